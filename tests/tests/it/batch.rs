//! Batch reads: `get_many` answers in request order, in one round trip.

use microdcs_tests::fixtures::{JobResponse, Plant};
use microdcs_tests::{command_calls, server, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{Error, Page, PutOutcome, Store, Valkey, config::WriteOptions};

#[tokio::test]
async fn get_many_names_a_damaged_document() {
    let server = server();
    let prefix = unique_prefix("many-bad");
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let mut raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let store = Plant::open(valkey).store::<JobResponse>();
    let _ = store.create(&JobResponse::new("r-1", "s1", "o-1", &["A"])).await.unwrap();
    let key = |id: &str| format!("{}:jobresponse:{id}", prefix.as_str());
    let _: () = redis::cmd("HSET").arg(key("r-2")).arg("v").arg("x1").query_async(&mut raw).await.unwrap();
    match store.get_many(&["r-1", "r-2"]).await {
        Err(Error::Corrupt { key: k, .. }) => assert_eq!(k, key("r-2")),
        other => panic!("expected a corrupt r-2, got {other:?}"),
    }
    let _: () = redis::cmd("SET").arg(key("r-3")).arg("junk").query_async(&mut raw).await.unwrap();
    assert!(matches!(store.get_many(&["r-3", "r-1"]).await, Err(Error::WrongType { .. })));
}

async fn plant(name: &str) -> (microdcs_valkey::testing::ValkeyServer, microdcs_tests::fixtures::PlantHandle) {
    let server = server();
    let valkey = Valkey::connect_url(server.url(), unique_prefix(name), WriteOptions::default()).await.unwrap();
    (server, Plant::open(valkey))
}

#[tokio::test]
async fn put_many_writes_each_document_with_its_own_script_in_order() {
    let (_server, plant) = plant("put-many").await;
    let store = plant.store::<JobResponse>();
    let mut docs: Vec<JobResponse> =
        (0..300).map(|i| JobResponse::new(&format!("r-{i}"), "s1", &format!("o-{i}"), &["Queued"])).collect();
    // The last one takes the unique order key of the first: refused alone.
    docs.push(JobResponse::new("r-dup", "s1", "o-0", &["Queued"]));
    let out = store.put_many(&docs, microdcs_valkey::Expect::Create).await;
    assert_eq!(out.len(), 301);
    assert!(out[..300].iter().all(|o| matches!(o, Ok(PutOutcome::Written { version: 1 }))));
    assert!(matches!(out[300], Err(Error::UniqueViolation { .. })), "{:?}", out[300]);
    // Again: every one reports its conflict, nothing is written twice.
    let again = store.put_many(&docs[..300], microdcs_valkey::Expect::Create).await;
    assert!(again.iter().all(|o| matches!(o, Ok(PutOutcome::Conflict { current: 1 }))));
    let report = store.verify(&Default::default()).await.unwrap();
    assert!(report.is_clean() && report.documents == 300, "{report:?}");
}

#[tokio::test]
async fn fifty_workers_claim_each_queued_job_exactly_once() {
    let (_server, plant) = plant("claim").await;
    let store = plant.store::<JobResponse>();
    let jobs: Vec<JobResponse> =
        (0..1000).map(|i| JobResponse::new(&format!("j-{i}"), "s1", &format!("o-{i}"), &["Queued"])).collect();
    assert!(store.put_many(&jobs, microdcs_valkey::Expect::Create).await.iter().all(Result::is_ok));
    let workers: Vec<_> = (0..50)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let claimed = store
                        .claim(JobResponse::by_state("s1", "Queued"), |d| {
                            (d.state == ["Queued"]).then(|| JobResponse { state: vec!["Running".into()], ..d.clone() })
                        })
                        .await
                        .unwrap();
                    match claimed {
                        Some(s) => {
                            assert_eq!((s.version, s.doc.state.clone()), (2, vec!["Running".to_owned()]), "worker {w}");
                            mine.push(s.id);
                        }
                        None => break mine,
                    }
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await.unwrap());
    }
    let claimed = all.len();
    all.sort();
    all.dedup();
    assert_eq!((claimed, all.len()), (1000, 1000), "every job claimed, none twice");
    let left = store.ids(JobResponse::by_state("s1", "Queued"), Page::first(10)).await.unwrap();
    assert!(left.ids.is_empty(), "none left queued");
    let running = store.docs(JobResponse::by_state("s1", "Running"), Page::first(2000)).await.unwrap();
    assert_eq!(running.documents.len(), 1000);
    assert!(running.documents.iter().all(|s| s.version == 2));
}

#[tokio::test]
async fn scopes_docs_and_a_walk_over_every_document() {
    let (_server, plant) = plant("walk").await;
    let store = plant.store::<JobResponse>();
    for i in 0..120 {
        let scope = if i % 2 == 0 { "s1" } else { "s2" };
        let _ = store.create(&JobResponse::new(&format!("r-{i}"), scope, &format!("o-{i}"), &["A"])).await.unwrap();
    }
    let mut scopes = store.scopes(Page::first(10)).await.unwrap().ids;
    scopes.sort();
    assert_eq!(scopes, ["s1", "s2"]);
    let page = store.docs(JobResponse::by_state("s2", "A"), Page::first(100)).await.unwrap();
    assert_eq!(page.documents.len(), 60);
    assert!(page.documents.iter().all(|s| s.scope == "s2"));
    let (mut seen, mut cursor, mut steps) = (Vec::new(), Some(0), 0);
    while let Some(c) = cursor {
        let page = store.scan(c, 25).await.unwrap();
        seen.extend(page.documents.into_iter().map(|s| s.id));
        cursor = page.next;
        steps += 1;
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 120, "every document");
    assert!(steps > 1, "in steps");
}

/// Tests that stop, restart or cut their server, kill its clients or count
/// its commands: each starts a server of its own (the cluster suite leaves
/// this module out).
mod standalone {
    use super::*;

    use microdcs_tests::own_server as server;

    #[tokio::test]
    async fn get_many_answers_in_request_order_in_one_round_trip() {
        let server = server();
        let prefix = unique_prefix("many");
        let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
        let mut raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
        let store = Plant::open(valkey).store::<JobResponse>();
        for i in 0..5 {
            let _ = store.create(&JobResponse::new(&format!("r-{i}"), "s1", &format!("o-{i}"), &["A"])).await.unwrap();
        }
        let before = command_calls(&mut raw).await;
        let got = store.get_many(&["r-3", "nope", "r-0", "r-3", "r-4"]).await.unwrap();
        let after = command_calls(&mut raw).await;
        let ids: Vec<Option<&str>> = got.iter().map(|s| s.as_ref().map(|s| s.doc.id.as_str())).collect();
        assert_eq!(ids, [Some("r-3"), None, Some("r-0"), Some("r-3"), Some("r-4")]);
        assert!(got.iter().flatten().all(|s| s.version == 1));
        let delta = |name: &str| after.get(name).copied().unwrap_or(0) - before.get(name).copied().unwrap_or(0);
        assert_eq!(delta("hgetall"), 5, "one HGETALL per id, pipelined: {after:?}");
        assert_eq!(after.values().sum::<u64>() - before.values().sum::<u64>(), 5 + 1, "nothing else (besides INFO)");

        assert!(store.get_many::<&str>(&[]).await.unwrap().is_empty());
        let too_many = vec!["r-0"; Store::<JobResponse>::MAX_MANY + 1];
        assert!(matches!(store.get_many(&too_many).await, Err(Error::InvalidArgument(_))));
        assert!(matches!(store.get_many(&["r-0", ""]).await, Err(Error::Key(_))));
    }
}
