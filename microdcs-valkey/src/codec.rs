//! Codecs turn documents into the text stored in the `doc` field and back.

use std::borrow::Cow;

use microdcs_schema::Document;

/// Encodes and decodes documents of type `D`.
///
/// The store writes what [`encode_stored`](Self::encode_stored) returns
/// and reads it back through [`decode_stored`](Self::decode_stored); both
/// default to [`encode`](Self::encode) and [`decode`](Self::decode), so a
/// codec that only implements those two has its text stored as is.
///
/// Before a write is sent, the store decodes the text it is about to
/// store; a text that does not decode is refused as
/// [`Error::Codec`](crate::Error::Codec) (action `encode`), nothing
/// written, so a write is never acknowledged and then unreadable. With
/// the JSON codecs that is a NaN or infinite float (JSON writes it as
/// `null`, which no float reads) and nesting deeper than `serde_json`'s
/// reader takes (128 levels, the document's own object included). The
/// check asks only that the text decode, not that it decode to an equal
/// document. It costs one decode per write (see BENCHMARKS.md).
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

/// A document whose stored text the codec does not read back: the store
/// refuses to write it (the codec's reading error is the source).
#[derive(Debug, thiserror::Error)]
#[error("the text it encodes to does not read back: {0}")]
pub(crate) struct NotReadBack<E: std::error::Error + 'static>(#[source] pub(crate) E);

/// The default codec: JSON through `serde_json`.
///
/// The stored text leaves out the id member when the document's JSON holds
/// the id as the string its key carries (a field named as the type's id
/// field, not renamed by serde): the key says it already, and on a small
/// document those bytes decide whether the server keeps the hash in its
/// compact form. Such a text starts with a space (still valid JSON, which
/// `serde_json` never writes first); reading puts the member back. A text
/// without the space, written by an earlier release or for an id of
/// another JSON type, is read as it is. It also reads the texts
/// [`CompactJson`] writes.
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
        let whole = whole_text(text, D::SPEC.id_field, id)?;
        serde_json::from_str(&whole).or_else(|e| with_fields_added_last::<D>(&whole).ok_or(e))
    }
}

/// A positional text a later release wrote, with fields added last that
/// this release's type does not have: read from the values this type
/// takes, the rest left out, as the named form's unknown members are
/// (serde reads a struct from a longer array only as an error). `None`
/// when the text is no array, or the values this type takes do not read
/// (then the first error stands).
fn with_fields_added_last<D: serde::de::DeserializeOwned>(whole: &str) -> Option<D> {
    if !whole.starts_with('[') {
        return None;
    }
    let values: Vec<serde_json::Value> = serde_json::from_str(whole).ok()?;
    let mut seq = ExactSeq { values: values.clone().into_iter(), short: false };
    D::deserialize(&mut seq).ok()?;
    let taken = values.len() - seq.values.len();
    if seq.short || taken == values.len() {
        return None;
    }
    // The values it takes, read the way every other text is read.
    serde_json::from_str(&serde_json::to_string(&values[..taken]).ok()?).ok()
}

/// JSON with a struct's fields by position: a codec for many small
/// documents, where field names weigh as much as the values.
///
/// The stored text is the array of the document's top-level values in
/// the order its fields are declared (the form serde reads a struct from
/// as readily as an object), without the id when the key says it; the id's
/// position is told by the text's leading spaces. The idempotency entry
/// of the miroir example goes from 50 to 34 bytes, which keeps its hash
/// one allocator class smaller (see BENCHMARKS.md).
///
/// A document is stored this way only when serde reads exactly one value
/// of the array per field it fills and the document read writes the same
/// JSON again; one that does not (a field left out by
/// `skip_serializing_if` or `skip_serializing`, flattened fields, an
/// internally tagged struct) is stored as [`Json`] stores it. The check costs a
/// second decode and encode per write. Both codecs read both forms, so a
/// type can move between them without rewriting what is stored; a text
/// marked as stored without its id that cannot take it back is a decode
/// error, never read as it stands.
///
/// **The field order is part of the stored data.** Add new fields last,
/// with `#[serde(default)]`: a release reads the texts of an earlier one
/// (the new fields take their defaults), and an earlier release reads the
/// texts of a later one (the values past its own fields are left out, as
/// unknown members of a JSON object are). Reordering, inserting or
/// removing fields makes stored texts read into the wrong fields or fail
/// to read. Keep
/// [`Json`] for types whose fields still move.
#[derive(Debug, Clone, Copy, Default)]
pub struct CompactJson;

// Everything but the stored text is the JSON codec's: the plain forms are
// JSON objects, and reading takes either stored form.
impl<D: Document + serde::Serialize + serde::de::DeserializeOwned> Codec<D> for CompactJson {
    type Error = serde_json::Error;

    fn encode(&self, doc: &D) -> Result<String, Self::Error> {
        Json.encode(doc)
    }

    fn decode(&self, text: &str) -> Result<D, Self::Error> {
        Json.decode(text)
    }

    fn encode_stored(&self, doc: &D, id: &str) -> Result<String, Self::Error> {
        let text = Json.encode(doc)?;
        if let Some(compact) = positional(&text, D::SPEC.id_field, id)
            && reads_back::<D>(&compact, id, &text)
        {
            return Ok(compact);
        }
        Ok(without_id(&text, D::SPEC.id_field, id).unwrap_or(text))
    }

    fn decode_stored(&self, text: &str, id: &str) -> Result<D, Self::Error> {
        Json.decode_stored(text, id)
    }
}

/// Whether `compact` reads back as the document whose named text is
/// `text`. Positions carry no names, so two things must hold: serde reads
/// exactly one value per field it fills (a field that is read but never
/// written, `skip_serializing`, would take the next field's value, and
/// hide it behind a default), and the document read writes `text` again.
fn reads_back<D: Document + serde::Serialize + serde::de::DeserializeOwned>(
    compact: &str,
    id: &str,
    text: &str,
) -> bool {
    let Some(whole) = with_id(compact, D::SPEC.id_field, id) else {
        return false;
    };
    let Ok(values) = serde_json::from_str::<Vec<serde_json::Value>>(&whole) else {
        return false;
    };
    let mut seq = ExactSeq { values: values.into_iter(), short: false };
    if D::deserialize(&mut seq).is_err() || seq.short || seq.values.len() != 0 {
        return false;
    }
    // And the read itself, as the store will do it.
    let back = serde_json::from_str::<D>(&whole).ok().and_then(|d| serde_json::to_string(&d).ok());
    back.as_deref() == Some(text)
}

/// A sequence that notes whether serde asked for more values than it has.
struct ExactSeq {
    values: std::vec::IntoIter<serde_json::Value>,
    short: bool,
}

impl<'de> serde::de::SeqAccess<'de> for &mut ExactSeq {
    type Error = serde_json::Error;

    fn next_element_seed<T: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Self::Error> {
        match self.values.next() {
            Some(v) => seed.deserialize(v).map(Some),
            None => {
                self.short = true;
                Ok(None)
            }
        }
    }
}

impl<'de> serde::Deserializer<'de> for &mut ExactSeq {
    type Error = serde_json::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_seq(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

/// The id is left out of a compact array only among its first fields, so
/// the leading spaces that say where it goes stay few.
const MAX_ID_POSITION: usize = 16;

/// `text` (a compact JSON object) as the array of its member values, the
/// member `member` whose value is the JSON string `id` left out and its
/// position told by the leading spaces (one more than the position).
fn positional(text: &str, member: &str, id: &str) -> Option<String> {
    let members = members(text.strip_prefix('{')?)?;
    let (name, value) = (serde_json::to_string(member).ok()?, serde_json::to_string(id).ok()?);
    let at = members.iter().position(|&(n, v)| n == name && v == value).filter(|&at| at < MAX_ID_POSITION);
    let values: Vec<&str> = members.iter().enumerate().filter(|&(i, _)| Some(i) != at).map(|(_, &(_, v))| v).collect();
    let marker = at.map_or(0, |at| at + 1);
    Some(format!("{}[{}]", " ".repeat(marker), values.join(",")))
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
/// key's `id` put back where the text was stored without it (first in an
/// object; at the position its leading spaces say in an array). A text
/// without leading spaces is whole already. `None` for a text marked as
/// stored without its id that cannot take it back: damage, not a document
/// (`serde_json` never writes a leading space, so only we mark texts).
pub(crate) fn with_id<'a>(text: &'a str, member: &str, id: &str) -> Option<Cow<'a, str>> {
    let spaces = text.bytes().take_while(|&c| c == b' ').count();
    if spaces == 0 {
        return Some(Cow::Borrowed(text));
    }
    let rest = &text[spaces..];
    match rest.as_bytes().first() {
        Some(b'{') if spaces == 1 => object_with_id(&rest[1..], member, id),
        Some(b'[') => array_with_id(&rest[1..], spaces - 1, id),
        _ => None,
    }
    .map(Cow::Owned)
}

/// [`with_id`] for a decoder: a marked text that cannot take its id back
/// is a decode error.
fn whole_text<'a>(text: &'a str, member: &str, id: &str) -> Result<Cow<'a, str>, serde_json::Error> {
    with_id(text, member, id)
        .ok_or_else(|| serde::de::Error::custom("a text stored without its id has no place to put it back (damaged)"))
}

fn object_with_id(body: &str, member: &str, id: &str) -> Option<String> {
    let (name, value) = (serde_json::to_string(member).ok()?, serde_json::to_string(id).ok()?);
    let sep = if body.starts_with('}') { "" } else { "," };
    Some(format!("{{{name}:{value}{sep}{body}"))
}

fn array_with_id(body: &str, at: usize, id: &str) -> Option<String> {
    let mut values = elements(body)?;
    let value = serde_json::to_string(id).ok()?;
    if at > values.len() {
        return None;
    }
    values.insert(at, &value);
    Some(format!("[{}]", values.join(",")))
}

/// The top-level members of a compact JSON object (`body` follows its
/// `{`), as name and value texts; `None` unless it is exactly one object.
fn members(body: &str) -> Option<Vec<(&str, &str)>> {
    let b = body.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    if body == "}" {
        return Some(out);
    }
    loop {
        let key_end = skip_string(b, at)?;
        if b.get(key_end) != Some(&b':') {
            return None;
        }
        let end = skip_value(b, key_end + 1)?;
        out.push((&body[at..key_end], &body[key_end + 1..end]));
        match b.get(end)? {
            b',' => at = end + 1,
            b'}' if end + 1 == b.len() => return Some(out),
            _ => return None,
        }
    }
}

/// The top-level values of a compact JSON array (`body` follows its
/// `[`); `None` unless it is exactly one array.
fn elements(body: &str) -> Option<Vec<&str>> {
    let b = body.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    if body == "]" {
        return Some(out);
    }
    loop {
        let end = skip_value(b, at)?;
        if end == at {
            return None;
        }
        out.push(&body[at..end]);
        match b.get(end)? {
            b',' => at = end + 1,
            b']' if end + 1 == b.len() => return Some(out),
            _ => return None,
        }
    }
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
            let back: serde_json::Value = serde_json::from_str(&with_id(stored, "id", "a").unwrap()).unwrap();
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
        assert_eq!(with_id(r#" {"x":1}"#, "id", "q\"uo\\te").unwrap(), r#"{"id":"q\"uo\\te","x":1}"#);
    }

    #[test]
    fn a_whole_text_is_read_as_it_is() {
        // Stored by an earlier release, or for an id of another JSON type.
        for text in [r#"{"id":"a","n":1}"#, r#"{"id":7}"#, "{not json"] {
            assert!(matches!(with_id(text, "id", "a"), Some(Cow::Borrowed(t)) if t == text));
        }
    }

    #[test]
    fn fields_by_position_leave_the_id_and_say_where_it_goes() {
        let cases = [
            (r#"{"id":"a","n":1,"s":"x"}"#, r#" [1,"x"]"#, r#"["a",1,"x"]"#),
            (r#"{"n":[1,{"id":"a"}],"id":"a","s":"]"}"#, r#"  [[1,{"id":"a"}],"]"]"#, r#"[[1,{"id":"a"}],"a","]"]"#),
            (r#"{"n":1,"id":"a"}"#, "  [1]", r#"[1,"a"]"#),
            (r#"{"id":"a"}"#, " []", r#"["a"]"#),
            // Not the key's id: every value stays, and nothing marks the text.
            (r#"{"id":"b","n":1}"#, r#"["b",1]"#, r#"["b",1]"#),
            (r#"{"id":7}"#, "[7]", "[7]"),
            ("{}", "[]", "[]"),
        ];
        for (text, stored, read) in cases {
            assert_eq!(positional(text, "id", "a").as_deref(), Some(stored), "{text}");
            assert_eq!(with_id(stored, "id", "a").unwrap(), read, "{stored}");
        }
        // Far from the front the id stays in place, unmarked.
        let late: Vec<String> = (0..MAX_ID_POSITION).map(|i| format!(r#""f{i}":{i}"#)).collect();
        let text = format!(r#"{{{},"id":"a"}}"#, late.join(","));
        let stored = positional(&text, "id", "a").unwrap();
        assert!(stored.starts_with("[0,1,") && stored.ends_with(r#","a"]"#), "{stored}");
        // Not one compact object: not stored by position.
        for text in [r#"["a",1]"#, r#"{"id":"a""#, r#"{"id":"a"} "#, r#"{"id""a"}"#] {
            assert_eq!(positional(text, "id", "a"), None, "{text}");
        }
    }

    #[test]
    fn a_marked_text_that_cannot_take_the_id_is_refused() {
        // More spaces than places, not one array, an object with more than
        // one space, a space before anything else: only damage looks so.
        for text in ["   [1]", " [1,", " [1]x", " [,]", "  [1,]", r#"  {"n":1}"#, " x", " "] {
            assert_eq!(with_id(text, "id", "a"), None, "{text}");
        }
    }
}
