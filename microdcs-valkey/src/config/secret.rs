//! Secrets that never reach `Debug`, `Display`, logs or error texts: the
//! [`Secret`] wrapper and the masking of passwords inside connection strings.

use std::fmt;

use serde::Deserialize;

/// A string that never shows in `Debug` or `Display`.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The secret itself; do not log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Secret)
    }
}

/// A connection string with any password replaced by `***`.
pub fn redact_connection_string(cs: &str) -> String {
    let lower = cs.to_ascii_lowercase();
    if let Some(scheme_end) = lower.find("://") {
        let rest = &cs[scheme_end + 3..];
        let auth_end = rest.find('/').unwrap_or(rest.len());
        if let Some(at) = rest[..auth_end].rfind('@') {
            let userinfo = &rest[..at];
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            let masked = if userinfo.contains(':') { format!("{user}:***") } else { "***".to_owned() };
            return format!("{}{masked}{}", &cs[..scheme_end + 3], &rest[at..]);
        }
        return cs.to_owned();
    }
    cs.split(',')
        .map(|part| match part.split_once('=') {
            Some((k, _)) if k.trim().eq_ignore_ascii_case("password") => format!("{k}=***"),
            _ => part.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction() {
        assert_eq!(redact_connection_string("redis://app:s3cret@h:1/0"), "redis://app:***@h:1/0");
        assert_eq!(redact_connection_string("redis://:s3cret@h:1"), "redis://:***@h:1");
        assert_eq!(redact_connection_string("h:1,password=s3cret,ssl=true"), "h:1,password=***,ssl=true");
        assert_eq!(redact_connection_string("h:1"), "h:1");
    }
}
