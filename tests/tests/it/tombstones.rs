//! Deletes leave a tombstone: retries across a delete are recognised, a
//! retried delete never reports a delete it did not make, and a damaged
//! tombstone is refused with nothing written. Against a real Valkey.

use std::time::Duration;

use microdcs_tests::fixtures::{JobResponse, Plant};
use microdcs_tests::{FaultProxy, ValkeyServer, server, snapshot, stream_entries, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{
    Error, Expect, KeyPrefix, PutOutcome, Valkey, config::WriteOptions, store::DeleteExpect, store::DeleteOutcome,
};

struct Env {
    _server: ValkeyServer,
    valkey: Valkey,
    prefix: KeyPrefix,
    raw: ConnectionManager,
}

async fn env(name: &str, write: WriteOptions) -> Env {
    let server = server();
    let prefix = unique_prefix(name);
    let valkey =
        Valkey::connect_url(server.url(), prefix.clone(), write).await.unwrap_or_else(|e| server.fail("connect", &e));
    let raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    Env { _server: server, valkey, prefix, raw }
}

impl Env {
    fn k(&self, rest: &str) -> String {
        format!("{}:{rest}", self.prefix.as_str())
    }

    /// The change entries of scope `s1` as (id, version, change).
    async fn changes(&mut self) -> Vec<(String, String, String)> {
        let key = self.k("changes:s1");
        stream_entries(&mut self.raw, &key)
            .await
            .into_iter()
            .map(|e| (e["id"].clone(), e["v"].clone(), e["change"].clone()))
            .collect()
    }
}

fn entry(id: &str, v: u64, change: &str) -> (String, String, String) {
    (id.to_owned(), v.to_string(), change.to_owned())
}

#[tokio::test]
async fn a_write_retried_after_a_delete_is_recognised_not_applied_again() {
    let mut e = env("tomb-put", WriteOptions::default()).await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    assert_eq!(store.put(&doc, Expect::Any).op("job-1.step-1").await.unwrap(), PutOutcome::Written { version: 1 });
    let read = store.get("r-1").await.unwrap().unwrap();
    let next = JobResponse { state: vec!["B".into()], ..doc.clone() };
    assert_eq!(store.update(&read, &next).op("job-1.step-2").await.unwrap(), PutOutcome::Written { version: 2 });
    // Another writer deletes the document before the caller retries.
    assert_eq!(store.delete_id("r-1", DeleteExpect::Any).await.unwrap(), DeleteOutcome::Deleted { version: 2 });

    // Both writes, retried with their ids and any expectation, are
    // recognised with the versions they produced; nothing is re-created.
    for (op, version) in [("job-1.step-2", 2), ("job-1.step-1", 1)] {
        for expect in [Expect::Any, Expect::Create, Expect::Version(version - 1)] {
            assert_eq!(
                store.put(&next, expect).op(op).await.unwrap(),
                PutOutcome::Written { version },
                "{op} {expect:?}"
            );
        }
    }
    assert!(store.get("r-1").await.unwrap().is_none(), "the document stays deleted");
    assert_eq!(e.valkey.metrics().write_already_applied(), 6);
    // A new write creates the document again, its versions going on from
    // the deleted one's: a read of that document can never match it.
    assert_eq!(store.put(&next, Expect::Any).op("job-2.step-1").await.unwrap(), PutOutcome::Written { version: 3 });
    assert_eq!(store.update(&read, &next).await.unwrap(), PutOutcome::Conflict { current: 3 }, "a stale read");
    assert_eq!(
        e.changes().await,
        [
            entry("r-1", 1, "created"),
            entry("r-1", 2, "updated"),
            entry("r-1", 2, "deleted"),
            entry("r-1", 3, "created")
        ]
    );
}

#[tokio::test]
async fn a_retried_delete_reports_only_its_own_delete() {
    let mut e = env("tomb-del", WriteOptions::default()).await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    let _ = store.create(&doc).await.unwrap();
    assert_eq!(
        store.delete_id("r-1", DeleteExpect::Version(1)).op("cleanup-7").await.unwrap(),
        DeleteOutcome::Deleted { version: 1 }
    );
    // Again with the same id: the delete it made, with its version.
    assert_eq!(
        store.delete_id("r-1", DeleteExpect::Version(1)).op("cleanup-7").await.unwrap(),
        DeleteOutcome::Deleted { version: 1 }
    );
    // Another delete finds nothing: it did not delete the document.
    assert_eq!(store.delete_id("r-1", DeleteExpect::Any).op("cleanup-8").await.unwrap(), DeleteOutcome::NotFound);
    assert_eq!(store.delete_id("r-1", DeleteExpect::Any).await.unwrap(), DeleteOutcome::NotFound);

    // Created again: the first delete, retried, still reports itself and
    // leaves the new document alone.
    let _ = store.create(&doc).await.unwrap();
    assert_eq!(
        store.delete_id("r-1", DeleteExpect::Version(1)).op("cleanup-7").await.unwrap(),
        DeleteOutcome::Deleted { version: 1 }
    );
    assert_eq!(store.get("r-1").await.unwrap().unwrap().version, 2, "the new document is kept");
    assert_eq!(e.changes().await, [entry("r-1", 1, "created"), entry("r-1", 1, "deleted"), entry("r-1", 2, "created")]);
    // Repeated with a version expectation that no longer holds: still its
    // own delete, not a conflict.
    let _ = store.put(&doc, Expect::Any).await.unwrap();
    assert_eq!(
        store.delete_id("r-1", DeleteExpect::Version(1)).op("cleanup-7").await.unwrap(),
        DeleteOutcome::Deleted { version: 1 }
    );
    assert_eq!(store.get("r-1").await.unwrap().unwrap().version, 3);
    assert!(matches!(store.delete_id("r-1", DeleteExpect::Any).op("bad id").await, Err(Error::InvalidOpId(_))));
}

#[tokio::test]
async fn the_tombstone_lasts_for_the_retention_setting() {
    // Long enough that the replays below land within it on a loaded machine.
    let retention = Duration::from_secs(3);
    let mut e = env("tomb-ttl", WriteOptions { tombstone_retention: retention, ..WriteOptions::default() }).await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    assert_eq!(store.put(&doc, Expect::Create).op("load-1").await.unwrap(), PutOutcome::Written { version: 1 });
    assert_eq!(
        store.delete_id("r-1", DeleteExpect::Any).op("drop-1").await.unwrap(),
        DeleteOutcome::Deleted { version: 1 }
    );
    let tomb = e.k("tomb:jobresponse:r-1");
    assert_eq!(store.tombstone_key("r-1").unwrap(), tomb, "the accessor names the key the delete left");
    assert_eq!(store.tombstone_key_in("any", "r-1").unwrap(), tomb, "ids unique in the island: the scope is not part");
    assert!(store.tombstone_key("").is_err());
    let ttl: i64 = redis::cmd("PTTL").arg(&tomb).query_async(&mut e.raw).await.unwrap();
    assert!(ttl > 0 && ttl <= 3000, "expires with the setting: {ttl} ms");
    // Within the retention both ids are recognised ...
    assert_eq!(
        store.delete_id("r-1", DeleteExpect::Any).op("drop-1").await.unwrap(),
        DeleteOutcome::Deleted { version: 1 }
    );
    assert_eq!(store.put(&doc, Expect::Create).op("load-1").await.unwrap(), PutOutcome::Written { version: 1 });
    assert!(store.get("r-1").await.unwrap().is_none());
    // ... and after it, the documented fallback: nothing to delete, and a
    // create is applied again.
    tokio::time::sleep(retention + Duration::from_millis(300)).await;
    let exists: i64 = redis::cmd("EXISTS").arg(&tomb).query_async(&mut e.raw).await.unwrap();
    assert_eq!(exists, 0, "the tombstone expired");
    assert_eq!(store.delete_id("r-1", DeleteExpect::Any).op("drop-1").await.unwrap(), DeleteOutcome::NotFound);
    assert_eq!(store.put(&doc, Expect::Create).op("load-1").await.unwrap(), PutOutcome::Written { version: 1 });
    assert_eq!(store.get("r-1").await.unwrap().unwrap().version, 1);
}

#[tokio::test]
async fn a_damaged_tombstone_is_corrupt_and_nothing_is_written() {
    let mut e = env("tomb-corrupt", WriteOptions::default()).await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    let tomb = e.k("tomb:jobresponse:r-1");
    // Texts that are not `<version>:<delete id><history>`, and a history
    // longer than the version accounts for.
    let bad = [
        "garbage".to_owned(),
        "1:short".to_owned(),
        "0:aaaaaaaaaaaa".to_owned(),
        "01:aaaaaaaaaaaa".to_owned(),
        "99999999999999999:aaaaaaaaaaaa".to_owned(),
        format!("1:{}", "a".repeat(36)),
        format!("1:{}", "a".repeat(13)),
    ];
    for text in &bad {
        let _: () = redis::cmd("SET").arg(&tomb).arg(text).query_async(&mut e.raw).await.unwrap();
        let before = snapshot(&mut e.raw, &e.prefix).await;
        let put = store.put(&doc, Expect::Create).op("load-1").await;
        assert!(matches!(&put, Err(Error::Corrupt { reason, .. }) if reason.contains("tombstone")), "{text}: {put:?}");
        let del = store.delete_id("r-1", DeleteExpect::Any).op("drop-1").await;
        assert!(matches!(&del, Err(Error::Corrupt { .. })), "{text}: {del:?}");
        assert_eq!(snapshot(&mut e.raw, &e.prefix).await, before, "{text}: nothing written");
    }
    // A tombstone key of another type: refused before the first write.
    let _: () = redis::cmd("DEL").arg(&tomb).query_async(&mut e.raw).await.unwrap();
    let _: () = redis::cmd("HSET").arg(&tomb).arg("f").arg("v").query_async(&mut e.raw).await.unwrap();
    let before = snapshot(&mut e.raw, &e.prefix).await;
    assert!(matches!(store.create(&doc).await, Err(Error::WrongType { .. })));
    assert_eq!(snapshot(&mut e.raw, &e.prefix).await, before, "nothing written");
    // An update of an existing document never reads the tombstone.
    let _: () = redis::cmd("DEL").arg(&tomb).query_async(&mut e.raw).await.unwrap();
    let _ = store.create(&doc).await.unwrap();
    let _: () = redis::cmd("SET").arg(&tomb).arg("garbage").query_async(&mut e.raw).await.unwrap();
    let read = store.get("r-1").await.unwrap().unwrap();
    let next = JobResponse { state: vec!["B".into()], ..doc.clone() };
    assert_eq!(store.update(&read, &next).await.unwrap(), PutOutcome::Written { version: 2 });
}

/// Tests that stop, restart or cut their server, kill its clients or count
/// its commands: each starts a server of its own (the cluster suite leaves
/// this module out).
mod standalone {
    use super::*;

    use microdcs_tests::own_server as server;

    #[tokio::test]
    async fn a_delete_whose_reply_is_lost_is_applied_once_even_if_the_document_returns() {
        let server = server();
        let proxy = FaultProxy::start(server.host_port()).await;
        let prefix = unique_prefix("tomb-cut");
        let write = WriteOptions { retry_delay: Duration::from_millis(400), ..WriteOptions::default() };
        let valkey = Valkey::connect_url(&proxy.url(), prefix.clone(), write).await.unwrap();
        let other = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
        let store = Plant::open(valkey.clone()).store::<JobResponse>();
        let other_store = Plant::open(other).store::<JobResponse>();
        let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
        // Loads the delete script, so the cut request is the delete itself.
        assert_eq!(store.delete_id("r-0", DeleteExpect::Any).await.unwrap(), DeleteOutcome::NotFound);
        let _ = store.create(&doc).await.unwrap();
        let read = store.get("r-1").await.unwrap().unwrap();

        proxy.cut_after_request_containing(b"EVALSHA").await;
        let (out, ()) = tokio::join!(store.delete(&read), async {
            proxy.wait_cut().await;
            // Between the lost reply and the retry, the document is created
            // again (its versions going on from the deleted one's).
            assert!(other_store.get("r-1").await.unwrap().is_none(), "the cut delete was applied");
            assert_eq!(other_store.create(&doc).await.unwrap(), PutOutcome::Written { version: 2 });
        });
        assert_eq!(proxy.cuts(), 1);
        assert_eq!(out.unwrap(), DeleteOutcome::Deleted { version: 1 }, "its own delete, reported once");
        assert_eq!(valkey.metrics().write_already_applied(), 1);
        assert_eq!(store.get("r-1").await.unwrap().unwrap().version, 2, "the document created since is kept");
        let mut raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
        let entries = stream_entries(&mut raw, &format!("{}:changes:s1", prefix.as_str())).await;
        let changes: Vec<&str> = entries.iter().map(|e| e["change"].as_str()).collect();
        assert_eq!(changes, ["created", "deleted", "created"], "one delete");
    }
}
