//! The miroir task store, declared (`examples/src/miroir.rs`): its
//! acceptance tests against a real Valkey. Lease race, memory budget beside
//! a plain hand-written layout, revocation by channel, verify clean after a
//! mixed workload, and every family type it declares.

use std::time::{Duration, Instant};

use microdcs_examples::miroir::{
    AdminSession, Alias, CANARY_RUNS_KEPT, Canary, Idempotency, Job, Miroir, NodeSettingsVersion, RolloverPolicy,
    SearchUiConfig, Session, Task, TaskStore,
};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::testing::{ValkeyServer, unique_prefix};
use microdcs_valkey::{
    Document, Error, Expect, KeyspaceHandle, Page, PutOutcome, Valkey, config::WriteOptions, lease::Acquire,
    store::MaintenanceOptions,
};

struct Env {
    server: ValkeyServer,
    store: TaskStore,
    ks: KeyspaceHandle<Miroir>,
}

async fn env(name: &str) -> Env {
    let server = ValkeyServer::start().unwrap_or_else(|e| panic!("{e}"));
    let valkey = Valkey::connect_url(server.url(), unique_prefix(name), WriteOptions::default())
        .await
        .unwrap_or_else(|e| server.fail("connect", &e));
    Env { store: TaskStore::new(valkey.clone()).unwrap(), ks: Miroir::open(valkey), server }
}

fn task(i: usize) -> Task {
    Task {
        id: format!("t-{i}"),
        index_uid: format!("idx-{}", i % 7),
        status: "enqueued".into(),
        details: format!("{{\"documents\":{i}}}"),
        enqueued_at: 1_700_000_000_000 + i as i64,
    }
}

#[tokio::test]
async fn lease_race_has_exactly_one_owner() {
    let e = env("miroir-lease").await;
    let racers: Vec<_> = (0..100)
        .map(|i| {
            let store = e.store.clone();
            tokio::spawn(
                async move { store.acquire_leader("cluster", &format!("pod-{i}"), Duration::from_secs(10)).await },
            )
        })
        .collect();
    let mut owners = Vec::new();
    let mut held_by = Vec::new();
    for r in racers {
        match r.await.unwrap().unwrap() {
            Acquire::Acquired(lease) => owners.push(lease),
            Acquire::Held { owner, .. } => held_by.push(owner),
        }
    }
    assert_eq!(owners.len(), 1, "exactly one of 100 concurrent acquires wins");
    let winner = &owners[0];
    assert_eq!(held_by.len(), 99);
    assert!(held_by.iter().all(|o| *o == winner.owner), "the others see the winner");
    // The lease lives in the families the keyspace declares.
    let key = Miroir::leader_lease_key(e.store.valkey().prefix(), "cluster").unwrap();
    let mut raw = ConnectionManager::new(redis::Client::open(e.server.url()).unwrap()).await.unwrap();
    let owner: Option<String> = redis::cmd("HGET").arg(&key).arg("owner").query_async(&mut raw).await.unwrap();
    assert_eq!(owner.as_deref(), Some(winner.owner.as_str()));
}

async fn used_memory(con: &mut ConnectionManager) -> i64 {
    let info: String = redis::cmd("INFO").arg("memory").query_async(con).await.unwrap();
    info.lines().find_map(|l| l.strip_prefix("used_memory:")).unwrap().trim().parse().unwrap()
}

/// The hand-written layout of the same data, as the original store wrote
/// it: a hash per row with the same fields, the `_index` set, `EXPIRE` on
/// sessions and idempotency entries; pipelined.
async fn plain_layout(con: &mut ConnectionManager, p: &str, tasks: usize, sessions: usize, idemp: usize) {
    for chunk in (0..tasks).collect::<Vec<_>>().chunks(1000) {
        let mut pipe = redis::pipe();
        for &i in chunk {
            let t = task(i);
            pipe.hset_multiple(
                format!("{p}:tasks:{}", t.id),
                &[
                    ("id", t.id.clone()),
                    ("index_uid", t.index_uid),
                    ("status", t.status),
                    ("details", t.details),
                    ("enqueued_at", t.enqueued_at.to_string()),
                ],
            )
            .ignore();
            pipe.sadd(format!("{p}:tasks:_index"), &t.id).ignore();
        }
        let () = pipe.query_async(con).await.unwrap();
    }
    for (n, what) in [(sessions, "session"), (idemp, "idemp")] {
        for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
            let mut pipe = redis::pipe();
            for &i in chunk {
                let key = format!("{p}:{what}:{what}-{i}");
                if what == "session" {
                    pipe.hset_multiple(&key, &[("id", format!("session-{i}")), ("node", "node-1".into())]).ignore();
                } else {
                    pipe.hset_multiple(
                        &key,
                        &[("id", format!("idemp-{i}")), ("status", "200".into()), ("body", "ok".into())],
                    )
                    .ignore();
                }
                pipe.expire(&key, 3600).ignore();
            }
            let () = pipe.query_async(con).await.unwrap();
        }
    }
}

#[tokio::test]
async fn memory_budget_beside_the_plain_layout() {
    let (tasks, sessions, idemp) = (10_000, 1_000, 100_000);
    // A server of its own: used memory is the server's, not the test's.
    let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
    let mut raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let prefix = unique_prefix("miroir-mem");
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let ks = Miroir::open(valkey);

    let before = used_memory(&mut raw).await;
    let all: Vec<Task> = (0..tasks).map(task).collect();
    assert!(ks.store::<Task>().put_many(&all, Expect::Create).await.iter().all(Result::is_ok));
    let s: Vec<Session> =
        (0..sessions).map(|i| Session { id: format!("session-{i}"), node: "node-1".into() }).collect();
    let store = ks.store::<Session>().with_ttl(Duration::from_secs(3600)).unwrap();
    assert!(store.put_many(&s, Expect::Create).await.iter().all(Result::is_ok));
    let entries: Vec<Idempotency> =
        (0..idemp).map(|i| Idempotency { id: format!("idemp-{i}"), status: 200, body: "ok".into() }).collect();
    let store = ks.store::<Idempotency>().with_ttl(Duration::from_secs(3600)).unwrap();
    assert!(store.put_many(&entries, Expect::Create).await.iter().all(Result::is_ok));
    let ours = used_memory(&mut raw).await - before;

    let plain_prefix = unique_prefix("miroir-plain");
    let before = used_memory(&mut raw).await;
    plain_layout(&mut raw, plain_prefix.as_str(), tasks, sessions, idemp).await;
    let plain = used_memory(&mut raw).await - before;

    // Everything is there, with its index and its lifetimes.
    assert_eq!(ks.store::<Task>().list_all(Page::first(10)).await.unwrap().ids.len(), 10);
    let index = Task::list_key(ks.valkey().prefix()).unwrap();
    let listed: u64 = redis::cmd("SCARD").arg(&index).query_async(&mut raw).await.unwrap();
    assert_eq!(listed, tasks as u64);
    let idemp_key = Idempotency::key(ks.valkey().prefix(), "idemp-99999").unwrap();
    let ttl: i64 = redis::cmd("PTTL").arg(&idemp_key).query_async(&mut raw).await.unwrap();
    assert!(ttl > 3_000_000, "idempotency entries expire: {ttl} ms");
    let items = (tasks + sessions + idemp) as f64;
    println!(
        "memory for {tasks} tasks + {sessions} sessions + {idemp} idempotency entries: \
         ours {:.1} MiB ({:.0} B/item), plain {:.1} MiB ({:.0} B/item), ratio {:.2}",
        ours as f64 / 1_048_576.0,
        ours as f64 / items,
        plain as f64 / 1_048_576.0,
        plain as f64 / items,
        ours as f64 / plain as f64
    );
}

#[tokio::test]
async fn revocation_reaches_a_subscriber() {
    let e = env("miroir-revoke").await;
    let admins = e.store.table::<AdminSession>();
    let mut sub = Miroir::revoked(&e.ks).unwrap().subscribe().await.unwrap();
    let mut latencies = Vec::new();
    for i in 0..100 {
        let id = format!("admin-{i}");
        let _ = admins.create(&AdminSession { id: id.clone(), user: "ada".into(), revoked: false }).await.unwrap();
        let t = Instant::now();
        assert!(e.store.revoke_admin_session(&id).await.unwrap());
        let got = sub.next(Duration::from_secs(5)).await;
        latencies.push(t.elapsed());
        assert_eq!(got.as_deref(), Some(id.as_str()), "revocation {i} reached the subscriber");
        assert!(admins.get(&id).await.unwrap().unwrap().doc.revoked);
    }
    assert!(!e.store.revoke_admin_session("admin-none").await.unwrap(), "nothing to revoke");
    latencies.sort();
    println!(
        "revocation, store write + publish to delivery: p50 {:?}, p99 {:?} (100 revocations)",
        latencies[49], latencies[98]
    );
}

#[tokio::test]
async fn verify_is_clean_after_a_mixed_workload() {
    let e = env("miroir-mixed").await;
    let s = &e.store;
    for i in 0..200 {
        assert!(matches!(s.insert_task(&task(i)).await.unwrap(), PutOutcome::Written { .. }));
    }
    let tasks = s.table::<Task>();
    for i in (0..200).step_by(3) {
        let mut read = tasks.get(&format!("t-{i}")).await.unwrap().unwrap();
        let done = Task { status: "succeeded".into(), ..read.doc.clone() };
        let _ = tasks.update_in_place(&mut read, done).await.unwrap();
    }
    for i in (0..200).step_by(5) {
        let _ = tasks.delete_id(&format!("t-{i}"), microdcs_valkey::store::DeleteExpect::Any).await.unwrap();
    }
    // Jobs: 300 queued, 10 workers, each job taken once.
    for i in 0..300 {
        let _ = s.enqueue_job(&format!("j-{i}"), "reindex").await.unwrap();
    }
    let workers: Vec<_> = (0..10)
        .map(|w| {
            let s = s.clone();
            tokio::spawn(async move {
                let mut took = Vec::new();
                while let Some(job) = s.claim_job(&format!("w-{w}")).await.unwrap() {
                    took.push(job.id);
                }
                took
            })
        })
        .collect();
    let mut taken = Vec::new();
    for w in workers {
        taken.extend(w.await.unwrap());
    }
    taken.sort();
    taken.dedup();
    assert_eq!(taken.len(), 300, "every job claimed exactly once");
    assert!(s.table::<Job>().ids(Job::queued(), Page::first(10)).await.unwrap().ids.is_empty());
    // The other tables.
    for i in 0..20 {
        let n = NodeSettingsVersion {
            id: NodeSettingsVersion::id_of(&format!("idx-{i}"), "node-1"),
            index_uid: format!("idx-{i}"),
            node: "node-1".into(),
            version: i,
        };
        let _ = s.table::<NodeSettingsVersion>().put(&n, Expect::Any).await.unwrap();
        let a = Alias { id: format!("alias-{i}"), indexes: vec![format!("idx-{i}")] };
        let _ = s.table::<Alias>().put(&a, Expect::Any).await.unwrap();
        let c = Canary { id: format!("c-{i}"), index_uid: format!("idx-{i}"), query: "q".into() };
        let _ = s.table::<Canary>().put(&c, Expect::Any).await.unwrap();
        let r = RolloverPolicy { id: format!("roll-{i}"), max_docs: 1_000_000 };
        let _ = s.table::<RolloverPolicy>().put(&r, Expect::Any).await.unwrap();
        let u = SearchUiConfig { id: format!("idx-{i}"), config: "{}".into() };
        let _ = s.table::<SearchUiConfig>().put(&u, Expect::Any).await.unwrap();
        s.pin_session(&format!("session-{i}"), "node-1", None).await.unwrap();
        assert!(s.remember(&format!("req-{i}"), 201, "created").await.unwrap());
        assert!(!s.remember(&format!("req-{i}"), 500, "again").await.unwrap(), "an idempotency key is kept");
    }
    let _ = s.table::<Alias>().delete_id("alias-3", microdcs_valkey::store::DeleteExpect::Any).await.unwrap();

    let opts = MaintenanceOptions::default();
    macro_rules! clean {
        ($($t:ty),*) => {$(
            let report = s.table::<$t>().verify(&opts).await.unwrap();
            assert!(report.is_clean(), "{}: {report:?}", <$t>::SPEC.type_name);
        )*};
    }
    clean!(Task, Job, NodeSettingsVersion, Alias, Canary, RolloverPolicy, SearchUiConfig, Session, Idempotency);
    // Unscoped documents carry the one scope, and their lists are global.
    let listed = s.list_tasks(Page::first(1000)).await.unwrap().ids;
    assert_eq!(listed.len(), 200 - 40);
    assert!(tasks.get("t-1").await.unwrap().unwrap().scope == microdcs_valkey::schema::UNSCOPED);
    let err = tasks.list("s1", Page::first(10)).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

#[tokio::test]
async fn every_declared_family_has_its_typed_operations() {
    let e = env("miroir-families").await;
    let (s, ks) = (&e.store, &e.ks);
    let mut raw = ConnectionManager::new(redis::Client::open(e.server.url()).unwrap()).await.unwrap();
    let p = s.valkey().prefix().clone();
    // Canary runs: bounded to the latest.
    for i in 0..(CANARY_RUNS_KEPT + 20) {
        s.record_canary_run("c-1", &format!("run-{i}"), i as i64).await.unwrap();
    }
    let runs = Miroir::canary_runs(ks, "c-1").unwrap();
    assert_eq!(runs.count().await.unwrap(), CANARY_RUNS_KEPT);
    assert!(runs.score("run-0").await.unwrap().is_none(), "the oldest were trimmed");
    // CDC cursors and their index.
    s.set_cdc_cursor("kafka", "idx-1", "42").await.unwrap();
    assert_eq!(Miroir::cdc_cursor(ks, "kafka", "idx-1").unwrap().get().await.unwrap().as_deref(), Some("42"));
    assert!(Miroir::cdc_cursors(ks).unwrap().contains("kafka/idx-1").await.unwrap());
    // Tenant map and scoped keys.
    let tenant = Miroir::tenant_map(ks, &microdcs_valkey::families::content_digest("tenant-key")).unwrap();
    assert!(tenant.set("indexes", "a,b").await.unwrap());
    assert_eq!(tenant.get("indexes").await.unwrap().as_deref(), Some("a,b"));
    let scoped = Miroir::scoped_key(ks, "idx-1").unwrap();
    let _ = scoped.set("key_id", "k-1").await.unwrap();
    s.observe_scoped_key("pod-a", "idx-1", "k-1").await.unwrap();
    let observed = Miroir::scoped_key_observed(ks, "pod-a", "idx-1").unwrap();
    assert_eq!(observed.get("key_id").await.unwrap().as_deref(), Some("k-1"));
    let ttl = observed.ttl().await.unwrap().expect("an observation expires");
    assert!(ttl <= Duration::from_secs(60) && ttl > Duration::from_secs(50), "{ttl:?}");
    // CDC overflow: bounded.
    for i in 0..30 {
        let _ = s.overflow("kafka", &format!("event-{i}")).await.unwrap();
    }
    assert_eq!(Miroir::cdc_overflow(ks, "kafka").unwrap().range(0, 0).await.unwrap(), ["event-29"]);
    // Rate limits: the search UI window, the admin login backoff.
    let search = Miroir::searchui_rate(ks, "10.0.0.1").unwrap();
    for _ in 0..3 {
        assert!(matches!(
            search.attempt(3, Duration::from_secs(60)).await.unwrap(),
            microdcs_valkey::families::RateDecision::Allowed { .. }
        ));
    }
    assert!(matches!(
        search.attempt(3, Duration::from_secs(60)).await.unwrap(),
        microdcs_valkey::families::RateDecision::Limited { .. }
    ));
    assert!(s.admin_login_allowed("10.0.0.2").await.unwrap());
    let first = s.admin_login_failed("10.0.0.2").await.unwrap();
    let second = s.admin_login_failed("10.0.0.2").await.unwrap();
    assert!(second > first, "the backoff grows: {first:?} then {second:?}");
    assert!(!s.admin_login_allowed("10.0.0.2").await.unwrap(), "blocked during the backoff");
    // Every key written is a key of the keyspace (no stray family).
    let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{}:*", p.as_str())).query_async(&mut raw).await.unwrap();
    assert!(!keys.is_empty());
    for k in &keys {
        let rest = k.strip_prefix(&format!("{}:", p.as_str())).unwrap();
        assert!(
            Miroir::SPEC
                .all_families()
                .any(|f| microdcs_valkey::schema::KeyTemplate::parse(f.key).is_ok_and(|t| t.parse_key(&p, k).is_some())),
            "{rest} matches no declared family"
        );
    }
}

#[tokio::test]
async fn damage_to_the_global_index_and_the_queue_is_found_and_repaired() {
    let e = env("miroir-repair").await;
    let s = &e.store;
    let mut raw = ConnectionManager::new(redis::Client::open(e.server.url()).unwrap()).await.unwrap();
    let p = s.valkey().prefix().clone();
    for i in 0..30 {
        let _ = s.insert_task(&task(i)).await.unwrap();
        let _ = s.enqueue_job(&format!("j-{i}"), "reindex").await.unwrap();
    }
    let index = Task::list_key(&p).unwrap();
    let queue = Job::queued_key(&p).unwrap();
    let () = redis::cmd("SREM").arg(&index).arg("t-3").query_async(&mut raw).await.unwrap();
    let () = redis::cmd("SADD").arg(&index).arg("ghost").query_async(&mut raw).await.unwrap();
    let () = redis::cmd("SREM").arg(&queue).arg("j-4").query_async(&mut raw).await.unwrap();
    let opts = MaintenanceOptions::default();
    let tasks = s.table::<Task>();
    let report = tasks.verify(&opts).await.unwrap();
    let mut found: Vec<(String, String)> =
        report.differences.iter().map(|d| (d.id.clone(), format!("{:?}", d.kind))).collect();
    found.sort();
    assert_eq!(found, [("ghost".to_owned(), "Orphan".to_owned()), ("t-3".to_owned(), "Missing".to_owned())]);
    let jobs = s.table::<Job>();
    let report = jobs.verify(&opts).await.unwrap();
    assert_eq!(report.differences.len(), 1, "{report:?}");
    assert_eq!(report.differences[0].id, "j-4");
    for report in [tasks.rebuild(&opts).await.unwrap(), jobs.rebuild(&opts).await.unwrap()] {
        assert!(!report.is_clean(), "the rebuild reports what it fixed");
    }
    assert!(tasks.verify(&opts).await.unwrap().is_clean());
    assert!(jobs.verify(&opts).await.unwrap().is_clean());
    let queued: u64 = redis::cmd("SCARD").arg(&queue).query_async(&mut raw).await.unwrap();
    assert_eq!(queued, 30, "j-4 is queued again");
    assert!(s.claim_job("w-1").await.unwrap().is_some());
}
