//! The job queue of `examples/src/queue.rs` (BullMQ's model on the
//! library): 50 workers over 5,000 jobs with random failures and one
//! worker that dies holding a job; every job ends completed or dead
//! exactly once, none is lost, retries wait their backoff. Then the
//! smaller promises one at a time: idempotent enqueue, priorities, delays,
//! the rate limit, events and retention.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use microdcs_examples::queue::{Enqueued, Job, JobOptions, Queue, Settled, now_ms};
use microdcs_tests::{server, stream_entries};
use microdcs_valkey::redis::aio::ConnectionManager;
use microdcs_valkey::testing::unique_prefix;
use microdcs_valkey::{Valkey, config::WriteOptions};

const JOBS: usize = 5000;
const WORKERS: usize = 50;
const BACKOFF: Duration = Duration::from_millis(20);
const LEASE: Duration = Duration::from_millis(1500);

/// Whether attempt `n` of job `id` fails: about one in six, the same on
/// every run (no randomness crate: a hash of the two).
fn fails(id: &str, n: u32) -> bool {
    let mut h: u64 = 1469598103934665603;
    for b in id.bytes().chain(n.to_le_bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(1099511628211);
    }
    // A finaliser: FNV's prime is 1 modulo 6, so `h % 6` alone would
    // hardly depend on the attempt.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    h.is_multiple_of(6)
}

#[derive(Default)]
struct Seen {
    /// Completions acknowledged to a worker, per job.
    completed: HashMap<String, u32>,
    /// Deaths acknowledged to a worker, per job.
    died: HashMap<String, u32>,
    /// When each failed attempt was failed (attempt, ms), per job.
    failed_at: HashMap<String, Vec<(u32, i64)>>,
    /// When each attempt was claimed (attempt, ms), per job.
    claimed_at: HashMap<String, Vec<(u32, i64)>>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_workers_settle_five_thousand_jobs_exactly_once() {
    let s = server();
    let valkey = Valkey::connect_url(s.url(), unique_prefix("queue"), WriteOptions::default()).await.unwrap();
    let queue = Queue::new(&valkey, "tenant-a:emails");
    let opts = JobOptions { attempts: 3, backoff: BACKOFF, ..JobOptions::default() };
    for i in 0..JOBS {
        assert_eq!(queue.enqueue(&format!("job-{i}"), "send", "{}", &opts).await.unwrap(), Enqueued::Added);
    }
    let started = std::time::Instant::now();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));

    // The scheduler: promotes delayed jobs and takes back stalled ones.
    let scheduler = {
        let (queue, stop) = (queue.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                queue.promote().await.unwrap();
                queue.recover_stalled().await.unwrap();
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    // One worker claims a job, reports progress, and is killed mid-job.
    let (tx, rx) = tokio::sync::oneshot::channel();
    let doomed = {
        let queue = queue.clone();
        tokio::spawn(async move {
            let mut job = queue.claim("doomed", LEASE).await.unwrap().expect("a ready job");
            assert_eq!(queue.progress(&mut job, 10).await.unwrap(), Settled::Done);
            tx.send(job.doc.id.clone()).unwrap();
            std::future::pending::<()>().await;
        })
    };
    let dead_worker_job = rx.await.unwrap();
    doomed.abort();
    assert!(doomed.await.unwrap_err().is_cancelled());

    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let (queue, seen, stop) = (queue.clone(), seen.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            let me = format!("w-{w}");
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let Some(mut job) = queue.claim(&me, LEASE).await.unwrap() else {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                let (id, n) = (job.doc.id.clone(), job.doc.attempts);
                // The claim's own clock reading: its lease ends `LEASE` after it.
                let claimed = job.doc.lease_until.unwrap() - i64::try_from(LEASE.as_millis()).unwrap();
                seen.lock().unwrap().claimed_at.entry(id.clone()).or_default().push((n, claimed));
                if queue.progress(&mut job, 50).await.unwrap() == Settled::Lost {
                    continue;
                }
                if fails(&id, n) {
                    let before = now_ms();
                    if queue.fail(&mut job, "random failure").await.unwrap() == Settled::Done {
                        let after = now_ms();
                        let mut seen = seen.lock().unwrap();
                        // The retry's time, set by the failing step.
                        let wait = i64::try_from(BACKOFF.as_millis()).unwrap() << (n - 1);
                        if job.doc.state == "delayed" {
                            let failed = job.doc.run_at - wait;
                            assert!(
                                (before..=after).contains(&failed),
                                "{id}: failed at {failed}, not in {before}..={after}"
                            );
                        }
                        seen.failed_at.entry(id.clone()).or_default().push((n, job.doc.run_at - wait));
                        if job.doc.state == "dead" {
                            *seen.died.entry(id).or_default() += 1;
                        }
                    }
                } else if queue.complete(&mut job).await.unwrap() == Settled::Done {
                    *seen.lock().unwrap().completed.entry(id).or_default() += 1;
                }
            }
        }));
    }
    // Until every job is settled (completed or dead). The bound is on
    // progress, not on the whole run: a loaded machine may take longer,
    // but a minute with no job settled is a hang.
    let stall = Duration::from_secs(60);
    let (mut last, mut since) = (0, tokio::time::Instant::now());
    loop {
        let stats = queue.stats().await.unwrap();
        let settled: usize = ["completed", "dead"].iter().map(|k| stats[*k].parse::<usize>().unwrap()).sum();
        if settled == JOBS {
            break;
        }
        if settled > last {
            (last, since) = (settled, tokio::time::Instant::now());
        }
        assert!(since.elapsed() < stall, "no job settled for {stall:?}: {stats:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    scheduler.await.unwrap();
    let elapsed = started.elapsed();

    // Every job is there and settled, each exactly once.
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let (mut completed, mut dead, mut stalls_dead) = (0, 0, 0);
    for i in 0..JOBS {
        let id = format!("job-{i}");
        let job = queue.store().get_in(queue.name(), &id).await.unwrap().expect("no job is lost");
        match job.doc.state.as_str() {
            "completed" => {
                completed += 1;
                assert_eq!(seen.completed.get(&id), Some(&1), "{id} completed once");
                assert_eq!(seen.died.get(&id), None, "{id}");
            }
            "dead" => {
                dead += 1;
                assert_eq!(seen.completed.get(&id), None, "{id} never completed");
                assert_eq!(job.doc.attempts, job.doc.max_attempts, "{id} died after its last attempt");
                // Dead by a worker's failure, or by a stall (the doomed worker's job).
                match seen.died.get(&id) {
                    Some(1) => {}
                    None => stalls_dead += 1,
                    other => panic!("{id} died {other:?} times"),
                }
            }
            other => panic!("{id} ended {other}"),
        }
        // Each attempt was claimed by one worker: a second claim of the
        // same attempt would be a double claim, even if it lost later.
        let claims = seen.claimed_at.get(&id).cloned().unwrap_or_default();
        let mut attempts: Vec<u32> = claims.iter().map(|&(n, _)| n).collect();
        attempts.sort_unstable();
        let all = attempts.len();
        attempts.dedup();
        assert_eq!(attempts.len(), all, "{id}: an attempt claimed twice: {claims:?}");
        // Every retry waited its backoff after the failure before it.
        for &(n, failed) in seen.failed_at.get(&id).map_or(&[][..], Vec::as_slice) {
            // Computed here, not by the queue: 20 ms, doubled after each failure.
            let wait = i64::try_from(BACKOFF.as_millis()).unwrap() << (n - 1);
            if let Some(&(_, next)) = claims.iter().find(|(m, _)| *m == n + 1) {
                assert!(
                    next - failed >= wait,
                    "{id}: attempt {} {} ms after the failure, not {wait}",
                    n + 1,
                    next - failed
                );
            }
        }
    }
    let stats = queue.stats().await.unwrap();
    assert_eq!(stats["completed"], completed.to_string());
    assert_eq!(stats["dead"], dead.to_string());
    assert!(dead > 0 && completed > JOBS * 9 / 10, "completed {completed}, dead {dead}");
    // The doomed worker's job was taken back by the stall sweep and ended.
    let doomed = queue.store().get_in(queue.name(), &dead_worker_job).await.unwrap().unwrap();
    assert!(doomed.doc.attempts >= 2 || doomed.doc.state == "dead", "{doomed:?}");
    assert_ne!(doomed.doc.worker.as_deref(), Some("doomed"));
    assert!(stalls_dead <= 1, "only the doomed job can die by a stall here: {stalls_dead}");
    let opts = microdcs_valkey::store::MaintenanceOptions::default();
    assert!(queue.store().verify(&opts).await.unwrap().differences.is_empty());
    println!("{JOBS} jobs, {WORKERS} workers: {completed} completed, {dead} dead, in {elapsed:?}");
}

#[tokio::test]
async fn enqueue_is_idempotent_and_claims_follow_priority_delay_and_the_rate_limit() {
    let s = server();
    let valkey = Valkey::connect_url(s.url(), unique_prefix("queue-rules"), WriteOptions::default()).await.unwrap();
    let mut raw = ConnectionManager::new(microdcs_valkey::redis::Client::open(s.url()).unwrap()).await.unwrap();
    let queue = Queue::new(&valkey, "tenant-b:reports");
    let o = |priority, delay_ms| JobOptions {
        priority,
        delay: Duration::from_millis(delay_ms),
        keep_completed: Duration::from_millis(200),
        ..JobOptions::default()
    };
    let tagged = JobOptions { tags: vec!["customer-7".into(), "monthly".into()], ..o(5, 0) };
    assert_eq!(queue.enqueue("low", "r", "{}", &tagged).await.unwrap(), Enqueued::Added);
    // Delayed well past the test: not ready however slow the machine is.
    assert_eq!(queue.enqueue("later", "r", "{}", &o(0, 60_000)).await.unwrap(), Enqueued::Added);
    assert_eq!(queue.enqueue("high", "r", "{}", &o(1, 0)).await.unwrap(), Enqueued::Added);
    // The same key again: a duplicate, and the job is unchanged.
    assert_eq!(queue.enqueue("high", "other", "{}", &o(9, 0)).await.unwrap(), Enqueued::Duplicate);
    assert!(queue.enqueue("x", "r", "{}", &o(101, 0)).await.is_err(), "priority above the maximum");
    // Priority first; the delayed job waits for its time.
    let mut a = queue.claim("w", LEASE).await.unwrap().unwrap();
    assert_eq!((a.doc.id.as_str(), a.doc.name.as_str()), ("high", "r"));
    let mut b = queue.claim("w", LEASE).await.unwrap().unwrap();
    assert_eq!(b.doc.id, "low");
    assert!(queue.claim("w", LEASE).await.unwrap().is_none(), "the delayed job is not ready");
    assert_eq!(queue.promote().await.unwrap(), 0);
    // A short delay of its own, to watch a promotion.
    assert_eq!(queue.enqueue("soon", "r", "{}", &o(0, 100)).await.unwrap(), Enqueued::Added);
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(queue.promote().await.unwrap(), 1, "only the job whose time came");
    let c = queue.claim("w", LEASE).await.unwrap().unwrap();
    assert_eq!(c.doc.id, "soon");
    // Events: progress is a change entry; completion an outbox event.
    assert_eq!(queue.progress(&mut a, 30).await.unwrap(), Settled::Done);
    // A copy of the active job, as a second holder would have it.
    let mut stale = a.clone();
    assert_eq!(queue.complete(&mut a).await.unwrap(), Settled::Done);
    assert_eq!(queue.complete(&mut a).await.unwrap(), Settled::Lost, "completed once");
    // The stale copy still says `active`: the server refuses it.
    assert_eq!(queue.complete(&mut stale).await.unwrap(), Settled::Lost, "completed once, by the server");
    let p = valkey.prefix().clone();
    let events =
        stream_entries(&mut raw, &microdcs_examples::queue::Queues::events_key(&p, queue.name()).unwrap()).await;
    assert_eq!(events.iter().filter(|e| e.get("event").map(String::as_str) == Some("completed")).count(), 1);
    let changes =
        stream_entries(&mut raw, &microdcs_examples::queue::Queues::changes_key(&p, queue.name()).unwrap()).await;
    assert!(changes.iter().filter(|e| e.get("id").map(String::as_str) == Some("high")).count() >= 4);
    // A failed job waits its backoff in `delayed`.
    assert_eq!(queue.fail(&mut b, "boom").await.unwrap(), Settled::Done);
    // Found by its labels in any state (a multi-valued index).
    for tag in ["customer-7", "monthly"] {
        let ids = queue.store().ids(Job::by_tag(queue.name(), tag), microdcs_valkey::Page::first(10)).await.unwrap();
        assert_eq!(ids.ids, vec!["low".to_owned()], "{tag}");
    }
    let failed = queue.store().get_in(queue.name(), "low").await.unwrap().unwrap();
    assert_eq!((failed.doc.state.as_str(), failed.doc.error.as_deref()), ("delayed", Some("boom")));
    // Retention: the completed job is removed after `keep_completed`.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let removed = queue.retention(Duration::from_secs(60)).sweep().await.unwrap();
    assert_eq!(removed.deleted, 1);
    assert!(queue.store().get_in(queue.name(), "high").await.unwrap().is_none());
    // The rate limit: at most 3 claims per window for the queue (a window
    // long enough that a loaded machine stays inside it).
    let limited = Queue::new(&valkey, "tenant-b:sms").rate_limit(3, Duration::from_secs(10)).unwrap();
    for i in 0..5 {
        let _ = limited.enqueue(&format!("s-{i}"), "sms", "{}", &JobOptions::default()).await.unwrap();
    }
    let mut got = 0;
    for _ in 0..5 {
        if limited.claim("w", LEASE).await.unwrap().is_some() {
            got += 1;
        }
    }
    assert_eq!(got, 3);
}

/// A worker whose lease ran out and was taken back cannot settle the job
/// (its copy still says `active`: the server refuses it), and a worker
/// that renews its lease keeps its job through the stall sweep.
#[tokio::test]
async fn a_lease_taken_back_cannot_settle_and_a_renewed_one_is_kept() {
    let s = server();
    let valkey = Valkey::connect_url(s.url(), unique_prefix("queue-lease"), WriteOptions::default()).await.unwrap();
    let queue = Queue::new(&valkey, "tenant-c:mail");
    let opts = JobOptions { attempts: 3, ..JobOptions::default() };
    assert_eq!(queue.enqueue("slow", "r", "{}", &opts).await.unwrap(), Enqueued::Added);
    assert_eq!(queue.enqueue("long", "r", "{}", &opts).await.unwrap(), Enqueued::Added);
    let mut slow = queue.claim("w1", Duration::from_millis(50)).await.unwrap().unwrap();
    let mut long = queue.claim("w2", Duration::from_secs(3)).await.unwrap().unwrap();
    assert_eq!((slow.doc.id.as_str(), long.doc.id.as_str()), ("slow", "long"));
    tokio::time::sleep(Duration::from_millis(90)).await;
    // w2 renews before its lease ends; w1 does not.
    assert_eq!(queue.extend(&mut long, Duration::from_secs(30)).await.unwrap(), Settled::Done);
    assert_eq!(queue.recover_stalled().await.unwrap(), 1, "only the lapsed lease");
    for (id, settle) in [("slow", queue.complete(&mut slow).await), ("slow", queue.progress(&mut slow, 5).await)] {
        assert_eq!(settle.unwrap(), Settled::Lost, "{id}: taken back");
    }
    assert_eq!(queue.extend(&mut slow, Duration::from_secs(1)).await.unwrap(), Settled::Lost);
    let taken = queue.store().get_in(queue.name(), "slow").await.unwrap().unwrap();
    assert_eq!((taken.doc.state.as_str(), taken.doc.attempts), ("delayed", 1), "a stall is a failed attempt");
    assert_eq!(queue.stats().await.unwrap()["completed"], "0");
    // The renewed job is still w2's, and completes.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(queue.recover_stalled().await.unwrap(), 0);
    assert_eq!(queue.complete(&mut long).await.unwrap(), Settled::Done);
    assert_eq!(queue.stats().await.unwrap()["completed"], "1");
}

#[tokio::test]
async fn bad_options_leases_and_limits_are_refused_before_anything_is_written() {
    let s = server();
    let valkey = Valkey::connect_url(s.url(), unique_prefix("queue-bad"), WriteOptions::default()).await.unwrap();
    let queue = Queue::new(&valkey, "tenant-c:bad");
    let month = Duration::from_secs(31 * 24 * 3600);
    let refused = |r: Result<(), microdcs_valkey::Error>| matches!(r, Err(microdcs_valkey::Error::InvalidArgument(_)));
    for o in [
        JobOptions { attempts: 0, ..JobOptions::default() },
        JobOptions { delay: month, ..JobOptions::default() },
        JobOptions { backoff: Duration::MAX, ..JobOptions::default() },
        JobOptions { keep_completed: month, ..JobOptions::default() },
        JobOptions { priority: 101, ..JobOptions::default() },
    ] {
        assert!(refused(queue.enqueue("j", "x", "{}", &o).await.map(|_| ())), "{o:?}");
    }
    assert!(queue.store().get_in(queue.name(), "j").await.unwrap().is_none(), "nothing written");

    assert_eq!(queue.enqueue("j", "x", "{}", &JobOptions::default()).await.unwrap(), Enqueued::Added);
    for lease in [Duration::ZERO, Duration::from_micros(500), month, Duration::MAX] {
        assert!(refused(queue.claim("w", lease).await.map(|_| ())), "{lease:?}");
    }
    // Still ready: the refused claims took nothing.
    let mut job = queue.claim("w", LEASE).await.unwrap().expect("ready");
    assert_eq!(job.doc.attempts, 1);
    assert!(refused(queue.extend(&mut job, Duration::MAX).await.map(|_| ())));
    assert_eq!(queue.complete(&mut job).await.unwrap(), Settled::Done);

    for (limit, window) in
        [(0, Duration::from_secs(1)), (u64::MAX, Duration::from_secs(1)), (1, Duration::ZERO), (1, month)]
    {
        assert!(
            refused(Queue::new(&valkey, "tenant-c:rl").rate_limit(limit, window).map(|_| ())),
            "{limit} {window:?}"
        );
    }
}
