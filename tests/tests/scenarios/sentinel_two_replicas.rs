//! Durable writes through Sentinel with one primary and two replicas: a
//! write acknowledged with `Durability::every_replica()` survives a
//! requested failover (`SENTINEL FAILOVER`), where the old primary keeps
//! its second replica for a moment after the first was promoted away and
//! answers a `WAIT 1` with it; `Durability::replicas(1)` keeps its meaning
//! (one replica down of two still confirms it), while every replica is
//! refused as `NotReplicated` (applied, unconfirmed) until all are back;
//! and a handle that followed a promotion never goes back to the old
//! primary stopped through the failover and continued after it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use microdcs_tests::fixtures::{JobResponse, Plant};
use microdcs_tests::unique_prefix;
use microdcs_valkey::store::DeleteExpect;
use microdcs_valkey::testing::{Sentinel, command};
use microdcs_valkey::{
    Error, Expect, KeyPrefix, MicroDcsConfig, PutOutcome, Valkey, config::Durability, config::ValkeyConfig,
};

const WRITERS: usize = 4;

fn two_replicas() -> Sentinel {
    Sentinel::start_with_replicas(2).unwrap_or_else(|e| panic!("{e}"))
}

fn config(s: &Sentinel, prefix: &KeyPrefix) -> ValkeyConfig {
    config_with(s, prefix, &[])
}

fn config_with(s: &Sentinel, prefix: &KeyPrefix, settings: &[(&str, &str)]) -> ValkeyConfig {
    let mut c = MicroDcsConfig::default();
    c.set("Valkey:ConnectionString", &s.connection_string()).unwrap();
    c.set("Valkey:KeyPrefix", prefix.as_str()).unwrap();
    c.set("Valkey:PollInterval", "30s").unwrap();
    c.set("Valkey:WriteRetryDelay", "50ms").unwrap();
    for (k, v) in settings {
        c.set(k, v).unwrap();
    }
    c.valkey
}

async fn connect(s: &Sentinel, prefix: &KeyPrefix) -> Valkey {
    Valkey::connect(&config(s, prefix)).await.unwrap_or_else(|e| panic!("connect through sentinel: {e}"))
}

/// Stops a process (SIGSTOP) until dropped.
struct Stopped(u32);

impl Drop for Stopped {
    fn drop(&mut self) {
        signal("-CONT", self.0);
    }
}

fn signal(which: &str, pid: u32) {
    let status = std::process::Command::new("kill").args([which, &pid.to_string()]).status().expect("kill");
    assert!(status.success(), "kill {which} {pid}");
}

/// What the writers saw: the ids acknowledged `Ok`, and how many writes
/// were applied unconfirmed (`NotReplicated`) or failed on the way.
#[derive(Default)]
struct Tally {
    acked: Vec<String>,
    not_replicated: usize,
    failed: usize,
}

/// Writers, each on its own handle, create one new document per call with
/// `durability` while the Sentinels fail the primary over on request;
/// they stop once the old primary is a replica of the new one again and
/// every replica is in sync. The tally, and the ids acknowledged `Ok` that
/// the final primary does not hold.
async fn writes_through_a_requested_failover(s: &Sentinel, name: &str, durability: Durability) -> (Tally, Vec<String>) {
    let prefix = unique_prefix(name);
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let valkey = connect(s, &prefix).await;
        let stop = stop.clone();
        writers.push(tokio::spawn(async move {
            let store = Plant::open(valkey).store::<JobResponse>();
            let mut tally = Tally::default();
            let mut n = 0u32;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                let id = format!("w{w}-{n}");
                match store
                    .create(&JobResponse::new(&id, "s1", &format!("o-{id}"), &["A"]))
                    .durability(durability)
                    .await
                {
                    Ok(PutOutcome::Written { .. }) => tally.acked.push(id),
                    Ok(other) => panic!("a new id is written, got {other:?}"),
                    Err(Error::NotReplicated { .. }) => tally.not_replicated += 1,
                    Err(e) if e.is_connection() || e.is_unknown_outcome() => tally.failed += 1,
                    Err(e) => panic!("not an error of a failover: {e:?}"),
                }
            }
            tally
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let new = s.failover().unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(new, 0, "a replica was promoted");
    // The old primary takes writes until the Sentinels turn it replica.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !command(&s.data_nodes()[0], &["ROLE"]).unwrap_or_default().contains("slave") {
        assert!(Instant::now() < deadline, "the old primary never turned replica");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.wait_replicated(Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::SeqCst);
    let mut tally = Tally::default();
    for w in writers {
        let t = w.await.unwrap();
        tally.acked.extend(t.acked);
        tally.not_replicated += t.not_replicated;
        tally.failed += t.failed;
    }
    let took = started.elapsed();
    let primary = s.primary().expect("an agreed primary after the failover");
    let store = Plant::open(connect(s, &prefix).await).store::<JobResponse>();
    let lost: Vec<String> = tally
        .acked
        .iter()
        .filter(|id| {
            let key = store.key(id).unwrap();
            command(&s.data_nodes()[primary], &["EXISTS", &key]).unwrap_or_else(|e| panic!("{e}")) != "1"
        })
        .cloned()
        .collect();
    println!(
        "{name}: {} acknowledged, {} lost, {} not replicated, {} failed, through a requested failover of {} ms",
        tally.acked.len(),
        lost.len(),
        tally.not_replicated,
        tally.failed,
        took.as_millis()
    );
    (tally, lost)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_loses_no_acknowledged_write_in_a_requested_failover() {
    let s = two_replicas();
    let (tally, lost) = writes_through_a_requested_failover(&s, "dur-every", Durability::every_replica()).await;
    assert!(!tally.acked.is_empty(), "some writes were acknowledged");
    assert!(lost.is_empty(), "{} acknowledged writes lost, the first: {:?}", lost.len(), &lost[..lost.len().min(10)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_down_of_two_confirms_replicas_1_and_refuses_every_replica() {
    let s = two_replicas();
    let prefix = unique_prefix("dur-down");
    let valkey = connect(&s, &prefix).await;
    let store = Plant::open(valkey).store::<JobResponse>();
    let short = Duration::from_millis(300);
    let every = Durability::every_replica().with_timeout(short);
    // Both replicas up: every replica confirms, and both hold the write.
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    assert_eq!(store.create(&doc).durability(every).await.unwrap(), PutOutcome::Written { version: 1 });
    let key = store.key("r-1").unwrap();
    for r in 1..=2 {
        assert_eq!(command(&s.data_nodes()[r], &["HGET", &key, "v"]).unwrap(), "1", "on replica {r}");
    }
    let stopped = Stopped(s.data_nodes()[2].pid().expect("local"));
    signal("-STOP", stopped.0);
    // One replica of two: `replicas(1)` is confirmed, by the one running.
    let other = JobResponse::new("r-2", "s1", "o-2", &["A"]);
    let one = Durability::replicas(1).with_timeout(Duration::from_secs(5));
    assert_eq!(store.create(&other).durability(one).await.unwrap(), PutOutcome::Written { version: 1 });
    assert_eq!(command(&s.data_nodes()[1], &["HGET", &store.key("r-2").unwrap(), "v"]).unwrap(), "1");
    // Every replica is not: applied, unconfirmed, at the version written.
    let read = store.get("r-1").await.unwrap().unwrap();
    let next = JobResponse { state: vec!["B".into()], ..doc.clone() };
    match store.update(&read, &next).durability(every).await {
        Err(Error::NotReplicated { version, acked, wanted, reason, .. }) => {
            assert_eq!((version, acked, wanted), (2, 1, 2), "{reason}");
        }
        other => panic!("expected NotReplicated with one replica stopped, got {other:?}"),
    }
    assert_eq!(store.get("r-1").await.unwrap().unwrap().version, 2, "the write stands");
    drop(stopped);
    // Back: confirmed again.
    let read = store.get("r-1").await.unwrap().unwrap();
    let every = every.with_timeout(Duration::from_secs(10));
    assert_eq!(store.update(&read, &doc).durability(every).await.unwrap(), PutOutcome::Written { version: 3 });
}

/// The primary stopped (`SIGSTOP`) until the Sentinels promoted a replica,
/// then continued: it still says it is a primary until the Sentinels turn
/// it, and a question a handle asked while it was stopped (its `ROLE`
/// check held by the stopped node) is answered only now. Every write a
/// handle starts once it had time to hear of the switch must land on the
/// new primary: one that lands on the old primary is dropped when it
/// resyncs, so it would be missing at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_never_goes_back_to_a_primary_stopped_through_the_failover() {
    let s = two_replicas();
    let prefix = unique_prefix("split-brain");
    // Calls to the stopped primary end after a short response timeout and
    // make the handles ask the Sentinels while it is stopped and still
    // named; the check that the node they name is a primary then waits
    // on the stopped node for up to the connect timeout, past the switch.
    let settings = [("Valkey:ResponseTimeout", "1s"), ("Valkey:ConnectTimeout", "5s")];
    let stop = Arc::new(AtomicBool::new(false));
    // Calls started after this instant count (set once the handles had
    // time to hear of the switch).
    let counted_from: Arc<std::sync::Mutex<Option<Instant>>> = Arc::default();
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let valkey =
            Valkey::connect(&config_with(&s, &prefix, &settings)).await.unwrap_or_else(|e| panic!("connect: {e}"));
        let (stop, counted_from) = (stop.clone(), counted_from.clone());
        writers.push(tokio::spawn(async move {
            let store = Plant::open(valkey).store::<JobResponse>();
            let (mut counted, mut other) = (Vec::new(), 0usize);
            let mut n = 0u32;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                let id = format!("w{w}-{n}");
                let started = Instant::now();
                let doc = JobResponse::new(&id, "s1", &format!("o-{id}"), &["A"]);
                match store.create(&doc).await {
                    Ok(PutOutcome::Written { .. }) => {
                        let from = *counted_from.lock().unwrap();
                        if from.is_some_and(|t| started >= t) {
                            counted.push(id);
                        } else {
                            other += 1;
                        }
                    }
                    Ok(o) => panic!("a new id is written, got {o:?}"),
                    Err(e) if e.is_connection() || e.is_unknown_outcome() => {}
                    Err(e) => panic!("not an error of a failover: {e:?}"),
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (counted, other)
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pid = s.data_nodes()[0].pid().expect("local");
    let stopped = Stopped(pid);
    signal("-STOP", pid);
    let new = s.wait_primary_other_than(0, Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));
    // Continued a second after the promotion, time enough for every
    // handle to hear the Sentinels' announcement, while a question asked
    // during the stop may still wait on it. Every write started from now
    // on must reach the new primary.
    tokio::time::sleep(Duration::from_secs(1)).await;
    *counted_from.lock().unwrap() = Some(Instant::now());
    drop(stopped);
    let continued = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !command(&s.data_nodes()[0], &["ROLE"]).unwrap_or_default().contains("slave") {
        assert!(Instant::now() < deadline, "the old primary never turned replica");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let demoted = continued.elapsed();
    s.wait_replicated(Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));
    stop.store(true, Ordering::SeqCst);
    let (mut counted, mut other) = (Vec::new(), 0);
    for w in writers {
        let (c, o) = w.await.unwrap();
        counted.extend(c);
        other += o;
    }
    let primary = s.primary().expect("an agreed primary");
    assert_eq!(primary, new, "no second failover");
    let store = Plant::open(connect(&s, &prefix).await).store::<JobResponse>();
    let lost: Vec<&String> = counted
        .iter()
        .filter(|id| {
            let key = store.key(id).unwrap();
            command(&s.data_nodes()[primary], &["EXISTS", &key]).unwrap_or_else(|e| panic!("{e}")) != "1"
        })
        .collect();
    println!(
        "split brain: {} writes acknowledged after the switch ({other} before), {} lost; the old primary turned \
         replica {} ms after it was continued",
        counted.len(),
        lost.len(),
        demoted.as_millis()
    );
    assert!(!counted.is_empty(), "writes went on after the switch");
    assert!(
        lost.is_empty(),
        "{} writes went to the deposed primary, the first: {:?}",
        lost.len(),
        &lost[..lost.len().min(10)]
    );
}

/// Writes started right after a `SIGKILL` of the primary: each either
/// succeeds on the promoted replica or has spent its whole bound first,
/// `WriteAttempts x (ResponseTimeout + WriteRetryDelay)`; quick refusals of
/// the dead node prove the script never ran and use none of it, and the
/// switch to the new primary is a reason to send again at once. A third
/// of the writers create new documents (the script alone), a third
/// overwrite their own (`put(Expect::Any)`: a read of the stored index
/// fields, then the script), a third delete their own (`delete_id`: the
/// same read first); a read getting no answer must not end the write
/// either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_through_a_killed_primary_spend_their_whole_bound() {
    let mut s = two_replicas();
    let prefix = unique_prefix("kill-bound");
    let (attempts, response, delay) = (4u32, Duration::from_secs(1), Duration::from_millis(100));
    let settings =
        [("Valkey:ResponseTimeout", "1s"), ("Valkey:WriteAttempts", "4"), ("Valkey:WriteRetryDelay", "100ms")];
    let mut handles = Vec::new();
    for _ in 0..6 {
        let valkey =
            Valkey::connect(&config_with(&s, &prefix, &settings)).await.unwrap_or_else(|e| panic!("connect: {e}"));
        let store = Plant::open(valkey).store::<JobResponse>();
        // Warm: the connections exist before the kill.
        let _ = store.get("none").await.unwrap();
        let w = handles.len();
        let own = JobResponse::new(&format!("p{w}"), "s1", &format!("o-p{w}"), &["A"]);
        let before = store.put(&own, Expect::Any).await;
        assert!(matches!(before, Ok(PutOutcome::Written { .. })), "before the kill: {before:?}");
        handles.push(store);
    }
    s.data_node_mut(0).kill();
    let killed = Instant::now();
    let mut writers = Vec::new();
    for (w, store) in handles.into_iter().enumerate() {
        writers.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            // One write after another until one succeeds on the new primary.
            for n in 0.. {
                let id = format!("w{w}-{n}");
                let started = Instant::now();
                let r = match w % 3 {
                    0 => store.create(&JobResponse::new(&id, "s1", &format!("o-{id}"), &["A"])).await.map(|_| ()),
                    1 => {
                        let own = JobResponse::new(&format!("p{w}"), "s1", &format!("o-{id}"), &["B"]);
                        store.put(&own, Expect::Any).await.map(|_| ())
                    }
                    _ => store.delete_id(&format!("p{w}"), DeleteExpect::Any).await.map(|_| ()),
                };
                let ok = r.is_ok();
                outcomes.push((started.elapsed(), r.map_err(|e| format!("{e:?}"))));
                if ok {
                    break;
                }
            }
            outcomes
        }));
    }
    let spent = (response + delay) * (attempts - 1);
    let mut failed = Vec::new();
    for w in writers {
        for (took, outcome) in w.await.unwrap() {
            if let Err(e) = &outcome
                && took < spent
            {
                failed.push(format!("after {} ms: {e}", took.as_millis()));
            }
        }
    }
    println!(
        "writes resumed {} ms after the kill; {} failed before spending {} ms",
        killed.elapsed().as_millis(),
        failed.len(),
        spent.as_millis()
    );
    assert!(failed.is_empty(), "calls failed before their bound:\n{}", failed.join("\n"));
}

/// A replica added after the handle started: the Sentinels find it, and
/// `every_replica()` waits for it too (the handle asks every Sentinel
/// again every few seconds). Found by stopping the new replica: a write
/// that waits for every replica is then refused as unconfirmed, where it
/// would have been confirmed by the first replica alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_waits_for_a_replica_added_later() {
    let s = Sentinel::start_with_replicas(1).unwrap_or_else(|e| panic!("{e}"));
    let prefix = unique_prefix("dur-added");
    let valkey = connect(&s, &prefix).await;
    let store = Plant::open(valkey).store::<JobResponse>();
    let every = Durability::every_replica().with_timeout(Duration::from_millis(300));
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    assert_eq!(store.create(&doc).durability(every).await.unwrap(), PutOutcome::Written { version: 1 });

    let primary = &s.data_nodes()[s.primary().expect("a primary")];
    let added = microdcs_valkey::testing::ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
    command(&added, &["REPLICAOF", "127.0.0.1", &primary.port().to_string()]).unwrap();
    for _ in 0..300 {
        let info = command(&added, &["INFO", "replication"]).unwrap();
        if info.contains("master_link_status:up") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Stopped, it still counts as a replica of the primary (and for the
    // Sentinels) until the replication timeout, far longer than this test.
    let stopped = Stopped(added.pid().expect("local"));
    signal("-STOP", stopped.0);
    let mut version = 1;
    let mut refused = None;
    // Bounded far beyond the Sentinels' discovery (their look at the
    // primary every 10 s) and the handle's next check; a handle that never
    // learns the new replica reaches the bound.
    for _ in 0..120 {
        let read = store.get("r-1").await.unwrap().unwrap();
        match store.update(&read, &doc).durability(every).await {
            Ok(PutOutcome::Written { version: v }) => version = v,
            Err(Error::NotReplicated { acked, wanted, .. }) => {
                refused = Some((acked, wanted));
                break;
            }
            other => panic!("an update: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(refused, Some((1, 2)), "every replica includes the one added later (last confirmed: version {version})");
    drop(stopped);
}
