//! The key prefix (`KeyPrefix`): one per island, default `microdcs`.

use std::fmt;
use std::str::FromStr;

/// The longest key prefix accepted, in bytes.
pub const MAX_PREFIX_LEN: usize = 128;

/// Why a key prefix was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PrefixError {
    /// The prefix is empty.
    #[error("the key prefix is empty")]
    Empty,
    /// The prefix ends with `:` (the separator is added for you).
    #[error("the key prefix `{0}` ends with `:`; the separator is added for you")]
    TrailingColon(String),
    /// The prefix contains a glob character, whitespace or a control character.
    #[error("the key prefix `{prefix}` contains `{ch}`; `*?[]\\`, whitespace and control characters are not allowed")]
    ForbiddenChar {
        /// The prefix.
        prefix: String,
        /// The offending character.
        ch: char,
    },
    /// The prefix is longer than [`MAX_PREFIX_LEN`].
    #[error("the key prefix is {0} bytes long; the limit is {MAX_PREFIX_LEN}")]
    TooLong(usize),
}

/// A validated key prefix. Every key is `{prefix}:{rendered template}`.
///
/// Rules: non-empty, at most [`MAX_PREFIX_LEN`] bytes, no `*?[]\` (so it never
/// acts as a glob in `SCAN` patterns), no whitespace or control characters,
/// no trailing `:`. A `:` inside (`plant:island-1`) is allowed.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyPrefix(String);

impl KeyPrefix {
    /// The default prefix, `microdcs`.
    pub const DEFAULT: &'static str = "microdcs";

    /// Validates `prefix`.
    ///
    /// # Errors
    /// See [`PrefixError`].
    pub fn new(prefix: impl Into<String>) -> Result<Self, PrefixError> {
        let prefix = prefix.into();
        if prefix.is_empty() {
            return Err(PrefixError::Empty);
        }
        if prefix.len() > MAX_PREFIX_LEN {
            return Err(PrefixError::TooLong(prefix.len()));
        }
        if let Some(ch) =
            prefix.chars().find(|c| matches!(c, '*' | '?' | '[' | ']' | '\\') || c.is_whitespace() || c.is_control())
        {
            return Err(PrefixError::ForbiddenChar { prefix, ch });
        }
        if prefix.ends_with(':') {
            return Err(PrefixError::TrailingColon(prefix));
        }
        Ok(KeyPrefix(prefix))
    }

    /// The prefix text, without the trailing separator.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Every key (and channel) under this prefix as a glob pattern,
    /// `prefix:*` with the prefix's glob characters escaped: what an ACL
    /// rule confines a user to.
    pub fn pattern(&self) -> String {
        let mut out = String::with_capacity(self.0.len() + 2);
        crate::encode::glob_escape_into(&mut out, &self.0);
        out.push_str(":*");
        out
    }
}

impl Default for KeyPrefix {
    fn default() -> Self {
        KeyPrefix(Self::DEFAULT.to_owned())
    }
}

impl fmt::Debug for KeyPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyPrefix({:?})", self.0)
    }
}

impl fmt::Display for KeyPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for KeyPrefix {
    type Err = PrefixError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KeyPrefix::new(s)
    }
}

impl TryFrom<String> for KeyPrefix {
    type Error = PrefixError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        KeyPrefix::new(s)
    }
}

impl TryFrom<&str> for KeyPrefix {
    type Error = PrefixError;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        KeyPrefix::new(s)
    }
}

impl AsRef<str> for KeyPrefix {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        assert_eq!(KeyPrefix::default().as_str(), "microdcs");
        assert!(KeyPrefix::new("plant:island-1").is_ok());
        assert_eq!(KeyPrefix::new(""), Err(PrefixError::Empty));
        assert!(matches!(KeyPrefix::new("a:"), Err(PrefixError::TrailingColon(_))));
        for bad in ["a*", "a?", "a[", "a]", "a\\b", "a b", "a\n"] {
            assert!(matches!(KeyPrefix::new(bad), Err(PrefixError::ForbiddenChar { .. })), "{bad:?}");
        }
        assert!(matches!(KeyPrefix::new("x".repeat(200)), Err(PrefixError::TooLong(200))));
    }
}
