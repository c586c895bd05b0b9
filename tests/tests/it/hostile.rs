//! Damaged stored data and extreme arguments: typed errors, nothing
//! written, and nothing that holds a consumer back forever.

use std::time::Duration;

use microdcs_tests::change_channel;
use microdcs_tests::fixtures::{JobResponse, Plant, WorkMaster};
use microdcs_tests::{created, server, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{
    Error, Expect, KeyPrefix, MicroDcsConfig, Page, Valkey, changes::Changes, config::WriteOptions, poller::Poller,
    store::DeleteExpect,
};

async fn setup(name: &str) -> (microdcs_valkey::testing::ValkeyServer, Valkey, KeyPrefix, ConnectionManager) {
    let s = server();
    let prefix = unique_prefix(name);
    let valkey = Valkey::connect_url(s.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let raw = ConnectionManager::new(redis::Client::open(s.url()).unwrap()).await.unwrap();
    (s, valkey, prefix, raw)
}

async fn hash(raw: &mut ConnectionManager, key: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut h: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL").arg(key).query_async(raw).await.unwrap();
    h.sort();
    h
}

#[tokio::test]
async fn damaged_hashes_are_corrupt_and_left_alone() {
    let (_s, valkey, _prefix, mut raw) = setup("hostile-hash").await;
    let responses = Plant::open(valkey).store::<JobResponse>();
    created(&responses, &JobResponse::new("r-1", "s1", "o-1", &["Running"])).await;
    let key = responses.key("r-1").unwrap();

    // No scope: a write cannot name the list or the change stream.
    let () = redis::cmd("HDEL").arg(&key).arg("scope").query_async(&mut raw).await.unwrap();
    let before = hash(&mut raw, &key).await;
    let err = responses.delete_id("r-1", DeleteExpect::Any).await.unwrap_err();
    assert!(err.is_corrupt() && !err.is_invalid_input(), "{err:?}");
    let err = responses.put(&JobResponse::new("r-1", "s1", "o-1", &[]), Expect::Any).await.unwrap_err();
    assert!(err.is_corrupt(), "{err:?}");
    assert_eq!(hash(&mut raw, &key).await, before, "nothing written");
    let () = redis::cmd("HSET").arg(&key).arg("scope").arg("s1").query_async(&mut raw).await.unwrap();

    // A field name that is not UTF-8.
    let () = redis::cmd("HSET").arg(&key).arg(&b"\xff\xfe"[..]).arg("x").query_async(&mut raw).await.unwrap();
    let err = responses.get("r-1").await.unwrap_err();
    assert!(matches!(&err, Error::Corrupt { key: k, .. } if *k == key), "{err:?}");
    let () = redis::cmd("HDEL").arg(&key).arg(&b"\xff\xfe"[..]).query_async(&mut raw).await.unwrap();

    // A document text the codec cannot read is damaged data too.
    let () = redis::cmd("HSET").arg(&key).arg("doc").arg("{not json").query_async(&mut raw).await.unwrap();
    let err = responses.get("r-1").await.unwrap_err();
    assert!(err.is_corrupt(), "{err:?}");
    assert!(err.to_string().contains("jobresponse `r-1`"), "{err}");
}

#[tokio::test]
async fn a_damaged_document_does_not_hold_back_a_fetching_consumer() {
    let (s, _valkey, prefix, mut raw) = setup("hostile-changes").await;
    let mut c = MicroDcsConfig::default();
    c.set("Valkey:ConnectionString", &s.host_port()).unwrap();
    c.set("Valkey:KeyPrefix", prefix.as_str()).unwrap();
    c.set("Valkey:PollInterval", "300ms").unwrap();
    let valkey = Valkey::connect(&c.valkey).await.unwrap();
    let responses = Plant::open(valkey.clone()).store::<JobResponse>();
    // Written and damaged before the consumer starts.
    created(&responses, &JobResponse::new("r-1", "s1", "o-1", &[])).await;
    let key = responses.key("r-1").unwrap();
    let () = redis::cmd("HSET").arg(&key).arg("doc").arg("{not json").query_async(&mut raw).await.unwrap();
    let (handler, mut rx) = change_channel::<JobResponse>();
    let poller = Poller::new(valkey.clone(), "i-1")
        .consumer(Changes::new(responses.clone(), "audit", handler).fetching())
        .start()
        .await
        .unwrap();
    created(&responses, &JobResponse::new("r-2", "s1", "o-2", &[])).await;
    let got = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.ok().flatten().map(|c| c.id);
    assert_eq!(got.as_deref(), Some("r-2"), "the next change arrives; the damaged one is passed over");
    assert_eq!(valkey.metrics().stream_entries_corrupt(), 1);
    poller.shutdown().await;
}

#[tokio::test]
async fn huge_page_sizes_are_capped() {
    let (_s, valkey, _prefix, _raw) = setup("hostile-pages").await;
    let plant = Plant::open(valkey);
    let responses = plant.store::<JobResponse>();
    let masters = plant.store::<WorkMaster>();
    for i in 0..3 {
        created(&responses, &JobResponse::new(&format!("r-{i}"), "s1", &format!("o-{i}"), &["Held"])).await;
        created(&masters, &WorkMaster { id: format!("w-{i}"), scope: "s1".into(), name: "n".into() }).await;
    }
    assert_eq!(Page::first(usize::MAX).count(), Page::MAX);
    assert_eq!(responses.list("s1", Page::first(usize::MAX)).await.unwrap().ids.len(), 3);
    assert_eq!(masters.list("s1", Page::first(usize::MAX)).await.unwrap().ids.len(), 3);
    let held = responses.ids(JobResponse::by_state("s1", "Held"), Page::first(0)).await.unwrap();
    assert_eq!(held.ids.len(), 1, "a count of 0 is taken as 1");
}

#[test]
fn pieces_of_a_password_with_a_comma_never_reach_an_error() {
    for cs in ["password=se,cr:et,host:6379", "h:1,password=ab,cd=ef", "h:1,password=ab,cd,ef"] {
        let mut c = MicroDcsConfig::default();
        let text = match c.set("Valkey:ConnectionString", cs) {
            Err(e) => format!("{e} {e:?}"),
            Ok(()) => match c.valkey.validate() {
                Err(e) => format!("{e} {e:?}"),
                Ok(()) => panic!("`{cs}` is ambiguous and must be refused"),
            },
        };
        for piece in ["cr", "et", "cd", "ef"] {
            assert!(!text.contains(&format!("`{piece}`")), "{cs}: {text}");
        }
    }
}

#[tokio::test]
async fn an_empty_dedupe_token_is_refused_before_anything_is_written() {
    use microdcs_valkey::{dedupe::DedupeStore, dedupe::MemoryDedupe, dedupe::ValkeyDedupe};
    let (_s, valkey, _prefix, mut raw) = setup("hostile-dedupe").await;
    let dedupe = ValkeyDedupe::new(valkey, Duration::from_secs(5), Duration::from_secs(60));
    let err = dedupe.claim("urn:a", "e-1", "").await.unwrap_err();
    assert!(err.is_invalid_input(), "{err:?}");
    let exists: bool =
        redis::cmd("EXISTS").arg(dedupe.key("urn:a", "e-1").unwrap()).query_async(&mut raw).await.unwrap();
    assert!(!exists, "nothing written");
    let memory = MemoryDedupe::new(Duration::from_secs(5), Duration::from_secs(60));
    assert!(memory.claim("urn:a", "e-1", "").await.unwrap_err().is_invalid_input(), "both implementations agree");
}

#[tokio::test]
async fn an_op_history_longer_than_the_version_is_corrupt() {
    let (_s, valkey, _prefix, mut raw) = setup("hostile-ops").await;
    let responses = Plant::open(valkey).store::<JobResponse>();
    created(&responses, &JobResponse::new("r-1", "s1", "o-1", &[])).await;
    let key = responses.key("r-1").unwrap();
    // Two ids of history for version 1: no position can name a version.
    let () =
        redis::cmd("HSET").arg(&key).arg("ops").arg("aaaaaaaaaaaabbbbbbbbbbbb").query_async(&mut raw).await.unwrap();
    let before = hash(&mut raw, &key).await;
    let err = responses.put(&JobResponse::new("r-1", "s1", "o-1", &["x"]), Expect::Any).await.unwrap_err();
    assert!(err.is_corrupt(), "{err:?}");
    assert_eq!(hash(&mut raw, &key).await, before, "nothing written");
}
