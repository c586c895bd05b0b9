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
///
/// Masking errs on the side of hiding too much, since the text it gets may
/// not even parse (it is shown precisely when it is wrong):
/// - after `://` (or from the start without a scheme), everything up to the
///   last `@` is hidden except a user name before the first `:`, because a
///   password may hold unencoded `/`, `?`, `#` or `@`;
/// - the value of every `password=` or `pass=` option (StackExchange
///   `,password=`, URL query `?pass=`/`&password=`) is hidden up to the next
///   option, or to the end.
///
/// Where both apply the hidden parts merge into one `***`.
pub fn redact_connection_string(cs: &str) -> String {
    let mut hidden: Vec<(usize, usize)> = Vec::new();
    let start = cs.find("://").map_or(0, |i| i + 3);
    if let Some(at) = cs[start..].rfind('@').map(|i| start + i) {
        let from = cs[start..at].find(':').map_or(start, |i| start + i + 1);
        hidden.push((from, at));
    }
    hidden.extend(secret_option_values(cs));
    hidden.sort_unstable();
    // Overlapping or touching ranges become one.
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (from, to) in hidden {
        match merged.last_mut() {
            Some(last) if from <= last.1 => last.1 = last.1.max(to),
            _ => merged.push((from, to)),
        }
    }
    let mut out = String::with_capacity(cs.len());
    let mut shown = 0;
    for (from, to) in merged {
        out.push_str(&cs[shown..from]);
        out.push_str("***");
        shown = to;
    }
    out.push_str(&cs[shown..]);
    out
}

/// Byte ranges of the values of `password=`/`pass=` options.
fn secret_option_values(cs: &str) -> Vec<(usize, usize)> {
    let bytes = cs.as_bytes();
    let mut found = Vec::new();
    let mut key_start = 0;
    // Options after a `?` are a URL's query, whose separator is `&`; the
    // others are the `host:port,name=value` form's, separated by `,`.
    let mut in_query = false;
    for i in 0..=bytes.len() {
        if i < bytes.len() && !matches!(bytes[i], b',' | b'?' | b'&' | b';') {
            continue;
        }
        // The option running from `key_start` to this separator.
        if let Some(eq) = cs[key_start..i].find('=') {
            let key = cs[key_start..key_start + eq].trim();
            if key.eq_ignore_ascii_case("password") || key.eq_ignore_ascii_case("pass") {
                let value_start = key_start + eq + 1;
                found.push((value_start, option_end(cs, value_start, in_query)));
            }
        }
        in_query |= bytes.get(i) == Some(&b'?');
        key_start = i + 1;
    }
    found
}

/// Where the value starting at `from` ends, or the end of the text. In a
/// URL's query: at the next `&` followed by a name and `=` (a password
/// there holds `&` only encoded). In the `name=value` form the parser
/// splits at every `,`, so a password written with a `,` reaches the next
/// part that names one of its options: only such a part ends the value;
/// anything else may be a piece of the password and stays hidden.
fn option_end(cs: &str, from: usize, in_query: bool) -> usize {
    let separator = if in_query { b'&' } else { b',' };
    for (i, b) in cs.bytes().enumerate().skip(from) {
        if b == separator {
            let rest = &cs[i + 1..];
            let name_len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
            let named = rest[name_len..].trim_start().starts_with('=');
            let name = rest[..name_len].trim();
            if name_len > 0 && named && (in_query || super::option_names::is_option(name)) {
                return i;
            }
        }
    }
    cs.len()
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

    #[test]
    fn redaction_hides_passwords_that_do_not_parse() {
        let cases = [
            ("redis://u:pa/ss@h:6379", "redis://u:***@h:6379"),
            ("redis://u:p@ss@h:6379/0", "redis://u:***@h:6379/0"),
            ("redis://u:pa?ss#x@h:6379", "redis://u:***@h:6379"),
            ("unix:///s?pass=x", "unix:///s?pass=***"),
            ("redis+unix:///s?db=1&pass=x&user=u", "redis+unix:///s?db=1&pass=***&user=u"),
            ("redis://h:1/0?password=x", "redis://h:1/0?password=***"),
            ("redis://h:1/0?PassWord=x&protocol=3", "redis://h:1/0?PassWord=***&protocol=3"),
            ("h:1,password=a,b,ssl=true", "h:1,password=***,ssl=true"),
            // A `&` or a `,name=` that is no option may be part of the password.
            ("h:1,password=s3&k=9", "h:1,password=***"),
            ("h:1,password=s3,k=9,ssl=true", "h:1,password=***,ssl=true"),
            ("h:1,password=s3&user=x,user=u", "h:1,password=***,user=u"),
            ("h:1, Password = x", "h:1, Password =***"),
            ("password=x", "password=***"),
            ("user:secret@host:6379", "user:***@host:6379"),
            ("user:secret@host:6379,ssl=true", "user:***@host:6379,ssl=true"),
        ];
        for (cs, want) in cases {
            assert_eq!(redact_connection_string(cs), want, "{cs}");
        }
        // A query password holding `@`, or a user password holding
        // `?password=`: both readings are hidden at once.
        for (cs, pieces) in
            [("redis://h:1/?password=Qa7@Zb9", ["Qa7", "Zb9"]), ("redis://u:Xk3?password=Yj5@h", ["Xk3", "Yj5"])]
        {
            let shown = redact_connection_string(cs);
            for piece in pieces {
                assert!(!shown.contains(piece), "{cs}: {shown}");
            }
        }
    }
}
