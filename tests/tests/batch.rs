//! Batch reads: `get_many` answers in request order, in one round trip.

use microdcs_tests::fixtures::{JobResponse, Plant};
use microdcs_tests::{command_calls, server, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{Error, Store, Valkey, WriteOptions};

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
