//! Placeholder value encoding.
//!
//! A placeholder value is arbitrary text. It is written into a key with a
//! percent encoding that escapes exactly the bytes that would make a key
//! ambiguous or unsafe:
//!
//! - the separators `:` and `|` (so a value never adds a segment),
//! - `%` itself (so decoding is unambiguous),
//! - the glob characters `*`, `?`, `[`, `]`, `\` (so a key is its own `SCAN` pattern),
//! - `{` and `}` (so a value never forms a cluster hash tag),
//! - space and the ASCII control characters.
//!
//! Every other character, including all non-ASCII text, is written as is.
//! Escapes are `%` followed by two upper-case hex digits. Decoding is strict:
//! it accepts only the canonical encoding, so each key has exactly one value.
//!
//! Rejected values: the empty string ([`ValueError::Empty`]) and values longer
//! than [`MAX_VALUE_LEN`] bytes ([`ValueError::TooLong`]).

use std::borrow::Cow;

/// The longest placeholder value accepted, in bytes of UTF-8 before encoding.
pub const MAX_VALUE_LEN: usize = 1024;

/// Why a placeholder value cannot be written into a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValueError {
    /// The value is the empty string; an empty segment would be ambiguous.
    #[error("the value is empty")]
    Empty,
    /// The value is longer than [`MAX_VALUE_LEN`] bytes.
    #[error("the value is {len} bytes long; the limit is {MAX_VALUE_LEN}")]
    TooLong {
        /// Length of the rejected value in bytes.
        len: usize,
    },
}

/// Whether `b` must be escaped inside a key segment.
#[inline]
pub const fn needs_escape(b: u8) -> bool {
    matches!(b, b'%' | b':' | b'|' | b'*' | b'?' | b'[' | b']' | b'\\' | b'{' | b'}' | b' ' | 0x00..=0x1f | 0x7f)
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Checks a value against the rules above without encoding it.
///
/// # Errors
/// [`ValueError::Empty`] or [`ValueError::TooLong`].
pub fn validate_value(value: &str) -> Result<(), ValueError> {
    if value.is_empty() {
        Err(ValueError::Empty)
    } else if value.len() > MAX_VALUE_LEN {
        Err(ValueError::TooLong { len: value.len() })
    } else {
        Ok(())
    }
}

/// Appends the encoding of `value` to `out`.
///
/// # Errors
/// See [`validate_value`]; on error nothing is appended.
pub fn encode_into(out: &mut String, value: &str) -> Result<(), ValueError> {
    validate_value(value)?;
    let bytes = value.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if needs_escape(b) {
            out.push_str(&value[start..i]);
            out.push('%');
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 0xf) as usize] as char);
            start = i + 1;
        }
    }
    out.push_str(&value[start..]);
    Ok(())
}

/// Encodes `value`; borrows when nothing needs escaping.
///
/// # Errors
/// See [`validate_value`].
pub fn encode(value: &str) -> Result<Cow<'_, str>, ValueError> {
    validate_value(value)?;
    if !value.bytes().any(needs_escape) {
        return Ok(Cow::Borrowed(value));
    }
    let mut out = String::with_capacity(value.len() + 8);
    encode_into(&mut out, value)?;
    Ok(Cow::Owned(out))
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decodes one encoded segment value. Returns `None` unless `encoded` is the
/// canonical encoding of a valid value (so `encode(decode(s)) == s`).
pub fn decode(encoded: &str) -> Option<Cow<'_, str>> {
    let bytes = encoded.as_bytes();
    if bytes.is_empty() {
        return None;
    }
    if !bytes.contains(&b'%') {
        if bytes.iter().any(|&b| needs_escape(b)) || bytes.len() > MAX_VALUE_LEN {
            return None;
        }
        return Some(Cow::Borrowed(encoded));
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hi = hex_val(*bytes.get(i + 1)?)?;
            let lo = hex_val(*bytes.get(i + 2)?)?;
            let v = (hi << 4) | lo;
            if !needs_escape(v) {
                return None; // not canonical
            }
            out.push(v);
            i += 3;
        } else if needs_escape(b) {
            return None;
        } else {
            out.push(b);
            i += 1;
        }
    }
    if out.len() > MAX_VALUE_LEN {
        return None;
    }
    String::from_utf8(out).ok().map(Cow::Owned)
}

/// Appends `text` to `out` with the `SCAN`/`KEYS` glob characters
/// `*?[]\` escaped by a backslash.
pub fn glob_escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
}

/// A placeholder value could not be written into a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value for `{{{placeholder}}}` in `{template}`: {error}")]
pub struct KeyError {
    /// The template being rendered.
    pub template: String,
    /// The placeholder whose value was rejected.
    pub placeholder: String,
    /// Why.
    pub error: ValueError,
}

/// Appends the encoding of `value` for `placeholder` of `template` to `out`:
/// the step the generated key builders repeat per placeholder.
///
/// # Errors
/// A [`KeyError`] naming the template and placeholder.
pub fn push_segment(
    out: &mut String,
    value: &str,
    template: &'static str,
    placeholder: &'static str,
) -> Result<(), KeyError> {
    encode_into(out, value).map_err(|error| KeyError {
        template: template.to_owned(),
        placeholder: placeholder.to_owned(),
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_values_borrow() {
        assert!(matches!(encode("order-1").unwrap(), Cow::Borrowed("order-1")));
        assert!(matches!(encode("Running_Held").unwrap(), Cow::Borrowed(_)));
        assert!(matches!(encode("wärme→ok").unwrap(), Cow::Borrowed(_)));
    }

    #[test]
    fn reserved_characters_are_escaped() {
        assert_eq!(encode("list:s1").unwrap(), "list%3As1");
        assert_eq!(encode("a|b").unwrap(), "a%7Cb");
        assert_eq!(encode("100%").unwrap(), "100%25");
        assert_eq!(encode("*?[]\\").unwrap(), "%2A%3F%5B%5D%5C");
        assert_eq!(encode("{t} x").unwrap(), "%7Bt%7D%20x");
        assert_eq!(encode("\n\0\x7f").unwrap(), "%0A%00%7F");
    }

    #[test]
    fn rejected_values() {
        assert_eq!(encode(""), Err(ValueError::Empty));
        let long = "x".repeat(MAX_VALUE_LEN + 1);
        assert_eq!(encode(&long), Err(ValueError::TooLong { len: MAX_VALUE_LEN + 1 }));
        assert!(encode(&"x".repeat(MAX_VALUE_LEN)).is_ok());
    }

    #[test]
    fn decode_is_strict() {
        assert_eq!(decode("list%3As1").as_deref(), Some("list:s1"));
        assert_eq!(decode("%41"), None, "escape of a plain character is not canonical");
        assert_eq!(decode("%3a"), None, "lower-case hex is not canonical");
        assert_eq!(decode("a:b"), None);
        assert_eq!(decode("%3"), None);
        assert_eq!(decode(""), None);
        assert_eq!(decode("%C3"), None, "an escape never produces invalid UTF-8");
    }

    #[test]
    fn glob_escape() {
        let mut s = String::new();
        glob_escape_into(&mut s, "a*b?[c]\\");
        assert_eq!(s, "a\\*b\\?\\[c\\]\\\\");
    }
}
