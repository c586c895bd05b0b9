//! The generated CAS write path and the typed store, against a real Valkey.
//!
//! Long on purpose: one file per contract, and this is the store's whole
//! write/read contract (outcomes, indexes, retries, damage); its parts share
//! the fixtures and helpers at the top.

use std::collections::BTreeMap;
use std::time::Duration;

use microdcs_tests::{FaultProxy, ValkeyServer, command_calls, created, snapshot, stream_entries, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{
    Document, Error, Expect, KeyPrefix, Page, PutOutcome, Valkey, config::WriteOptions, store::Codec,
    store::DeleteExpect, store::DeleteOutcome,
};

use microdcs_tests::fixtures::{JobResponse, Plant, WorkMaster};

/// A document whose stored text is exactly one field, to test byte-exact storage.
#[derive(Debug, Clone, PartialEq, Document)]
#[microdcs(kind = "blob")]
struct Blob {
    id: String,
    scope: String,
    body: String,
}

// The store tests' own document types, beside the plant keyspace.
microdcs_valkey::keyspace! { Local { documents: [Blob, Reading] } }

/// Stores `{id length}:{id}{scope length}:{scope}` and then the body as is,
/// so the body bytes are kept exactly and the store can still check that a
/// hash holds the document its key and scope name.
struct RawBody;

impl RawBody {
    fn take<'t>(text: &mut &'t str) -> Option<&'t str> {
        let (len, rest) = text.split_once(':')?;
        let len: usize = len.parse().ok()?;
        let value = rest.get(..len)?;
        *text = &rest[len..];
        Some(value)
    }
}

impl Codec<Blob> for RawBody {
    type Error = std::io::Error;
    fn encode(&self, doc: &Blob) -> Result<String, Self::Error> {
        Ok(format!("{}:{}{}:{}{}", doc.id.len(), doc.id, doc.scope.len(), doc.scope, doc.body))
    }
    fn decode(&self, text: &str) -> Result<Blob, Self::Error> {
        let mut rest = text;
        let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "no id and scope prefix");
        let id = Self::take(&mut rest).ok_or_else(bad)?.to_owned();
        let scope = Self::take(&mut rest).ok_or_else(bad)?.to_owned();
        Ok(Blob { id, scope, body: rest.to_owned() })
    }
}

struct Env {
    server: ValkeyServer,
    valkey: Valkey,
    prefix: KeyPrefix,
    raw: ConnectionManager,
}

async fn env(name: &str) -> Env {
    env_with(name, WriteOptions::default()).await
}

async fn env_with(name: &str, write: WriteOptions) -> Env {
    let server = ValkeyServer::start().unwrap_or_else(|e| panic!("{e}"));
    let prefix = unique_prefix(name);
    let valkey =
        Valkey::connect_url(server.url(), prefix.clone(), write).await.unwrap_or_else(|e| server.fail("connect", &e));
    let raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    Env { server, valkey, prefix, raw }
}

impl Env {
    fn k(&self, rest: &str) -> String {
        format!("{}:{rest}", self.prefix.as_str())
    }

    async fn smembers(&mut self, rest: &str) -> Vec<String> {
        let mut v: Vec<String> = redis::cmd("SMEMBERS").arg(self.k(rest)).query_async(&mut self.raw).await.unwrap();
        v.sort();
        v
    }

    async fn get(&mut self, rest: &str) -> Option<String> {
        redis::cmd("GET").arg(self.k(rest)).query_async(&mut self.raw).await.unwrap()
    }

    async fn zrange(&mut self, rest: &str) -> Vec<(String, f64)> {
        redis::cmd("ZRANGE")
            .arg(self.k(rest))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query_async(&mut self.raw)
            .await
            .unwrap()
    }

    async fn changes(&mut self, scope: &str) -> Vec<BTreeMap<String, String>> {
        let key = self.k(&format!("changes:{scope}"));
        stream_entries(&mut self.raw, &key).await
    }

    async fn snapshot(&mut self) -> BTreeMap<String, String> {
        snapshot(&mut self.raw, &self.prefix).await
    }
}

fn change(id: &str, v: u64, change: &str) -> (String, String, String) {
    (id.to_owned(), v.to_string(), change.to_owned())
}

fn summarize(entries: &[BTreeMap<String, String>]) -> Vec<(String, String, String)> {
    entries.iter().map(|e| (e["id"].clone(), e["v"].clone(), e["change"].clone())).collect()
}

#[tokio::test]
async fn create_update_overwrite_stale_delete_with_exact_indexes() {
    let mut e = env("lifecycle").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    let r = JobResponse::new("r-1", "s1", "o-1", &["Running"]);

    // create
    assert_eq!(store.create(&r).await.unwrap(), PutOutcome::Written { version: 1 });
    assert_eq!(store.create(&r).await.unwrap(), PutOutcome::Conflict { current: 1 });
    assert_eq!(e.get("jobresponse:byorder:o-1").await.as_deref(), Some("r-1"));
    assert_eq!(e.smembers("jobresponse:bystate:s1:Running").await, ["r-1"]);
    assert_eq!(e.zrange("jobresponse:list:s1").await, [("r-1".to_owned(), 1000.0)]);
    assert_eq!(e.smembers("scopes").await, ["s1"]);
    assert_eq!(summarize(&e.changes("s1").await), [change("r-1", 1, "created")]);
    let first = e.changes("s1").await.remove(0);
    assert_eq!(first["kind"], "jobresponse");

    // update (state move, new order, new start time)
    let read = store.get("r-1").await.unwrap().unwrap();
    assert_eq!(read.version, 1);
    assert_eq!(read.doc, r);
    let mut r2 = r.clone();
    r2.state = vec!["Running".into(), "Held".into()];
    r2.job_order_id = "o-2".into();
    r2.start_time = 2000;
    assert_eq!(store.update(&read, &r2).await.unwrap(), PutOutcome::Written { version: 2 });
    assert_eq!(e.smembers("jobresponse:bystate:s1:Running").await, Vec::<String>::new());
    assert_eq!(e.smembers("jobresponse:bystate:s1:Running_Held").await, ["r-1"]);
    assert_eq!(e.get("jobresponse:byorder:o-1").await, None);
    assert_eq!(e.get("jobresponse:byorder:o-2").await.as_deref(), Some("r-1"));
    assert_eq!(e.zrange("jobresponse:list:s1").await, [("r-1".to_owned(), 2000.0)]);

    // stale version: nothing written
    let before = e.snapshot().await;
    assert_eq!(store.update(&read, &r).await.unwrap(), PutOutcome::Conflict { current: 2 });
    assert_eq!(store.put(&r, Expect::Version(1)).await.unwrap(), PutOutcome::Conflict { current: 2 });
    assert_eq!(e.snapshot().await, before);

    // overwrite without a read (reads the index fields first), state emptied: not indexed
    let mut r3 = r2.clone();
    r3.state.clear();
    assert_eq!(store.put(&r3, Expect::Any).await.unwrap(), PutOutcome::Written { version: 3 });
    assert_eq!(e.smembers("jobresponse:bystate:s1:Running_Held").await, Vec::<String>::new());
    let stored_state: Option<String> =
        redis::cmd("HGET").arg(e.k("jobresponse:r-1")).arg("state").query_async(&mut e.raw).await.unwrap();
    assert_eq!(stored_state, None, "an unindexed value leaves no hash field");
    assert_eq!(e.get("jobresponse:byorder:o-2").await.as_deref(), Some("r-1"));

    // update of a missing document
    let ghost = JobResponse::new("r-9", "s1", "o-9", &["X"]);
    assert_eq!(store.put(&ghost, Expect::Version(4)).await.unwrap(), PutOutcome::NotFound);

    // delete
    let read = store.get("r-1").await.unwrap().unwrap();
    assert_eq!(store.delete(&read).await.unwrap(), DeleteOutcome::Deleted { version: 3 });
    assert_eq!(store.delete_id("r-1", DeleteExpect::Any).await.unwrap(), DeleteOutcome::NotFound);
    assert!(store.get("r-1").await.unwrap().is_none());
    assert_eq!(e.get("jobresponse:byorder:o-2").await, None);
    assert_eq!(e.zrange("jobresponse:list:s1").await, Vec::<(String, f64)>::new());
    assert_eq!(
        summarize(&e.changes("s1").await),
        [
            change("r-1", 1, "created"),
            change("r-1", 2, "updated"),
            change("r-1", 3, "updated"),
            change("r-1", 3, "deleted")
        ]
    );
    // What is left: the change stream, the scope registry and the
    // tombstone (last version, delete id, history), which expires.
    let left: Vec<String> = e.snapshot().await.into_keys().collect();
    assert_eq!(left, [e.k("changes:s1"), e.k("scopes"), e.k("tomb:jobresponse:r-1")]);
    let ttl: i64 = redis::cmd("PTTL").arg(e.k("tomb:jobresponse:r-1")).query_async(&mut e.raw).await.unwrap();
    assert!(ttl > 0 && ttl <= 600_000, "kept for `TombstoneRetention`: {ttl} ms");
}

#[tokio::test]
async fn state_moves_leave_exactly_one_by_state_entry() {
    let mut e = env("statemove").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    let states: [&[&str]; 5] = [&["Idle"], &["Running"], &["Running", "Held"], &["Complete"], &["Running"]];
    assert!(matches!(
        store.create(&JobResponse::new("r-1", "s1", "o-1", states[0])).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    for s in &states[1..] {
        let read = store.get("r-1").await.unwrap().unwrap();
        let mut next = read.doc.clone();
        next.state = s.iter().map(|x| (*x).to_owned()).collect();
        assert!(matches!(store.update(&read, &next).await.unwrap(), PutOutcome::Written { .. }));
        let sets: Vec<String> = e
            .snapshot()
            .await
            .into_iter()
            .filter(|(k, v)| k.contains(":bystate:") && v.contains("r-1"))
            .map(|(k, _)| k)
            .collect();
        assert_eq!(sets, [e.k(&format!("jobresponse:bystate:s1:{}", s.join("_")))]);
    }
    let hits = store.ids(JobResponse::by_state("s1", "Running"), Page::first(100)).await.unwrap();
    assert_eq!(hits.ids, ["r-1"]);
    assert_eq!(hits.next, None);
}

#[tokio::test]
async fn wrong_scope_and_unique_violation_write_nothing() {
    let mut e = env("violations").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    assert!(matches!(
        store.create(&JobResponse::new("r-1", "s1", "o-1", &["Running"])).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    assert!(matches!(
        store.create(&JobResponse::new("r-2", "s1", "o-2", &["Running"])).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    let before = e.snapshot().await;

    let moved = JobResponse::new("r-1", "s2", "o-1", &["Running"]);
    for expect in [Expect::Any, Expect::Version(1)] {
        match store.put(&moved, expect).await {
            Err(Error::WrongScope { id, stored, given }) => {
                assert_eq!((id.as_str(), stored.as_str(), given.as_str()), ("r-1", "s1", "s2"))
            }
            other => panic!("expected WrongScope, got {other:?}"),
        }
    }
    assert_eq!(e.snapshot().await, before, "a wrong-scope write writes nothing");

    let before = e.snapshot().await;
    let r2 = store.get("r-2").await.unwrap().unwrap();
    let mut steal = r2.doc.clone();
    steal.job_order_id = "o-1-other".into();
    assert!(matches!(store.update(&r2, &steal).await.unwrap(), PutOutcome::Written { .. }));
    let before2 = e.snapshot().await;
    assert_ne!(before, before2);

    // r-3 wants o-1-other, held by r-2
    let r3 = JobResponse::new("r-3", "s1", "o-1-other", &["Idle"]);
    match store.create(&r3).await {
        Err(Error::UniqueViolation { index, holder, key, .. }) => {
            assert_eq!(index, "by_order");
            assert_eq!(holder, "r-2");
            assert_eq!(key, e.k("jobresponse:byorder:o-1-other"));
        }
        other => panic!("expected UniqueViolation, got {other:?}"),
    }
    assert_eq!(e.snapshot().await, before2, "a unique violation writes nothing");
}

#[tokio::test]
async fn wrong_scope_leaves_keyspace_identical() {
    let mut e = env("wrongscope").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    assert!(matches!(
        store.create(&JobResponse::new("r-1", "s1", "o-1", &["Running"])).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    let before = e.snapshot().await;
    let err = store.put(&JobResponse::new("r-1", "s2", "o-5", &["Held"]), Expect::Any).await.unwrap_err();
    assert!(matches!(err, Error::WrongScope { .. }), "{err:?}");
    let err = store.create(&JobResponse::new("r-1", "s2", "o-5", &["Held"])).await.unwrap_err();
    assert!(matches!(err, Error::WrongScope { .. }), "{err:?}");
    assert_eq!(e.snapshot().await, before);
}

#[tokio::test]
async fn concurrent_cas_writers_on_one_document() {
    let mut e = env("concurrent").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    assert!(matches!(
        store.create(&JobResponse::new("r-1", "s1", "o-1", &["S0"])).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    let mut tasks = Vec::new();
    for w in 0..50 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut ok = 0u64;
            for i in 0..20 {
                let read = store.get("r-1").await.unwrap().unwrap();
                let mut next = read.doc.clone();
                next.state = vec![format!("W{w}"), format!("I{i}")];
                next.start_time = read.doc.start_time + 1;
                match store.update(&read, &next).await.unwrap() {
                    PutOutcome::Written { .. } => ok += 1,
                    PutOutcome::Conflict { .. } => {}
                    PutOutcome::NotFound => panic!("document vanished"),
                }
            }
            ok
        }));
    }
    let mut successes = 0;
    for t in tasks {
        successes += t.await.unwrap();
    }
    assert!(successes > 0);
    let read = store.get("r-1").await.unwrap().unwrap();
    assert_eq!(read.version, 1 + successes, "version = create + one per successful CAS");
    assert_eq!(read.doc.start_time, 1000 + successes as i64, "no lost update");
    let entries = e.changes("s1").await;
    assert_eq!(entries.len() as u64, 1 + successes, "one change entry per success");
    let versions: Vec<u64> = entries.iter().map(|x| x["v"].parse().unwrap()).collect();
    assert_eq!(versions, (1..=1 + successes).collect::<Vec<_>>(), "in version order");
    // Exactly one by-state set holds the id.
    let sets: Vec<String> = e
        .snapshot()
        .await
        .into_iter()
        .filter(|(k, v)| k.contains(":bystate:") && v.contains("r-1"))
        .map(|(k, _)| k)
        .collect();
    assert_eq!(sets.len(), 1, "{sets:?}");
}

#[tokio::test]
async fn unknown_outcome_is_applied_exactly_once() {
    let server = ValkeyServer::start().unwrap_or_else(|e| panic!("{e}"));
    let proxy = FaultProxy::start(server.host_port()).await;
    let prefix = unique_prefix("unknown");
    let write = WriteOptions { retry_delay: Duration::from_millis(100), ..WriteOptions::default() };
    let valkey = Valkey::connect_url(&proxy.url(), prefix.clone(), write).await.unwrap();
    let mut raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    assert!(matches!(
        store.create(&JobResponse::new("r-1", "s1", "o-1", &["A"])).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    let read = store.get("r-1").await.unwrap().unwrap();

    proxy.cut_after_request_containing(b"EVALSHA").await;
    let next = JobResponse { state: vec!["B".into()], ..read.doc.clone() };
    let out = store.update(&read, &next).await.unwrap();
    assert_eq!(proxy.cuts(), 1, "the proxy cut the reply");
    assert_eq!(out, PutOutcome::Written { version: 2 });
    assert_eq!(valkey.metrics().write_retries(), 1);
    assert_eq!(valkey.metrics().write_already_applied(), 1);
    let changes = stream_entries(&mut raw, &format!("{}:changes:s1", prefix.as_str())).await;
    assert_eq!(summarize(&changes), [change("r-1", 1, "created"), change("r-1", 2, "updated")], "applied once");
    assert_eq!(store.get("r-1").await.unwrap().unwrap().version, 2);
}

#[tokio::test]
async fn unknown_outcome_with_another_writer_in_between() {
    let server = ValkeyServer::start().unwrap_or_else(|e| panic!("{e}"));
    let proxy = FaultProxy::start(server.host_port()).await;
    let prefix = unique_prefix("unknown2");
    let write = WriteOptions { retry_delay: Duration::from_millis(400), ..WriteOptions::default() };
    let valkey = Valkey::connect_url(&proxy.url(), prefix.clone(), write).await.unwrap();
    let other = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let mut raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    let other_store = Plant::open(other.clone()).store::<JobResponse>();
    assert!(matches!(
        store.create(&JobResponse::new("r-1", "s1", "o-1", &["A"])).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    let read = store.get("r-1").await.unwrap().unwrap();

    proxy.cut_after_request_containing(b"EVALSHA").await;
    let next = JobResponse { state: vec!["B".into()], ..read.doc.clone() };
    let (out, ()) = tokio::join!(store.update(&read, &next), async {
        proxy.wait_cut().await;
        // Between the cut and the retry, another writer updates the document.
        let seen = other_store.get("r-1").await.unwrap().unwrap();
        assert_eq!(seen.version, 2, "the cut write was applied");
        let theirs = JobResponse { state: vec!["C".into()], ..seen.doc.clone() };
        assert_eq!(other_store.update(&seen, &theirs).await.unwrap(), PutOutcome::Written { version: 3 });
    });
    assert_eq!(out.unwrap(), PutOutcome::Written { version: 2 }, "applied, not a conflict");
    assert_eq!(valkey.metrics().write_already_applied(), 1);
    let changes = stream_entries(&mut raw, &format!("{}:changes:s1", prefix.as_str())).await;
    assert_eq!(
        summarize(&changes),
        [change("r-1", 1, "created"), change("r-1", 2, "updated"), change("r-1", 3, "updated")]
    );
    let now = store.get("r-1").await.unwrap().unwrap();
    assert_eq!((now.version, now.doc.state.clone()), (3, vec!["C".to_owned()]));
}

#[tokio::test]
async fn caller_op_id_recognised_across_calls() {
    let e = env("opid").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    assert!(matches!(
        store.create(&JobResponse::new("r-1", "s1", "o-1", &["A"])).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    let read = store.get("r-1").await.unwrap().unwrap();
    let next = JobResponse { state: vec!["B".into()], ..read.doc.clone() };
    assert_eq!(store.update_with_op(&read, &next, "job-42.step-3").await.unwrap(), PutOutcome::Written { version: 2 });
    // The caller did not see the reply and tries again with the same read and op id.
    assert_eq!(store.update_with_op(&read, &next, "job-42.step-3").await.unwrap(), PutOutcome::Written { version: 2 });
    assert_eq!(
        store.put_with_op(&next, Expect::Version(1), "job-42.step-3").await.unwrap(),
        PutOutcome::Written { version: 2 }
    );
    assert_eq!(store.get("r-1").await.unwrap().unwrap().version, 2);
    assert!(matches!(store.put_with_op(&next, Expect::Any, "bad id").await, Err(Error::InvalidOpId(_))));
    let _ = &e.server;
}

#[tokio::test]
async fn script_flush_between_operations() {
    let mut e = env("flush").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    assert!(matches!(
        store.create(&JobResponse::new("r-1", "s1", "o-1", &["A"])).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut e.raw).await.unwrap();
    let read = store.get("r-1").await.unwrap().unwrap();
    let next = JobResponse { state: vec!["B".into()], ..read.doc.clone() };
    assert_eq!(store.update(&read, &next).await.unwrap(), PutOutcome::Written { version: 2 });
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut e.raw).await.unwrap();
    assert_eq!(store.find(JobResponse::by_order("o-1")).await.unwrap().unwrap().version, 2);
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut e.raw).await.unwrap();
    let read = store.get("r-1").await.unwrap().unwrap();
    assert_eq!(store.delete(&read).await.unwrap(), DeleteOutcome::Deleted { version: 2 });
}

#[tokio::test]
async fn document_texts_and_ids_round_trip_byte_identical() {
    let mut e = env("bytes").await;
    let store = Local::open(e.valkey.clone()).store_with::<Blob, _>(RawBody);
    let mut big = String::with_capacity(1 << 20);
    while big.len() < (1 << 20) {
        big.push_str("line \"quoted\" \\ back\nslash\0nul ünïcødé 🚀 ");
    }
    let texts = [
        "{\"a\":\"b\\\"c\"}",
        "quote \" backslash \\ newline \n tab \t",
        "nul \0 inside",
        "ünïcødé → 🚀",
        big.as_str(),
        "",
    ];
    let ids = ["plain", "a:b", "a|b", "a*b?", "100%", "list:s1", "{tag}", "spaced id", "ünï"];
    for (i, id) in ids.iter().enumerate() {
        let text = texts[i % texts.len()];
        let doc = Blob { id: (*id).to_owned(), scope: "s:1|x".into(), body: text.to_owned() };
        assert_eq!(store.create(&doc).await.unwrap(), PutOutcome::Written { version: 1 }, "id {id:?}");
        let back = store.get(id).await.unwrap().unwrap();
        assert!(
            back.doc.body.as_bytes() == text.as_bytes(),
            "id {id:?}: body differs ({} bytes back)",
            back.doc.body.len()
        );
        assert_eq!(back.id, *id);
        assert_eq!(back.scope, "s:1|x");
        assert_eq!((back.doc.id.as_str(), back.doc.scope.as_str()), (*id, "s:1|x"));
    }
    // The big text is stored as is after its prefix (compared without printing a MiB on failure).
    let big_id = ids[texts.iter().position(|t| t.len() == big.len()).unwrap()];
    let raw: Vec<u8> =
        redis::cmd("HGET").arg(store.key(big_id).unwrap()).arg("doc").query_async(&mut e.raw).await.unwrap();
    let written = RawBody.encode(&Blob { id: big_id.to_owned(), scope: "s:1|x".into(), body: big.clone() }).unwrap();
    assert!(raw.ends_with(big.as_bytes()), "1 MiB body differs: {} bytes stored, {} written", raw.len(), big.len());
    assert!(raw == written.as_bytes(), "stored text is the codec's text");
    // Every id has its own key; none parses as another family's key.
    let keys: Vec<String> = e.snapshot().await.into_keys().filter(|k| k.contains(":blob:")).collect();
    assert_eq!(keys.len(), ids.len(), "{keys:?}");
    assert!(keys.contains(&e.k("blob:a%3Ab")));
    assert!(keys.contains(&e.k("blob:list%3As1")));
}

#[tokio::test]
async fn corrupt_hashes_give_typed_errors() {
    let mut e = env("corrupt").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    assert!(matches!(
        store.create(&JobResponse::new("r-1", "s1", "o-1", &["A"])).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    assert!(matches!(
        store.create(&JobResponse::new("r-2", "s1", "o-2", &["A"])).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    let next = JobResponse::new("r-1", "s1", "o-1", &["B"]);

    // non-numeric v
    let _: () =
        redis::cmd("HSET").arg(e.k("jobresponse:r-1")).arg("v").arg("seven").query_async(&mut e.raw).await.unwrap();
    assert!(matches!(store.get("r-1").await, Err(Error::Corrupt { .. })));
    let before = e.snapshot().await;
    assert!(matches!(store.put(&next, Expect::Any).await, Err(Error::Corrupt { .. })));
    assert!(matches!(store.create(&next).await, Err(Error::Corrupt { .. })));
    assert_eq!(e.snapshot().await, before, "nothing written");

    // missing doc
    let _: () = redis::cmd("HDEL").arg(e.k("jobresponse:r-2")).arg("doc").query_async(&mut e.raw).await.unwrap();
    match store.get("r-2").await {
        Err(Error::Corrupt { reason, .. }) => assert!(reason.contains("doc"), "{reason}"),
        other => panic!("{other:?}"),
    }
    let r2 = JobResponse::new("r-2", "s1", "o-2", &["B"]);
    match store.put(&r2, Expect::Any).await {
        Err(Error::Corrupt { reason, .. }) => assert!(reason.contains("doc"), "{reason}"),
        other => panic!("{other:?}"),
    }

    // wrong type at the key
    let _: () = redis::cmd("SET").arg(e.k("jobresponse:r-3")).arg("not a hash").query_async(&mut e.raw).await.unwrap();
    assert!(matches!(store.get("r-3").await, Err(Error::WrongType { .. })), "{:?}", store.get("r-3").await);
    let r3 = JobResponse::new("r-3", "s1", "o-3", &["B"]);
    assert!(matches!(store.create(&r3).await, Err(Error::WrongType { .. })));
    assert!(matches!(store.put(&r3, Expect::Any).await, Err(Error::WrongType { .. })));

    // bad document text for the codec
    let _: () = redis::cmd("HSET")
        .arg(e.k("jobresponse:r-1"))
        .arg("v")
        .arg("1")
        .arg("doc")
        .arg("{not json")
        .query_async(&mut e.raw)
        .await
        .unwrap();
    let err = store.get("r-1").await.unwrap_err();
    assert!(matches!(err, Error::Codec { action: "decode", kind: "jobresponse", .. }), "{err:?}");
    // The message says what and where: the kind and the id.
    assert!(err.to_string().starts_with("cannot decode jobresponse `r-1`: "), "{err}");

    // invalid ids are typed errors
    assert!(matches!(store.get("").await, Err(Error::Key(_))));
    assert!(matches!(store.create(&JobResponse::new("", "s1", "o", &[])).await, Err(Error::Index(_))));
}

#[tokio::test]
async fn round_trips_per_operation() {
    let server = ValkeyServer::start().unwrap_or_else(|e| panic!("{e}"));
    let proxy = FaultProxy::start(server.host_port()).await;
    let prefix = unique_prefix("roundtrips");
    let valkey = Valkey::connect_url(&proxy.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let mut raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    // Warm up: load the scripts.
    assert!(matches!(
        store.create(&JobResponse::new("warm", "s1", "o-w", &["A"])).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    store.find(JobResponse::by_order("o-w")).await.unwrap();
    let w = store.get("warm").await.unwrap().unwrap();
    assert!(matches!(store.delete(&w).await.unwrap(), DeleteOutcome::Deleted { .. }));

    async fn measure<F: Future<Output = ()>>(
        proxy: &FaultProxy,
        raw: &mut ConnectionManager,
        f: F,
    ) -> (u64, BTreeMap<String, u64>) {
        let before = command_calls(raw).await;
        let p0 = proxy.commands();
        f.await;
        let after = command_calls(raw).await;
        let top: BTreeMap<String, u64> = ["evalsha", "eval", "hgetall", "hmget", "script|load", "get"]
            .into_iter()
            .map(|c| (c.to_owned(), after.get(c).copied().unwrap_or(0) - before.get(c).copied().unwrap_or(0)))
            .filter(|(_, n)| *n > 0)
            .collect();
        (proxy.commands() - p0, top)
    }

    let r = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    let (n, _) = measure(&proxy, &mut raw, async {
        created(&store, &r).await;
    })
    .await;
    assert_eq!(n, 1, "create");
    let mut read = None;
    let (n, stats) = measure(&proxy, &mut raw, async {
        read = store.get("r-1").await.unwrap();
    })
    .await;
    assert_eq!(n, 1, "get");
    assert_eq!(stats.get("hgetall"), Some(&1));
    let read = read.unwrap();
    let next = JobResponse { state: vec!["B".into()], ..read.doc.clone() };
    let (n, stats) = measure(&proxy, &mut raw, async {
        assert!(matches!(store.update(&read, &next).await.unwrap(), PutOutcome::Written { .. }));
    })
    .await;
    assert_eq!(n, 1, "update with known version");
    assert_eq!(stats.get("evalsha"), Some(&1));
    let (n, stats) = measure(&proxy, &mut raw, async {
        store.find(JobResponse::by_order("o-1")).await.unwrap().unwrap();
    })
    .await;
    assert_eq!(n, 1, "unique lookup");
    assert_eq!(stats.get("evalsha"), Some(&1));
    let read = store.get("r-1").await.unwrap().unwrap();
    let (n, stats) = measure(&proxy, &mut raw, async {
        assert!(matches!(store.delete(&read).await.unwrap(), DeleteOutcome::Deleted { .. }));
    })
    .await;
    assert_eq!(n, 1, "delete");
    assert_eq!(stats.get("evalsha"), Some(&1));
}

#[tokio::test]
async fn unique_lookup_of_ids_with_reserved_characters() {
    let e = env("findids").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    let ids = ["a:b", "a|b", "a*b?[c]", "100%", "{tag}", "sp ace", "back\\slash", "nl\nx", "ünï→"];
    for (i, id) in ids.iter().enumerate() {
        let _ = store.create(&JobResponse::new(id, "s1", &format!("o-{i}"), &["A"])).await.unwrap();
    }
    for (i, id) in ids.iter().enumerate() {
        let found = store
            .find(JobResponse::by_order(&format!("o-{i}")))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{id:?} not found"));
        assert_eq!(found.id, *id);
        assert_eq!(found.doc.id, *id);
    }
}

#[tokio::test]
async fn lists_and_queries_page() {
    let e = env("lists").await;
    let responses = Plant::open(e.valkey.clone()).store::<JobResponse>();
    for i in 0..25 {
        let mut r = JobResponse::new(&format!("r-{i:02}"), "s1", &format!("o-{i}"), &["Running"]);
        r.start_time = 100 - i;
        created(&responses, &r).await;
    }
    let mut page = Some(Page::first(10));
    let mut ids = Vec::new();
    while let Some(p) = page {
        let got = responses.list("s1", p).await.unwrap();
        assert!(got.ids.len() <= 10);
        ids.extend(got.ids);
        page = got.next;
    }
    let expected: Vec<String> = (0..25).rev().map(|i| format!("r-{i:02}")).collect();
    assert_eq!(ids, expected, "ascending start time");

    let mut page = Some(Page::first(7));
    let mut by_state = Vec::new();
    while let Some(p) = page {
        let got = responses.ids(JobResponse::by_state("s1", "Running"), p).await.unwrap();
        by_state.extend(got.ids);
        page = got.next;
    }
    by_state.sort();
    by_state.dedup();
    assert_eq!(by_state.len(), 25);
    assert!(responses.find(JobResponse::by_order("o-missing")).await.unwrap().is_none());
    assert_eq!(responses.find(JobResponse::by_order("o-3")).await.unwrap().unwrap().id, "r-03");

    let masters = Plant::open(e.valkey.clone()).store::<WorkMaster>();
    assert!(matches!(
        masters.create(&WorkMaster { id: "wm-1".into(), scope: "s1".into(), name: "Mix".into() }).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    assert!(matches!(
        masters.create(&WorkMaster { id: "wm-2".into(), scope: "s1".into(), name: "Fill".into() }).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    let mut got = masters.list("s1", Page::first(10)).await.unwrap().ids;
    got.sort();
    assert_eq!(got, ["wm-1", "wm-2"]);
}

/// Writes 20 updates with caller ids under a history of `keep` ids, then
/// retries old writes: each of the last `keep` is recognised with the
/// version it produced, the one before them is not.
async fn op_history_boundary(name: &str, keep: u32) {
    use microdcs_schema::lua::OP_ID_LEN;
    let mut e = env_with(name, WriteOptions { op_history: keep, ..WriteOptions::default() }).await;
    let keep = keep as usize;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    let _ = store.create(&JobResponse::new("r-1", "s1", "o-1", &["A"])).await.unwrap();
    let mut writes = Vec::new();
    // Long caller ids: stored as fixed-length digests.
    for i in 0..20u64 {
        let read = store.get("r-1").await.unwrap().unwrap();
        let next = JobResponse { start_time: 2000 + i as i64, ..read.doc.clone() };
        let op = format!("{i:0>64}");
        assert_eq!(store.update_with_op(&read, &next, &op).await.unwrap(), PutOutcome::Written { version: 2 + i });
        writes.push((read, next, op));
    }
    let key = e.k("jobresponse:r-1");
    let ops: String = redis::cmd("HGET").arg(&key).arg("ops").query_async(&mut e.raw).await.unwrap();
    assert_eq!(ops.len(), keep * OP_ID_LEN, "bounded by the setting: {ops}");
    let op_field: Option<String> = redis::cmd("HGET").arg(&key).arg("op").query_async(&mut e.raw).await.unwrap();
    assert_eq!(op_field, None, "the newest id is not stored twice");
    // The boundary: each of the last `keep` writes (the oldest of them is
    // `keep` writes back), retried with its op id, is recognised with the
    // version it produced ...
    let kept = writes.len() - keep;
    for (read, next, op) in &writes[kept..] {
        assert_eq!(
            store.update_with_op(read, next, op).await.unwrap(),
            PutOutcome::Written { version: read.version + 1 },
            "op {op}"
        );
    }
    // ... and the one `keep + 1` back no longer is: a version expectation
    // then reports the conflict, and nothing is written twice.
    let (read, next, op) = &writes[kept - 1];
    assert_eq!(store.update_with_op(read, next, op).await.unwrap(), PutOutcome::Conflict { current: 21 });
    assert_eq!(e.changes("s1").await.len(), 21);
}

#[tokio::test]
async fn op_history_keeps_exactly_the_last_writes() {
    op_history_boundary("history", WriteOptions::default().op_history).await;
}

#[tokio::test]
async fn op_history_length_is_a_setting() {
    op_history_boundary("history3", 3).await;
}

#[tokio::test]
async fn a_wrong_type_index_key_aborts_before_any_write() {
    let mut e = env("wrongtypeindex").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    let _ = store.create(&JobResponse::new("r-1", "s1", "o-1", &["A"])).await.unwrap();
    // Someone wrote a string where the new by-state set would go.
    let _: () =
        redis::cmd("SET").arg(e.k("jobresponse:bystate:s1:B")).arg("junk").query_async(&mut e.raw).await.unwrap();
    let before = e.snapshot().await;
    let read = store.get("r-1").await.unwrap().unwrap();
    let next = JobResponse { state: vec!["B".into()], job_order_id: "o-2".into(), ..read.doc.clone() };
    let err = store.update(&read, &next).await.unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
    assert_eq!(e.snapshot().await, before, "no partial write");
    // The change stream as the wrong type: also nothing written.
    let _: () = redis::cmd("DEL").arg(e.k("jobresponse:bystate:s1:B")).query_async(&mut e.raw).await.unwrap();
    let _: () = redis::cmd("DEL").arg(e.k("changes:s1")).query_async(&mut e.raw).await.unwrap();
    let _: () = redis::cmd("SET").arg(e.k("changes:s1")).arg("junk").query_async(&mut e.raw).await.unwrap();
    let before = e.snapshot().await;
    assert!(matches!(store.update(&read, &next).await, Err(Error::WrongType { .. })));
    assert_eq!(e.snapshot().await, before, "no partial write: the group move was undone");
    // The same with the id missing from its old group (the move becomes
    // an add to the new group, undone just as well).
    let _: () =
        redis::cmd("SREM").arg(e.k("jobresponse:bystate:s1:A")).arg("r-1").query_async(&mut e.raw).await.unwrap();
    let before = e.snapshot().await;
    assert!(matches!(store.update(&read, &next).await, Err(Error::WrongType { .. })));
    assert_eq!(e.snapshot().await, before, "no partial write: the add was undone");
}

#[tokio::test]
async fn update_needs_the_read_of_the_same_document() {
    let e = env("mismatch").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    let _ = store.create(&JobResponse::new("r-1", "s1", "o-1", &["A"])).await.unwrap();
    let _ = store.create(&JobResponse::new("r-2", "s1", "o-2", &["A"])).await.unwrap();
    let read = store.get("r-1").await.unwrap().unwrap();
    let other = JobResponse::new("r-2", "s1", "o-2", &["B"]);
    assert!(matches!(store.update(&read, &other).await, Err(Error::ReadMismatch { .. })));
}

#[tokio::test]
async fn stale_unique_entry_is_not_followed() {
    let mut e = env("staleunique").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    let _ = store.create(&JobResponse::new("r-1", "s1", "o-1", &["A"])).await.unwrap();
    // Drift: the by-order key for o-9 points at r-1, whose order is o-1.
    let _: () = redis::cmd("SET").arg(e.k("jobresponse:byorder:o-9")).arg("r-1").query_async(&mut e.raw).await.unwrap();
    assert!(store.find(JobResponse::by_order("o-9")).await.unwrap().is_none());
    assert_eq!(store.find(JobResponse::by_order("o-1")).await.unwrap().unwrap().id, "r-1");
}

#[tokio::test]
async fn update_in_place_loops_without_rereading() {
    let mut e = env("inplace").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    let _ = store.create(&JobResponse::new("r-1", "s1", "o-1", &["A"])).await.unwrap();
    let mut read = store.get("r-1").await.unwrap().unwrap();
    for (i, st) in ["B", "C", "", "D"].iter().enumerate() {
        let next = JobResponse {
            state: if st.is_empty() { vec![] } else { vec![(*st).into()] },
            job_order_id: format!("o-{i}x"),
            ..read.doc.clone()
        };
        assert_eq!(
            store.update_in_place(&mut read, next).await.unwrap(),
            PutOutcome::Written { version: 2 + i as u64 }
        );
    }
    assert_eq!(read.version, 5);
    assert_eq!(store.get("r-1").await.unwrap().unwrap().doc, read.doc);
    assert_eq!(e.smembers("jobresponse:bystate:s1:D").await, ["r-1"]);
    for old in ["A", "B", "C"] {
        assert!(e.smembers(&format!("jobresponse:bystate:s1:{old}")).await.is_empty());
    }
    assert_eq!(e.get("jobresponse:byorder:o-3x").await.as_deref(), Some("r-1"));
    assert_eq!(e.get("jobresponse:byorder:o-0x").await, None);
}

/// A reading listed by its value, a floating-point score.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, Document)]
#[microdcs(kind = "reading", list(key = "reading:list:{scope}", score = value))]
struct Reading {
    id: String,
    scope: String,
    value: f64,
}

#[tokio::test]
async fn non_finite_scores_are_refused_before_anything_is_written() {
    let mut e = env("nonfinite").await;
    let store = Local::open(e.valkey.clone()).store::<Reading>();
    for bad in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN] {
        let r = Reading { id: "x-1".into(), scope: "s1".into(), value: bad };
        let got = store.create(&r).await;
        assert!(
            matches!(
                got,
                Err(Error::Index(microdcs_valkey::schema::IndexError::NonFiniteScore { type_name: "Reading", .. }))
            ),
            "{bad}: {got:?}"
        );
        let got = store.put(&r, Expect::Any).await;
        assert!(matches!(got, Err(Error::Index(_))), "{bad}: {got:?}");
    }
    assert!(e.snapshot().await.is_empty(), "nothing was written");
    // A finite score is written and reads back.
    created(&store, &Reading { id: "x-1".into(), scope: "s1".into(), value: -1.5e300 }).await;
    assert_eq!(store.get("x-1").await.unwrap().unwrap().doc.value, -1.5e300);
}

/// Another client flushing the script cache in a loop, while writers run:
/// a cache miss is the store's business, never the caller's. Each flush can
/// land between the store's `SCRIPT LOAD` and its `EVALSHA`, so one reload
/// is not enough.
#[tokio::test]
async fn script_flush_loop_under_concurrent_writers_is_invisible() {
    let mut e = env("flushloop").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flusher = {
        let stop = stop.clone();
        let mut raw = e.raw.clone();
        tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _: () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut raw).await.unwrap();
                n += 1;
            }
            n
        })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    let mut writers = Vec::new();
    for w in 0..8 {
        let store = store.clone();
        writers.push(tokio::spawn(async move {
            // (errors, the ids left with their expected version and state)
            let mut errors = Vec::new();
            let mut kept = BTreeMap::new();
            let mut i = 0;
            while tokio::time::Instant::now() < deadline {
                let id = format!("w{w}-{i}");
                let order = format!("o-{w}-{i}");
                let step = async {
                    let doc = JobResponse::new(&id, "s1", &order, &["A"]);
                    assert_eq!(store.create(&doc).await?, PutOutcome::Written { version: 1 });
                    let read = store.get(&id).await?.expect("just created");
                    let next = JobResponse { state: vec!["B".into()], ..read.doc.clone() };
                    assert_eq!(store.update(&read, &next).await?, PutOutcome::Written { version: 2 });
                    let found = store.find(JobResponse::by_order(&order)).await?.expect("indexed");
                    assert_eq!(found.version, 2);
                    if i % 2 == 0 {
                        assert_eq!(store.delete(&found).await?, DeleteOutcome::Deleted { version: 2 });
                        Ok::<_, Error>(false)
                    } else {
                        Ok(true)
                    }
                };
                match step.await {
                    Ok(true) => {
                        kept.insert(id, order);
                    }
                    Ok(false) => {}
                    Err(err) => errors.push(format!("{id}: {err}")),
                }
                i += 1;
            }
            (errors, kept, i)
        }));
    }
    let mut errors = Vec::new();
    let mut kept = BTreeMap::new();
    let mut rounds = 0;
    for t in writers {
        let (err, k, n) = t.await.unwrap();
        errors.extend(err);
        kept.extend(k);
        rounds += n;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let flushes = flusher.await.unwrap();
    println!("{rounds} rounds, {flushes} flushes, {} errors", errors.len());
    assert!(flushes > 10 && rounds > 8, "the test did not exercise anything: {flushes} flushes, {rounds} rounds");
    assert!(errors.is_empty(), "{} caller-visible errors, first: {:?}", errors.len(), &errors[..errors.len().min(5)]);
    // Final state: exactly the kept documents, at version 2, each indexed once.
    let snap = e.snapshot().await;
    let docs: Vec<String> = snap
        .keys()
        .filter_map(|k| k.strip_prefix(&e.k("jobresponse:")))
        .filter(|k| k.starts_with('w'))
        .map(str::to_owned)
        .collect();
    assert_eq!(docs, kept.keys().cloned().collect::<Vec<_>>());
    for (id, order) in &kept {
        let read = store.get(id).await.unwrap().unwrap();
        assert_eq!((read.version, read.doc.state.clone()), (2, vec!["B".to_owned()]), "{id}");
        assert_eq!(e.get(&format!("jobresponse:byorder:{order}")).await.as_deref(), Some(id.as_str()));
    }
    let mut in_b = e.smembers("jobresponse:bystate:s1:B").await;
    in_b.sort();
    assert_eq!(in_b, kept.keys().cloned().collect::<Vec<_>>());
    assert!(e.smembers("jobresponse:bystate:s1:A").await.is_empty());
}

/// The largest version: integers above it are not exact in the scripts' numbers.
const MAX_VERSION: u64 = (1 << 53) - 1;

/// A stored `v` outside `1 ..= 2^53 - 1` written without sign or leading
/// zero is damage: every read and every write says so, and nothing is
/// written. Before, digits beyond 2^53 were rounded (versions going
/// backwards, two writers with one read both winning), 2^64 - 1 was written
/// and then reported as a protocol error, and `007` read as version 7 while
/// every write called it corrupt.
#[tokio::test]
async fn versions_outside_the_canonical_grammar_are_corrupt_everywhere() {
    let mut e = env("versions").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    created(&store, &doc).await;
    let read = store.get("r-1").await.unwrap().unwrap();
    let next = JobResponse { state: vec!["B".into()], ..doc.clone() };
    let key = e.k("jobresponse:r-1");
    let bad = [
        "9007199254740992",
        "9007199254740993",
        "18446744073709551615",
        "99999999999999999999999",
        "007",
        "+5",
        "-1",
        "0",
        " 5",
        "5 ",
        "5.0",
        "1e3",
        "0x10",
        "",
    ];
    for v in bad {
        let _: () = redis::cmd("HSET").arg(&key).arg("v").arg(v).query_async(&mut e.raw).await.unwrap();
        let before = e.snapshot().await;
        let corrupt = |what: &str, r: Result<String, Error>| match r {
            Err(Error::Corrupt { key: k, .. }) => assert_eq!(k, key, "v={v:?}: {what} names the key"),
            other => panic!("v={v:?}: {what}: expected Corrupt, got {other:?}"),
        };
        corrupt("get", store.get("r-1").await.map(|s| format!("{s:?}")));
        corrupt("find", store.find(JobResponse::by_order("o-1")).await.map(|s| format!("{s:?}")));
        corrupt("update", store.update(&read, &next).await.map(|o| format!("{o:?}")));
        corrupt("put(Any)", store.put(&next, Expect::Any).await.map(|o| format!("{o:?}")));
        corrupt("put(Version)", store.put(&next, Expect::Version(5)).await.map(|o| format!("{o:?}")));
        corrupt("create", store.create(&next).await.map(|o| format!("{o:?}")));
        corrupt("delete", store.delete(&read).await.map(|o| format!("{o:?}")));
        corrupt("delete_id(Any)", store.delete_id("r-1", DeleteExpect::Any).await.map(|o| format!("{o:?}")));
        corrupt("delete_id(Version)", store.delete_id("r-1", DeleteExpect::Version(7)).await.map(|o| format!("{o:?}")));
        assert_eq!(e.snapshot().await, before, "v={v:?}: nothing written");
    }

    // The last versions below the limit are exact, and the limit is never passed.
    let _: () = redis::cmd("HSET").arg(&key).arg("v").arg(MAX_VERSION - 1).query_async(&mut e.raw).await.unwrap();
    let read = store.get("r-1").await.unwrap().unwrap();
    assert_eq!(read.version, MAX_VERSION - 1);
    assert_eq!(store.update(&read, &next).await.unwrap(), PutOutcome::Written { version: MAX_VERSION });
    // A second writer with the same read loses.
    assert_eq!(store.update(&read, &doc).await.unwrap(), PutOutcome::Conflict { current: MAX_VERSION });
    let read = store.get("r-1").await.unwrap().unwrap();
    assert_eq!(read.version, MAX_VERSION);
    let before = e.snapshot().await;
    for (what, r) in [
        ("update", store.update(&read, &doc).await),
        ("put(Any)", store.put(&doc, Expect::Any).await),
        ("put(Version)", store.put(&doc, Expect::Version(MAX_VERSION)).await),
    ] {
        match r {
            Err(Error::Corrupt { key: k, reason }) => {
                assert_eq!(k, key);
                assert!(reason.contains("limit"), "{what}: {reason}");
            }
            other => panic!("{what} at the last version: {other:?}"),
        }
    }
    assert_eq!(e.snapshot().await, before, "nothing written at the limit");
    let stored: String = redis::cmd("HGET").arg(&key).arg("v").query_async(&mut e.raw).await.unwrap();
    assert_eq!(stored, MAX_VERSION.to_string());
    // An expectation no stored version can have is a conflict, not an error.
    assert_eq!(
        store.put(&doc, Expect::Version(u64::MAX)).await.unwrap(),
        PutOutcome::Conflict { current: MAX_VERSION }
    );
    assert_eq!(store.put(&doc, Expect::Version(0)).await.unwrap(), PutOutcome::Conflict { current: MAX_VERSION });
    assert_eq!(
        store.delete_id("r-1", DeleteExpect::Version(u64::MAX)).await.unwrap(),
        DeleteOutcome::Conflict { current: MAX_VERSION }
    );
    // Deleting at the limit is fine.
    assert_eq!(store.delete(&read).await.unwrap(), DeleteOutcome::Deleted { version: MAX_VERSION });
}

/// A hash copied to another key, or a `scope` field that disagrees with the
/// document text, is not the document its key names: reading it as such
/// would hand out (and let the caller write back) another document's data.
/// A text stored without its id (the JSON codec's) takes the id of its key,
/// so the check applies to whole texts: an earlier release's, or a codec's
/// that keeps the id.
#[tokio::test]
async fn a_document_must_be_the_one_its_key_and_scope_name() {
    let mut e = env("identity").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    created(&store, &JobResponse::new("r-1", "s1", "o-1", &["A"])).await;
    created(&store, &JobResponse::new("r-2", "s1", "o-2", &["A"])).await;
    // r-1's hash copied over r-2's key, its text whole as an earlier release wrote it.
    let _: i64 = redis::cmd("COPY")
        .arg(e.k("jobresponse:r-1"))
        .arg(e.k("jobresponse:r-2"))
        .arg("REPLACE")
        .query_async(&mut e.raw)
        .await
        .unwrap();
    let whole = serde_json::to_string(&JobResponse::new("r-1", "s1", "o-1", &["A"])).unwrap();
    let _: () =
        redis::cmd("HSET").arg(e.k("jobresponse:r-2")).arg("doc").arg(&whole).query_async(&mut e.raw).await.unwrap();
    match store.get("r-2").await {
        Err(Error::Corrupt { key, reason }) => {
            assert_eq!(key, e.k("jobresponse:r-2"));
            assert!(reason.contains("r-1"), "says whose document it holds: {reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // The by-order entry of o-2 still names r-2: the lookup reads the same hash.
    assert!(matches!(store.find(JobResponse::by_order("o-2")).await, Err(Error::Corrupt { .. })));
    assert_eq!(store.get("r-1").await.unwrap().unwrap().doc.id, "r-1");

    // The hash's scope differs from the document's.
    let _: () =
        redis::cmd("HSET").arg(e.k("jobresponse:r-1")).arg("scope").arg("s2").query_async(&mut e.raw).await.unwrap();
    match store.get("r-1").await {
        Err(Error::Corrupt { key, reason }) => {
            assert_eq!(key, e.k("jobresponse:r-1"));
            assert!(reason.contains("s1") && reason.contains("s2"), "{reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(matches!(store.find(JobResponse::by_order("o-1")).await, Err(Error::Corrupt { .. })));
}

/// When every attempt loses its reply, the write ends after `WriteAttempts`
/// attempts as an unknown outcome (never as success or a plain connection
/// error), and the attempts together applied it at most once.
#[tokio::test]
async fn write_attempts_running_out_is_an_unknown_outcome() {
    let server = ValkeyServer::start().unwrap_or_else(|e| panic!("{e}"));
    let proxy = std::sync::Arc::new(FaultProxy::start(server.host_port()).await);
    let prefix = unique_prefix("attempts");
    let write = WriteOptions { attempts: 3, retry_delay: Duration::from_millis(200), ..WriteOptions::default() };
    let valkey = Valkey::connect_url(&proxy.url(), prefix.clone(), write).await.unwrap();
    let mut raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    created(&store, &JobResponse::new("r-1", "s1", "o-1", &["A"])).await;
    let read = store.get("r-1").await.unwrap().unwrap();

    // Cut every EVALSHA: the proxy's cut is one-shot, so arm it again after each.
    proxy.cut_after_request_containing(b"EVALSHA").await;
    let rearm = {
        let proxy = proxy.clone();
        tokio::spawn(async move {
            let mut seen = 0;
            loop {
                if proxy.cuts() > seen {
                    seen = proxy.cuts();
                    proxy.cut_after_request_containing(b"EVALSHA").await;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let next = JobResponse { state: vec!["B".into()], ..read.doc.clone() };
    let out = store.update(&read, &next).await;
    rearm.abort();
    match out {
        Err(Error::UnknownOutcome { key, attempts, .. }) => {
            assert_eq!(key, format!("{}:jobresponse:r-1", prefix.as_str()));
            assert_eq!(attempts, 3);
        }
        other => panic!("expected UnknownOutcome after 3 attempts, got {other:?}"),
    }
    assert_eq!(proxy.cuts(), 3, "every attempt was sent and cut");
    assert_eq!(valkey.metrics().write_retries(), 2);
    // Once the connection works again, so does the store: the write was applied.
    assert_eq!(store.get("r-1").await.unwrap().unwrap().version, 2);
    // Applied by the first attempt, recognised (not applied again) by the others.
    let changes = stream_entries(&mut raw, &format!("{}:changes:s1", prefix.as_str())).await;
    assert_eq!(summarize(&changes), [change("r-1", 1, "created"), change("r-1", 2, "updated")]);
}

/// `ChangeStreamMaxLength` trims the change stream on a real server. `MAXLEN
/// ~` trims whole stream nodes only, so the server keeps small nodes here and
/// the stream stays within the limit plus one node.
#[tokio::test]
async fn change_stream_max_length_trims_on_a_real_server() {
    const NODE: u64 = 10;
    const LIMIT: u64 = 25;
    let server = ValkeyServer::start_local(&["--stream-node-max-entries", "10"]).unwrap_or_else(|e| panic!("{e}"));
    let prefix = unique_prefix("maxlen");
    let write = WriteOptions { change_stream_max_len: LIMIT, ..WriteOptions::default() };
    let valkey =
        Valkey::connect_url(server.url(), prefix.clone(), write).await.unwrap_or_else(|e| server.fail("connect", &e));
    let mut raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    created(&store, &JobResponse::new("r-1", "s1", "o-1", &["A"])).await;
    let mut read = store.get("r-1").await.unwrap().unwrap();
    let stream = format!("{}:changes:s1", prefix.as_str());
    let mut longest = 0;
    for i in 0..300 {
        let next = JobResponse { start_time: i, ..read.doc.clone() };
        assert!(matches!(store.update_in_place(&mut read, next).await.unwrap(), PutOutcome::Written { .. }));
        let len: u64 = redis::cmd("XLEN").arg(&stream).query_async(&mut raw).await.unwrap();
        longest = longest.max(len);
    }
    let len: u64 = redis::cmd("XLEN").arg(&stream).query_async(&mut raw).await.unwrap();
    println!("301 writes, limit {LIMIT}, node {NODE}: XLEN {len}, longest {longest}");
    assert!(len >= LIMIT, "never below the limit: {len}");
    assert!(longest <= LIMIT + NODE, "the stream grew to {longest}, limit {LIMIT} + one node of {NODE}");
    // The newest entries are kept.
    let entries = stream_entries(&mut raw, &stream).await;
    assert_eq!(entries.last().unwrap()["v"], "301");
}

/// A server whose script cache the store cannot fill (here `SCRIPT` is
/// renamed away; after a failover the load may also reach another server
/// than the call): every operation still runs, by sending the script text.
#[tokio::test]
async fn scripts_run_when_they_cannot_be_loaded() {
    let server =
        ValkeyServer::start_local(&["--rename-command", "SCRIPT", "SCRIPT-HIDDEN"]).unwrap_or_else(|e| panic!("{e}"));
    let prefix = unique_prefix("noload");
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default())
        .await
        .unwrap_or_else(|e| server.fail("connect", &e));
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    created(&store, &JobResponse::new("r-1", "s1", "o-1", &["A"])).await;
    let read = store.get("r-1").await.unwrap().unwrap();
    let next = JobResponse { state: vec!["B".into()], ..read.doc.clone() };
    assert_eq!(store.update(&read, &next).await.unwrap(), PutOutcome::Written { version: 2 });
    let found = store.find(JobResponse::by_order("o-1")).await.unwrap().unwrap();
    assert_eq!(found.version, 2);
    assert_eq!(store.delete(&found).await.unwrap(), DeleteOutcome::Deleted { version: 2 });
}
