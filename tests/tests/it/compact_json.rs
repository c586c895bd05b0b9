//! `CompactJson`: a document stored as the array of its field values,
//! without the id. It must make the miroir idempotency entry smaller than
//! the JSON codec does, read what either codec wrote (and be read by
//! `Json`), keep a document that would not read back by position in the
//! named form, and let a type grow new trailing fields.

use microdcs_examples::miroir::{Idempotency, Miroir, TaskStore};
use microdcs_tests::{created, server, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{
    Document, Expect, PutOutcome, Valkey, config::WriteOptions, inspect::Inspector, store::Codec, store::CompactJson,
};
use serde::{Deserialize, Serialize};

/// A note whose title is left out when it has none: by position, the
/// body would shift into the title's place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(unscoped, kind = "note", key = "note:{id}")]
pub struct Note {
    /// Note id.
    pub id: String,
    /// Title, left out when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Text.
    pub body: String,
}

/// [`Note`] a release later: one field added last, with a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(unscoped, kind = "note2", key = "note2:{id}")]
pub struct NoteLater {
    /// Note id.
    pub id: String,
    /// Title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Text.
    pub body: String,
    /// Added later.
    #[serde(default)]
    pub pinned: bool,
}

/// A count with a field that is read but never written: by position the
/// count would land in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(unscoped, kind = "tally", key = "tally:{id}")]
pub struct Tally {
    /// Tally id.
    pub id: String,
    /// Filled by the reader, never stored.
    #[serde(skip_serializing, default)]
    pub cached: Option<u32>,
    /// The count.
    #[serde(default)]
    pub n: u32,
}

microdcs_valkey::keyspace! {
    /// Notes, for the codec's fallback.
    pub Notes {
        documents: [Note, NoteLater, Tally, Tagged, Flat, Nested],
    }
}

async fn setup(name: &str) -> (microdcs_valkey::testing::ValkeyServer, Valkey, ConnectionManager) {
    let s = server();
    let valkey = Valkey::connect_url(s.url(), unique_prefix(name), WriteOptions::default()).await.unwrap();
    let raw = ConnectionManager::new(redis::Client::open(s.url()).unwrap()).await.unwrap();
    (s, valkey, raw)
}

async fn text(raw: &mut ConnectionManager, key: &str) -> String {
    redis::cmd("HGET").arg(key).arg("doc").query_async(raw).await.unwrap()
}

async fn usage(raw: &mut ConnectionManager, key: &str) -> u64 {
    redis::cmd("MEMORY").arg("USAGE").arg(key).query_async(raw).await.unwrap()
}

fn entry(id: &str) -> Idempotency {
    Idempotency { id: id.into(), status: 200, body: "{\"ok\":true,\"task\":42}".into() }
}

#[tokio::test]
async fn the_entry_by_position_is_smaller_and_both_codecs_read_both_forms() {
    let (_s, valkey, mut raw) = setup("compactjson-entry").await;
    let tasks = TaskStore::new(valkey.clone()).unwrap();
    let (compact, json) = (tasks.idempotency(), tasks.table::<Idempotency>());
    let a = entry("req-00000001-7f3c9a2e");
    let b = entry("req-00000002-7f3c9a2e");
    assert_eq!(created(compact, &a).await, 1);
    assert_eq!(created(&json, &b).await, 1);
    let (key_a, key_b) = (compact.key(&a.id).unwrap(), json.key(&b.id).unwrap());
    // The stored texts, pinned: they cross releases. One leading space:
    // the id goes back first.
    assert_eq!(text(&mut raw, &key_a).await, r#" [200,"{\"ok\":true,\"task\":42}"]"#);
    assert_eq!(text(&mut raw, &key_b).await, r#" {"status":200,"body":"{\"ok\":true,\"task\":42}"}"#);
    let encoding: String = redis::cmd("OBJECT").arg("ENCODING").arg(&key_a).query_async(&mut raw).await.unwrap();
    assert_eq!(encoding, "listpack");
    let (small, named) = (usage(&mut raw, &key_a).await, usage(&mut raw, &key_b).await);
    // Never larger; whether it drops an allocator class depends on the key
    // too (a cluster's tagged prefix is longer), so the bench measures it.
    assert!(small <= named, "by position {small} B, by name {named} B");

    // Each codec reads what the other wrote.
    assert_eq!(json.get(&a.id).await.unwrap().expect("stored").doc, a);
    assert_eq!(compact.get(&b.id).await.unwrap().expect("stored").doc, b);
    // A write through the compact store stores by position from then on,
    // with the version and history as any write.
    let next = Idempotency { status: 201, ..b.clone() };
    assert!(matches!(compact.put(&next, Expect::Version(1)).await, Ok(PutOutcome::Written { version: 2 })));
    assert_eq!(text(&mut raw, &key_b).await, r#" [201,"{\"ok\":true,\"task\":42}"]"#);
    let got = json.get(&b.id).await.unwrap().expect("stored");
    assert_eq!((got.doc, got.version), (next, 2));
    // The guide's idiom: a second answer under the same key is refused.
    assert!(tasks.remember("req-r", 202, "accepted").await.unwrap());
    assert!(!tasks.remember("req-r", 500, "other").await.unwrap());
    assert_eq!(compact.get("req-r").await.unwrap().unwrap().doc.status, 202);

    // The inspector shows the values with the id back in its place.
    let view = Inspector::new(&Miroir::open(valkey.clone())).document("idemp", &a.id).await.unwrap().expect("seen");
    let shown = view.document.expect("decoded");
    assert_eq!(shown, serde_json::json!([a.id, 200, a.body]));
}

#[tokio::test]
async fn a_document_that_would_shift_keeps_its_names() {
    let (_s, valkey, mut raw) = setup("compactjson-shift").await;
    let notes = Notes::open(valkey.clone()).store_with::<Note, _>(CompactJson);
    let titled = Note { id: "n-1".into(), title: Some("t".into()), body: "x".into() };
    let bare = Note { id: "n-2".into(), title: None, body: "x".into() };
    created(&notes, &titled).await;
    created(&notes, &bare).await;
    assert_eq!(text(&mut raw, &notes.key("n-1").unwrap()).await, r#" ["t","x"]"#);
    // Without its title the body would land in the title's place: the
    // named form is stored instead.
    assert_eq!(text(&mut raw, &notes.key("n-2").unwrap()).await, r#" {"body":"x"}"#);
    assert_eq!(notes.get("n-1").await.unwrap().unwrap().doc, titled);
    assert_eq!(notes.get("n-2").await.unwrap().unwrap().doc, bare);

    // A damaged array is a decode error on read, and nothing is written.
    let key = notes.key("n-1").unwrap();
    let () = redis::cmd("HSET").arg(&key).arg("doc").arg(r#"   ["t","x"]"#).query_async(&mut raw).await.unwrap();
    let err = notes.get("n-1").await.unwrap_err();
    assert!(err.is_corrupt(), "{err:?}");
    assert_eq!(text(&mut raw, &key).await, r#"   ["t","x"]"#);
}

#[test]
fn a_field_read_but_never_written_keeps_the_names() {
    // By position ` [0]` would read back as `cached: Some(0), n: 0`, which
    // writes the same text: the count of values read is what tells.
    let t = Tally { id: "k".into(), cached: None, n: 0 };
    let stored = CompactJson.encode_stored(&t, "k").unwrap();
    assert_eq!(stored, r#" {"n":0}"#);
    let back: Tally = CompactJson.decode_stored(&stored, "k").unwrap();
    assert_eq!(back, t);
    let t = Tally { n: 7, ..t };
    let back: Tally = CompactJson.decode_stored(&CompactJson.encode_stored(&t, "k").unwrap(), "k").unwrap();
    assert_eq!(back, t);
}

#[test]
fn a_field_added_last_with_a_default_reads_earlier_texts() {
    let old = Note { id: "n-1".into(), title: Some("t".into()), body: "x".into() };
    let stored = CompactJson.encode_stored(&old, "n-1").unwrap();
    assert_eq!(stored, r#" ["t","x"]"#);
    let later: NoteLater = CompactJson.decode_stored(&stored, "n-1").unwrap();
    assert_eq!(later, NoteLater { id: "n-1".into(), title: Some("t".into()), body: "x".into(), pinned: false });
    // The plain forms stay plain JSON objects.
    assert_eq!(Codec::<Note>::encode(&CompactJson, &old).unwrap(), r#"{"id":"n-1","title":"t","body":"x"}"#);
    assert_eq!(NoteLater::SPEC.id_field, "id");
}

/// During a rolling deploy (and after a rollback) the earlier release
/// reads what the later one wrote: the values past its own fields are
/// left out, as unknown members of a JSON object are.
#[test]
fn an_earlier_release_reads_a_text_with_fields_added_last() {
    let later = NoteLater { id: "n-1".into(), title: Some("t".into()), body: "x".into(), pinned: true };
    let stored = CompactJson.encode_stored(&later, "n-1").unwrap();
    assert_eq!(stored, r#" ["t","x",true]"#);
    let earlier: Note = CompactJson.decode_stored(&stored, "n-1").unwrap();
    assert_eq!(earlier, Note { id: "n-1".into(), title: Some("t".into()), body: "x".into() });
    // Json reads both forms too.
    let earlier: Note = microdcs_valkey::store::Json.decode_stored(&stored, "n-1").unwrap();
    assert_eq!(earlier.body, "x");
    // What the earlier type's own fields cannot take is still an error.
    assert!(Codec::<Note>::decode_stored(&CompactJson, r#" [1,"x",true]"#, "n-1").is_err());
    assert!(Codec::<Note>::decode_stored(&CompactJson, r#" ["t"]"#, "n-1").is_err());
}

/// A struct with an internal tag: serde reads it from an array only
/// through the tag's own handling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(unscoped, kind = "tagged", key = "tagged:{id}")]
#[serde(tag = "type")]
pub struct Tagged {
    /// Id.
    pub id: String,
    /// A value.
    pub n: u32,
}

/// Fields of [`Flat`] and [`Nested`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inner {
    /// A value.
    pub a: u32,
}

/// A struct with flattened fields: written as a map, not a struct.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(unscoped, kind = "flat", key = "flat:{id}")]
pub struct Flat {
    /// Id.
    pub id: String,
    /// Flattened.
    #[serde(flatten)]
    pub inner: Inner,
}

/// Maps and structs below the top level keep their names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(unscoped, kind = "nested", key = "nested:{id}")]
pub struct Nested {
    /// Id.
    pub id: String,
    /// A map.
    pub m: std::collections::BTreeMap<String, u32>,
    /// A struct.
    pub o: Option<Inner>,
}

fn round_trip<D>(doc: &D) -> String
where
    D: Document + Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let id = doc.id();
    let stored = CompactJson.encode_stored(doc, &id).unwrap();
    let back: D = CompactJson.decode_stored(&stored, &id).unwrap();
    assert_eq!(&back, doc, "{stored}");
    stored
}

#[test]
fn tagged_and_flattened_structs_keep_their_names_nested_values_go_by_position() {
    assert_eq!(round_trip(&Tagged { id: "k".into(), n: 1 }), r#" {"type":"Tagged","n":1}"#);
    assert_eq!(round_trip(&Flat { id: "k".into(), inner: Inner { a: 1 } }), r#" {"a":1}"#);
    let nested = Nested { id: "k".into(), m: [("x".to_owned(), 1)].into(), o: Some(Inner { a: 2 }) };
    assert_eq!(round_trip(&nested), r#" [{"x":1},{"a":2}]"#);
}
