//! What a running poller reports about itself, for a health endpoint: the
//! nudge subscription, the scope registry reads and each stream's reads.
//! Trouble the loop rides out by itself (a registry unreadable for minutes,
//! a stream whose reads fail) is otherwise visible only in the log.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

/// A snapshot of a poller's health ([`crate::poller::PollerHandle::health`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PollerHealth {
    /// Whether the loop runs (it ends only at shutdown, or if it panicked).
    pub running: bool,
    /// Whether the nudge subscription is up. While it is down the fallback
    /// poll still reads every stream each `PollInterval`.
    pub subscribed: bool,
    /// The scope registry reads (each `ScopeRefreshInterval`).
    pub registry: ReadHealth,
    /// Each stream read so far, by key.
    pub streams: BTreeMap<String, ReadHealth>,
    /// Each consumer's backlog per scope, by stream key and group, as last
    /// sampled (each `PollInterval`, with the fallback poll).
    pub backlog: BTreeMap<(String, String), Backlog>,
    /// Undelivered entries of one consumer in one scope from which the
    /// poller is unhealthy: setting `ConsumerLagLimit`, by default half of
    /// `ChangeStreamMaxLength` (at least 1), so a burst of that size again
    /// would trim entries it has not read.
    pub lag_limit: u64,
    /// Each stream where entries its consumer's group had not read were
    /// trimmed, by key (see [`crate::poller::StreamConsumer::gap`]).
    pub gaps: BTreeMap<String, GapHealth>,
}

/// The gaps of one stream: entries trimmed before its consumer read them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GapHealth {
    /// Gaps seen since the poller started.
    pub gaps: u64,
    /// Entries lost in them, as far as the server could count.
    pub lost: u64,
    /// The last gap.
    pub last: crate::streams::Gap,
    /// When it was seen.
    pub at: SystemTime,
    /// Whether every consumer group of the stream made up for its last
    /// gap ([`crate::poller::GapOutcome::Recovered`]), or they were
    /// cleared ([`crate::poller::PollerHandle::clear_gaps`]).
    pub recovered: bool,
    /// The groups whose last gap on this stream is not made up for (each
    /// typed consumer of a shared stream has its own group, and one
    /// group's recovery says nothing of another's).
    pub open: std::collections::BTreeSet<String>,
}

/// What waits in one stream for a consumer's group.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Backlog {
    /// The consumer's group.
    pub group: String,
    /// The scope.
    pub scope: String,
    /// When the oldest entry the group has not handled yet (pending or not
    /// delivered) was written, by its id; `None` when nothing waits.
    pub oldest_waiting: Option<SystemTime>,
    /// Entries delivered to the group and not acknowledged yet.
    pub pending: u64,
    /// Entries not yet delivered to the group; `None` when the server
    /// cannot tell (after entries were deleted from the middle of the stream).
    pub lag: Option<u64>,
    /// When this was sampled.
    pub sampled_at: SystemTime,
}

/// How the reads of one thing have gone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadHealth {
    /// When a read last succeeded.
    pub last_ok: Option<SystemTime>,
    /// Failed reads since the poller started.
    pub errors: u64,
    /// When the reads started failing, while they still fail (cleared by
    /// the next success).
    pub failing_since: Option<SystemTime>,
    /// The last failure (no secrets: the runtime's error text).
    pub last_error: Option<String>,
}

impl ReadHealth {
    /// Whether the reads have failed for longer than `grace`, as of `now`.
    fn failing_longer(&self, grace: Duration, now: SystemTime) -> bool {
        self.failing_since.is_some_and(|since| now.duration_since(since).unwrap_or_default() > grace)
    }

    fn ok(&mut self, now: SystemTime) {
        self.last_ok = Some(now);
        self.failing_since = None;
    }

    fn failed(&mut self, error: &dyn std::fmt::Display, now: SystemTime) {
        self.errors += 1;
        self.failing_since.get_or_insert(now);
        self.last_error = Some(error.to_string());
    }
}

impl PollerHealth {
    /// Healthy: running, subscribed, neither the registry nor any stream
    /// failing for longer than `grace` (a failure shorter than that is a
    /// blip the next read may already have healed), no gap its consumer has
    /// not recovered from (a loss does not heal by waiting), and every
    /// consumer keeping up in every scope: no entry waiting longer than
    /// `grace` (a scope left unserved shows here too) and fewer than
    /// [`PollerHealth::lag_limit`] entries undelivered. Backlogs are sampled
    /// each `PollInterval`, so give a `grace` of at least two.
    pub fn is_healthy(&self, grace: Duration) -> bool {
        let now = SystemTime::now();
        self.running
            && self.subscribed
            && !self.registry.failing_longer(grace, now)
            && !self.streams.values().any(|s| s.failing_longer(grace, now))
            && self.gaps.values().all(|g| g.recovered)
            && self.backlog.values().all(|b| b.keeps_up(grace, self.lag_limit, now))
    }
}

impl Backlog {
    /// Whether the consumer keeps up in this scope, as of `now`.
    fn keeps_up(&self, grace: Duration, lag_limit: u64, now: SystemTime) -> bool {
        let waited = self.oldest_waiting.map(|t| now.duration_since(t).unwrap_or_default());
        waited.is_none_or(|w| w <= grace) && self.lag.is_none_or(|l| l < lag_limit)
    }
}

/// The loop's side: where it records what happened.
#[derive(Debug, Clone)]
pub(super) struct Recorder(Arc<Mutex<PollerHealth>>);

impl Recorder {
    pub(super) fn new(lag_limit: u64) -> Self {
        Recorder(Arc::new(Mutex::new(PollerHealth {
            lag_limit,
            running: true,
            subscribed: true,
            registry: ReadHealth::default(),
            streams: BTreeMap::new(),
            backlog: BTreeMap::new(),
            gaps: BTreeMap::new(),
        })))
    }

    fn with(&self, f: impl FnOnce(&mut PollerHealth)) {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner));
    }

    pub(super) fn registry(&self, result: Result<(), &dyn std::fmt::Display>) {
        let now = SystemTime::now();
        self.with(|h| match result {
            Ok(()) => h.registry.ok(now),
            Err(e) => h.registry.failed(e, now),
        });
    }

    pub(super) fn stream(&self, key: &str, result: Result<(), &dyn std::fmt::Display>) {
        let now = SystemTime::now();
        self.with(|h| {
            let s = h.streams.entry(key.to_owned()).or_default();
            match result {
                Ok(()) => s.ok(now),
                Err(e) => s.failed(e, now),
            }
        });
    }

    pub(super) fn backlog(&self, key: &str, scope: &str, g: &crate::streams::GroupInfo, oldest_ms: Option<u64>) {
        let sampled_at = SystemTime::now();
        let oldest_waiting = oldest_ms.map(|ms| SystemTime::UNIX_EPOCH + Duration::from_millis(ms));
        let b = Backlog {
            group: g.name.clone(),
            scope: scope.to_owned(),
            oldest_waiting,
            pending: g.pending,
            lag: g.lag,
            sampled_at,
        };
        self.with(|h| {
            h.backlog.insert((key.to_owned(), g.name.clone()), b);
        });
    }

    /// A gap seen on `key` by `group`: open (not recovered) until its
    /// consumer says otherwise.
    pub(super) fn gap(&self, key: &str, group: &str, gap: &crate::streams::Gap) {
        let at = SystemTime::now();
        self.with(|h| {
            let g = h.gaps.entry(key.to_owned()).or_insert_with(|| GapHealth {
                gaps: 0,
                lost: 0,
                last: gap.clone(),
                at,
                recovered: false,
                open: std::collections::BTreeSet::new(),
            });
            g.last = gap.clone();
            g.at = at;
            g.open.insert(group.to_owned());
            g.recovered = false;
        });
    }

    /// The consumer of `group` on `key` was told of its gap (counted now,
    /// once per telling), and whether it recovered. The stream is
    /// recovered when no group's gap is open.
    pub(super) fn gap_told(&self, key: &str, group: &str, lost: Option<u64>, recovered: bool) {
        self.with(|h| {
            if let Some(g) = h.gaps.get_mut(key) {
                g.gaps += 1;
                g.lost += lost.unwrap_or(0);
                if recovered {
                    g.open.remove(group);
                } else {
                    g.open.insert(group.to_owned());
                }
                g.recovered = g.open.is_empty();
            }
        });
    }

    pub(super) fn clear_gaps(&self) {
        self.with(|h| {
            h.gaps.values_mut().for_each(|g| {
                g.open.clear();
                g.recovered = true;
            })
        });
    }

    pub(super) fn subscribed(&self, up: bool) {
        self.with(|h| h.subscribed = up);
    }

    pub(super) fn snapshot(&self, running: bool) -> PollerHealth {
        let mut h = self.0.lock().unwrap_or_else(PoisonError::into_inner).clone();
        h.running = running;
        h
    }
}
