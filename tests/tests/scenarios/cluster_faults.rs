//! The runtime through cluster faults, on three primaries and three
//! replicas: a manual failover, `kill -9` of a primary, an atomic slot
//! migration and a legacy one (`ASK`, `TRYAGAIN`) of the island's slot, all
//! while writers run, and the poller's nudges across a failover.
//!
//! Each fault runs writers that put their own documents with fresh
//! operation ids and record every outcome. Afterwards: no call ended with
//! an untyped error or outlived its bound, no write was applied twice (a
//! document's version never exceeds the writes that may have applied), no
//! acknowledged write is missing unless a primary died before its replica
//! had it (counted and printed; the figures are what this machine
//! measured), and `verify` is clean.
//!
//! The same faults then hit a keyspace sharded by scope (`ShardedPlant`,
//! `Placement=sharded`): the writers put documents and run steps (a state,
//! its work entry) in one busy scope, and the fault takes that scope's
//! slot; afterwards every acknowledged step's state is there (unless its
//! primary died), and `verify` is clean for both types.
//!
//! One cluster serves the binary; the faults run in order in one test and
//! the cluster is killed when it ends, also when it fails.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use microdcs_examples::plant::sharded::{self, ShardedPlant};
use microdcs_tests::change_channel;
use microdcs_tests::fixtures::{JobResponse, Plant};
use microdcs_valkey::config::Secret;
use microdcs_valkey::testing::{ValkeyCluster, unique_island, unique_prefix};
use microdcs_valkey::{
    Error, Expect, MicroDcsConfig, PutOutcome, Valkey, changes::Changes, config::Durability, config::Placement,
    config::ValkeyConfig, poller::Poller, store::Effects, store::MaintenanceOptions, store::StepOutcome,
    store::WorkEntry,
};

/// The busy scope of the sharded runs: every writer writes there.
const BUSY: &str = "busy-line";

const WRITERS: usize = 4;
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
const ATTEMPTS: u32 = 4;
const RETRY_DELAY: Duration = Duration::from_millis(200);

/// The longest a write may take: every attempt its response timeout and
/// retry delay, plus scheduling slack on a shared 2-core machine.
fn bound() -> Duration {
    (RESPONSE_TIMEOUT + RETRY_DELAY) * ATTEMPTS + Duration::from_secs(2)
}

/// An island (tagged prefix) or the sharded plant (untagged prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Island,
    Sharded,
}

async fn connect(cluster: &ValkeyCluster, name: &str) -> Valkey {
    connect_as(cluster, name, Shape::Island).await
}

async fn connect_as(cluster: &ValkeyCluster, name: &str, shape: Shape) -> Valkey {
    let (prefix, placement) = match shape {
        Shape::Island => (unique_island(name), Placement::Island),
        Shape::Sharded => (unique_prefix(name), Placement::Sharded),
    };
    connect_to(cluster, prefix.as_str(), placement).await
}

async fn connect_to(cluster: &ValkeyCluster, prefix: &str, placement: Placement) -> Valkey {
    let config = ValkeyConfig {
        connection_string: Secret::new(cluster.connection_string()),
        key_prefix: prefix.to_owned(),
        placement,
        response_timeout: RESPONSE_TIMEOUT,
        write_attempts: ATTEMPTS,
        write_retry_delay: RETRY_DELAY,
        ..MicroDcsConfig::default().valkey
    };
    Valkey::connect(&config).await.unwrap_or_else(|e| panic!("connect {prefix}: {e}"))
}

/// What one writer saw.
#[derive(Default, Debug)]
struct Tally {
    /// Calls made.
    calls: u64,
    /// `Written`: acknowledged.
    acked: u64,
    /// The highest acknowledged version.
    last_acked: u64,
    /// `UnknownOutcome`: may or may not have applied.
    unknown: u64,
    /// Any other error (each printed).
    other: Vec<String>,
    /// The longest call.
    longest: Duration,
    /// Counter increments (sent at most once): acknowledged, unknown.
    incr_acked: u64,
    incr_unknown: u64,
    /// Steps acknowledged (sharded runs): the job ids.
    steps_acked: Vec<String>,
}

/// One put of writer `w`'s document, version `n`, on either shape.
async fn put_once(valkey: &Valkey, shape: Shape, w: usize, n: u64) -> microdcs_valkey::Result<PutOutcome> {
    let (id, order, state) = (format!("r-{w}"), format!("o-{w}"), format!("Step{n}"));
    let op = format!("w{w}-{n}");
    match shape {
        Shape::Island => {
            let doc = JobResponse::new(&id, "s1", &order, &[&state]);
            Plant::open(valkey.clone()).store::<JobResponse>().put(&doc, Expect::Any).op(op).await
        }
        Shape::Sharded => {
            let doc = sharded::JobResponse::new(&id, BUSY, &order, &[&state]);
            ShardedPlant::open(valkey.clone()).store::<sharded::JobResponse>().put(&doc, Expect::Any).op(op).await
        }
    }
}

/// The stored version of writer `w`'s document.
async fn version_of(valkey: &Valkey, shape: Shape, w: usize) -> u64 {
    let id = format!("r-{w}");
    let version = match shape {
        Shape::Island => Plant::open(valkey.clone()).store::<JobResponse>().get(&id).await.unwrap().map(|s| s.version),
        Shape::Sharded => ShardedPlant::open(valkey.clone())
            .store::<sharded::JobResponse>()
            .get_in(BUSY, &id)
            .await
            .unwrap()
            .map(|s| s.version),
    };
    version.expect("written before the fault")
}

/// Writer `w`'s counter (sent at most once), in the busy scope's slot when sharded.
fn counter_of(valkey: &Valkey, shape: Shape, w: usize) -> microdcs_valkey::families::CounterKey {
    match shape {
        Shape::Island => Plant::pubseq(&Plant::open(valkey.clone()), &format!("w{w}")).unwrap(),
        Shape::Sharded => ShardedPlant::pubseq(&ShardedPlant::open(valkey.clone()), &format!("{BUSY}-w{w}")).unwrap(),
    }
}

/// Writer `w` puts document `r-w` with fresh op ids until `stop`; on the
/// sharded plant it also runs a step of a new job each round.
async fn writer(valkey: Valkey, shape: Shape, w: usize, stop: Arc<AtomicBool>) -> Tally {
    let counter = counter_of(&valkey, shape, w);
    let states = ShardedPlant::open(valkey.clone()).store::<sharded::SfcState>();
    let mut tally = Tally::default();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let started = Instant::now();
        let out = put_once(&valkey, shape, w, n).await;
        tally.longest = tally.longest.max(started.elapsed());
        tally.calls += 1;
        match out {
            Ok(PutOutcome::Written { version }) => {
                tally.acked += 1;
                tally.last_acked = tally.last_acked.max(version);
            }
            Ok(other) => tally.other.push(format!("unexpected outcome {other:?}")),
            // A lost answer, or (after one) a lookup of the op id that got
            // none either: typed connection errors, the write may have applied.
            Err(Error::UnknownOutcome { .. }) => tally.unknown += 1,
            Err(e) if e.is_connection() => tally.unknown += 1,
            Err(e) => tally.other.push(e.to_string()),
        }
        // A new job per step: the first 100 rounds only, so the busy slot
        // stays small enough for a legacy migration (keys moved a few at a
        // time) to take seconds, not minutes.
        if shape == Shape::Sharded && n <= 100 {
            let job = format!("j-{w}-{n}");
            let state = sharded::SfcState {
                job_id: job.clone(),
                scope: BUSY.into(),
                step: "mix".into(),
                deadline: Some(1_000),
                running: true,
                wait_type: None,
                wait_start: None,
            };
            let effects = Effects::new().work(WorkEntry::new().field("task", &job));
            let started = Instant::now();
            let out = states.step(None, &state, &effects).await;
            tally.longest = tally.longest.max(started.elapsed());
            match out {
                Ok(StepOutcome::Written { .. }) => tally.steps_acked.push(job),
                Ok(other) => tally.other.push(format!("unexpected step outcome {other:?}")),
                Err(e) if e.is_connection() || matches!(e, Error::UnknownOutcome { .. }) => {}
                Err(e) => tally.other.push(format!("step: {e}")),
            }
        }
        // A command sent at most once, over the connection that never
        // resends by itself (ASK during a legacy migration is ours to follow).
        let started = Instant::now();
        let out = counter.increment(1).await;
        tally.longest = tally.longest.max(started.elapsed());
        match out {
            Ok(_) => tally.incr_acked += 1,
            Err(e) if e.is_connection() => tally.incr_unknown += 1,
            Err(e) => tally.other.push(format!("increment: {e}")),
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    tally
}

/// Runs the writers around `fault` (given the cluster, returns a label and
/// whether a primary died, so acknowledged writes may be lost), then checks.
async fn under_fault<F>(cluster: &mut ValkeyCluster, name: &str, shape: Shape, fault: F)
where
    F: FnOnce(&mut ValkeyCluster, u16) -> bool,
{
    let valkey = connect_as(cluster, name, shape).await;
    // The island's slot, or the busy scope's.
    let slot = match shape {
        Shape::Island => valkey.prefix().slot().expect("a tagged prefix"),
        Shape::Sharded => microdcs_schema::slot::key_slot(BUSY.as_bytes()),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..WRITERS).map(|w| tokio::spawn(writer(valkey.clone(), shape, w, stop.clone()))).collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let primary_died = tokio::task::block_in_place(|| fault(cluster, slot));
    let fault_took = started.elapsed();
    // Writers go on until the cluster has served them for a while again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut tallies = Vec::new();
    for t in tasks {
        tallies.push(t.await.unwrap());
    }
    let (mut calls, mut acked, mut unknown, mut lost, mut longest) = (0, 0, 0, 0, Duration::ZERO);
    let states = ShardedPlant::open(valkey.clone()).store::<sharded::SfcState>();
    let mut steps = 0;
    for (w, t) in tallies.iter().enumerate() {
        assert!(t.other.is_empty(), "{name}: writer {w} got errors other than an unknown outcome: {:?}", t.other);
        assert!(t.longest <= bound(), "{name}: writer {w} waited {:?}, over the bound {:?}", t.longest, bound());
        let version = version_of(&valkey, shape, w).await;
        // Every applied write adds one version: more than the calls that
        // may have applied would be a write applied twice.
        assert!(version <= t.acked + t.unknown, "{name}: writer {w} doubled a write: {t:?}, v{version}");
        for job in &t.steps_acked {
            let there = states.get_in(BUSY, job).await.unwrap().is_some();
            assert!(there || primary_died, "{name}: writer {w}'s acknowledged step {job} is missing");
        }
        steps += t.steps_acked.len();
        let count = counter_of(&valkey, shape, w).get().await.unwrap();
        let count = u64::try_from(count).unwrap();
        assert!(
            count <= t.incr_acked + t.incr_unknown,
            "{name}: writer {w} counted an increment twice: {count}, {t:?}"
        );
        assert!(primary_died || count >= t.incr_acked, "{name}: writer {w} lost increments: {count}, {t:?}");
        if version < t.last_acked {
            assert!(primary_died, "{name}: writer {w} lost acknowledged writes without a dead primary: {t:?}");
            lost += t.last_acked - version;
        }
        calls += t.calls;
        acked += t.acked;
        unknown += t.unknown;
        longest = longest.max(t.longest);
    }
    assert!(acked > 0, "{name}: the writers made progress");
    let opts = MaintenanceOptions::default();
    let report = match shape {
        Shape::Island => Plant::open(valkey.clone()).store::<JobResponse>().verify(&opts).await.unwrap(),
        Shape::Sharded => {
            let steps = states.verify(&opts).await.unwrap();
            assert!(steps.is_clean(), "{name}: verify of the steps after the fault: {steps:?}");
            ShardedPlant::open(valkey.clone()).store::<sharded::JobResponse>().verify(&opts).await.unwrap()
        }
    };
    assert!(report.is_clean(), "{name}: verify after the fault: {report:?}");
    println!(
        "{name}: fault took {fault_took:?}; {calls} calls, {acked} acknowledged, {unknown} unknown outcomes, \
         {lost} acknowledged but lost with the dead primary, {steps} steps acknowledged, longest call \
         {longest:?}; verify clean"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_survives_cluster_faults() {
    // Two replicas per primary: with one, a deposed primary has none left
    // and a wait for fewer than every replica could not be told apart from
    // one for all of them.
    let mut cluster = ValkeyCluster::start_local(3, 2).unwrap_or_else(|e| panic!("{e}"));
    println!("cluster of 9 nodes formed in {:?}", cluster.formed_in());
    every_replica_waits_for_the_whole_shard(&mut cluster).await;

    for shape in [Shape::Island, Shape::Sharded] {
        let tag = if shape == Shape::Island { "" } else { "sharded-" };
        under_fault(&mut cluster, &format!("{tag}manual-failover"), shape, |c, slot| {
            let primary = c.primary_of(slot).expect("the slot has a primary");
            let replica = c.replica_of(primary).expect("and a replica");
            c.failover(replica).unwrap_or_else(|e| panic!("{e}"));
            false
        })
        .await;

        under_fault(&mut cluster, &format!("{tag}kill-9-primary"), shape, |c, slot| {
            let primary = c.primary_of(slot).expect("the slot has a primary");
            c.node_mut(primary).kill();
            let deadline = Instant::now() + Duration::from_secs(15);
            // Either replica may be promoted.
            while c.primary_of(slot).is_none_or(|p| p == primary) {
                assert!(Instant::now() < deadline, "the replica was not promoted");
                std::thread::sleep(Duration::from_millis(20));
            }
            // Back as a replica of the new primary, for the next faults.
            c.node_mut(primary).restart().unwrap_or_else(|e| panic!("{e}"));
            true
        })
        .await;
        cluster.wait_healthy(Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));

        under_fault(&mut cluster, &format!("{tag}atomic-slot-migration"), shape, |c, slot| {
            let from = c.primary_of(slot).expect("the slot has a primary");
            let to = (0..c.nodes().len()).find(|&i| i != from && c.is_primary(i)).expect("another primary");
            c.migrate_slot(slot, to).unwrap_or_else(|e| panic!("{e}"));
            false
        })
        .await;

        under_fault(&mut cluster, &format!("{tag}legacy-slot-migration"), shape, |c, slot| {
            let from = c.primary_of(slot).expect("the slot has a primary");
            let to = (0..c.nodes().len()).find(|&i| i != from && c.is_primary(i)).expect("another primary");
            // Three keys a batch for an island (a handful of keys), sixty
            // for the busy scope (some hundreds): about a second either way.
            let batch = if shape == Shape::Island { 3 } else { 60 };
            c.migrate_slot_legacy(slot, to, batch, Duration::from_millis(100)).unwrap_or_else(|e| panic!("{e}"));
            false
        })
        .await;
    }

    nudges_across_a_failover(&mut cluster).await;
    shard_nudges_across_a_failover(&mut cluster).await;
}

/// `Durability::every_replica()` on a cluster waits for every replica of
/// the shard serving the island's slot, a failed one included: with both
/// of its two replicas running a write is confirmed; with one killed, a
/// handle made after the kill still waits for two, so its write is applied
/// and answered `NotReplicated` (one of two), where `replicas(1)` is
/// confirmed; with the replica back, confirmed again.
async fn every_replica_waits_for_the_whole_shard(cluster: &mut ValkeyCluster) {
    let prefix = unique_island("every-replica");
    let valkey = connect_to(cluster, prefix.as_str(), Placement::Island).await;
    let slot = prefix.slot().expect("a tagged prefix");
    let every = Durability::every_replica().with_timeout(Duration::from_millis(300));
    let doc = |n: u32| JobResponse::new("e-1", "s1", "o-1", &[&format!("Step{n}")]);
    let put = |valkey: &Valkey, n: u32, d: Durability| {
        let valkey = valkey.clone();
        async move { Plant::open(valkey).store::<JobResponse>().put(&doc(n), Expect::Any).durability(d).await }
    };
    let out = put(&valkey, 1, every).await;
    assert!(matches!(out, Ok(PutOutcome::Written { version: 1 })), "both replicas running: {out:?}");

    let primary = cluster.primary_of(slot).expect("the slot has a primary");
    let replica = cluster.replica_of(primary).expect("and a replica");
    tokio::task::block_in_place(|| cluster.node_mut(replica).kill());
    let after = connect_to(cluster, prefix.as_str(), Placement::Island).await;
    for (handle, n) in [(&valkey, 2), (&after, 3)] {
        let out = put(handle, n, every).await;
        assert!(
            matches!(out, Err(Error::NotReplicated { version, acked: 1, wanted: 2, .. }) if version == u64::from(n)),
            "one replica of two down, write {n}: {out:?}"
        );
    }
    let out = put(&after, 4, Durability::replicas(1).with_timeout(Duration::from_millis(300))).await;
    assert!(matches!(out, Ok(PutOutcome::Written { version: 4 })), "replicas(1) with one down: {out:?}");

    tokio::task::block_in_place(|| {
        cluster.node_mut(replica).restart().unwrap_or_else(|e| panic!("{e}"));
        cluster.wait_healthy(Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));
    });
    let out = put(&after, 5, every).await;
    assert!(matches!(out, Ok(PutOutcome::Written { version: 5 })), "the replica back: {out:?}");
    println!("every replica on a cluster: waited for the shard's two replicas, a failed one included");
}

/// Nudges per scope (`SPUBLISH` on the scope's shard channel) still reach
/// the poller after the scope's primary failed over, with the fallback
/// poll off in effect: only a nudge, or the read the poller makes when it
/// learns its subscription moved, can bring the change.
async fn shard_nudges_across_a_failover(cluster: &mut ValkeyCluster) {
    let config = ValkeyConfig {
        connection_string: Secret::new(cluster.connection_string()),
        key_prefix: unique_prefix("shard-nudges").as_str().to_owned(),
        placement: Placement::Sharded,
        response_timeout: RESPONSE_TIMEOUT,
        poll_interval: Duration::from_secs(3600),
        scope_refresh_interval: Duration::from_secs(3600),
        ..MicroDcsConfig::default().valkey
    };
    let valkey = Valkey::connect(&config).await.unwrap_or_else(|e| panic!("{e}"));
    let responses = ShardedPlant::open(valkey.clone()).store::<sharded::JobResponse>();
    assert!(<sharded::JobResponse as microdcs_valkey::Document>::SPEC.shard_nudge());
    let _ = responses.create(&sharded::JobResponse::new("n-0", "s1", "o-0", &["Queued"])).await.unwrap();
    let (handler, mut rx) = change_channel::<sharded::JobResponse>();
    let poller = Poller::new(valkey.clone(), "shard-nudges")
        .consumer(Changes::new(responses.clone(), "shard-nudges", handler).fetching())
        .start()
        .await
        .unwrap();
    // The first read, at start, finds the scope and subscribes to it.
    let first = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
    assert!(matches!(first, Ok(Some(_))), "the change before the poller started");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = responses.create(&sharded::JobResponse::new("n-1", "s1", "o-1", &["Queued"])).await.unwrap();
    let nudged = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
    assert!(matches!(&nudged, Ok(Some(c)) if c.id == "n-1"), "a change by its nudge alone: {nudged:?}");
    let slot = microdcs_schema::slot::key_slot(b"s1");
    tokio::task::block_in_place(|| {
        let primary = cluster.primary_of(slot).unwrap();
        let replica = cluster.replica_of(primary).unwrap();
        cluster.failover(replica).unwrap_or_else(|e| panic!("{e}"));
    });
    let started = Instant::now();
    let _ = responses.create(&sharded::JobResponse::new("n-2", "s1", "o-2", &["Queued"])).await.unwrap();
    loop {
        let got = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
        match got {
            Ok(Some(change)) if change.id == "n-2" => break,
            Ok(Some(_)) => continue,
            other => panic!("the change after the failover never came: {other:?}"),
        }
    }
    println!("shard nudges: a change after a failover reached the consumer in {:?}", started.elapsed());
    poller.shutdown().await;
}

async fn nudges_across_a_failover(cluster: &mut ValkeyCluster) {
    let valkey = connect(cluster, "nudges").await;
    let slot = valkey.prefix().slot().unwrap();
    let responses = Plant::open(valkey.clone()).store::<JobResponse>();
    let (handler, mut rx) = change_channel::<JobResponse>();
    let poller = Poller::new(valkey.clone(), "cluster-faults")
        .consumer(Changes::new(responses.clone(), "cluster-faults", handler).fetching())
        .start()
        .await
        .unwrap();
    let _ = responses.create(&JobResponse::new("n-1", "s1", "o-1", &["Queued"])).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
    assert!(matches!(first, Ok(Some(_))), "a change before the failover");
    tokio::task::block_in_place(|| {
        let primary = cluster.primary_of(slot).unwrap();
        let replica = cluster.replica_of(primary).unwrap();
        cluster.failover(replica).unwrap_or_else(|e| panic!("{e}"));
    });
    let started = Instant::now();
    let _ = responses.create(&JobResponse::new("n-2", "s1", "o-2", &["Queued"])).await.unwrap();
    loop {
        let got = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
        match got {
            Ok(Some(change)) if change.id == "n-2" => break,
            Ok(Some(_)) => continue,
            other => panic!("the change after the failover never came: {other:?}"),
        }
    }
    println!("nudges: a change after a failover reached the consumer in {:?}", started.elapsed());
    poller.shutdown().await;
}
