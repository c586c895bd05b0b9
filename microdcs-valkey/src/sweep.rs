// Just over 600 lines: the due and the expiry sweep share their scope walk
// and their damage accounting. The seam if it grows: one file per sweep.
//! Sweeps over sorted indexes scored by time: timers that fire, and
//! documents that expire. Both are [`PollerTask`]s, run by the
//! [`Poller`](crate::poller::Poller) (`Poller::task`) or by hand (`sweep()`).
//!
//! - [`DueSweep`] fires the timers of a sorted index (the SFC `due` index):
//!   every interval, for each scope of the type's registry, the ids due by
//!   the server's clock go, oldest first, to a callback as [`Due`] (ids
//!   with their scores). It reads only; the callback decides what a due id
//!   means (usually a step of its document). With
//!   [`heartbeat`](DueSweep::heartbeat) it writes the server's clock after
//!   each run, and with [`after_outage`](DueSweep::after_outage) a run that
//!   finds the heartbeat older than a grace first hands every running job
//!   to a walk, so what was missed while nothing swept is looked at.
//! - [`ExpirySweep`] deletes the documents whose expiry score has passed,
//!   each through the type's delete script (indexes stay exact, change
//!   consumers get a `Deleted` change), and reports an [`Expired`] count:
//!   the way to expire ordered data, since a `ttl` removes the document
//!   hash only.
//!
//! ```no_run
//! use std::time::Duration;
//! use microdcs_valkey::poller::{BoxError, Poller};
//! use microdcs_valkey::sweep::{Due, DueSweep};
//! use microdcs_valkey::{Document, Valkey, keyspace};
//!
//! #[derive(Debug, Clone, serde::Serialize, serde::Deserialize, Document)]
//! #[microdcs(sorted(key = "job:due:{scope}", score = due_at, name = "due"))]
//! struct Job { id: String, scope: String, due_at: i64 } // Unix milliseconds
//!
//! keyspace! { Jobs { documents: [Job] } }
//!
//! # async fn demo(valkey: Valkey) -> Result<(), microdcs_valkey::Error> {
//! let jobs = Jobs::open(valkey.clone()).store::<Job>();
//! let fire = |scope: String, due: Due| async move {
//!     for timer in due {
//!         println!("{scope}: {} due at {}", timer.member, timer.score);
//!     }
//!     Ok::<(), BoxError>(())
//! };
//! let sweep = DueSweep::new(jobs, |scope| Job::due(scope), fire, Duration::from_secs(1));
//! let poller = Poller::new(valkey, "instance-1").task(sweep).start().await?;
//! # poller.shutdown().await; Ok(()) }
//! ```
//!
//! # Guarantees and bounds
//!
//! Scores are Unix time in milliseconds, compared with the server's clock
//! (`TIME`), so clients' clocks do not matter; an index scored in another
//! unit fires or expires at the wrong time. A run handles at most `batch`
//! ids per scope (1,000 by default); the rest come next run, and ids a run
//! left in place (a callback that failed or left them, a document kept or
//! damaged) are stepped over by the next runs, so they never hide the ids
//! behind them. Each call of a run is bounded like any read or write of
//! the store (`ResponseTimeout`, `WriteAttempts`); nothing blocks. A due
//! id fires again on later runs until its document leaves the index, so
//! the callback moves it (a step that clears or moves `due_at`).
//!
//! One damaged scope or document never stops a run: a scope that cannot be
//! swept (an empty registry member, an index key of another type) and a
//! document that cannot be judged are logged, counted in
//! `microdcs.valkey.sweep.damaged` and stepped over. A `DueSweep` run then
//! returns the first such error (a failed callback is [`Error::Callback`]
//! naming the scope) after the other scopes ran; an `ExpirySweep` counts
//! the damage in [`Expired`]. A connection error ends a run of either
//! (what it did stays done), as does, for an expiry sweep, an index that
//! is not sorted or a registry key of another type; the next run starts
//! over.
//!
//! Timers, outages and expiring ordered data are in the guide: [Streams,
//! consumers and
//! retention](https://github.com/microdcs/microdcs/blob/main/docs/guide/07-streams-and-consumers.md#sweeps).

use std::time::Duration;

use microdcs_schema::{Document, GroupQuery};

use crate::codec::Codec;
use crate::error::{Error, Result};
use crate::families::StringKey;
use crate::poller::{BoxError, BoxFuture, PollerTask};
use crate::store::{Page, Store};

/// What a sweep hands its callback: one scope's due ids with their scores
/// (each a [`Scored`](crate::families::Scored): the id as `member`).
pub type Due = Vec<crate::page::Scored>;

/// The due sweep of document type `D`: a poller task that fires the timers
/// of a sorted index (the SFC `due` index). Every interval, for each scope
/// of the type's registry, the ids due by the server's clock go to a
/// callback, oldest first. Reads only; no blocking command.
///
/// The index's scores are Unix time in milliseconds, compared with the
/// server's clock (`TIME`), so clients' clocks do not matter; an index
/// scored in another unit fires at the wrong time. Scores are finite (a
/// write with a NaN or infinite score is refused).
///
/// Built with [`DueSweep::new`], run by the [`crate::poller::Poller`]
/// (`Poller::task`) or by hand ([`DueSweep::sweep`]).
pub struct DueSweep<D, C, Q, F> {
    store: Store<D, C>,
    query: Q,
    fire: F,
    interval: Duration,
    batch: usize,
    heartbeat: Option<StringKey>,
    outage: Option<Outage<D>>,
    /// Per scope, where the next run starts among the due ids: past those
    /// a full run handed out and found still due afterwards (a callback
    /// that failed or left them), so a batch of stuck ids cannot hide the
    /// ones behind it; a run that reaches the end starts the next at the
    /// head again.
    resume: Resume,
}

/// What a sweep does after an outage: the group index of the running jobs
/// and the callback that takes them.
struct Outage<D> {
    grace: Duration,
    active: ActiveQuery<D>,
    walk: Walk,
}

/// The group index of a scope's running jobs.
type ActiveQuery<D> = Box<dyn Fn(&str) -> GroupQuery<D> + Send + Sync>;

/// The callback taking a scope's running jobs after an outage.
type Walk = Box<dyn Fn(String, Vec<String>) -> BoxFuture<'static, std::result::Result<(), BoxError>> + Send + Sync>;

impl<D, C, Q, F, Fut> DueSweep<D, C, Q, F>
where
    D: Document + Send + Sync + 'static,
    C: Codec<D> + Send + Sync + 'static,
    Q: Fn(&str) -> GroupQuery<D> + Send + Sync + 'static,
    F: Fn(String, Due) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<(), BoxError>> + Send + 'static,
{
    /// A sweep every `interval` of the sorted index `query(scope)` names
    /// (`|scope| SfcState::due(scope)`), handing each scope's due ids to
    /// `fire`; at most 1,000 ids per scope and run (the rest come next run).
    pub fn new(store: Store<D, C>, query: Q, fire: F, interval: Duration) -> Self {
        DueSweep { store, query, fire, interval, batch: 1000, heartbeat: None, outage: None, resume: Resume::default() }
    }

    /// At most this many ids per scope and run (1 to [`Page::MAX`]).
    #[must_use]
    pub fn batch(mut self, batch: usize) -> Self {
        self.batch = batch.clamp(1, Page::MAX);
        self
    }

    /// After each complete run, writes the server's clock to `heartbeat`
    /// ([`StringKey::set_now`]), so `age()` tells how long ago the last
    /// sweep ran (an outage's length).
    #[must_use]
    pub fn heartbeat(mut self, heartbeat: StringKey) -> Self {
        self.heartbeat = Some(heartbeat);
        self
    }

    /// After an outage: when the heartbeat ([`DueSweep::heartbeat`], which
    /// this needs) is older than `grace` at the start of a run (or was
    /// never written), the run first hands every id of `active(scope)` (the
    /// running jobs, `|scope| SfcState::active(scope)`) to `walk`, scope by
    /// scope, so timers and waits missed while nothing swept are looked at.
    #[must_use]
    pub fn after_outage<A, W, WFut>(mut self, grace: Duration, active: A, walk: W) -> Self
    where
        A: Fn(&str) -> GroupQuery<D> + Send + Sync + 'static,
        W: Fn(String, Vec<String>) -> WFut + Send + Sync + 'static,
        WFut: Future<Output = std::result::Result<(), BoxError>> + Send + 'static,
    {
        self.outage = Some(Outage {
            grace,
            active: Box::new(active),
            walk: Box::new(move |scope, ids| Box::pin(walk(scope, ids))),
        });
        self
    }

    /// One run: every scope of the registry, the ids due by the server's
    /// clock now, to the callback; returns how many ids it handed out. Ids
    /// a full batch handed out that are still due after the callback (it
    /// failed, or left them) are stepped over by the next runs until one
    /// reaches the end of the due ids, so they never hide the ids behind.
    ///
    /// # Errors
    /// Connection errors end the run; an index that is not sorted, a key
    /// of another type and callback errors are the first error of the run,
    /// after the other scopes ran. A scope that cannot be swept (a key of
    /// another type, a registry member that is no valid scope) is also
    /// logged as a warning and counted in `microdcs.valkey.sweep.damaged`
    /// ([`Metrics::SWEEP_DAMAGED`](crate::client::Metrics::SWEEP_DAMAGED)).
    pub async fn sweep(&self) -> Result<u64> {
        let now = crate::retry::server_time_ms(self.store.valkey()).await?;
        let (mut fired, mut first_err, mut walk_failed) = (0u64, None, false);
        // The registry, read once for both passes of the run.
        let scopes = all_scopes(&self.store).await?;
        // A heartbeat that cannot be read counts as never written: the run
        // walks the running jobs and writes it again, instead of stopping
        // every run from then on.
        let stale = match &self.heartbeat {
            Some(beat) => match beat.age().await {
                Ok(age) => age.is_none_or(|age| self.outage.as_ref().is_some_and(|o| age > o.grace)),
                Err(e) if e.is_corrupt() => true,
                Err(e) => return Err(e),
            },
            None => false,
        };
        if let Some(outage) = &self.outage
            && stale
        {
            for scope in &scopes {
                // A scope whose running jobs cannot be listed for damage (a
                // key of another type, a registry member that is no valid
                // scope) is stepped over as the due pass below steps over
                // it: the other scopes are walked and their timers still
                // fire. Damage does not keep the heartbeat old, or every run
                // would walk every scope again until someone repaired it.
                let ids = match self.active_ids(outage, scope).await {
                    Ok(ids) => ids,
                    Err(e) if e.is_connection() => return Err(e),
                    Err(e) if is_damage(&e) => {
                        tracing::warn!(scope = %scope, error = %e, "due sweep: a scope whose running jobs cannot be listed after an outage is stepped over");
                        self.store.valkey().metrics().add_sweep_damaged();
                        first_err.get_or_insert(e);
                        continue;
                    }
                    // Not damage (a server loading, a refused command): this
                    // scope is walked again by the next run, which keeps the
                    // heartbeat old.
                    Err(e) => {
                        walk_failed = true;
                        first_err.get_or_insert(e);
                        continue;
                    }
                };
                if ids.is_empty() {
                    continue;
                }
                if let Err(e) = (outage.walk)(scope.clone(), ids).await {
                    walk_failed = true;
                    if first_err.is_none() {
                        first_err = Some(Error::Callback { what: "outage", scope: scope.clone(), source: e });
                    }
                }
            }
        }
        for scope in scopes {
            let query = (self.query)(&scope);
            let start = self.resume.at(&scope);
            // One scope's damage (a key of another type) is that scope's
            // error: the other scopes still run.
            let due = match self.due_from(&query, now, start).await {
                Ok(due) => due,
                Err(e) if e.is_connection() => return Err(e),
                Err(e) => {
                    if is_damage(&e) {
                        tracing::warn!(scope = %scope, error = %e, "due sweep: a scope that cannot be swept is stepped over");
                        self.store.valkey().metrics().add_sweep_damaged();
                    }
                    first_err.get_or_insert(e);
                    continue;
                }
            };
            let full = due.len() == self.batch;
            if !full {
                self.resume.set(&scope, 0);
            }
            if due.is_empty() {
                continue;
            }
            fired += due.len() as u64;
            let handed: std::collections::HashSet<String> = due.iter().map(|d| d.member.clone()).collect();
            if let Err(e) = (self.fire)(scope.clone(), due).await
                && first_err.is_none()
            {
                first_err = Some(Error::Callback { what: "due", scope: scope.clone(), source: e });
            }
            if full && let Ok(again) = self.due_from(&query, now, start).await {
                let stuck = again.iter().take_while(|d| handed.contains(&d.member)).count();
                self.resume.set(&scope, start + stuck);
            }
        }
        // A failed outage walk leaves the heartbeat old, so the next run
        // walks the running jobs again.
        if let Some(beat) = &self.heartbeat
            && !walk_failed
        {
            beat.set_now(None).await?;
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(fired),
        }
    }
}

impl<D, C, Q, F> DueSweep<D, C, Q, F>
where
    D: Document + Send + Sync + 'static,
    C: Codec<D> + Send + Sync + 'static,
{
    /// Every id of the running jobs of `scope` (`active(scope)`), page by page.
    async fn active_ids(&self, outage: &Outage<D>, scope: &str) -> Result<Vec<String>> {
        let mut ids = Vec::new();
        let mut at = Some(Page::first(1000));
        while let Some(q) = at {
            let got = self.store.ids_page(&(outage.active)(scope), q).await?;
            ids.extend(got.ids);
            at = got.next;
        }
        Ok(ids)
    }

    /// The ids due by `now` from `start` in (at most a batch).
    async fn due_from(&self, query: &GroupQuery<D>, now: u64, start: usize) -> Result<Due> {
        Store::<D, C>::check_sorted(query)?;
        self.store.range_at(query, f64::NEG_INFINITY, now as f64, false, start, self.batch).await
    }
}

impl<D, C, Q, F, Fut> PollerTask for DueSweep<D, C, Q, F>
where
    D: Document + Send + Sync + 'static,
    C: Codec<D> + Send + Sync + 'static,
    Q: Fn(&str) -> GroupQuery<D> + Send + Sync + 'static,
    F: Fn(String, Due) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<(), BoxError>> + Send + 'static,
{
    fn interval(&self) -> Duration {
        self.interval
    }

    fn run(&self) -> BoxFuture<'_, std::result::Result<(), BoxError>> {
        Box::pin(async move { self.sweep().await.map(|_| ()).map_err(|e| Box::new(e) as BoxError) })
    }
}

/// The expiry sweep of document type `D`: documents that carry their end
/// of life in a sorted index (scored by the time they expire, Unix
/// milliseconds, a field or a method such as `created + 30 days`) are
/// deleted once it has passed, each through the type's delete script, so
/// every index stays exact and change consumers get a `deleted` entry.
/// The pattern for ordered data that must expire: a `ttl` removes the
/// document hash only, never its index entries, so a type with a `ttl` may
/// have no ordered index.
///
/// Each run reads, per scope of the registry, the ids whose expiry score
/// is at most the server's clock (`TIME`; clients' clocks do not matter),
/// reads each document and deletes it only if the document itself still
/// says it has expired, expecting the version read: a document written
/// meanwhile with a later expiry stays. `verify` and `rebuild` know the
/// index like any other sorted index.
///
/// ```ignore
/// #[microdcs(kind = "message", sorted(key = "msg:expiry:{scope}", score = expires_at, name = "expiry"))]
/// // ...
/// let sweep = ExpirySweep::new(store, |scope| Message::expiry(scope), Duration::from_secs(60));
/// let poller = Poller::new(valkey, "node-1").task(sweep).start().await?;
/// ```
pub struct ExpirySweep<D, C, Q> {
    store: Store<D, C>,
    query: Q,
    interval: Duration,
    batch: usize,
    /// Per scope, where the next run starts among the due entries: past
    /// the ones the last run left in place when it stopped at its cap, so
    /// a head of damaged or kept entries as long as a run cannot hide the
    /// expired documents behind it. A run that reaches the end of the due
    /// entries starts the next one at the head again.
    resume: Resume,
}

/// What one expiry run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Expired {
    /// Documents deleted.
    pub deleted: u64,
    /// Ids whose document is no longer expired (by its own score) or was
    /// written between its read and its delete: left in place.
    pub kept: u64,
    /// Index entries whose document was gone: damage (every write keeps
    /// the index exact), removed by the sweep while the document is still
    /// absent.
    pub orphans: u64,
    /// Documents that could not be judged or deleted (a corrupt hash, a
    /// text the codec rejects, a score that is not a number, stored index
    /// fields that cannot name their entries): left in place and logged;
    /// `verify` names them, and once `rebuild` has rewritten their index
    /// fields the next run deletes them.
    pub damaged: u64,
    /// Scopes of the registry the run could not sweep (a member that is no
    /// valid scope, such as an empty one; an index key of another type):
    /// logged, and the other scopes still swept.
    pub damaged_scopes: u64,
}

impl<D, C, Q> ExpirySweep<D, C, Q>
where
    D: Document + Send + Sync + 'static,
    C: Codec<D> + Send + Sync + 'static,
    Q: Fn(&str) -> GroupQuery<D> + Send + Sync + 'static,
{
    /// A sweep every `interval` of the sorted index `query(scope)` names
    /// (`|scope| Message::expiry(scope)`); per scope and run at most 1,000
    /// documents deleted and 1,000 entries left in place (the rest come
    /// next run).
    pub fn new(store: Store<D, C>, query: Q, interval: Duration) -> Self {
        ExpirySweep { store, query, interval, batch: 1000, resume: Resume::default() }
    }

    /// Per scope and run, at most this many documents deleted and this many
    /// entries left in place (1 to [`Page::MAX`]).
    #[must_use]
    pub fn batch(mut self, batch: usize) -> Self {
        self.batch = batch.clamp(1, Page::MAX);
        self
    }

    /// One run over every scope of the registry. Entries left in place
    /// (kept or damaged) are stepped over within the run, and a run that
    /// stops at its cap of entries left in place makes the next run start
    /// past them, so they never hide the expired documents behind them.
    ///
    /// # Errors
    /// An index that is not sorted, or not the index of the scope it is
    /// given ([`Error::InvalidArgument`]), connection errors, a registry
    /// key of another type: the run ends there (what it deleted stays
    /// deleted). Damage does not end it: a damaged document is counted in
    /// [`Expired::damaged`], a scope that cannot be swept in
    /// [`Expired::damaged_scopes`]; each is logged as a warning and counted
    /// in `microdcs.valkey.sweep.damaged`
    /// ([`Metrics::SWEEP_DAMAGED`](crate::client::Metrics::SWEEP_DAMAGED)).
    pub async fn sweep(&self) -> Result<Expired> {
        let now = crate::retry::server_time_ms(self.store.valkey()).await?;
        let mut done = Expired::default();
        for scope in all_scopes(&self.store).await? {
            let query = (self.query)(&scope);
            // A sweep built with the wrong index is the caller's error, the
            // same in every scope: it ends the run.
            Store::<D, C>::check_sorted(&query)?;
            if self.store.index_scope(&query) != Some(scope.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "the expiry index of `{}` for scope `{scope}` must be that scope's own index (its key \
                     holds `{{scope}}`, given the scope)",
                    D::SPEC.type_name
                )));
            }
            // One scope's damage (a registry member that cannot name a key,
            // an index key of another type) is that scope's alone: counted,
            // and the other scopes still run.
            match self.sweep_scope(&scope, &query, now, &mut done).await {
                Ok(()) => {}
                Err(e) if is_damage(&e) => {
                    tracing::warn!(scope = %scope, error = %e, "expiry sweep: a scope that cannot be swept is stepped over");
                    self.store.valkey().metrics().add_sweep_damaged();
                    done.damaged_scopes += 1;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    /// One scope: pages of expired entries, each judged by its document,
    /// stepping over the entries left in place.
    async fn sweep_scope(&self, scope: &str, query: &GroupQuery<D>, now: u64, done: &mut Expired) -> Result<()> {
        let start = self.resume.at(scope);
        let (left, at_end) = self.sweep_from(scope, query, now, start, done).await?;
        if at_end {
            self.resume.set(scope, 0);
        } else if left >= self.batch {
            self.resume.set(scope, start + left);
        }
        Ok(())
    }

    /// The entries due from `start` (past the ones an earlier run left in
    /// place); how many it left in place, and whether it reached the end.
    async fn sweep_from(
        &self,
        scope: &str,
        query: &GroupQuery<D>,
        now: u64,
        start: usize,
        done: &mut Expired,
    ) -> Result<(usize, bool)> {
        let prefix = self.store.valkey().prefix();
        let (mut deleted, mut left) = (0usize, 0usize);
        while deleted < self.batch && left < self.batch {
            // The entries left so far are still at the head: start past them.
            let due =
                self.store.range_at(query, f64::NEG_INFINITY, now as f64, false, start + left, self.batch).await?;
            let full = due.len() == self.batch;
            for entry in due {
                if deleted >= self.batch || left >= self.batch {
                    return Ok((left, false));
                }
                let read = match self.store.get_in(scope, &entry.member).await {
                    Ok(Some(read)) => read,
                    Ok(None) => {
                        if self.store.drop_orphan_entry(query, scope, &entry.member).await? {
                            // Damage repaired, said where it happened: a
                            // caller that runs the sweep as a poller task
                            // never sees the run's report.
                            tracing::warn!(kind = D::SPEC.kind, scope, id = %entry.member, "expiry sweep: removed an index entry whose document was gone");
                            done.orphans += 1;
                        } else {
                            // Created again meanwhile: judged next run.
                            done.kept += 1;
                            left += 1;
                        }
                        continue;
                    }
                    Err(e) if e.is_corrupt() || e.is_invalid_input() => {
                        self.left_damaged(scope, &entry.member, &e, "a damaged document is left in place", done);
                        left += 1;
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                // The document's own expiry, not the index's: a write may
                // have moved it since the range was read.
                match expired_at(&read.doc, prefix, query.index(), now) {
                    Ok(true) => {}
                    Ok(false) => {
                        done.kept += 1;
                        left += 1;
                        continue;
                    }
                    Err(e) => {
                        let why = "a document whose expiry cannot be read is left in place";
                        self.left_damaged(scope, &entry.member, &e, why, done);
                        left += 1;
                        continue;
                    }
                }
                // Stored index fields that cannot name the entries they
                // hold (a damaged `each` values field) are refused before
                // the delete script runs: deleting the hash would leave its
                // entries behind for good, with nothing left to find them
                // by. Left in place instead, for `verify` to name and
                // `rebuild` to rewrite; the next run then deletes it.
                match self.store.delete(&read).await {
                    Ok(crate::store::DeleteOutcome::Deleted { .. }) => {
                        done.deleted += 1;
                        deleted += 1;
                    }
                    Ok(_) => {
                        done.kept += 1;
                        left += 1;
                    }
                    Err(e) if e.is_corrupt() => {
                        let why = "a document whose index fields are damaged is left in place";
                        self.left_damaged(scope, &entry.member, &e, why, done);
                        left += 1;
                    }
                    Err(e) => return Err(e),
                }
            }
            if !full {
                return Ok((left, true));
            }
        }
        Ok((left, false))
    }
}

impl<D, C, Q> ExpirySweep<D, C, Q>
where
    D: Document + Send + Sync + 'static,
    C: Codec<D> + Send + Sync + 'static,
{
    /// Counts, logs and meters a document left in place as damaged.
    fn left_damaged(&self, scope: &str, id: &str, e: &Error, why: &'static str, done: &mut Expired) {
        tracing::warn!(scope, id, error = %e, "expiry sweep: {why}");
        self.store.valkey().metrics().add_sweep_damaged();
        done.damaged += 1;
    }
}

/// Whether an error of one scope's sweep is damage of that scope (stored
/// data, or a registry member that cannot name a key), which the run
/// steps over, rather than a reason to end the run (connection errors,
/// the caller's own arguments).
fn is_damage(e: &Error) -> bool {
    e.is_corrupt() || matches!(e, Error::Key(_))
}

/// Per scope, how many due entries at the head a sweep's next run steps
/// over (0: start at the head), shared by both sweeps.
#[derive(Default)]
struct Resume(std::sync::Mutex<std::collections::HashMap<String, usize>>);

impl Resume {
    fn at(&self, scope: &str) -> usize {
        self.0.lock().map_or(0, |r| r.get(scope).copied().unwrap_or(0))
    }

    fn set(&self, scope: &str, at: usize) {
        if let Ok(mut r) = self.0.lock() {
            if at == 0 {
                r.remove(scope);
            } else {
                r.insert(scope.to_owned(), at);
            }
        }
    }
}

/// Every scope of the type's registry, page by page.
async fn all_scopes<D: Document, C: Codec<D>>(store: &Store<D, C>) -> Result<Vec<String>> {
    let mut scopes = Vec::new();
    // A set scan may name a member twice across its pages: each scope runs once.
    let mut seen = std::collections::HashSet::new();
    let mut page = Some(Page::first(1000));
    while let Some(p) = page {
        let got = store.scopes(p).await?;
        scopes.extend(got.ids.into_iter().filter(|s| seen.insert(s.clone())));
        page = got.next;
    }
    Ok(scopes)
}

/// Whether `doc`'s score in group index `index` is at most `now`; a
/// document outside the index (no expiry) has not expired.
fn expired_at<D: Document>(doc: &D, prefix: &microdcs_schema::KeyPrefix, index: usize, now: u64) -> Result<bool> {
    let spec = &D::SPEC.groups[index];
    let entries = doc.index_entries(prefix)?;
    let Some(Some(entry)) = entries.groups.get(index) else { return Ok(false) };
    let score = entry.fields.iter().find(|(f, _)| *f == spec.name).and_then(|(_, v)| v.parse::<f64>().ok());
    Ok(score.is_some_and(|s| s <= now as f64))
}

impl<D, C, Q> PollerTask for ExpirySweep<D, C, Q>
where
    D: Document + Send + Sync + 'static,
    C: Codec<D> + Send + Sync + 'static,
    Q: Fn(&str) -> GroupQuery<D> + Send + Sync + 'static,
{
    fn interval(&self) -> Duration {
        self.interval
    }

    fn run(&self) -> BoxFuture<'_, std::result::Result<(), BoxError>> {
        Box::pin(async move {
            let done = self.sweep().await.map_err(|e| Box::new(e) as BoxError)?;
            if done != Expired::default() {
                tracing::info!(
                    kind = D::SPEC.kind,
                    deleted = done.deleted,
                    kept = done.kept,
                    orphans = done.orphans,
                    damaged = done.damaged,
                    damaged_scopes = done.damaged_scopes,
                    "expiry sweep run"
                );
            }
            Ok(())
        })
    }
}
