//! A hung cluster primary costs its promotion, not its whole stop.
//!
//! A primary stopped with `SIGSTOP` still completes TCP handshakes (the
//! kernel does that for a stopped process) and its connections stay open,
//! so the cluster client never drops it and learns of the replica promoted
//! in its place only from a `MOVED` the stopped node sends once it runs
//! again. Here writers keep putting documents on the island's shard while
//! its primary is stopped; after the replica has been promoted, with the
//! old primary still stopped, a write must succeed within one call's bound.
//! Then, as for every fault: no acknowledged write is lost (nothing died:
//! the writers start after the stop, once the writes before it reached the
//! replica) and none applied twice, read back from the servers.
//!
//! A `kill -9` of the same shard's primary runs after it as the baseline;
//! both print what this machine measured (promotion, the longest time
//! without an acknowledged write, failed calls by type).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use microdcs_tests::fixtures::{JobResponse, Plant};
use microdcs_valkey::config::Secret;
use microdcs_valkey::testing::{ValkeyCluster, unique_island};
use microdcs_valkey::{Error, Expect, MicroDcsConfig, PutOutcome, Valkey, config::ValkeyConfig};
use tokio::sync::Mutex;

const WRITERS: usize = 3;
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);
const ATTEMPTS: u32 = 8;
const RETRY_DELAY: Duration = Duration::from_millis(100);

/// The longest one write may take: every attempt its response timeout and
/// retry delay. Larger than a promotion (about 2 s at the harness's 1 s
/// node timeout) plus a response timeout, so a write started while the
/// primary hangs can still succeed on the promoted replica.
fn call_bound() -> Duration {
    (RESPONSE_TIMEOUT + RETRY_DELAY) * ATTEMPTS
}

/// How long the test waits for one step (a promotion, a write after it):
/// generous, since a loaded machine is slow; it bounds the wait, it is not
/// the measurement.
fn step_bound() -> Duration {
    call_bound() * 2 + Duration::from_secs(10)
}

/// A process stopped with `SIGSTOP` until dropped (`SIGCONT`), also when
/// the test fails.
struct Stopped(u32);

impl Stopped {
    fn new(pid: u32) -> Self {
        signal("-STOP", pid);
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal("-CONT", self.0);
    }
}

fn signal(which: &str, pid: u32) {
    let status = std::process::Command::new("kill").args([which, &pid.to_string()]).status().expect("kill");
    assert!(status.success(), "kill {which} {pid}");
}

/// Whether process `pid` is stopped (state `T` in `/proc/<pid>/stat`).
fn is_stopped(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name, which is in parentheses.
    stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()) == Some("T")
}

/// One call's record.
#[derive(Debug, Clone)]
struct Call {
    /// The document a create made (`Expect::Create`: straight to the
    /// script, no read first); `None` for a put of the writer's document
    /// (`Expect::Any`: a read of its index fields, then the script).
    created: Option<String>,
    started: Instant,
    ended: Instant,
    outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Acked(u64),
    /// `UnknownOutcome`: every attempt of the write got no answer.
    Unknown,
    /// Another connection error (a time-out of the read a put makes first):
    /// nothing was written.
    Connection,
    Other(String),
}

/// Writer `w` puts its document with fresh op ids until `stop`.
async fn writer(valkey: Valkey, w: usize, stop: Arc<AtomicBool>, log: Arc<Mutex<Vec<Call>>>) {
    let store = Plant::open(valkey).store::<JobResponse>();
    // Op ids unique across the faults of the run.
    static RUN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run = RUN.fetch_add(1, Ordering::Relaxed);
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let doc = JobResponse::new(&format!("r-{w}"), "s1", &format!("o-{w}"), &[&format!("Step{n}")]);
        let started = Instant::now();
        let out = store.put(&doc, Expect::Any).op(format!("w{w}-{run}-{n}")).await;
        log.lock().await.push(Call { created: None, started, ended: Instant::now(), outcome: outcome(out) });
        let id = format!("c-{w}-{run}-{n}");
        let doc = JobResponse::new(&id, "s1", &format!("oc-{w}-{run}-{n}"), &["Queued"]);
        let started = Instant::now();
        let out = store.put(&doc, Expect::Create).op(format!("c{w}-{run}-{n}")).await;
        log.lock().await.push(Call { created: Some(id), started, ended: Instant::now(), outcome: outcome(out) });
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn outcome(out: microdcs_valkey::Result<PutOutcome>) -> Outcome {
    match out {
        Ok(PutOutcome::Written { version }) => Outcome::Acked(version),
        Ok(other) => Outcome::Other(format!("{other:?}")),
        Err(Error::UnknownOutcome { .. }) => Outcome::Unknown,
        Err(e) if e.is_connection() => Outcome::Connection,
        Err(e) => Outcome::Other(e.to_string()),
    }
}

/// Waits (bounded) until `ok`.
async fn until(what: &str, bound: Duration, mut ok: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !ok() {
        assert!(started.elapsed() < bound, "waited {bound:?} in vain for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    started.elapsed()
}

/// What the writers saw around a fault at `fault`.
fn report(name: &str, fault: Instant, calls: &[Call]) -> String {
    let mut acks: Vec<Instant> =
        calls.iter().filter(|c| matches!(c.outcome, Outcome::Acked(_))).map(|c| c.ended).collect();
    acks.sort();
    // The longest time without an acknowledged write, from the fault on.
    let mut gap = Duration::ZERO;
    let mut last = fault;
    for &a in acks.iter().filter(|&&a| a >= fault) {
        gap = gap.max(a - last);
        last = a;
    }
    let first_ok = acks.iter().find(|&&a| a >= fault).map(|&a| a - fault);
    let first_failed = calls.iter().filter(|c| !matches!(c.outcome, Outcome::Acked(_))).map(|c| c.ended).min();
    let failed_to_ok = first_failed
        .and_then(|f| acks.iter().find(|&&a| a > f).map(|&a| a - f))
        .map_or("-".to_owned(), |d| format!("{d:?}"));
    // Puts (`Expect::Any`) / creates.
    let count = |o: Outcome| {
        let n = |creates: bool| calls.iter().filter(|c| c.created.is_some() == creates && c.outcome == o).count();
        format!("{}/{}", n(false), n(true))
    };
    let (unknown, connection) = (count(Outcome::Unknown), count(Outcome::Connection));
    let other = calls.iter().filter(|c| matches!(c.outcome, Outcome::Other(_))).count();
    let longest = calls.iter().map(|c| c.ended - c.started).max().unwrap_or_default();
    format!(
        "{name}: {} calls, {} acknowledged, failed (puts/creates): {unknown} UnknownOutcome, {connection} time-out of the read before the write, {other} other; first acknowledged \
         write {first_ok:?} after the fault; longest time without one {gap:?}; first failed call to the next \
         acknowledged one {failed_to_ok}; longest call {longest:?}",
        calls.len(),
        acks.len(),
    )
}

/// Reads back every writer's document: no acknowledged write lost, none
/// applied twice. `before` is each document's version when the writers
/// started.
async fn check_writes(valkey: &Valkey, name: &str, logs: &[Arc<Mutex<Vec<Call>>>], before: &[u64]) {
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    for (w, log) in logs.iter().enumerate() {
        let calls = log.lock().await;
        let others: Vec<_> = calls.iter().filter(|c| matches!(c.outcome, Outcome::Other(_))).collect();
        assert!(others.is_empty(), "{name}: writer {w} got errors other than an unknown outcome: {others:?}");
        for c in calls.iter() {
            if let (Some(id), Outcome::Acked(_)) = (&c.created, &c.outcome) {
                assert!(
                    store.get(id).await.unwrap().is_some(),
                    "{name}: writer {w}'s acknowledged create {id} is lost"
                );
            }
        }
        let puts: Vec<_> = calls.iter().filter(|c| c.created.is_none()).collect();
        let acked = puts.iter().filter(|c| matches!(c.outcome, Outcome::Acked(_))).count() as u64;
        let unknown = puts.iter().filter(|c| c.outcome == Outcome::Unknown).count() as u64;
        let last_acked =
            puts.iter().filter_map(|c| if let Outcome::Acked(v) = c.outcome { Some(v) } else { None }).max();
        let version = store.get(&format!("r-{w}")).await.unwrap().expect("written before the fault").version;
        assert!(
            version <= before[w] + acked + unknown,
            "{name}: writer {w} applied a write twice: v{version}, {acked} acknowledged, {unknown} unknown since v{}",
            before[w]
        );
        if let Some(last) = last_acked {
            assert!(version >= last, "{name}: writer {w} lost acknowledged writes: v{version} < v{last}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_cluster_primary_costs_its_promotion_not_its_stop() {
    let mut cluster = ValkeyCluster::start_local(3, 1).unwrap_or_else(|e| panic!("{e}"));
    println!("cluster of 6 nodes formed in {:?}", cluster.formed_in());
    let config = ValkeyConfig {
        connection_string: Secret::new(cluster.connection_string()),
        key_prefix: unique_island("hung-primary").as_str().to_owned(),
        response_timeout: RESPONSE_TIMEOUT,
        write_attempts: ATTEMPTS,
        write_retry_delay: RETRY_DELAY,
        ..MicroDcsConfig::default().valkey
    };
    let valkey = Valkey::connect(&config).await.unwrap_or_else(|e| panic!("connect: {e}"));
    let slot = valkey.prefix().slot().expect("a tagged prefix");
    let store = Plant::open(valkey.clone()).store::<JobResponse>();

    for fault in ["SIGSTOP", "SIGKILL"] {
        // Each writer's document exists, and its replica has it, before the
        // fault: writes from before the fault cannot be lost with it.
        let mut before = Vec::new();
        for w in 0..WRITERS {
            let doc = JobResponse::new(&format!("r-{w}"), "s1", &format!("o-{w}"), &["Queued"]);
            match store.put(&doc, Expect::Any).op(format!("{fault}-seed-{w}")).await.unwrap() {
                PutOutcome::Written { version } => before.push(version),
                other => panic!("seed write: {other:?}"),
            }
        }
        cluster.wait_healthy(Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));
        let (primary, replica) = tokio::task::block_in_place(|| {
            let primary = cluster.primary_of(slot).expect("the slot has a primary");
            (primary, cluster.replica_of(primary).expect("and a replica"))
        });
        tokio::time::sleep(Duration::from_millis(200)).await;

        let pid = cluster.nodes()[primary].pid().expect("a local node");
        let fault_at = Instant::now();
        let stopped = if fault == "SIGSTOP" {
            Some(Stopped::new(pid))
        } else {
            cluster.node_mut(primary).kill();
            None
        };
        let stop = Arc::new(AtomicBool::new(false));
        let logs: Vec<_> = (0..WRITERS).map(|_| Arc::new(Mutex::new(Vec::new()))).collect();
        let tasks: Vec<_> =
            (0..WRITERS).map(|w| tokio::spawn(writer(valkey.clone(), w, stop.clone(), logs[w].clone()))).collect();

        // The replica takes over; only it is asked (the stopped node would
        // not answer).
        let c = &cluster;
        let promoted =
            until("the replica's promotion", step_bound(), || tokio::task::block_in_place(|| c.is_primary(replica)))
                .await;
        let promoted_at = Instant::now();
        // Then, the old primary still stopped, a write succeeds on the new one.
        let mut acked_after = None;
        let waited = Instant::now();
        while acked_after.is_none() {
            for log in &logs {
                if let Some(c) =
                    log.lock().await.iter().find(|c| c.started >= promoted_at && matches!(c.outcome, Outcome::Acked(_)))
                {
                    acked_after = Some(c.ended - fault_at);
                }
            }
            if waited.elapsed() >= step_bound() {
                let mut all = Vec::new();
                for log in &logs {
                    all.extend(log.lock().await.iter().cloned());
                }
                panic!(
                    "{fault}: no write started after the promotion ({promoted:?} after the fault) succeeded within \
                     {:?} while the old primary was still stopped; {}",
                    step_bound(),
                    report(fault, fault_at, &all)
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if stopped.is_some() {
            assert!(is_stopped(pid), "{fault}: the old primary was continued before the write succeeded");
        }
        println!(
            "{fault}: replica promoted {promoted:?} after the fault; a write started after it acknowledged {:?} \
             after the fault",
            acked_after.unwrap()
        );
        // The old primary wakes (or restarts) and rejoins as a replica;
        // the writers go on for a while.
        drop(stopped);
        if fault == "SIGKILL" {
            tokio::task::block_in_place(|| cluster.node_mut(primary).restart()).unwrap_or_else(|e| panic!("{e}"));
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await.unwrap();
        }
        let mut all = Vec::new();
        for log in &logs {
            all.extend(log.lock().await.iter().cloned());
        }
        check_writes(&valkey, fault, &logs, &before).await;
        println!("{}", report(fault, fault_at, &all));
        tokio::task::block_in_place(|| cluster.wait_healthy(Duration::from_secs(30))).unwrap_or_else(|e| panic!("{e}"));
    }
}
