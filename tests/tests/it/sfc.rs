//! The SFC state's engine indexes (due, active, waits) kept by every write
//! of the state, and checked and repaired by verify and rebuild.

use microdcs_tests::fixtures::{Plant, SfcState};
use microdcs_tests::{command_calls, server, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{
    Page, PutOutcome, Valkey, config::WriteOptions, families::Scored, store::DiffKind, store::MaintenanceOptions,
};

fn state(job: &str, deadline: Option<i64>, running: bool, wait: Option<(&str, i64)>) -> SfcState {
    SfcState {
        job_id: job.into(),
        scope: "s1".into(),
        step: "mix".into(),
        deadline,
        running,
        wait_type: wait.map(|(t, _)| t.to_owned()),
        wait_start: wait.map(|(_, s)| s),
    }
}

#[tokio::test]
async fn the_due_sweep_over_20_scopes_of_500_jobs_returns_exactly_the_due_ones() {
    use microdcs_valkey::sweep::DueSweep;
    use std::collections::BTreeSet;
    use std::sync::{Arc, Mutex};

    let server = server();
    let prefix = unique_prefix("sweep");
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let mut raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let store = Plant::open(valkey.clone()).store::<SfcState>();
    let (s, _): (i64, i64) = redis::cmd("TIME").query_async(&mut raw).await.unwrap();
    let now = s * 1000;
    // Deadlines spread an hour either side of now; a third have none.
    let mut rng = microdcs_tests::seeded::Rng::new(microdcs_tests::seeded::env_u64("SWEEP_SEED").unwrap_or(7));
    let mut docs = Vec::new();
    let mut expected = BTreeSet::new();
    for scope in 0..20 {
        for j in 0..500 {
            let job = format!("j-{scope}-{j}");
            let deadline = (!rng.chance(33)).then(|| now - 3_600_000 + rng.below(7_200_000) as i64);
            // A margin of a minute around now keeps the clock's advance
            // during the test from deciding.
            if deadline.is_some_and(|d| (d - now).abs() < 60_000) {
                continue;
            }
            if deadline.is_some_and(|d| d <= now) {
                expected.insert(job.clone());
            }
            docs.push(SfcState { job_id: job, scope: format!("s{scope}"), deadline, ..state("x", None, true, None) });
        }
    }
    assert!(store.put_many(&docs, microdcs_valkey::Expect::Create).await.iter().all(Result::is_ok));
    let fired: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let seen = fired.clone();
    let beat = Plant::sfc_heartbeat(&Plant::open(valkey.clone())).unwrap();
    let sweep = DueSweep::new(
        store.clone(),
        |scope: &str| SfcState::due(scope),
        move |scope: String, due: microdcs_valkey::sweep::Due| {
            let seen = seen.clone();
            async move {
                assert!(due.windows(2).all(|w| w[0].score <= w[1].score), "oldest first in {scope}");
                seen.lock().unwrap().extend(due.into_iter().map(|d| d.member));
                Ok(())
            }
        },
        std::time::Duration::from_secs(1),
    )
    .batch(1000)
    .heartbeat(beat.clone());
    let n = sweep.sweep().await.unwrap();
    let got = fired.lock().unwrap().clone();
    assert_eq!(n as usize, expected.len());
    assert_eq!(got, expected, "exactly the due ones");
    assert!(beat.age().await.unwrap().is_some(), "the sweep beat");
    // A callback that fails is reported, naming the scope; the others ran.
    let failing = DueSweep::new(
        store,
        |scope: &str| SfcState::due(scope),
        |scope: String, _due: microdcs_valkey::sweep::Due| async move {
            if scope == "s3" { Err("boom".into()) } else { Ok(()) }
        },
        std::time::Duration::from_secs(1),
    );
    match failing.sweep().await {
        Err(microdcs_valkey::Error::Callback { scope, .. }) => assert_eq!(scope, "s3"),
        other => panic!("{other:?}"),
    }
    // A callback that leaves its ids due (it cannot handle them yet): the
    // next runs go past them, so every due id is handed out in turn.
    let handed: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let seen = handed.clone();
    let stuck = DueSweep::new(
        Plant::open(valkey.clone()).store::<SfcState>(),
        |scope: &str| SfcState::due(scope),
        move |scope: String, due: microdcs_valkey::sweep::Due| {
            let seen = seen.clone();
            async move {
                if scope == "s0" {
                    seen.lock().unwrap().extend(due.into_iter().map(|d| d.member));
                }
                Ok(())
            }
        },
        std::time::Duration::from_secs(1),
    )
    .batch(50);
    let due_s0: BTreeSet<String> = expected.iter().filter(|j| j.starts_with("j-0-")).cloned().collect();
    assert!(due_s0.len() > 100, "several batches due: {}", due_s0.len());
    for _ in 0..due_s0.len().div_ceil(50) {
        stuck.sweep().await.unwrap();
    }
    assert_eq!(*handed.lock().unwrap(), due_s0, "every due id handed out, not the first batch again and again");
}

#[tokio::test]
async fn after_an_outage_longer_than_the_grace_the_sweep_walks_the_running_jobs() {
    use microdcs_valkey::sweep::DueSweep;
    use std::sync::{Arc, Mutex};

    let server = server();
    let prefix = unique_prefix("outage");
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let plant = Plant::open(valkey.clone());
    let store = plant.store::<SfcState>();
    let _ = store.create(&state("j-1", None, true, None)).await.unwrap();
    let _ = store.create(&state("j-2", None, false, None)).await.unwrap();
    let beat = Plant::sfc_heartbeat(&plant).unwrap();
    type Walked = Vec<(String, Vec<String>)>;
    let walked: Arc<Mutex<Walked>> = Arc::default();
    let seen = walked.clone();
    let sweep = DueSweep::new(
        store,
        |scope: &str| SfcState::due(scope),
        |_scope: String, _due: microdcs_valkey::sweep::Due| async { Ok(()) },
        std::time::Duration::from_secs(1),
    )
    .heartbeat(beat.clone())
    .after_outage(
        std::time::Duration::from_secs(60),
        |scope: &str| SfcState::active(scope),
        move |scope: String, ids: Vec<String>| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push((scope, ids));
                Ok(())
            }
        },
    );
    // Never swept: an outage as long as it gets.
    let _ = sweep.sweep().await.unwrap();
    assert_eq!(walked.lock().unwrap().clone(), [("s1".to_owned(), vec!["j-1".to_owned()])], "the running job");
    // Swept a moment ago: within the grace, no walk.
    let _ = sweep.sweep().await.unwrap();
    assert_eq!(walked.lock().unwrap().len(), 1);
    // The last sweep an hour ago: the walk again.
    beat.set(&(beat_ms(&valkey).await - 3_600_000).to_string(), None).await.unwrap();
    let _ = sweep.sweep().await.unwrap();
    assert_eq!(walked.lock().unwrap().len(), 2);
}

async fn beat_ms(valkey: &Valkey) -> i64 {
    let mut con = valkey.connection();
    let (s, us): (i64, i64) = redis::cmd("TIME").query_async(&mut con).await.unwrap();
    s * 1000 + us / 1000
}

/// A registry member that names no scope (an empty one) is one scope's
/// damage: the due sweep still fires every other scope's timers, reports
/// the damage as the run's error and meters it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_due_sweep_steps_over_an_empty_registry_member_and_meters_it() {
    use microdcs_valkey::sweep::DueSweep;
    use std::sync::{Arc, Mutex};

    let server = server();
    let valkey =
        Valkey::connect_url(server.url(), unique_prefix("sweep-empty"), WriteOptions::default()).await.unwrap();
    let mut raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let store = Plant::open(valkey.clone()).store::<SfcState>();
    for scope in ["s1", "s2"] {
        let due = SfcState { job_id: format!("j-{scope}"), scope: scope.into(), ..state("x", Some(1000), true, None) };
        assert_eq!(store.create(&due).await.unwrap(), PutOutcome::Written { version: 1 });
    }
    let registry = Plant::scopes_key(valkey.prefix()).unwrap();
    let _: i64 = redis::cmd("SADD").arg(&registry).arg("").query_async(&mut raw).await.unwrap();
    let fired: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = fired.clone();
    let sweep = DueSweep::new(
        store,
        |scope: &str| SfcState::due(scope),
        move |_scope: String, due: microdcs_valkey::sweep::Due| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().extend(due.into_iter().map(|d| d.member));
                Ok(())
            }
        },
        std::time::Duration::from_secs(1),
    );
    let e = sweep.sweep().await.unwrap_err();
    assert!(!e.is_connection(), "{e:?}");
    let mut got = fired.lock().unwrap().clone();
    got.sort();
    assert_eq!(got, ["j-s1", "j-s2"], "every real scope fired");
    assert_eq!(valkey.metrics().sweep_damaged(), 1, "the damaged member metered");

    // The same with the walk after an outage: the damaged member is
    // stepped over there too, the timers fire, and the heartbeat is
    // written, so the next run does not walk every scope again.
    fired.lock().unwrap().clear();
    let walked: Arc<Mutex<Vec<String>>> = Arc::default();
    let (seen, seen_walk) = (fired.clone(), walked.clone());
    let beat = Plant::sfc_heartbeat(&Plant::open(valkey.clone())).unwrap();
    let sweep = DueSweep::new(
        Plant::open(valkey.clone()).store::<SfcState>(),
        |scope: &str| SfcState::due(scope),
        move |_scope: String, due: microdcs_valkey::sweep::Due| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().extend(due.into_iter().map(|d| d.member));
                Ok(())
            }
        },
        std::time::Duration::from_secs(1),
    )
    .heartbeat(beat.clone())
    .after_outage(
        std::time::Duration::from_secs(60),
        |scope: &str| SfcState::active(scope),
        move |scope: String, _ids: Vec<String>| {
            let seen = seen_walk.clone();
            async move {
                seen.lock().unwrap().push(scope);
                Ok(())
            }
        },
    );
    let e = sweep.sweep().await.unwrap_err();
    assert!(!e.is_connection(), "{e:?}");
    let mut got = fired.lock().unwrap().clone();
    got.sort();
    assert_eq!(got, ["j-s1", "j-s2"], "every real scope fired after the outage walk");
    let mut walked_scopes = walked.lock().unwrap().clone();
    walked_scopes.sort();
    assert_eq!(walked_scopes, ["s1", "s2"], "every real scope walked");
    assert_eq!(valkey.metrics().sweep_damaged(), 3, "the damaged member metered by both passes");
    assert!(beat.age().await.unwrap().is_some(), "the heartbeat is written despite the damaged member");
}

/// Tests that stop, restart or cut their server, kill its clients or count
/// its commands: each starts a server of its own (the cluster suite leaves
/// this module out).
mod standalone {
    use super::*;

    use microdcs_tests::own_server as server;

    #[tokio::test]
    async fn a_step_keeps_due_active_and_waits_and_finishing_leaves_all_three() {
        let server = server();
        let prefix = unique_prefix("sfc");
        let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
        let mut raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
        let store = Plant::open(valkey).store::<SfcState>();
        let k = |rest: &str| format!("{}:{rest}", prefix.as_str());
        let due = |store: microdcs_valkey::Store<SfcState>| async move {
            let due = store.range(SfcState::due("s1"), f64::NEG_INFINITY, f64::INFINITY, false, 100).await.unwrap();
            due.into_iter().map(|d| (d.member, d.score)).collect::<Vec<_>>()
        };

        assert_eq!(
            store.create(&state("j-1", Some(100), true, Some(("ev", 50)))).await.unwrap(),
            PutOutcome::Written { version: 1 }
        );
        assert_eq!(
            store.create(&state("j-2", Some(300), true, None)).await.unwrap(),
            PutOutcome::Written { version: 1 }
        );
        assert_eq!(due(store.clone()).await, [("j-1".to_owned(), 100.0), ("j-2".to_owned(), 300.0)]);
        let mut active = store.ids(SfcState::active("s1"), Page::first(10)).await.unwrap().ids;
        active.sort();
        assert_eq!(active, ["j-1", "j-2"]);
        assert_eq!(store.ids(SfcState::waits("s1", "ev"), Page::first(10)).await.unwrap().ids, ["j-1"]);
        // Due by 200: only j-1, the timer the sweep fires.
        let by_200 = store.range(SfcState::due("s1"), f64::NEG_INFINITY, 200.0, false, 100).await.unwrap();
        assert_eq!(by_200, [Scored { member: "j-1".into(), score: 100.0 }]);

        // Finishing j-1: one write, out of due, active and waits.
        let mut read = store.get("j-1").await.unwrap().unwrap();
        let () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut raw).await.unwrap();
        let done = SfcState { step: "done".into(), ..state("j-1", None, false, None) };
        assert_eq!(store.update_in_place(&mut read, done).await.unwrap(), PutOutcome::Written { version: 2 });
        let calls = command_calls(&mut raw).await;
        assert_eq!(calls.get("evalsha"), Some(&1), "one script: {calls:?}");
        assert_eq!(due(store.clone()).await, [("j-2".to_owned(), 300.0)]);
        assert_eq!(store.ids(SfcState::active("s1"), Page::first(10)).await.unwrap().ids, ["j-2"]);
        assert!(store.ids(SfcState::waits("s1", "ev"), Page::first(10)).await.unwrap().ids.is_empty());

        // Damage to each index is found by verify and repaired by rebuild.
        let opts = MaintenanceOptions::default();
        assert!(store.verify(&opts).await.unwrap().is_clean());
        let () = redis::cmd("SREM").arg(k("sfc:active:s1")).arg("j-2").query_async(&mut raw).await.unwrap();
        let () = redis::cmd("ZADD").arg(k("sfc:due:s1")).arg(1).arg("j-2").query_async(&mut raw).await.unwrap();
        let () = redis::cmd("ZADD").arg(k("sfc:waits:s1:ev")).arg(7).arg("j-1").query_async(&mut raw).await.unwrap();
        let report = store.verify(&opts).await.unwrap();
        let found: Vec<(String, String, DiffKind)> =
            report.differences.iter().map(|d| (d.index.clone(), d.id.clone(), d.kind.clone())).collect();
        assert!(found.contains(&("active".into(), "j-2".into(), DiffKind::Missing)), "{found:?}");
        assert!(
            found.contains(&("due".into(), "j-2".into(), DiffKind::WrongScore { expected: 300.0, found: 1.0 })),
            "{found:?}"
        );
        assert!(found.iter().any(|(ix, id, _)| ix == "waits" && id == "j-1"), "the orphan wait: {found:?}");
        assert!(store.rebuild(&opts).await.unwrap().fixed >= 3);
        assert!(store.verify(&opts).await.unwrap().is_clean());
        assert_eq!(due(store.clone()).await, [("j-2".to_owned(), 300.0)]);
    }
}
