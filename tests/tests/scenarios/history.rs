//! Seeded fault histories, through Sentinel and on a cluster: several
//! clients run random
//! creates, compare-and-set updates, unconditional puts, deletes and reads
//! on a few documents while a nemesis kills, stops and fails over the
//! primary and cuts every client connection. Every call is recorded with its outcome; afterwards a small
//! checker proves the consistency model the guide states (chapter 5):
//!
//! - every write acknowledged as replicated is present or superseded: no
//!   later history shows another write at its version;
//! - no write is applied twice (no op id twice in a document's history);
//! - no two different documents were observed with the same (id, version,
//!   op id), and a document's content is the write its op id names;
//! - a compare-and-set write applied only on top of the document it read;
//! - every error is typed (a connection error, an unknown outcome, a
//!   replication shortfall), every call ended within its bound.
//!
//! Depth: `HISTORY_OPS` operations (default 240), seed `HISTORY_SEED`
//! (default: from the clock, printed).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use microdcs_schema::lua::{OP_ID_LEN, stored_op_id};
use microdcs_tests::fixtures::{JobResponse, Plant};
use microdcs_tests::unique_prefix;
use microdcs_valkey::testing::{Sentinel, ValkeyCluster, ValkeyServer, command, unique_island};
use microdcs_valkey::{
    Error, Expect, KeyPrefix, MicroDcsConfig, PutOutcome, Valkey, config::Durability, store::DeleteOutcome,
};

const IDS: [&str; 3] = ["d-0", "d-1", "d-2"];
const CLIENTS: u64 = 4;
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
const RETRY_DELAY: Duration = Duration::from_millis(50);
const ATTEMPTS: u32 = 4;
const REPLICA_WAIT: Duration = Duration::from_millis(500);

/// splitmix64: small, seeded, good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What one call was and how it ended.
#[derive(Debug)]
struct Call {
    op: String,
    id: &'static str,
    kind: &'static str,
    durable: bool,
    /// The write's expected version (a compare-and-set: the read's + 1).
    expected: Option<u64>,
    /// The op that produced the document a compare-and-set read.
    prev: Option<String>,
    outcome: Result<Option<u64>, String>,
    /// The version the write made: acknowledged, or applied but not
    /// replicated in time (`NotReplicated`).
    applied: Option<u64>,
    typed: bool,
    started: Instant,
    took: Duration,
}

/// A read: the version, the op the store names for it, the op the
/// content says wrote it, and the raw history read right after.
#[derive(Debug)]
struct Seen {
    id: &'static str,
    /// When the read started.
    started: Instant,
    version: u64,
    digest: Option<String>,
    content_op: String,
    /// `(version, digest)` of each entry of the stored history.
    history: Vec<(u64, String)>,
}

fn doc(id: &str, op: &str, expected: Option<u64>, prev: Option<&str>) -> JobResponse {
    let mut d = JobResponse::new(id, "s1", op, &[prev.unwrap_or("-")]);
    d.start_time = expected.map_or(0, |e| e as i64);
    d
}

/// Whether an error is one the model allows during faults.
fn typed(e: &Error) -> bool {
    match e {
        Error::Redis(r) => r.is_io_error() || r.is_timeout() || r.is_connection_dropped(),
        Error::UnknownOutcome { .. } | Error::NotReplicated { .. } | Error::NoReplicas { .. } => true,
        _ => false,
    }
}

fn history_of(raw: &str, version: u64) -> Vec<(u64, String)> {
    let n = raw.len() / OP_ID_LEN;
    (0..n)
        .filter_map(|i| {
            let v = version.checked_sub((n - 1 - i) as u64)?;
            Some((v, raw.get(i * OP_ID_LEN..(i + 1) * OP_ID_LEN)?.to_owned()))
        })
        .collect()
}

async fn read(valkey: &Valkey, id: &'static str) -> Result<Option<Seen>, Error> {
    let started = Instant::now();
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    let Some(got) = store.get(id).await? else { return Ok(None) };
    let key = store.key(id)?;
    let raw: (Option<u64>, Option<String>) = microdcs_valkey::redis::cmd("HMGET")
        .arg(&key)
        .arg("v")
        .arg("ops")
        .query_async(&mut valkey.connection())
        .await?;
    // The raw history counts only when nothing was written in between.
    let history = match raw {
        (Some(v), Some(ops)) if v == got.version => history_of(&ops, v),
        _ => Vec::new(),
    };
    Ok(Some(Seen {
        id,
        started,
        version: got.version,
        digest: got.revision().op().map(str::to_owned),
        content_op: got.doc.job_order_id.clone(),
        history,
    }))
}

async fn client(
    valkey: Valkey,
    seed: u64,
    level: Durability,
    budget: Arc<AtomicU64>,
    covered: Arc<AtomicBool>,
    calls: &mut Vec<Call>,
    seen: &mut Vec<Seen>,
) {
    let mut rng = Rng(seed);
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    let mut n = 0;
    // The budget, and on until every kind of fault has struck once.
    while budget.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |b| b.checked_sub(1)).is_ok()
        || !covered.load(Ordering::SeqCst)
    {
        n += 1;
        let id = IDS[rng.below(IDS.len() as u64) as usize];
        let op = format!("c{seed}-{n}");
        let durable = rng.below(2) == 0;
        let durability = if durable { level.with_timeout(REPLICA_WAIT) } else { Durability::NONE };
        let started = Instant::now();
        let pick = rng.below(10);
        let (kind, expected, prev, outcome) = match pick {
            0..=2 => match read(&valkey, id).await {
                Ok(s) => {
                    seen.extend(s);
                    ("read", None, None, Ok(None))
                }
                Err(e) => ("read", None, None, Err(e)),
            },
            3 => {
                let r = store.create(&doc(id, &op, None, None)).op(&op).durability(durability).await;
                ("create", None, None, r.map(written))
            }
            4..=6 => {
                // A compare-and-set on a fresh read.
                match store.get(id).await {
                    Ok(Some(read)) => {
                        let expected = read.version + 1;
                        let prev = read.doc.job_order_id.clone();
                        let next = doc(id, &op, Some(expected), Some(&prev));
                        let r = store.update(&read, &next).op(&op).durability(durability).await;
                        ("update", Some(expected), Some(prev), r.map(written))
                    }
                    Ok(None) => ("update", None, None, Ok(None)),
                    Err(e) => ("update", None, None, Err(e)),
                }
            }
            7..=8 => {
                let r = store.put(&doc(id, &op, None, None), Expect::Any).op(&op).durability(durability).await;
                ("put", None, None, r.map(written))
            }
            _ => match store.get(id).await {
                Ok(Some(read)) => {
                    let r = store.delete(&read).op(&op).durability(durability).await;
                    ("delete", None, None, r.map(|o| matches!(o, DeleteOutcome::Deleted { .. }).then_some(0)))
                }
                Ok(None) => ("delete", None, None, Ok(None)),
                Err(e) => ("delete", None, None, Err(e)),
            },
        };
        let is_typed = outcome.as_ref().err().is_none_or(typed);
        let applied = match &outcome {
            Ok(v) if kind != "delete" && kind != "read" => *v,
            Err(Error::NotReplicated { version, .. }) if kind != "delete" => Some(*version),
            _ => None,
        };
        calls.push(Call {
            applied,
            op,
            id,
            kind,
            durable,
            expected,
            prev,
            outcome: outcome.map_err(|e| format!("{e:?}")),
            typed: is_typed,
            started,
            took: started.elapsed(),
        });
        tokio::time::sleep(Duration::from_millis(rng.below(400))).await;
    }
}

/// The version a write made, if it made one.
fn written(o: PutOutcome) -> Option<u64> {
    match o {
        PutOutcome::Written { version } => Some(version),
        _ => None,
    }
}

/// Where the history runs: the Sentinel deployment, or a cluster and the
/// slot of the island's keys.
enum Deployment {
    Sentinel(Sentinel),
    Cluster(ValkeyCluster, u16),
}

impl Deployment {
    fn primary(&self) -> Option<usize> {
        match self {
            Deployment::Sentinel(s) => s.primary(),
            Deployment::Cluster(c, slot) => c.primary_of(*slot),
        }
    }

    fn node(&self, i: usize) -> &ValkeyServer {
        match self {
            Deployment::Sentinel(s) => &s.data_nodes()[i],
            Deployment::Cluster(c, _) => &c.nodes()[i],
        }
    }

    fn node_mut(&mut self, i: usize) -> &mut ValkeyServer {
        match self {
            Deployment::Sentinel(s) => s.data_node_mut(i),
            Deployment::Cluster(c, _) => c.node_mut(i),
        }
    }

    /// A failover on request.
    fn failover(&self) -> bool {
        match self {
            Deployment::Sentinel(s) => s.failover().is_ok(),
            Deployment::Cluster(c, slot) => {
                c.primary_of(*slot).and_then(|p| c.replica_of(p)).is_some_and(|r| c.failover(r).is_ok())
            }
        }
    }

    fn moved_from(&self, old: usize) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if self.primary().is_some_and(|p| p != old) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// A running replica of primary `p`.
    fn replica_of(&self, p: usize) -> Option<usize> {
        match self {
            Deployment::Sentinel(s) => (0..s.data_nodes().len()).find(|&i| i != p && s.data_nodes()[i].is_running()),
            Deployment::Cluster(c, _) => c.replica_of(p),
        }
    }

    /// The island's slot moved to another primary (a cluster only):
    /// atomically (`CLUSTER MIGRATESLOTS`) or the legacy way, a few keys
    /// at a time while clients get `ASK` and `TRYAGAIN`.
    fn migrate(&self, atomic: bool) {
        let Deployment::Cluster(c, slot) = self else { return };
        let Some(from) = c.primary_of(*slot) else { return };
        let Some(to) = (0..c.nodes().len()).find(|&i| i != from && c.is_primary(i)) else { return };
        let moved = if atomic {
            c.migrate_slot(*slot, to)
        } else {
            c.migrate_slot_legacy(*slot, to, 3, Duration::from_millis(100))
        };
        moved.unwrap_or_else(|e| panic!("migrate: {e}"));
    }

    /// A node restarted without its data comes back as a replica of the
    /// current primary, as a supervisor must bring it back: as a primary
    /// it would hold no data (or an old copy) until the Sentinels turn it
    /// (some seconds later), and a failover in that window would promote
    /// it over the only node holding the writes, the double fault no
    /// single replica covers. A cluster node learns its new role from the
    /// cluster itself.
    fn rejoin(&self, node: usize) {
        if let (Deployment::Sentinel(s), Some(p)) = (self, self.primary())
            && p != node
        {
            let port = s.data_nodes()[p].port().to_string();
            command(self.node(node), &["REPLICAOF", "127.0.0.1", &port]).unwrap_or_else(|e| panic!("rejoin: {e}"));
        }
    }

    /// Until a replica is in sync again, so the next fault can promote it.
    fn wait_ready(&self) {
        let ready = match self {
            Deployment::Sentinel(s) => s.wait_replicated(Duration::from_secs(30)),
            Deployment::Cluster(c, _) => c.wait_healthy(Duration::from_secs(30)),
        };
        ready.unwrap_or_else(|e| panic!("{e}"));
    }
}

/// One fault the nemesis made: its kind and when it began.
struct Fault {
    kind: &'static str,
    at: Instant,
}

/// Faults until told to stop: a failover on request, the primary stopped
/// (`SIGSTOP`) past the failure detection, the primary killed and
/// restarted empty (as a replica: [`Deployment::rejoin`]), every client
/// connection of the primary cut (`CLIENT KILL`), a replica killed for one
/// to two seconds and restarted empty, and on a cluster the island's slot
/// moved to another primary (atomic or legacy migration). The kinds come
/// in a seeded random order, each once per round, and `covered` is set
/// when each has struck. The faults made, how many moved the primary, and
/// the number of kinds.
fn nemesis(d: &mut Deployment, seed: u64, stop: &AtomicBool, covered: &AtomicBool) -> (Vec<Fault>, u32, usize) {
    let mut rng = Rng(seed ^ 0xfeed);
    let mut faults = Vec::new();
    let mut failovers = 0;
    let kinds: &[&'static str] = match d {
        Deployment::Sentinel(_) => &["failover", "sigstop", "sigkill", "client-kill", "replica-down"],
        Deployment::Cluster(..) => &["failover", "sigstop", "sigkill", "client-kill", "replica-down", "migrate"],
    };
    let mut round: Vec<&'static str> = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(600 + rng.below(900)));
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let Some(old) = d.primary() else { continue };
        if round.is_empty() {
            round = kinds.to_vec();
            for i in (1..round.len()).rev() {
                round.swap(i, rng.below(i as u64 + 1) as usize);
            }
        }
        let kind = round.pop().expect("refilled");
        faults.push(Fault { kind, at: Instant::now() });
        let moved = match kind {
            "failover" => d.failover(),
            "sigstop" => {
                let pid = d.node(old).pid().expect("local");
                signal("-STOP", pid);
                let moved = d.moved_from(old);
                signal("-CONT", pid);
                moved
            }
            "sigkill" => {
                d.node_mut(old).kill();
                let moved = d.moved_from(old);
                d.node_mut(old).restart().unwrap_or_else(|e| panic!("restart: {e}"));
                d.rejoin(old);
                moved
            }
            "replica-down" => {
                if let Some(r) = d.replica_of(old) {
                    d.node_mut(r).kill();
                    std::thread::sleep(Duration::from_millis(1000 + rng.below(1000)));
                    d.node_mut(r).restart().unwrap_or_else(|e| panic!("restart: {e}"));
                    d.rejoin(r);
                }
                false
            }
            "migrate" => {
                d.migrate(rng.below(2) == 0);
                true
            }
            _ => {
                let _ = command(d.node(old), &["CLIENT", "KILL", "TYPE", "normal"]);
                false
            }
        };
        failovers += u32::from(moved);
        d.wait_ready();
        if faults.len() >= kinds.len() {
            covered.store(true, Ordering::SeqCst);
        }
    }
    (faults, failovers, kinds.len())
}

fn signal(which: &str, pid: u32) {
    let status = std::process::Command::new("kill").args([which, &pid.to_string()]).status().expect("kill");
    assert!(status.success(), "kill {which} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_history_through_sentinel_keeps_the_consistency_model() {
    // Two replicas: with one, the old primary has none left after a
    // promotion, and a wait for fewer than every replica could not fall
    // short where it should (see `Durability::every_replica`).
    let s = Sentinel::start_with_replicas(2).unwrap_or_else(|e| panic!("{e}"));
    let cs = s.connection_string();
    let prefix = unique_prefix("history");
    run_history("sentinel", Deployment::Sentinel(s), &cs, prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_history_on_a_cluster_keeps_the_consistency_model() {
    // Two replicas per primary, as through Sentinel.
    let c = ValkeyCluster::start_local(3, 2).unwrap_or_else(|e| panic!("{e}"));
    let cs = c.connection_string();
    let prefix = unique_island("history");
    let slot = prefix.slot().expect("an island has a slot");
    run_history("cluster", Deployment::Cluster(c, slot), &cs, prefix).await;
}

/// What durable writes wait for: `Durability::every_replica()`, or with
/// `HISTORY_REPLICAS=n` a wait for `n` replicas (to measure what a level
/// below every replica loses; a lost write then fails the run).
fn level() -> Durability {
    match std::env::var("HISTORY_REPLICAS").ok().and_then(|v| v.parse().ok()) {
        Some(n) => Durability::replicas(n),
        None => Durability::every_replica(),
    }
}

/// Runs the history.
async fn run_history(name: &str, mut deployment: Deployment, connection_string: &str, prefix: KeyPrefix) {
    let level = level();
    let ops: u64 = std::env::var("HISTORY_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(240);
    let seed: u64 = std::env::var("HISTORY_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!(
        "{name} history seed {seed} (HISTORY_SEED={seed} repeats the choices), {ops} operations, durable writes \
         wait for {}",
        if level.every_replica { "every replica".to_owned() } else { format!("{} replicas", level.replicas) }
    );
    let mut config = MicroDcsConfig::default();
    config.set("Valkey:ConnectionString", connection_string).unwrap();
    config.set("Valkey:KeyPrefix", prefix.as_str()).unwrap();
    config.set("Valkey:ResponseTimeout", "2s").unwrap();
    config.set("Valkey:WriteRetryDelay", "50ms").unwrap();
    config.set("Valkey:WriteAttempts", &ATTEMPTS.to_string()).unwrap();
    let config = config.valkey;

    let budget = Arc::new(AtomicU64::new(ops));
    let stop = Arc::new(AtomicBool::new(false));
    let covered = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for c in 0..CLIENTS {
        let valkey = Valkey::connect(&config).await.unwrap_or_else(|e| panic!("connect: {e}"));
        let (budget, covered) = (budget.clone(), covered.clone());
        clients.push(tokio::spawn(async move {
            let (mut calls, mut seen) = (Vec::new(), Vec::new());
            client(valkey, seed.wrapping_add(c), level, budget, covered, &mut calls, &mut seen).await;
            (calls, seen)
        }));
    }
    let (nemesis_stop, nemesis_covered) = (stop.clone(), covered.clone());
    let faulting = std::thread::spawn(move || {
        let n = nemesis(&mut deployment, seed, &nemesis_stop, &nemesis_covered);
        (deployment, n)
    });
    let (mut calls, mut seen) = (Vec::new(), Vec::new());
    for c in clients {
        let (a, b) = c.await.unwrap();
        calls.extend(a);
        seen.extend(b);
    }
    // The nemesis ends with the operations (after the fault it is in).
    stop.store(true, Ordering::SeqCst);
    let (deployment, (faults, failovers, every_kind)) = faulting.join().unwrap();
    deployment.wait_ready();
    // The final state, read after the faults through a new handle.
    let last = Valkey::connect(&config).await.unwrap_or_else(|e| panic!("connect after: {e}"));
    for id in IDS {
        let got = read(&last, id).await.unwrap_or_else(|e| panic!("final read of {id}: {e}"));
        seen.extend(got);
    }
    let report = check(&calls, &seen);
    let (per_fault, per_kind) = unavailability(&calls, &faults, Instant::now());
    for line in per_fault.iter().chain(&per_kind) {
        println!("{name} {line}");
    }
    let mut fault_kinds: BTreeMap<&str, u32> = BTreeMap::new();
    for f in &faults {
        *fault_kinds.entry(f.kind).or_default() += 1;
    }
    let faults = faults.len();
    let acked = calls.iter().filter(|c| c.kind != "read" && matches!(c.outcome, Ok(Some(_)))).count();
    let acked_durable =
        calls.iter().filter(|c| c.durable && c.kind != "read" && matches!(c.outcome, Ok(Some(_)))).count();
    let errors = calls.iter().filter(|c| c.outcome.is_err()).count();
    let longest = calls.iter().map(|c| c.took).max().unwrap_or_default();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for c in &calls {
        if let Err(e) = &c.outcome {
            let kind = e.split([' ', '(', '{']).next().unwrap_or_default();
            *kinds.entry(format!("{} {kind}", c.kind)).or_default() += 1;
        }
    }
    println!(
        "{name} history: seed {seed}, {} operations, {faults} faults {fault_kinds:?}, {failovers} failovers, {acked} acknowledged \
         writes ({acked_durable} replicated), {errors} typed errors {kinds:?}, {} lost-unreplicated; lost durable \
         {}, regressions {}, doubled {}, {} violations in all; longest call {} ms",
        calls.len(),
        report.lost_unreplicated,
        report.lost_durable,
        report.regressions,
        report.doubled,
        report.violations.len(),
        longest.as_millis()
    );
    assert_eq!(fault_kinds.len(), every_kind, "every kind of fault struck: {fault_kinds:?}");
    assert!(report.violations.is_empty(), "seed {seed}: violations:\n{}", report.violations.join("\n"));
}

/// Per fault, and per kind of fault: the time from the first call that
/// failed (ended with an error other than `NotReplicated`, which is a
/// write applied) to the first call that succeeded after it, both by when
/// they ended; the calls that failed by error type (`NotReplicated`
/// included); the longest call. A fault's window runs from its start to
/// the next fault's (or the end), and holds the calls that ended in it.
fn unavailability(calls: &[Call], faults: &[Fault], end: Instant) -> (Vec<String>, Vec<String>) {
    let mut per_fault = Vec::new();
    // Per kind: faults, the longest gap, the gaps summed, failed calls by type, longest call.
    type Sums = (u32, Duration, Duration, BTreeMap<String, u32>, Duration);
    let mut per_kind: BTreeMap<&str, Sums> = BTreeMap::new();
    for (i, f) in faults.iter().enumerate() {
        let until = faults.get(i + 1).map_or(end, |n| n.at);
        let ended = |c: &Call| c.started + c.took;
        let window: Vec<&Call> = calls.iter().filter(|c| ended(c) >= f.at && ended(c) < until).collect();
        let failed_at = window
            .iter()
            .filter(|c| c.outcome.as_ref().is_err_and(|e| !e.starts_with("NotReplicated")))
            .map(|c| ended(c))
            .min();
        let gap = failed_at.map_or(Duration::ZERO, |first| {
            let ok = window.iter().filter(|c| c.outcome.is_ok() && ended(c) > first).map(|c| ended(c)).min();
            ok.unwrap_or(until).saturating_duration_since(first)
        });
        let mut failed: BTreeMap<String, u32> = BTreeMap::new();
        for c in &window {
            if let Err(e) = &c.outcome {
                *failed.entry(e.split([' ', '(', '{']).next().unwrap_or_default().to_owned()).or_default() += 1;
            }
        }
        let longest = window.iter().map(|c| c.took).max().unwrap_or_default();
        // What the calls that failed (not `NotReplicated`) were and said.
        let why: BTreeSet<String> = window
            .iter()
            .filter_map(|c| match &c.outcome {
                Err(e) if !e.starts_with("NotReplicated") => Some(format!(
                    "{} after {} ms: {}",
                    c.kind,
                    c.took.as_millis(),
                    e.chars().take(100).collect::<String>()
                )),
                _ => None,
            })
            .collect();
        per_fault.push(format!(
            "fault {} at +{} ms: unavailable {} ms, failed {failed:?}, longest call {} ms {why:?}",
            f.kind,
            f.at.saturating_duration_since(faults[0].at).as_millis(),
            gap.as_millis(),
            longest.as_millis()
        ));
        let k = per_kind.entry(f.kind).or_default();
        k.0 += 1;
        k.1 = k.1.max(gap);
        k.2 += gap;
        for (e, n) in failed {
            *k.3.entry(e).or_default() += n;
        }
        k.4 = k.4.max(longest);
    }
    let per_kind = per_kind
        .into_iter()
        .map(|(kind, (n, most, sum, failed, longest))| {
            format!(
                "kind {kind}: {n} faults, unavailable mean {} ms max {} ms, failed {failed:?}, longest call {} ms",
                (sum / n).as_millis(),
                most.as_millis(),
                longest.as_millis()
            )
        })
        .collect();
    (per_fault, per_kind)
}

struct Report {
    lost_unreplicated: usize,
    /// Writes acknowledged as replicated that were lost.
    lost_durable: usize,
    /// Reads that saw a version below a write acknowledged as replicated
    /// before they started.
    regressions: usize,
    /// Ops applied twice in one history.
    doubled: usize,
    violations: Vec<String>,
}

fn check(calls: &[Call], seen: &[Seen]) -> Report {
    let mut violations = Vec::new();
    let (mut lost_durable, mut regressions, mut doubled) = (0, 0, 0);
    // Learning a cluster shard's replica count (`every_replica`) adds one
    // response timeout to a handle's first durable write.
    let bound =
        (RESPONSE_TIMEOUT + RETRY_DELAY) * (ATTEMPTS + 1) + REPLICA_WAIT + RESPONSE_TIMEOUT + Duration::from_secs(1);
    let by_digest: BTreeMap<String, &Call> = calls.iter().map(|c| (stored_op_id(&c.op), c)).collect();
    for c in calls {
        if !c.typed {
            violations.push(format!("untyped error in {} {} {}: {:?}", c.kind, c.id, c.op, c.outcome));
        }
        if c.took > bound {
            violations.push(format!("{} {} {} took {:?}, over its bound {bound:?}", c.kind, c.id, c.op, c.took));
        }
        if let (Some(e), Some(v)) = (c.expected, c.applied)
            && v != e
        {
            violations.push(format!("update {} {} wrote v{v}, expected v{e}", c.id, c.op));
        }
    }
    // Every (id, version) and the digests any history or write put there.
    let mut at: BTreeMap<(&str, u64), BTreeSet<String>> = BTreeMap::new();
    for s in seen {
        // The content is the write the op id names.
        if s.digest.as_deref() != Some(stored_op_id(&s.content_op).as_str()) {
            violations
                .push(format!("{} v{} names op {:?}, but holds {}'s content", s.id, s.version, s.digest, s.content_op));
        }
        if let Some(c) = by_digest.get(&stored_op_id(&s.content_op))
            && let Some(e) = c.expected
            && e != s.version
        {
            violations.push(format!("{} seen at v{} holds update {} meant for v{e}", s.id, s.version, c.op));
        }
        let mut once = BTreeSet::new();
        for (v, d) in &s.history {
            if !once.insert(d) {
                doubled += 1;
                violations.push(format!("{}: op {d} applied twice in one history", s.id));
            }
            at.entry((s.id, *v)).or_default().insert(d.clone());
        }
        // A compare-and-set applied on top of the document it read.
        for pair in s.history.windows(2) {
            if let Some(c) = by_digest.get(&pair[1].1)
                && let Some(prev) = &c.prev
                && pair[0].1 != stored_op_id(prev)
            {
                violations.push(format!(
                    "{}: update {} at v{} applied on top of another document than it read",
                    s.id, c.op, pair[1].0
                ));
            }
        }
    }
    let mut lost_unreplicated = 0;
    for c in calls {
        let Some(v) = c.applied else { continue };
        // Only a write that returned `Ok` with a wait was replicated.
        let replicated = c.durable && c.outcome.is_ok();
        let mine = stored_op_id(&c.op);
        let Some(there) = at.get(&(c.id, v)) else { continue };
        if there.iter().any(|d| *d != mine) {
            if replicated {
                lost_durable += 1;
                violations.push(format!("{} {} acknowledged as replicated at v{v} was lost", c.kind, c.op));
            } else {
                lost_unreplicated += 1;
            }
        }
    }
    // No read sees a version below a write acknowledged as replicated
    // before the read started (a deleted document's versions go on from
    // its tombstone, so they never go back either).
    for s in seen {
        for c in calls {
            let Some(v) = c.applied else { continue };
            if c.id == s.id && c.durable && c.outcome.is_ok() && c.started + c.took <= s.started && s.version < v {
                regressions += 1;
                violations.push(format!(
                    "{} read at v{} after {} {} was acknowledged as replicated at v{v}",
                    s.id, s.version, c.kind, c.op
                ));
            }
        }
    }
    Report { lost_unreplicated, lost_durable, regressions, doubled, violations }
}

/// The checker itself, on made-up histories: each rule finds its breach.
#[test]
fn the_checker_finds_each_kind_of_violation() {
    let call = |op: &str, kind: &'static str, durable: bool, applied: Option<u64>| Call {
        op: op.to_owned(),
        id: "d-0",
        kind,
        durable,
        expected: None,
        prev: None,
        outcome: Ok(applied),
        applied,
        typed: true,
        started: Instant::now(),
        took: Duration::from_millis(5),
    };
    let seen = |version: u64, content: &str, history: &[(u64, &str)]| Seen {
        id: "d-0",
        started: Instant::now() + Duration::from_secs(1),
        version,
        digest: Some(stored_op_id(content)),
        content_op: content.to_owned(),
        history: history.iter().map(|(v, op)| (*v, stored_op_id(op))).collect(),
    };
    // A clean history: a replicated write, superseded by the next.
    let calls = vec![call("a", "create", true, Some(1)), call("b", "put", false, Some(2))];
    let fine = check(&calls, &[seen(2, "b", &[(1, "a"), (2, "b")])]);
    assert!(fine.violations.is_empty(), "{:?}", fine.violations);

    // The replicated write lost: another write holds its version.
    let lost = check(&calls, &[seen(1, "x", &[(1, "x")])]);
    assert!(lost.violations.iter().any(|v| v.contains("acknowledged as replicated")), "{:?}", lost.violations);
    assert_eq!(lost.lost_durable, 1);
    // A read after a replicated write that sees an older version.
    let back = check(&[call("a", "put", true, Some(3))], &[seen(2, "x", &[(2, "x")])]);
    assert_eq!((back.regressions, back.violations.len()), (1, 1), "{:?}", back.violations);
    // Not replicated: counted, not a violation.
    let calls_plain = vec![call("a", "create", false, Some(1))];
    let counted = check(&calls_plain, &[seen(1, "x", &[(1, "x")])]);
    assert_eq!((counted.lost_unreplicated, counted.violations.len()), (1, 0));

    // One op twice in a history.
    let twice = check(&calls, &[seen(3, "b", &[(1, "a"), (2, "b"), (3, "b")])]);
    assert!(twice.violations.iter().any(|v| v.contains("applied twice")), "{:?}", twice.violations);
    assert_eq!(twice.doubled, 1);

    // Content that is not the write its op id names.
    let mut wrong = seen(2, "b", &[(2, "b")]);
    wrong.content_op = "a".into();
    assert!(check(&calls, &[wrong]).violations.iter().any(|v| v.contains("content")));

    // A compare-and-set on top of another document than it read, and one
    // at another version than it expected.
    let mut cas = call("c", "update", false, Some(3));
    cas.expected = Some(3);
    cas.prev = Some("b".into());
    let calls = vec![call("a", "create", false, Some(1)), call("b", "put", false, Some(2)), cas];
    let on_other = check(&calls, &[seen(3, "c", &[(2, "a"), (3, "c")])]);
    assert!(on_other.violations.iter().any(|v| v.contains("another document")), "{:?}", on_other.violations);
    let off = check(&calls, &[seen(4, "c", &[(4, "c")])]);
    assert!(off.violations.iter().any(|v| v.contains("meant for v3")), "{:?}", off.violations);

    // An untyped error and a call over its bound.
    let mut bad = call("d", "put", false, None);
    bad.typed = false;
    bad.took = Duration::from_secs(60);
    let v = check(&[bad], &[]).violations;
    assert!(v.iter().any(|v| v.contains("untyped")) && v.iter().any(|v| v.contains("over its bound")), "{v:?}");
}
