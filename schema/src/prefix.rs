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
    /// The prefix holds `{` or `}` other than as one non-empty hash tag
    /// (`{island-7}` or `plant:{island-7}`).
    #[error(
        "the key prefix `{0}` has `{{` or `}}` outside one non-empty hash tag; braces are allowed only as one \
         `{{tag}}` (for example `{{island-7}}`), which puts every key of the island in one cluster slot"
    )]
    BadHashTag(String),
}

/// A validated key prefix. Every key is `{prefix}:{rendered template}`.
///
/// Rules: non-empty, at most [`MAX_PREFIX_LEN`] bytes, no `*?[]\` (so it never
/// acts as a glob in `SCAN` patterns), no whitespace or control characters,
/// no trailing `:`. A `:` inside (`plant:island-1`) is allowed. Braces
/// are allowed only as one non-empty hash tag (`{island-7}`,
/// `plant:{island-7}`): on a Valkey Cluster the tag puts every key of the
/// island in one slot, and no other brace may change which text is hashed.
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
        if !braces_form_one_tag(&prefix) {
            return Err(PrefixError::BadHashTag(prefix));
        }
        Ok(KeyPrefix(prefix))
    }

    /// The prefix's hash tag (`island-7` of `{island-7}`), if it has one.
    /// Encoded values and template literals never hold braces, so this tag
    /// is the first of every key under the prefix: all of them share the
    /// slot [`KeyPrefix::slot`].
    pub fn hash_tag(&self) -> Option<&str> {
        crate::slot::hash_tag(self.0.as_bytes())
            .map(|t| std::str::from_utf8(t).expect("a tag of a str between ASCII braces"))
    }

    /// The cluster slot every key under this prefix lives in, when the
    /// prefix has a hash tag; `None` when keys spread over slots.
    pub fn slot(&self) -> Option<u16> {
        self.hash_tag().map(|t| crate::slot::key_slot(t.as_bytes()))
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

/// Whether the prefix's braces (if any) are exactly one `{`, then one `}`,
/// with text between them.
fn braces_form_one_tag(prefix: &str) -> bool {
    let opens: Vec<usize> = prefix.match_indices('{').map(|(i, _)| i).collect();
    let closes: Vec<usize> = prefix.match_indices('}').map(|(i, _)| i).collect();
    match (opens.as_slice(), closes.as_slice()) {
        ([], []) => true,
        ([o], [c]) => c > &(o + 1),
        _ => false,
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

    #[test]
    fn one_hash_tag_at_most() {
        for good in ["{island-7}", "plant:{island-7}", "{a}:b", "p{x}q"] {
            let p = KeyPrefix::new(good).unwrap();
            assert!(p.hash_tag().is_some(), "{good}");
        }
        assert_eq!(KeyPrefix::new("{island-7}").unwrap().hash_tag(), Some("island-7"));
        assert_eq!(KeyPrefix::new("{island-7}").unwrap().slot(), Some(crate::slot::key_slot(b"island-7")));
        assert_eq!(KeyPrefix::new("plant").unwrap().slot(), None);
        for bad in ["{}", "{}x", "a{b", "a}b", "}a{", "{a}{b}", "{a}}", "{{a}", "x{a}y}"] {
            assert!(matches!(KeyPrefix::new(bad), Err(PrefixError::BadHashTag(_))), "{bad:?}");
        }
    }
}
