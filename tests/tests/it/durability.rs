//! What a failover may do to acknowledged writes, and what the store does
//! about it: revisions that a lost write can never match. Against a real
//! Valkey.
//!
//! A lost write is simulated exactly as a failover produces it: the keys
//! of the test's prefix are put back (DUMP, then RESTORE) to what they were
//! before an acknowledged write, as a promoted replica that never received
//! it would hold them.

use std::collections::BTreeMap;

use microdcs_tests::fixtures::{Extras, Idempotency, JobResponse, Plant};
use microdcs_tests::{ValkeyServer, server, snapshot, unique_prefix};
use microdcs_valkey::redis::{self, AsyncCommands, aio::ConnectionManager};
use microdcs_valkey::{
    Expect, KeyPrefix, PutOutcome, Revision, RevisionParseError, Valkey, config::WriteOptions, store::DeleteExpect,
    store::DeleteOutcome,
};

struct Env {
    server: ValkeyServer,
    valkey: Valkey,
    prefix: KeyPrefix,
    raw: ConnectionManager,
}

async fn env(name: &str) -> Env {
    let server = server();
    let prefix = unique_prefix(name);
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default())
        .await
        .unwrap_or_else(|e| server.fail("connect", &e));
    let raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    Env { server, valkey, prefix, raw }
}

/// Every key of a prefix, dumped, to be put back as it was.
struct Saved(BTreeMap<String, Vec<u8>>);

impl Env {
    async fn keys(&mut self) -> Vec<String> {
        let pattern = format!("{}:*", self.prefix.as_str());
        let mut keys: Vec<String> = self.raw.keys(pattern).await.unwrap();
        keys.sort();
        keys
    }

    async fn save(&mut self) -> Saved {
        let mut saved = BTreeMap::new();
        for key in self.keys().await {
            let dump: Vec<u8> = redis::cmd("DUMP").arg(&key).query_async(&mut self.raw).await.unwrap();
            saved.insert(key, dump);
        }
        Saved(saved)
    }

    /// Puts the prefix back to `saved`: the writes since are lost.
    async fn lose_writes_since(&mut self, saved: &Saved) {
        for key in self.keys().await {
            let _: i64 = self.raw.del(&key).await.unwrap();
        }
        for (key, dump) in &saved.0 {
            let _: () = redis::cmd("RESTORE").arg(key).arg(0).arg(dump).query_async(&mut self.raw).await.unwrap();
        }
    }
}

#[tokio::test]
async fn a_read_of_a_lost_write_matches_no_later_document() {
    let mut e = env("lost-write").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    assert_eq!(store.create(&doc).await.unwrap(), PutOutcome::Written { version: 1 });
    let before = e.save().await;

    // Version 2, acknowledged and read by a client, then lost.
    let v1 = store.get("r-1").await.unwrap().unwrap();
    let lost = JobResponse { state: vec!["LOST".into()], ..doc.clone() };
    assert_eq!(store.update(&v1, &lost).await.unwrap(), PutOutcome::Written { version: 2 });
    let stale = store.get("r-1").await.unwrap().unwrap();
    assert_eq!((stale.version, stale.revision().version()), (2, 2));
    // Found by a unique index: the same read, its revision included.
    let stale_found = store.find(JobResponse::by_order("o-1")).await.unwrap().expect("found");
    assert_eq!(stale_found.revision(), stale.revision());
    e.lose_writes_since(&before).await;

    // Another writer makes a different version 2.
    let other = JobResponse { state: vec!["OTHER".into()], ..doc.clone() };
    assert_eq!(store.update(&v1, &other).await.unwrap(), PutOutcome::Written { version: 2 });
    let now = store.get("r-1").await.unwrap().unwrap();
    assert_eq!(now.version, stale.version, "the same number");
    assert_ne!(now.revision(), stale.revision(), "but another write");
    let stored = snapshot(&mut e.raw, &e.prefix).await;

    // Every write that takes the stale read is refused, and nothing moves.
    let mine = JobResponse { state: vec!["MINE".into()], ..doc.clone() };
    assert_eq!(store.update(&stale, &mine).await.unwrap(), PutOutcome::Conflict { current: 2 });
    assert_eq!(store.update(&stale_found, &mine).await.unwrap(), PutOutcome::Conflict { current: 2 });
    assert_eq!(store.delete(&stale_found).await.unwrap(), DeleteOutcome::Conflict { current: 2 });
    let mut in_place = stale.clone();
    assert_eq!(store.update_in_place(&mut in_place, mine.clone()).await.unwrap(), PutOutcome::Conflict { current: 2 });
    assert_eq!(in_place, stale, "a refused in-place update leaves the read");
    assert_eq!(
        store.put(&mine, Expect::Revision(stale.revision())).await.unwrap(),
        PutOutcome::Conflict { current: 2 }
    );
    assert_eq!(store.delete(&stale).await.unwrap(), DeleteOutcome::Conflict { current: 2 });
    assert_eq!(
        store.delete_id("r-1", DeleteExpect::Revision(stale.revision())).await.unwrap(),
        DeleteOutcome::Conflict { current: 2 }
    );
    // With the caller's op id the script decides (no read first): refused too.
    assert_eq!(store.update(&stale, &mine).op("mine-1").await.unwrap(), PutOutcome::Conflict { current: 2 });
    assert_eq!(
        store.delete_id("r-1", DeleteExpect::Revision(stale.revision())).op("del-1").await.unwrap(),
        DeleteOutcome::Conflict { current: 2 }
    );
    assert_eq!(snapshot(&mut e.raw, &e.prefix).await, stored, "nothing written");

    // The version number alone cannot tell them apart: that is what a
    // revision is for.
    assert_eq!(store.put(&mine, Expect::Version(2)).await.unwrap(), PutOutcome::Written { version: 3 });
    // The current read still works as ever.
    let fresh = store.get("r-1").await.unwrap().unwrap();
    assert_eq!(store.delete(&fresh).await.unwrap(), DeleteOutcome::Deleted { version: 3 });
    drop(e.server);
}

#[tokio::test]
async fn in_place_updates_carry_the_revision_they_wrote() {
    let mut e = env("lost-in-place").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    assert_eq!(store.create(&doc).op("x").await.unwrap(), PutOutcome::Written { version: 1 });
    let mut read = store.get("r-1").await.unwrap().unwrap();
    // The text of a revision is pinned: `<version>.<stored op id>`, the
    // stored id of `x` being its digest.
    assert_eq!(read.revision().to_string(), "1.yNNnc5IT1P2r");
    assert_eq!("1.yNNnc5IT1P2r".parse::<Revision>(), Ok(read.revision()));
    assert_eq!("1.yNNnc5IT1P2".parse::<Revision>(), Err(RevisionParseError));

    let before = e.save().await;
    let b = JobResponse { state: vec!["B".into()], ..doc.clone() };
    assert_eq!(store.update_in_place(&mut read, b.clone()).op("y").await.unwrap(), PutOutcome::Written { version: 2 });
    assert_eq!(read.revision(), store.get("r-1").await.unwrap().unwrap().revision(), "the read moved to the write");
    e.lose_writes_since(&before).await;
    let v1 = store.get("r-1").await.unwrap().unwrap();
    assert_eq!(store.update(&v1, &doc).await.unwrap(), PutOutcome::Written { version: 2 });
    let c = JobResponse { state: vec!["C".into()], ..doc.clone() };
    assert_eq!(
        store.update_in_place(&mut read, c).await.unwrap(),
        PutOutcome::Conflict { current: 2 },
        "the moved read names the lost write"
    );

    // A revision handed back as text (an HTTP ETag) is the same token.
    let now = store.get("r-1").await.unwrap().unwrap();
    let etag = now.revision().to_string();
    let parsed: Revision = etag.parse().unwrap();
    assert_eq!(store.put(&b, Expect::Revision(parsed)).await.unwrap(), PutOutcome::Written { version: 3 });
    assert_eq!(store.put(&b, Expect::Revision(parsed)).await.unwrap(), PutOutcome::Conflict { current: 3 });
}

#[tokio::test]
async fn a_document_without_a_history_compares_its_version() {
    let mut e = env("no-history").await;
    let store = Plant::open(e.valkey.clone()).store::<JobResponse>();
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    assert_eq!(store.create(&doc).await.unwrap(), PutOutcome::Written { version: 1 });
    // Written before histories were kept: no `ops` field.
    let key = format!("{}:jobresponse:r-1", e.prefix.as_str());
    let _: i64 = e.raw.hdel(&key, "ops").await.unwrap();
    let read = store.get("r-1").await.unwrap().unwrap();
    assert_eq!((read.revision().version(), read.revision().op()), (1, None));
    assert_eq!(read.revision().to_string(), "1");
    let next = JobResponse { state: vec!["B".into()], ..doc.clone() };
    assert_eq!(store.update(&read, &next).await.unwrap(), PutOutcome::Written { version: 2 });
    // And a revision naming a write never matches a document without one.
    let _: i64 = e.raw.hdel(&key, "ops").await.unwrap();
    let named: Revision = "2.yNNnc5IT1P2r".parse().unwrap();
    assert_eq!(store.put(&doc, Expect::Revision(named)).await.unwrap(), PutOutcome::Conflict { current: 2 });
}

#[tokio::test]
async fn the_script_itself_refuses_a_lost_revision() {
    // A type without indexes writes without a read first: the script alone
    // compares the revision.
    let mut e = env("lost-script").await;
    let store = Extras::open(e.valkey.clone()).store::<Idempotency>();
    let doc = Idempotency { id: "k-1".into(), scope: "s1".into(), response: "A".into() };
    assert_eq!(store.create(&doc).await.unwrap(), PutOutcome::Written { version: 1 });
    let before = e.save().await;
    let b = Idempotency { response: "B".into(), ..doc.clone() };
    assert_eq!(store.put(&b, Expect::Version(1)).await.unwrap(), PutOutcome::Written { version: 2 });
    let stale = store.get("k-1").await.unwrap().unwrap().revision();
    e.lose_writes_since(&before).await;
    let c = Idempotency { response: "C".into(), ..doc.clone() };
    assert_eq!(store.put(&c, Expect::Version(1)).await.unwrap(), PutOutcome::Written { version: 2 });
    let stored = snapshot(&mut e.raw, &e.prefix).await;
    assert_eq!(store.put(&b, Expect::Revision(stale)).await.unwrap(), PutOutcome::Conflict { current: 2 });
    assert_eq!(store.put(&b, Expect::Revision(stale)).op("again").await.unwrap(), PutOutcome::Conflict { current: 2 });
    assert_eq!(snapshot(&mut e.raw, &e.prefix).await, stored, "nothing written");
    let now = store.get("k-1").await.unwrap().unwrap();
    assert_eq!(store.put(&b, Expect::Revision(now.revision())).await.unwrap(), PutOutcome::Written { version: 3 });
}
