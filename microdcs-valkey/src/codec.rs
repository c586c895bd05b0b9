//! Codecs turn documents into the text stored in the `doc` field and back.

use std::borrow::Cow;

use microdcs_schema::Document;

/// Encodes and decodes documents of type `D`.
///
/// The store writes what [`encode_stored`](Self::encode_stored) returns
/// and reads it back through [`decode_stored`](Self::decode_stored); both
/// default to [`encode`](Self::encode) and [`decode`](Self::decode), so a
/// codec that only implements those two has its text stored as is.
pub trait Codec<D>: Send + Sync {
    /// The codec's error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Document to text.
    ///
    /// # Errors
    /// The document cannot be encoded.
    fn encode(&self, doc: &D) -> Result<String, Self::Error>;

    /// Text to document.
    ///
    /// # Errors
    /// The text is not a valid document.
    fn decode(&self, text: &str) -> Result<D, Self::Error>;

    /// The text stored for `doc`, whose key names it by `id`. A codec may
    /// leave out what the key already says, as [`Json`] leaves out the id.
    ///
    /// # Errors
    /// The document cannot be encoded.
    fn encode_stored(&self, doc: &D, id: &str) -> Result<String, Self::Error> {
        let _ = id;
        self.encode(doc)
    }

    /// The document stored as `text` under a key that names it by `id`:
    /// the inverse of [`encode_stored`](Self::encode_stored).
    ///
    /// # Errors
    /// The text is not a valid document.
    fn decode_stored(&self, text: &str, id: &str) -> Result<D, Self::Error> {
        let _ = id;
        self.decode(text)
    }
}

/// The default codec: JSON through `serde_json`.
///
/// The stored text leaves out the id member when the document's JSON holds
/// the id as the string its key carries (a field named as the type's id
/// field, not renamed by serde): the key says it already, and on a small
/// document those bytes decide whether the server keeps the hash in its
/// compact form. Such a text starts with a space (still valid JSON, which
/// `serde_json` never writes first); reading puts the member back. A text
/// without the space, written by an earlier release or for an id of
/// another JSON type, is read as it is.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json;

impl<D: Document + serde::Serialize + serde::de::DeserializeOwned> Codec<D> for Json {
    type Error = serde_json::Error;

    fn encode(&self, doc: &D) -> Result<String, Self::Error> {
        serde_json::to_string(doc)
    }

    fn decode(&self, text: &str) -> Result<D, Self::Error> {
        serde_json::from_str(text)
    }

    fn encode_stored(&self, doc: &D, id: &str) -> Result<String, Self::Error> {
        let text = serde_json::to_string(doc)?;
        Ok(without_id(&text, D::SPEC.id_field, id).unwrap_or(text))
    }

    fn decode_stored(&self, text: &str, id: &str) -> Result<D, Self::Error> {
        serde_json::from_str(&with_id(text, D::SPEC.id_field, id))
    }
}

/// The first character of a JSON text the id member was taken out of.
const WITHOUT_ID: char = ' ';

/// `text` (a compact JSON object) without its top-level member `member`
/// whose value is exactly the JSON string `id`, marked as such; `None`
/// when there is no such member (the text is then stored whole).
pub(crate) fn without_id(text: &str, member: &str, id: &str) -> Option<String> {
    let body = text.strip_prefix('{')?;
    let name = serde_json::to_string(member).ok()?;
    let value = serde_json::to_string(id).ok()?;
    let b = body.as_bytes();
    let mut at = 0;
    while b.get(at) != Some(&b'}') {
        let key_end = skip_string(b, at)?;
        if b.get(key_end) != Some(&b':') {
            return None;
        }
        let end = skip_value(b, key_end + 1)?;
        if body[at..key_end] == name && body[key_end + 1..end] == value {
            // One comma goes with the member: the one after it, or the one
            // before it when it is the last.
            let (cut, rest) = match b.get(end)? {
                b',' => (at, end + 1),
                b'}' => (at.saturating_sub(1), end),
                _ => return None,
            };
            return Some(format!("{WITHOUT_ID}{{{}{}", &body[..cut], &body[rest..]));
        }
        match b.get(end)? {
            b',' => at = end + 1,
            _ => return None,
        }
    }
    None
}

/// The whole JSON text of a stored `text`: the member `member` with the
/// key's `id` put back first when the text was stored without it.
pub(crate) fn with_id<'a>(text: &'a str, member: &str, id: &str) -> Cow<'a, str> {
    let Some(body) = text.strip_prefix(WITHOUT_ID).and_then(|t| t.strip_prefix('{')) else {
        return Cow::Borrowed(text);
    };
    let (Ok(name), Ok(value)) = (serde_json::to_string(member), serde_json::to_string(id)) else {
        return Cow::Borrowed(text);
    };
    let sep = if body.starts_with('}') { "" } else { "," };
    Cow::Owned(format!("{{{name}:{value}{sep}{body}"))
}

/// The end (exclusive) of the JSON string starting at `at`.
fn skip_string(b: &[u8], at: usize) -> Option<usize> {
    if b.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    loop {
        match b.get(i)? {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
}

/// The end (exclusive) of the JSON value starting at `at`, in compact
/// text: a string, an object or array (nesting counted outside strings),
/// or a scalar running to the next delimiter.
fn skip_value(b: &[u8], at: usize) -> Option<usize> {
    match b.get(at)? {
        b'"' => skip_string(b, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match b.get(i)? {
                    b'"' => i = skip_string(b, i)?,
                    b'{' | b'[' => {
                        depth += 1;
                        i += 1;
                    }
                    b'}' | b']' => {
                        depth -= 1;
                        i += 1;
                        if depth == 0 {
                            return Some(i);
                        }
                    }
                    _ => i += 1,
                }
            }
        }
        _ => {
            let len = b[at..].iter().position(|c| matches!(c, b',' | b'}' | b']')).unwrap_or(b.len() - at);
            Some(at + len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_member_leaves_and_returns() {
        let cases = [
            // first, middle, last, only
            (r#"{"id":"a","n":1}"#, r#" {"n":1}"#),
            (r#"{"n":1,"id":"a","m":[1,{"id":"a"}]}"#, r#" {"n":1,"m":[1,{"id":"a"}]}"#),
            (r#"{"n":{"x":"}"},"id":"a"}"#, r#" {"n":{"x":"}"}}"#),
            (r#"{"id":"a"}"#, " {}"),
        ];
        for (text, stored) in cases {
            assert_eq!(without_id(text, "id", "a").as_deref(), Some(stored), "{text}");
            let back: serde_json::Value = serde_json::from_str(&with_id(stored, "id", "a")).unwrap();
            assert_eq!(back, serde_json::from_str::<serde_json::Value>(text).unwrap(), "{stored}");
        }
    }

    #[test]
    fn only_the_id_as_the_key_says_it_leaves() {
        // Nested, another value, another JSON type, escaped look-alikes.
        for text in [
            r#"{"n":{"id":"a"}}"#,
            r#"{"id":"b","n":1}"#,
            r#"{"id":1}"#,
            r#"{"x":"\"id\":\"a\"","id":"b"}"#,
            r#"["id","a"]"#,
            r#"{"id":"a""#,
        ] {
            assert_eq!(without_id(text, "1", "1"), None, "{text}");
            assert_eq!(without_id(text, "id", "a"), None, "{text}");
        }
        // An id with characters JSON escapes is compared in its escaped form.
        let text = r#"{"x":1,"id":"q\"uo\\te"}"#;
        assert_eq!(without_id(text, "id", "q\"uo\\te").as_deref(), Some(r#" {"x":1}"#));
        assert_eq!(with_id(r#" {"x":1}"#, "id", "q\"uo\\te"), r#"{"id":"q\"uo\\te","x":1}"#);
    }

    #[test]
    fn a_whole_text_is_read_as_it_is() {
        // Stored by an earlier release, or for an id of another JSON type.
        for text in [r#"{"id":"a","n":1}"#, r#"{"id":7}"#, "{not json"] {
            assert!(matches!(with_id(text, "id", "a"), Cow::Borrowed(t) if t == text));
        }
    }
}
