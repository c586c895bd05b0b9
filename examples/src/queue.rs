//! A job queue in the manner of BullMQ, built only on the library: queues
//! per tenant (one scope per queue), delayed jobs, priorities, claims of
//! ready jobs by many workers (each job claimed once), attempts with
//! exponential backoff and a dead-letter set after the last, stalled-job
//! recovery (a worker holds a job under a lease; a sweep re-queues jobs
//! whose lease ran out), a rate limit per queue, progress and completion
//! events through the change stream and the outbox, idempotent enqueue by
//! job key, and retention of completed jobs by an expiry sweep.
//!
//! Every state of a job is one document and the indexes its state puts it
//! in: `delayed` (scored by when it may run), `ready` (by priority, then
//! by enqueue time), `active` (by when its lease ends), `dead` (by when
//! it died) and `retention` (completed jobs, by when they are removed).
//! Every move between states is one compare-and-set write, so two workers
//! can never both own a job and a worker whose lease was taken over cannot
//! complete it.
//!
//! Leases and delays use each process's own clock: a sweeper whose clock
//! runs ahead of a worker's may take back a job still running (it then runs
//! again, and is still completed once). Keep the clocks synchronised, or
//! read the server's clock (`TIME`) for them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use microdcs_valkey::{
    Document, Error, KeyspaceHandle, PutOutcome, Store, Stored, Valkey, keyspace, store::Effects, store::StepOutcome,
    store::WorkEntry, sweep::ExpirySweep,
};
use serde::{Deserialize, Serialize};

/// The most priorities: 0 (first) to 100. Ready scores combine the
/// priority and the enqueue time in one exact `f64`.
pub const MAX_PRIORITY: u32 = 100;

/// A job. Its id is the job key (`enqueue` of a key already there is a
/// duplicate, not a second job); its scope is its queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(
    kind = "job",
    key = "job:{scope}:{id}",
    sorted(key = "q:delayed:{scope}", score = delayed_until(), name = "delayed"),
    sorted(key = "q:ready:{scope}", score = ready_score(), name = "ready"),
    sorted(key = "q:active:{scope}", score = lease_end(), name = "active"),
    sorted(key = "q:dead:{scope}", score = died_at(), name = "dead"),
    sorted(key = "q:retention:{scope}", score = remove_at(), name = "retention"),
    each(key = "q:bytag:{scope}:{tag}", tag = tags, name = "by_tag"),
    outbox(stream = "q:events:{scope}")
)]
pub struct Job {
    /// The job key.
    pub id: String,
    /// The queue.
    pub scope: String,
    /// What to run.
    pub name: String,
    /// Its input.
    pub payload: String,
    /// 0 runs first; at most [`MAX_PRIORITY`].
    pub priority: u32,
    /// `delayed`, `ready`, `active`, `completed` or `dead`.
    pub state: String,
    /// When it was enqueued, Unix ms.
    pub enqueued_at: i64,
    /// When it may run next (delayed), Unix ms.
    pub run_at: i64,
    /// Attempts started so far.
    pub attempts: u32,
    /// Attempts allowed; after the last failure it is dead.
    pub max_attempts: u32,
    /// The wait before the second attempt; doubled after each failure.
    pub backoff_ms: u64,
    /// The worker holding it (active) and when its lease ends, Unix ms.
    pub worker: Option<String>,
    /// When the holder's lease ends.
    pub lease_until: Option<i64>,
    /// Progress, 0 to 100, reported by the worker.
    pub progress: u32,
    /// When it completed or died, Unix ms.
    pub finished_at: Option<i64>,
    /// How long a completed job is kept, ms.
    pub keep_ms: u64,
    /// The last failure's message.
    pub error: Option<String>,
    /// Labels (a customer, a batch): the job is in the `by_tag` set of
    /// each, in every state, so a queue's jobs are found by label.
    #[serde(default)]
    pub tags: Vec<String>,
}

impl Job {
    fn is(&self, state: &str) -> bool {
        self.state == state
    }

    /// Score in `delayed`: when it may run.
    pub fn delayed_until(&self) -> Option<i64> {
        self.is("delayed").then_some(self.run_at)
    }

    /// Score in `ready`: priority first, then first in first out.
    #[allow(clippy::cast_precision_loss)]
    pub fn ready_score(&self) -> Option<f64> {
        self.is("ready").then(|| f64::from(self.priority) * 1e13 + self.enqueued_at as f64)
    }

    /// Score in `active`: when the holder's lease ends.
    pub fn lease_end(&self) -> Option<i64> {
        if self.is("active") { self.lease_until } else { None }
    }

    /// Score in `dead`: when it died.
    pub fn died_at(&self) -> Option<i64> {
        if self.is("dead") { self.finished_at } else { None }
    }

    /// Score in `retention`: when a completed job is removed.
    pub fn remove_at(&self) -> Option<i64> {
        let keep = i64::try_from(self.keep_ms).unwrap_or(i64::MAX);
        if self.is("completed") { self.finished_at.map(|f| f.saturating_add(keep)) } else { None }
    }

    /// The wait after failed attempt `n` (from 1): `backoff * 2^(n-1)`.
    pub fn backoff_after(&self, n: u32) -> u64 {
        self.backoff_ms.saturating_mul(1u64 << n.saturating_sub(1).min(32))
    }

    /// After a failure (or a stall) at `now`: again after its backoff, or
    /// dead after its last attempt.
    fn failed(&self, now: i64, error: &str) -> Job {
        let mut next = Job { worker: None, lease_until: None, error: Some(error.to_owned()), ..self.clone() };
        if self.attempts >= self.max_attempts {
            next.state = "dead".into();
            next.finished_at = Some(now);
        } else {
            next.state = "delayed".into();
            next.run_at = now.saturating_add(i64::try_from(self.backoff_after(self.attempts)).unwrap_or(i64::MAX));
        }
        next
    }
}

keyspace! {
    /// Job queues, one scope per queue.
    pub Queues {
        documents: [Job],
        scopes: set("scopes"),
        changes: stream("changes:{scope}"),
        events: stream("q:events:{scope}"),
        stats: hash("q:stats:{scope}"),
        limiter: rate_limit("q:limit:{scope}"),
    }
}

/// The retention sweep of completed jobs ([`Queue::retention`]).
pub type Retention =
    ExpirySweep<Job, microdcs_valkey::store::Json, fn(&str) -> microdcs_valkey::schema::GroupQuery<Job>>;

/// The longest delay, backoff, lease, retention or rate window a queue
/// takes: 30 days, the library's own bound for leases. A longer one would
/// park a job beyond every sweep, never completed and never dead.
pub const MAX_WAIT: Duration = Duration::from_secs(30 * 24 * 3600);

/// Refuses a wait longer than [`MAX_WAIT`], or shorter than a millisecond
/// unless it may be zero.
fn check_wait(what: &str, d: Duration, zero_ok: bool) -> Result<(), Error> {
    let too_short = if zero_ok { false } else { d < Duration::from_millis(1) };
    if too_short || d > MAX_WAIT {
        let low = if zero_ok { "0" } else { "1 ms" };
        return Err(Error::InvalidArgument(format!("{what} {d:?} must be between {low} and 30 days")));
    }
    Ok(())
}

/// Unix time in milliseconds by this process's clock.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// How a job is enqueued.
#[derive(Debug, Clone)]
pub struct JobOptions {
    /// Wait this long before it may run.
    pub delay: Duration,
    /// 0 runs first.
    pub priority: u32,
    /// Attempts allowed.
    pub attempts: u32,
    /// The wait before the second attempt, doubled after each failure.
    pub backoff: Duration,
    /// How long a completed job is kept.
    pub keep_completed: Duration,
    /// Labels to find the job by (`Job::by_tag`).
    pub tags: Vec<String>,
}

impl Default for JobOptions {
    fn default() -> Self {
        JobOptions {
            delay: Duration::ZERO,
            priority: 0,
            attempts: 3,
            backoff: Duration::from_millis(100),
            keep_completed: Duration::from_secs(24 * 3600),
            tags: Vec::new(),
        }
    }
}

/// What `enqueue` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enqueued {
    /// A new job.
    Added,
    /// A job with this key is there already; nothing was written.
    Duplicate,
}

/// What a worker's `progress`, `complete` or `fail` found (on a job that
/// is not active in the worker's hands, `Lost` without a round trip).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Recorded.
    Done,
    /// The job is no longer this worker's (its lease ran out and it was
    /// re-queued); nothing was written.
    Lost,
}

/// One queue: enqueue, claim, settle, and the sweeps that promote delayed
/// jobs and recover stalled ones.
#[derive(Clone)]
pub struct Queue {
    handle: KeyspaceHandle<Queues>,
    store: Store<Job>,
    name: String,
    /// At most this many claims per window, for the whole queue.
    rate: Option<(u64, Duration)>,
}

impl Queue {
    /// The queue `name` on `valkey`.
    pub fn new(valkey: &Valkey, name: &str) -> Self {
        let handle = Queues::open(valkey.clone());
        let store = handle.store::<Job>();
        Queue { handle, store, name: name.to_owned(), rate: None }
    }

    /// At most `limit` claims per `window` for the whole queue (all
    /// workers), counted in the server. A claim counts when a job is ready
    /// (one may still go to another worker first).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a `limit` of 0 or above
    /// [`microdcs_valkey::families::RateLimitKey::MAX_LIMIT`], or a `window` outside
    /// 1 ms to [`MAX_WAIT`].
    pub fn rate_limit(mut self, limit: u64, window: Duration) -> Result<Self, Error> {
        if limit == 0 || limit > microdcs_valkey::families::RateLimitKey::MAX_LIMIT {
            return Err(Error::InvalidArgument(format!(
                "a rate limit allows 1 to {} claims per window, not {limit}",
                microdcs_valkey::families::RateLimitKey::MAX_LIMIT
            )));
        }
        check_wait("rate window", window, false)?;
        self.rate = Some((limit, window));
        Ok(self)
    }

    /// The job store.
    pub fn store(&self) -> &Store<Job> {
        &self.store
    }

    /// The queue's name (its scope).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Adds job `key`, unless a job with that key is there already.
    ///
    /// # Errors
    /// Store errors; [`Error::InvalidArgument`], before anything is
    /// written, for a priority above [`MAX_PRIORITY`], no attempts, or a
    /// delay, backoff or `keep_completed` beyond [`MAX_WAIT`].
    pub async fn enqueue(&self, key: &str, name: &str, payload: &str, o: &JobOptions) -> Result<Enqueued, Error> {
        if o.priority > MAX_PRIORITY {
            return Err(Error::InvalidArgument(format!("priority {} is above {MAX_PRIORITY}", o.priority)));
        }
        if o.attempts == 0 {
            return Err(Error::InvalidArgument("a job needs at least 1 attempt".into()));
        }
        check_wait("delay", o.delay, true)?;
        check_wait("backoff", o.backoff, true)?;
        check_wait("keep_completed", o.keep_completed, true)?;
        let now = now_ms();
        let delay = i64::try_from(o.delay.as_millis()).unwrap_or(i64::MAX);
        let job = Job {
            id: key.to_owned(),
            scope: self.name.clone(),
            name: name.to_owned(),
            payload: payload.to_owned(),
            priority: o.priority,
            state: if delay > 0 { "delayed" } else { "ready" }.into(),
            enqueued_at: now,
            run_at: now.saturating_add(delay),
            attempts: 0,
            max_attempts: o.attempts,
            backoff_ms: u64::try_from(o.backoff.as_millis()).unwrap_or(u64::MAX),
            worker: None,
            lease_until: None,
            progress: 0,
            finished_at: None,
            keep_ms: u64::try_from(o.keep_completed.as_millis()).unwrap_or(u64::MAX),
            error: None,
            tags: o.tags.clone(),
        };
        Ok(match self.store.create(&job).await? {
            PutOutcome::Written { .. } => Enqueued::Added,
            _ => Enqueued::Duplicate,
        })
    }

    /// Claims the first ready job (lowest priority number, then oldest)
    /// for `worker`, holding it for `lease`; `None` when none is ready or
    /// the rate limit holds. Each job is claimed by one worker.
    ///
    /// # Errors
    /// Store errors; a `lease` outside 1 ms to [`MAX_WAIT`] is
    /// [`Error::InvalidArgument`].
    pub async fn claim(&self, worker: &str, lease: Duration) -> Result<Option<Stored<Job>>, Error> {
        check_wait("lease", lease, false)?;
        if let Some((limit, window)) = self.rate {
            // Idle polls of an empty queue must not use up the limit.
            if self.store.range(Job::ready(&self.name), f64::NEG_INFINITY, f64::INFINITY, false, 1).await?.is_empty() {
                return Ok(None);
            }
            let limiter = Queues::limiter(&self.handle, &self.name)?;
            if matches!(limiter.attempt(limit, window).await?, microdcs_valkey::families::RateDecision::Limited { .. })
            {
                return Ok(None);
            }
        }
        let lease = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
        self.store
            .claim(Job::ready(&self.name), |j| {
                Some(Job {
                    state: "active".into(),
                    attempts: j.attempts + 1,
                    worker: Some(worker.to_owned()),
                    lease_until: Some(now_ms().saturating_add(lease)),
                    ..j.clone()
                })
            })
            .await
    }

    /// Renews the lease of a job this worker holds: it now ends `lease`
    /// from now. A job that runs longer than its lease must be renewed
    /// before the lease ends, or `recover_stalled` takes it back (and this
    /// worker can no longer settle it: `Lost`).
    ///
    /// # Errors
    /// Store errors; a `lease` outside 1 ms to [`MAX_WAIT`] is
    /// [`Error::InvalidArgument`].
    pub async fn extend(&self, job: &mut Stored<Job>, lease: Duration) -> Result<Settled, Error> {
        check_wait("lease", lease, false)?;
        if !job.doc.is("active") {
            return Ok(Settled::Lost);
        }
        let lease = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
        let next = Job { lease_until: Some(now_ms().saturating_add(lease)), ..job.doc.clone() };
        Ok(match self.store.update_in_place(job, next).await? {
            PutOutcome::Written { .. } => Settled::Done,
            _ => Settled::Lost,
        })
    }

    /// Reports progress (0 to 100): a change entry consumers see. It does
    /// not renew the lease ([`Queue::extend`] does).
    ///
    /// # Errors
    /// Store errors.
    pub async fn progress(&self, job: &mut Stored<Job>, pct: u32) -> Result<Settled, Error> {
        if !job.doc.is("active") {
            return Ok(Settled::Lost);
        }
        let next = Job { progress: pct.min(100), ..job.doc.clone() };
        Ok(match self.store.update_in_place(job, next).await? {
            PutOutcome::Written { .. } => Settled::Done,
            _ => Settled::Lost,
        })
    }

    /// Completes a job this worker holds: one step writes the state, the
    /// completion event (outbox) and the queue's `completed` count.
    ///
    /// # Errors
    /// Store errors.
    pub async fn complete(&self, job: &mut Stored<Job>) -> Result<Settled, Error> {
        if !job.doc.is("active") {
            return Ok(Settled::Lost);
        }
        let next = Job { state: "completed".into(), finished_at: Some(now_ms()), progress: 100, ..job.doc.clone() };
        let stats = Queues::stats(&self.handle, &self.name)?;
        let effects = Effects::new()
            .work(WorkEntry::new().field("event", "completed").field("attempts", next.attempts))
            .hincr(&stats, "completed", 1);
        Ok(match self.store.step_in_place(job, next, &effects).await? {
            StepOutcome::Written { .. } => Settled::Done,
            _ => Settled::Lost,
        })
    }

    /// Fails the attempt of a job this worker holds: again after its
    /// backoff, or dead after the last attempt (counted as `retried` or
    /// `dead`, with a `retried` or `dead` event; a stall taken back by
    /// `recover_stalled` is reported the same way).
    ///
    /// # Errors
    /// Store errors.
    pub async fn fail(&self, job: &mut Stored<Job>, error: &str) -> Result<Settled, Error> {
        if !job.doc.is("active") {
            return Ok(Settled::Lost);
        }
        let next = job.doc.failed(now_ms(), error);
        Ok(match self.store.step_in_place(job, next.clone(), &self.settle_effects(&next)?).await? {
            StepOutcome::Written { .. } => Settled::Done,
            _ => Settled::Lost,
        })
    }

    fn settle_effects(&self, next: &Job) -> Result<Effects, Error> {
        let stats = Queues::stats(&self.handle, &self.name)?;
        let what = if next.is("dead") { "dead" } else { "retried" };
        Ok(Effects::new()
            .work(WorkEntry::new().field("event", what).field("attempts", next.attempts))
            .hincr(&stats, what, 1))
    }

    /// Moves delayed jobs whose time has come to `ready`; how many.
    ///
    /// # Errors
    /// Store errors.
    pub async fn promote(&self) -> Result<u64, Error> {
        let mut n = 0;
        #[allow(clippy::cast_precision_loss)]
        let now = now_ms() as f64;
        // Claims only while a delayed job is due: a claim finding none
        // walks the whole index before it says so.
        while !self.store.range(Job::delayed(&self.name), f64::NEG_INFINITY, now, false, 1).await?.is_empty() {
            let promoted = self
                .store
                .claim_due(Job::delayed(&self.name), now, |j| Some(Job { state: "ready".into(), ..j.clone() }))
                .await?;
            if promoted.is_none() {
                break;
            }
            n += 1;
        }
        Ok(n)
    }

    /// Takes back jobs whose holder's lease ran out (a worker that died or
    /// hangs): the stall counts as a failed attempt, written with its
    /// count and event in one step that expects the version read (a worker
    /// settling the job meanwhile wins, and the job is left alone); how
    /// many.
    ///
    /// # Errors
    /// Store errors.
    pub async fn recover_stalled(&self) -> Result<u64, Error> {
        let now = now_ms();
        #[allow(clippy::cast_precision_loss)]
        let due = self.store.range(Job::active(&self.name), f64::NEG_INFINITY, now as f64, false, 1000).await?;
        let mut n = 0;
        for entry in due {
            let Some(read) = self.store.get_in(&self.name, &entry.member).await? else { continue };
            if read.doc.lease_end().is_none_or(|end| end > now) {
                continue;
            }
            let next = read.doc.failed(now, "stalled: the worker's lease ran out");
            let effects = self.settle_effects(&next)?;
            if let StepOutcome::Written { .. } = self.store.step(Some(&read), &next, &effects).await? {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Removes completed jobs kept longer than their `keep_completed`: a
    /// poller task deleting them through the delete script.
    pub fn retention(&self, interval: Duration) -> Retention {
        ExpirySweep::new(self.store.clone(), Job::retention as fn(&str) -> _, interval)
    }

    /// The queue's counts: `completed`, `retried`, `dead`.
    ///
    /// # Errors
    /// Store errors.
    pub async fn stats(&self) -> Result<std::collections::BTreeMap<String, String>, Error> {
        let stats = Queues::stats(&self.handle, &self.name)?;
        let mut out = std::collections::BTreeMap::new();
        for f in ["completed", "retried", "dead"] {
            out.insert(f.to_owned(), stats.get(f).await?.unwrap_or_else(|| "0".into()));
        }
        Ok(out)
    }
}
