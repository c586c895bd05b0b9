//! Documents with a lifetime (`ttl`): each write sets it, for the document
//! and its unique keys, in the same script. Against a real Valkey.

use std::time::Duration;

use microdcs_tests::fixtures::{Extras, Session};
use microdcs_tests::{server, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{
    Document, Error, Expect, PutOutcome, Valkey, config::WriteOptions, store::DeleteExpect, store::DeleteOutcome,
};

fn session(id: &str, token: &str) -> Session {
    Session { id: id.into(), scope: "s1".into(), token: token.into(), user: "ada".into() }
}

async fn pttl(con: &mut ConnectionManager, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(con).await.unwrap()
}

#[tokio::test]
async fn a_write_sets_the_lifetime_of_the_document_and_its_unique_keys() {
    let server = server();
    let prefix = unique_prefix("ttl");
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let mut raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let store = Extras::open(valkey).store::<Session>();
    assert_eq!(Session::SPEC.ttl_ms, Some(30 * 60 * 1000));
    let k = |rest: &str| format!("{}:{rest}", prefix.as_str());

    assert_eq!(store.create(&session("x-1", "t-1")).await.unwrap(), PutOutcome::Written { version: 1 });
    let half_hour = 30 * 60 * 1000;
    for key in [k("session:x-1"), k("session:bytoken:t-1")] {
        let ttl = pttl(&mut raw, &key).await;
        assert!(ttl > half_hour - 60_000 && ttl <= half_hour, "{key}: {ttl}");
    }
    // A store with its own lifetime: the next write sets that one, also on
    // a unique key that stays and on one that moves.
    let short = store.with_ttl(Duration::from_secs(5)).unwrap();
    let read = short.get("x-1").await.unwrap().unwrap();
    assert_eq!(
        short.update(&read, &Session { user: "bob".into(), ..read.doc.clone() }).await.unwrap(),
        PutOutcome::Written { version: 2 }
    );
    for key in [k("session:x-1"), k("session:bytoken:t-1")] {
        let ttl = pttl(&mut raw, &key).await;
        assert!(ttl > 0 && ttl <= 5000, "{key}: {ttl}");
    }
    let read = short.get("x-1").await.unwrap().unwrap();
    let moved = Session { token: "t-2".into(), ..read.doc.clone() };
    assert_eq!(short.update(&read, &moved).await.unwrap(), PutOutcome::Written { version: 3 });
    let gone: i64 = redis::cmd("EXISTS").arg(k("session:bytoken:t-1")).query_async(&mut raw).await.unwrap();
    assert_eq!(gone, 0, "the old unique key is removed");
    let ttl = pttl(&mut raw, &k("session:bytoken:t-2")).await;
    assert!(ttl > 0 && ttl <= 5000, "the new unique key expires with the document: {ttl}");
    assert_eq!(store.find(Session::by_token("t-2")).await.unwrap().unwrap().doc.user, "bob");

    // Out of bounds, or on a type without a lifetime: refused.
    assert!(matches!(store.with_ttl(Duration::ZERO), Err(Error::InvalidArgument(_))));
    assert!(matches!(store.with_ttl(Duration::from_secs(200 * 365 * 86_400)), Err(Error::InvalidArgument(_))));
    let plant = microdcs_tests::fixtures::Plant::open(store.valkey().clone());
    let responses = plant.store::<microdcs_tests::fixtures::JobResponse>();
    assert!(matches!(responses.with_ttl(Duration::from_secs(5)), Err(Error::InvalidArgument(_))));
}

#[tokio::test]
async fn an_expired_document_and_its_unique_keys_are_gone_together() {
    let server = server();
    let prefix = unique_prefix("ttl-expire");
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let store = Extras::open(valkey).store::<Session>().with_ttl(Duration::from_secs(1)).unwrap();
    assert_eq!(store.put(&session("x-1", "t-1"), Expect::Create).await.unwrap(), PutOutcome::Written { version: 1 });
    assert!(store.find(Session::by_token("t-1")).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert!(store.get("x-1").await.unwrap().is_none());
    assert!(store.find(Session::by_token("t-1")).await.unwrap().is_none());
    // The id and the token are free again.
    assert_eq!(store.create(&session("x-1", "t-1")).await.unwrap(), PutOutcome::Written { version: 1 });
    assert_eq!(store.delete_id("x-1", DeleteExpect::Any).await.unwrap(), DeleteOutcome::Deleted { version: 1 });
    let report = store.verify(&Default::default()).await.unwrap();
    assert!(report.is_clean(), "{:?}", report.differences);
}

/// Tests that stop, restart or cut their server, kill its clients or count
/// its commands: each starts a server of its own (the cluster suite leaves
/// this module out).
mod standalone {
    use super::*;

    use microdcs_tests::own_server as server;

    #[tokio::test]
    async fn a_type_without_changes_writes_no_entry_and_no_nudge() {
        use microdcs_tests::fixtures::Idempotency;
        let server = server();
        let prefix = unique_prefix("no-changes");
        let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
        let mut raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
        let store = Extras::open(valkey).store::<Idempotency>();
        assert_eq!(Idempotency::SPEC.changes, None);
        assert!(Idempotency::SPEC.feed().is_none());
        let () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut raw).await.unwrap();
        let doc = Idempotency { id: "req-1".into(), scope: "s1".into(), response: "201".into() };
        assert_eq!(store.create(&doc).await.unwrap(), PutOutcome::Written { version: 1 });
        let read = store.get("req-1").await.unwrap().unwrap();
        let next = Idempotency { response: "200".into(), ..doc.clone() };
        assert_eq!(store.update(&read, &next).await.unwrap(), PutOutcome::Written { version: 2 });
        assert_eq!(store.delete_id("req-1", DeleteExpect::Any).await.unwrap(), DeleteOutcome::Deleted { version: 2 });
        let calls = microdcs_tests::command_calls(&mut raw).await;
        assert_eq!(calls.get("xadd"), None, "no change entry: {calls:?}");
        assert_eq!(calls.get("publish"), None, "no nudge: {calls:?}");
        let stream: i64 =
            redis::cmd("EXISTS").arg(format!("{}:changes:s1", prefix.as_str())).query_async(&mut raw).await.unwrap();
        assert_eq!(stream, 0);
        // Retries stay recognised through the history and the tombstone.
        assert_eq!(
            store.put(&doc, Expect::Create).op("req-1-answer").await.unwrap(),
            PutOutcome::Written { version: 3 }
        );
        assert_eq!(
            store.put(&doc, Expect::Create).op("req-1-answer").await.unwrap(),
            PutOutcome::Written { version: 3 }
        );
        let ttl = pttl(&mut raw, &format!("{}:idem:req-1", prefix.as_str())).await;
        assert!(ttl > 3_500_000 && ttl <= 3_600_000, "an hour: {ttl}");
    }
}
