//! A write is acknowledged only if what it stores reads back: a document
//! whose text the codec writes but cannot read (a NaN or infinite float,
//! which JSON writes as `null`; a value nested deeper than the JSON
//! reader's recursion limit) is refused with [`Error::Codec`] before
//! anything is sent, in both JSON codecs, and an update of that kind leaves
//! the stored version as it was. Against a real Valkey.

use microdcs_tests::{created, server, snapshot, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{
    Document, Error, Expect, PutOutcome, Store, Valkey, config::WriteOptions, store::Codec, store::CompactJson,
    store::Json,
};
use serde::{Deserialize, Serialize};

/// A measurement with a float and a free-form detail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(unscoped, kind = "reading", key = "reading:{id}", list(key = "readings"))]
pub struct Reading {
    /// Reading id.
    pub id: String,
    /// The value measured.
    pub value: f64,
    /// Whatever the sensor sent along.
    pub detail: serde_json::Value,
}

microdcs_valkey::keyspace! {
    /// Readings, for the read-back check.
    pub Readings {
        documents: [Reading],
    }
}

fn reading(id: &str, value: f64, detail: serde_json::Value) -> Reading {
    Reading { id: id.into(), value, detail }
}

/// `[[[...]]]`: `depth` arrays, one inside the other.
fn nested(depth: usize) -> serde_json::Value {
    (0..depth).fold(serde_json::json!(1), |inner, _| serde_json::Value::Array(vec![inner]))
}

async fn setup(name: &str) -> (microdcs_valkey::testing::ValkeyServer, Valkey, ConnectionManager) {
    let s = server();
    let valkey = Valkey::connect_url(s.url(), unique_prefix(name), WriteOptions::default()).await.unwrap();
    let raw = ConnectionManager::new(redis::Client::open(s.url()).unwrap()).await.unwrap();
    (s, valkey, raw)
}

/// The documents no JSON reader takes back, named for the messages.
fn unreadable() -> Vec<(&'static str, Reading)> {
    vec![
        ("NaN", reading("r-bad", f64::NAN, serde_json::json!({}))),
        ("+inf", reading("r-bad", f64::INFINITY, serde_json::json!({}))),
        ("-inf", reading("r-bad", f64::NEG_INFINITY, serde_json::json!({}))),
        ("130 deep", reading("r-bad", 1.0, nested(130))),
    ]
}

fn refused_encode(got: &Result<PutOutcome, Error>) -> bool {
    matches!(got, Err(Error::Codec { action: "encode", kind: "reading", id, .. }) if id == "r-bad")
}

/// Creates, puts and updates of unreadable documents through `store`
/// are refused with nothing written, and an existing version stays.
async fn refuses_what_it_cannot_read<C: Codec<Reading>>(
    store: &Store<Reading, C>,
    valkey: &Valkey,
    raw: &mut ConnectionManager,
) {
    for (what, doc) in unreadable() {
        let before = snapshot(raw, valkey.prefix()).await;
        let got = store.create(&doc).await;
        assert!(refused_encode(&got), "{what}: create answered {got:?}");
        let got = store.put(&doc, Expect::Any).await;
        assert!(refused_encode(&got), "{what}: put answered {got:?}");
        assert_eq!(store.get("r-bad").await.unwrap(), None, "{what}: a refused create wrote the document");
        assert_eq!(snapshot(raw, valkey.prefix()).await, before, "{what}: a refused create changed the keyspace");
    }

    // An update of a stored document to an unreadable one leaves it as it was.
    let good = reading("r-bad", 2.5, serde_json::json!({"unit": "bar"}));
    assert_eq!(created(store, &good).await, 1);
    let read = store.get("r-bad").await.unwrap().expect("stored");
    for (what, doc) in unreadable() {
        let before = snapshot(raw, valkey.prefix()).await;
        let got = store.update(&read, &doc).await;
        assert!(refused_encode(&got), "{what}: update answered {got:?}");
        let got = store.put(&doc, Expect::Version(1)).await;
        assert!(refused_encode(&got), "{what}: put answered {got:?}");
        let now = store.get("r-bad").await.unwrap().expect("still stored");
        assert_eq!((now.version, &now.doc), (1, &good), "{what}: a refused update changed the document");
        assert_eq!(snapshot(raw, valkey.prefix()).await, before, "{what}: a refused update changed the keyspace");
    }
}

#[tokio::test]
async fn json_refuses_a_document_it_could_not_read_back() {
    let (_s, valkey, mut raw) = setup("readback-json").await;
    let store = Readings::open(valkey.clone()).store_with::<Reading, _>(Json);
    refuses_what_it_cannot_read(&store, &valkey, &mut raw).await;
}

#[tokio::test]
async fn compact_json_refuses_a_document_it_could_not_read_back() {
    let (_s, valkey, mut raw) = setup("readback-compact").await;
    let store = Readings::open(valkey.clone()).store_with::<Reading, _>(CompactJson);
    refuses_what_it_cannot_read(&store, &valkey, &mut raw).await;
}

/// Around the reader's depth limit every write either reads back as
/// written or is refused with nothing stored: never acknowledged and
/// unreadable. The deepest documents the reader takes are still written.
#[tokio::test]
async fn around_the_depth_limit_a_write_reads_back_or_is_refused() {
    let (_s, valkey, _raw) = setup("readback-depth").await;
    let handle = Readings::open(valkey.clone());
    let (json, compact) = (handle.store_with::<Reading, _>(Json), handle.store_with::<Reading, _>(CompactJson));
    for (codec, store) in [("json", &json as &dyn Probe), ("compact", &compact as &dyn Probe)] {
        let mut written = 0;
        for depth in 120..=132 {
            let id = format!("{codec}-{depth}");
            let doc = Reading { id: id.clone(), value: f64::MAX, detail: nested(depth) };
            match store.probe(&doc).await {
                Ok(Some(back)) => {
                    assert_eq!(back, doc, "{codec} at depth {depth}: read back otherwise");
                    written += 1;
                }
                Ok(None) => {}
                Err(e) => panic!("{codec} at depth {depth}: {e}"),
            }
        }
        // The reader's limit is 128 levels: the object and 126 arrays
        // around the innermost value are read, so depth 120 to 126 are.
        assert_eq!(written, 7, "{codec}: the readable depths were not all written");
    }
}

/// A create and a read of the same document, or `None` when the create
/// was refused as unreadable (then nothing may be stored).
trait Probe: Sync {
    fn probe<'a>(
        &'a self,
        doc: &'a Reading,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Option<Reading>, String>> + Send + 'a>>;
}

impl<C: Codec<Reading> + 'static> Probe for Store<Reading, C> {
    fn probe<'a>(
        &'a self,
        doc: &'a Reading,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Option<Reading>, String>> + Send + 'a>> {
        Box::pin(async move {
            match self.create(doc).await {
                Ok(PutOutcome::Written { .. }) => {
                    let got = self.get(&doc.id).await.map_err(|e| format!("acknowledged, then unreadable: {e}"))?;
                    Ok(Some(got.ok_or("acknowledged, then missing")?.doc))
                }
                Err(Error::Codec { action: "encode", .. }) => match self.get(&doc.id).await {
                    Ok(None) => Ok(None),
                    other => Err(format!("refused, yet stored: {other:?}")),
                },
                other => Err(format!("create answered {other:?}")),
            }
        })
    }
}
