//! Conditional groups (`member(key = ..., when = method())`): the id is in
//! the set exactly while the method says so, kept by the same script as
//! the write, and checked and repaired by verify and rebuild.

use microdcs_tests::fixtures::{Extras, Job};
use microdcs_tests::{server, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{
    Page, PutOutcome, Valkey, config::WriteOptions, store::DeleteExpect, store::DeleteOutcome, store::DiffKind,
    store::MaintenanceOptions,
};

fn job(id: &str, status: &str) -> Job {
    Job { id: id.into(), scope: "s1".into(), status: status.into(), created: 1_700_000_000_000, due: None }
}

#[tokio::test]
async fn membership_follows_the_condition_in_the_same_write() {
    let server = server();
    let prefix = unique_prefix("member");
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let mut raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let store = Extras::open(valkey).store::<Job>();
    let k = |rest: &str| format!("{}:{rest}", prefix.as_str());
    let running = || async {
        let mut ids = store.ids(Job::running("s1"), Page::first(100)).await.unwrap().ids;
        ids.sort();
        ids
    };
    let marker = |raw: &mut ConnectionManager, id: &str| {
        let key = k(&format!("job:{id}"));
        let mut raw = raw.clone();
        async move { redis::cmd("HGET").arg(key).arg("running").query_async::<Option<String>>(&mut raw).await.unwrap() }
    };

    assert_eq!(store.create(&job("j-1", "queued")).await.unwrap(), PutOutcome::Written { version: 1 });
    assert_eq!(store.create(&job("j-2", "running")).await.unwrap(), PutOutcome::Written { version: 1 });
    assert_eq!(running().await, ["j-2"]);
    assert_eq!(marker(&mut raw, "j-1").await, None);
    assert_eq!(marker(&mut raw, "j-2").await.as_deref(), Some("1"));

    let mut read = store.get("j-1").await.unwrap().unwrap();
    assert_eq!(
        store.update_in_place(&mut read, job("j-1", "running")).await.unwrap(),
        PutOutcome::Written { version: 2 }
    );
    assert_eq!(running().await, ["j-1", "j-2"]);
    assert_eq!(store.update_in_place(&mut read, job("j-1", "done")).await.unwrap(), PutOutcome::Written { version: 3 });
    assert_eq!(running().await, ["j-2"]);
    assert_eq!(marker(&mut raw, "j-1").await, None, "the marker goes with the membership");
    assert_eq!(store.delete_id("j-2", DeleteExpect::Any).await.unwrap(), DeleteOutcome::Deleted { version: 1 });
    assert!(running().await.is_empty());
    let exists: i64 = redis::cmd("EXISTS").arg(k("job:running:s1")).query_async(&mut raw).await.unwrap();
    assert_eq!(exists, 0);

    // A claim moving a job from queued to running puts it in the set.
    for i in 0..5 {
        let _ = store.create(&job(&format!("q-{i}"), "queued")).await.unwrap();
    }
    let claimed = store
        .claim(Job::by_status("s1", "queued"), |j| {
            (j.status == "queued").then(|| Job { status: "running".into(), ..j.clone() })
        })
        .await
        .unwrap()
        .expect("one queued");
    assert_eq!(running().await, std::slice::from_ref(&claimed.id));

    // Verify and rebuild know the set: a member removed by hand and an
    // orphan added are found and repaired.
    let opts = MaintenanceOptions::default();
    assert!(store.verify(&opts).await.unwrap().is_clean());
    let () = redis::cmd("SREM").arg(k("job:running:s1")).arg(&claimed.id).query_async(&mut raw).await.unwrap();
    // j-1 is done: not a member.
    let () = redis::cmd("SADD").arg(k("job:running:s1")).arg("j-1").query_async(&mut raw).await.unwrap();
    let report = store.verify(&opts).await.unwrap();
    let kinds: Vec<(String, String, DiffKind)> =
        report.differences.iter().map(|d| (d.index.clone(), d.id.clone(), d.kind.clone())).collect();
    assert!(kinds.contains(&("running".into(), claimed.id.clone(), DiffKind::Missing)), "{kinds:?}");
    assert!(kinds.iter().any(|(ix, id, _)| ix == "running" && id == "j-1"), "the orphan: {kinds:?}");
    let fixed = store.rebuild(&opts).await.unwrap();
    assert!(fixed.fixed >= 2, "{fixed:?}");
    assert!(store.verify(&opts).await.unwrap().is_clean());
    assert_eq!(running().await, std::slice::from_ref(&claimed.id));
}

#[tokio::test]
async fn sorted_indexes_follow_the_score_and_bounded_ones_keep_the_highest() {
    let server = server();
    let prefix = unique_prefix("sorted");
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let mut raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let store = Extras::open(valkey).store::<Job>();
    let k = |rest: &str| format!("{}:{rest}", prefix.as_str());
    let at = |id: &str, created: i64, due: Option<i64>| Job { created, due, ..job(id, "queued") };

    // Due: by deadline while the job has one; `range` reads what is due.
    let _ = store.create(&at("j-1", 10, Some(100))).await.unwrap();
    let _ = store.create(&at("j-2", 20, Some(300))).await.unwrap();
    let _ = store.create(&at("j-3", 30, None)).await.unwrap();
    let due_by = |t: f64| {
        let store = store.clone();
        async move {
            let due = store.range(Job::due("s1"), f64::NEG_INFINITY, t, false, 100).await.unwrap();
            due.into_iter().map(|d| (d.member, d.score)).collect::<Vec<_>>()
        }
    };
    assert_eq!(due_by(150.0).await, [("j-1".to_owned(), 100.0)]);
    assert_eq!(due_by(1000.0).await.len(), 2);
    let mut read = store.get("j-1").await.unwrap().unwrap();
    assert!(matches!(
        store.update_in_place(&mut read, at("j-1", 10, Some(200))).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    assert!(due_by(150.0).await.is_empty(), "moved to its new deadline");
    assert_eq!(due_by(250.0).await, [("j-1".to_owned(), 200.0)]);
    assert!(matches!(store.update_in_place(&mut read, at("j-1", 10, None)).await.unwrap(), PutOutcome::Written { .. }));
    assert_eq!(due_by(1000.0).await, [("j-2".to_owned(), 300.0)], "no deadline: out of the index");
    let field: Option<String> = redis::cmd("HGET").arg(k("job:j-1")).arg("due").query_async(&mut raw).await.unwrap();
    assert_eq!(field, None);
    // Newest first, and ids by score through pages.
    let newest = store.range(Job::due("s1"), f64::NEG_INFINITY, f64::INFINITY, true, 1).await.unwrap();
    assert_eq!(newest, [microdcs_valkey::families::Scored { member: "j-2".into(), score: 300.0 }]);
    assert!(matches!(
        store.range(Job::by_status("s1", "queued"), 0.0, 1.0, false, 1).await,
        Err(microdcs_valkey::Error::InvalidArgument(_))
    ));

    // Recent: bounded to the three newest, trimmed by the write.
    for (i, created) in [(4, 40), (5, 50), (6, 60)] {
        let _ = store.create(&at(&format!("j-{i}"), created, None)).await.unwrap();
    }
    let recent = store.ids(Job::recent("s1"), Page::first(10)).await.unwrap().ids;
    assert_eq!(recent, ["j-4", "j-5", "j-6"], "lowest score first");
    let opts = MaintenanceOptions::default();
    let report = store.verify(&opts).await.unwrap();
    assert!(report.is_clean(), "evicted entries are no difference: {:?}", report.differences);

    // Damage: a score changed, an entry removed, an orphan added.
    let () = redis::cmd("ZADD").arg(k("job:due:s1")).arg(999).arg("j-2").query_async(&mut raw).await.unwrap();
    let () = redis::cmd("ZADD").arg(k("job:due:s1")).arg(5).arg("j-3").query_async(&mut raw).await.unwrap();
    let report = store.verify(&opts).await.unwrap();
    let found: Vec<(String, String, DiffKind)> =
        report.differences.iter().map(|d| (d.index.clone(), d.id.clone(), d.kind.clone())).collect();
    assert!(
        found.contains(&("due".into(), "j-2".into(), DiffKind::WrongScore { expected: 300.0, found: 999.0 })),
        "{found:?}"
    );
    assert!(found.iter().any(|(ix, id, _)| ix == "due" && id == "j-3"), "the orphan: {found:?}");
    let () = redis::cmd("ZREM").arg(k("job:due:s1")).arg("j-2").query_async(&mut raw).await.unwrap();
    let report = store.verify(&opts).await.unwrap();
    assert!(report.differences.iter().any(|d| d.index == "due" && d.id == "j-2" && d.kind == DiffKind::Missing));
    assert!(store.rebuild(&opts).await.unwrap().fixed >= 2);
    assert!(store.verify(&opts).await.unwrap().is_clean());
    assert_eq!(due_by(1000.0).await, [("j-2".to_owned(), 300.0)]);
}
