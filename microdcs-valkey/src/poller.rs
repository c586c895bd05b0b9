//! The poller, one per instance: it reads every stream consumer's streams,
//! scope by scope, and runs periodic tasks, without a blocking command.
//!
//! A [`Poller`] is built with [`Poller::new`] (a [`Valkey`] handle and a
//! consumer name unique to the instance), given consumers
//! ([`Poller::consumer`]) and tasks ([`Poller::task`]), and started with
//! [`Poller::start`], which returns a [`PollerHandle`]: its
//! [`health`](PollerHandle::health) is a [`PollerHealth`] for a health
//! endpoint, and [`shutdown`](PollerHandle::shutdown) stops it.
//!
//! - A [`StreamConsumer`] reads one kind of stream (one per scope) in one
//!   consumer group: its [`Feed`] names the stream template, the nudge
//!   channel and the scope registry. Typed change consumers
//!   ([`Changes`](crate::changes::Changes)) are the common case; implement
//!   the trait for other streams (`Feed::new(kind, "work:{scope}")`).
//!   A batch is acknowledged only when `handle` returns `Ok`; an entry the
//!   consumer does not [`want`](StreamConsumer::wants) is acknowledged
//!   unseen; a [`Gap`] (entries trimmed before the group read them) is told
//!   to [`StreamConsumer::gap`] before anything after it, which answers a
//!   [`GapOutcome`].
//! - A [`PollerTask`] runs every [`interval`](PollerTask::interval): the
//!   due and expiry sweeps of [`sweep`](crate::sweep) are tasks.
//!
//! ```no_run
//! use std::time::Duration;
//! use microdcs_valkey::Valkey;
//! use microdcs_valkey::poller::{BoxError, BoxFuture, Poller, StreamConsumer};
//! use microdcs_valkey::schema::Feed;
//! use microdcs_valkey::streams::StreamEntry;
//!
//! struct Worker;
//!
//! impl StreamConsumer for Worker {
//!     fn feed(&self) -> Feed<'_> {
//!         Feed::new("job", "work:{scope}") // on the shared nudge channel and registry
//!     }
//!     fn group(&self) -> &str {
//!         "workers"
//!     }
//!     fn handle<'a>(&'a self, scope: &'a str, entries: &'a [StreamEntry]) -> BoxFuture<'a, Result<(), BoxError>> {
//!         Box::pin(async move {
//!             for e in entries {
//!                 println!("{scope}: {:?}", e.field("action"));
//!             }
//!             Ok(()) // acknowledged; an Err brings the batch again after a pause
//!         })
//!     }
//! }
//!
//! # async fn demo(valkey: Valkey) -> Result<(), microdcs_valkey::Error> {
//! let poller = Poller::new(valkey, "instance-1").consumer(Worker).start().await?;
//! let healthy = poller.health().is_healthy(Duration::from_secs(5));
//! poller.shutdown().await;
//! # let _ = healthy; Ok(()) }
//! ```
//!
//! # How it reads, and its bounds
//!
//! A scope's stream is read at once when a write script publishes a nudge
//! on the feed's channel (`{prefix}:nudge:{kind}` by default; a sharded
//! type may send it per scope with `SPUBLISH`, which the poller follows
//! with `SSUBSCRIBE` as it discovers each scope), again at once after a
//! read that returned entries, and every `PollInterval` in any case,
//! because pub/sub can lose messages: `PollInterval` bounds how late an
//! entry whose nudge was lost is read. The scope registry is read every
//! `ScopeRefreshInterval`, and the groups of new scopes created. Each
//! consumer reads each scope in a worker of its own, at most
//! `ConsumerScopesAtOnce` scopes of one consumer at once, so a slow
//! consumer delays only itself. A failed batch stays pending and comes
//! again after a pause that doubles per failure, up to `PollInterval`.
//! Each poll samples every backlog into [`PollerHealth`] (unhealthy from
//! `ConsumerLagLimit` undelivered entries) and trims every stream to what
//! its groups still need. The nudge subscription runs on its own RESP3
//! connection that resubscribes after a drop (opened within
//! `ConnectTimeout`, each subscribe within `ResponseTimeout`), while the
//! fallback poll keeps entries flowing.
//!
//! Delivery is at least once: an entry is acknowledged only after its
//! batch was handled, so a crash or a lost acknowledgement hands it out
//! again; handlers must be idempotent (the change's `op` or a
//! dedupe claim tells a repeat). Shutdown loses
//! nothing: it stops between batches, gives up a command in flight (entries
//! not acknowledged stay pending and come again) and returns as soon as a
//! `handle` or `run` in progress returns.
//!
//! Consumers, retention, gaps and health thresholds are in the guide:
//! [Streams, consumers and
//! retention](https://github.com/microdcs/microdcs/blob/main/docs/guide/07-streams-and-consumers.md).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::client::Connection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::client::Valkey;
use crate::error::Result;
use crate::retry;
use crate::streams::{Gap, NewEntries, StreamEntry, Streams};
use microdcs_schema::{Feed, KeyTemplate};

/// A boxed future, for the object-safe consumer and task traits.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The error a consumer or task reports (it is logged; entries stay pending).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Reads one kind of stream (one per scope) with one consumer group.
///
/// The streams, the nudge channel and the scope registry come from a
/// [`Feed`]: `JobResponse::SPEC.feed()` for a document type's change stream
/// (whatever `changes`, `nudge` and `registry` it declares), or
/// [`Feed::new`] for another stream on the shared channel and registry.
pub trait StreamConsumer: Send + Sync + 'static {
    /// Where the entries are and how the poller learns of new ones.
    fn feed(&self) -> Feed<'_>;
    /// The consumer group.
    fn group(&self) -> &str;
    /// Entries per read (and per claim of entries another consumer left
    /// pending): from 1 to [`Streams::MAX_COUNT`] (10,000); a larger value
    /// is taken as the maximum.
    fn batch(&self) -> usize {
        100
    }
    /// Handles a batch; the entries are acknowledged only when this returns `Ok`.
    fn handle<'a>(
        &'a self,
        scope: &'a str,
        entries: &'a [StreamEntry],
    ) -> BoxFuture<'a, std::result::Result<(), BoxError>>;

    /// Whether an entry is for this consumer (default: every entry). An
    /// entry that is not is never handed to [`StreamConsumer::handle`]: it
    /// is acknowledged with the batch and counted as `skipped`, not
    /// `handled`, in `microdcs.valkey.poller.entries`. A change stream shared
    /// by several document types is read this way by each type's consumer.
    fn wants(&self, entry: &StreamEntry) -> bool {
        let _ = entry;
        true
    }

    /// Told that entries this consumer's group had not read were removed
    /// from the scope's stream (trimmed by its length bound): the [`Gap`]
    /// names the last entry the group had and the first it gets next.
    /// Called before any entry after the gap is handed over. The poller has
    /// logged it, counted it (`microdcs.valkey.stream.gaps`, and the lost
    /// entries in `microdcs.valkey.stream.entries_lost`) and shows it in
    /// [`PollerHealth::gaps`].
    ///
    /// Return [`GapOutcome::Recovered`] once the consumer has made up for
    /// the loss (for example by a resync from the documents as stored:
    /// [`crate::changes::Changes::resyncing`]); [`GapOutcome::NotRecovered`] (the
    /// default) keeps the poller unhealthy until a later gap of the stream
    /// is recovered or [`PollerHandle::clear_gaps`] is called. An `Err`
    /// reads nothing past the gap: the consumer is told again after the
    /// usual pause of a failed batch.
    fn gap<'a>(&'a self, scope: &'a str, gap: &'a Gap) -> BoxFuture<'a, std::result::Result<GapOutcome, BoxError>> {
        let _ = (scope, gap);
        Box::pin(async { Ok(GapOutcome::NotRecovered) })
    }
}

/// What a consumer did about a [`Gap`] ([`StreamConsumer::gap`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GapOutcome {
    /// The consumer made up for the lost entries (a resync): health is
    /// not held down by this gap.
    Recovered,
    /// The consumer knows, but has not made up for them: the poller stays
    /// unhealthy (see [`PollerHealth::is_healthy`]).
    NotRecovered,
}

/// Periodic work run by the poller (for example the SFC sweep). Each run
/// is a tokio task of its own, so a long run holds neither the consumers
/// (their nudges, the fallback poll and its backlog samples) nor the other
/// tasks; runs of one task never overlap (one due while the last still
/// runs waits for it). Shutdown waits for the runs in hand.
pub trait PollerTask: Send + Sync + 'static {
    /// How often. Anything above about thirty years is taken as that long
    /// (never, in practice).
    fn interval(&self) -> Duration;
    /// One run.
    fn run(&self) -> BoxFuture<'_, std::result::Result<(), BoxError>>;
}

/// The poller, built with [`Poller::new`] and started with [`Poller::start`].
pub struct Poller {
    valkey: Valkey,
    consumer_name: String,
    consumers: Vec<Arc<dyn StreamConsumer>>,
    tasks: Vec<Arc<dyn PollerTask>>,
}

/// A running poller; stop it with [`PollerHandle::shutdown`].
pub struct PollerHandle {
    stop: watch::Sender<bool>,
    join: JoinHandle<()>,
    health: health::Recorder,
}

impl std::fmt::Debug for PollerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollerHandle").field("running", &!self.join.is_finished()).finish()
    }
}

impl PollerHandle {
    /// Stops after the batch in hand and waits for the loop to end. The
    /// loop stops between batches and gives up a command in flight (a read,
    /// claim or acknowledge; unacknowledged entries stay pending and come
    /// again), so this returns as soon as a consumer's `handle` or a task's
    /// `run` in progress returns, without waiting on the server.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.join.await;
    }

    /// The poller's health now: whether it runs, whether the nudge
    /// subscription is up, how the registry and stream reads have gone
    /// (last success, failures, since when failing), each consumer's
    /// backlog per scope and the gaps. For a health endpoint:
    /// [`PollerHealth::is_healthy`] with a grace of a few poll intervals.
    pub fn health(&self) -> PollerHealth {
        self.health.snapshot(!self.join.is_finished())
    }

    /// Marks every gap seen so far as dealt with (an operator or the
    /// application made up for the lost entries some other way): they stay
    /// in [`PollerHealth::gaps`] but no longer make the poller unhealthy.
    pub fn clear_gaps(&self) {
        self.health.clear_gaps();
    }
}

impl std::fmt::Debug for Poller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Poller")
            .field("consumer_name", &self.consumer_name)
            .field("consumers", &self.consumers.len())
            .finish_non_exhaustive()
    }
}

struct ConsumerPlan {
    consumer: Arc<dyn StreamConsumer>,
    stream: KeyTemplate,
    /// The nudge channel.
    channel: Channel,
    /// The rendered scope registry key.
    registry: String,
}

impl Poller {
    /// A poller reading as `consumer_name` (unique per instance).
    pub fn new(valkey: Valkey, consumer_name: impl Into<String>) -> Self {
        Poller { valkey, consumer_name: consumer_name.into(), consumers: Vec::new(), tasks: Vec::new() }
    }

    /// Adds a consumer.
    #[must_use]
    pub fn consumer(mut self, c: impl StreamConsumer) -> Self {
        self.consumers.push(Arc::new(c));
        self
    }

    /// Adds a periodic task.
    #[must_use]
    pub fn task(mut self, t: impl PollerTask) -> Self {
        self.tasks.push(Arc::new(t));
        self
    }

    /// Opens the nudge subscription, subscribes to the feeds' channels and
    /// starts the loop. The loop's first step reads the scope registries and
    /// creates the groups of the scopes found (at once, not after a
    /// `ScopeRefreshInterval`); a registry that cannot be read then is read
    /// again at the next refresh.
    ///
    /// Bounded: opening the subscription's connection waits at most
    /// `ConnectTimeout`, each `SUBSCRIBE` at most `ResponseTimeout`.
    ///
    /// # Errors
    /// A feed template that does not parse or render
    /// ([`crate::Error::InvalidArgument`]), or the subscription failed or
    /// timed out (a connection error, [`crate::Error::is_connection`]).
    pub async fn start(self) -> Result<PollerHandle> {
        let prefix = self.valkey.prefix().clone();
        let mut plans = Vec::new();
        for c in &self.consumers {
            let feed = c.feed();
            let template = |what: &str, t: &str| {
                KeyTemplate::parse(t).map_err(|e| {
                    let why: Vec<String> = e.iter().map(ToString::to_string).collect();
                    crate::Error::InvalidArgument(format!(
                        "{what} template `{t}` of feed `{}`: {}",
                        feed.kind,
                        why.join("; ")
                    ))
                })
            };
            let stream = template("stream", feed.stream)?;
            let render = |what: &str, t: &KeyTemplate, values: &[&str]| {
                t.render(&prefix, values).map_err(|e| {
                    crate::Error::InvalidArgument(format!("{what} template `{t}` of feed `{}`: {e}", feed.kind))
                })
            };
            if stream.placeholders().ne(["scope"]) {
                return Err(crate::Error::InvalidArgument(format!(
                    "stream template `{stream}` of feed `{}` must have exactly the placeholder `{{scope}}`",
                    feed.kind
                )));
            }
            let nudge = template("nudge", feed.nudge)?;
            let channel = if nudge.placeholders().eq(["kind", "scope"]) {
                // Checked now, so a scope's channel renders whenever its
                // scope is a valid value.
                render("nudge", &nudge, &[feed.kind, "scope"])?;
                Channel::Scope(nudge, feed.kind.to_owned())
            } else {
                Channel::Kind(render("nudge", &nudge, &[feed.kind])?)
            };
            let registry = render("registry", &template("registry", feed.registry)?, &[])?;
            plans.push(ConsumerPlan { consumer: c.clone(), stream, channel, registry });
        }
        let (nudge_tx, nudge_rx) = mpsc::unbounded_channel::<Nudge>();
        let sub = pubsub_connection(&self.valkey, nudge_tx.clone()).await?;
        let channels: BTreeSet<String> = plans
            .iter()
            .filter_map(|p| match &p.channel {
                Channel::Kind(c) => Some(c.clone()),
                Channel::Scope(..) => None,
            })
            .collect();
        let timeout = self.valkey.response_timeout();
        for ch in &channels {
            let mut sub_con = sub.clone();
            retry::bounded(timeout, async move { sub_con.subscribe(ch).await }).await?;
        }
        let (stop, stop_rx) = watch::channel(false);
        let poll = self.valkey.poll_options();
        let health = health::Recorder::new(poll.lag_limit.max(1));
        // At least one permit: zero would never drain (the setting refuses
        // it; `PollOptions` set in code is not validated).
        let at_once = usize::try_from(poll.scopes_at_once).unwrap_or(usize::MAX).max(1);
        let permits = plans.iter().map(|_| Arc::new(tokio::sync::Semaphore::new(at_once))).collect();
        let shared = Shared {
            health: health.clone(),
            streams: Streams::new(self.valkey.clone()),
            valkey: self.valkey,
            consumer_name: self.consumer_name,
            plans,
            failing: std::sync::Mutex::default(),
            samples: std::sync::Mutex::default(),
            told: std::sync::Mutex::default(),
            untold: std::sync::Mutex::default(),
            permits,
            stop: stop_rx.clone(),
        };
        let state = Loop {
            shared: Arc::new(shared),
            tasks: self.tasks,
            scopes: BTreeMap::new(),
            unsubscribed: BTreeSet::new(),
            shard_channels: BTreeMap::new(),
            sub,
            events: nudge_tx,
            workers: BTreeMap::new(),
            sampling: None,
        };
        let join = tokio::spawn(state.run(nudge_rx, stop_rx));
        Ok(PollerHandle { stop, join, health })
    }
}

/// A feed's nudge channel.
enum Channel {
    /// One channel for the kind, subscribed at start (`SUBSCRIBE`).
    Kind(String),
    /// One shard channel per scope (the template and the kind it is
    /// rendered with), subscribed as each scope is discovered
    /// (`SSUBSCRIBE`): the writes of a sharded type send their nudge with
    /// `SPUBLISH` in the slot of the scope.
    Scope(KeyTemplate, String),
}

impl Channel {
    /// The channel that carries the nudges of `scope`.
    fn of(&self, prefix: &microdcs_schema::KeyPrefix, scope: &str) -> Option<String> {
        match self {
            Channel::Kind(c) => Some(c.clone()),
            Channel::Scope(t, kind) => t.render(prefix, &[kind, scope]).ok(),
        }
    }
}

#[derive(Debug)]
enum Nudge {
    Scope {
        channel: String,
        scope: String,
    },
    Disconnected,
    /// The server dropped a shard channel's subscription (`sunsubscribe`
    /// we did not ask for): the channel's slot moved to another primary,
    /// by a failover or a migration. Nudges sent meanwhile are lost.
    ShardLost(String),
    /// The subscription is back: nudges sent while it was down are lost, so
    /// every known stream is read once at once instead of at the next poll.
    Resubscribed,
}

/// The poller's pub/sub connection: nudges (and disconnections) go to `tx`;
/// it resubscribes by itself after a reconnect.
async fn pubsub_connection(valkey: &Valkey, tx: mpsc::UnboundedSender<Nudge>) -> Result<Connection> {
    let sender = move |info: PushInfo| -> std::result::Result<(), ()> {
        match info.kind {
            // A nudge on the kind's channel or on a scope's shard channel.
            PushKind::Message | PushKind::SMessage => {
                let text = |v: Option<&Value>| match v {
                    Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
                    Some(Value::SimpleString(s)) => s.clone(),
                    _ => String::new(),
                };
                let _ = tx.send(Nudge::Scope { channel: text(info.data.first()), scope: text(info.data.get(1)) });
            }
            PushKind::SUnsubscribe => {
                if let Some(Value::BulkString(b)) = info.data.first() {
                    let _ = tx.send(Nudge::ShardLost(String::from_utf8_lossy(b).into_owned()));
                }
            }
            PushKind::Disconnection => {
                let _ = tx.send(Nudge::Disconnected);
            }
            _ => {}
        }
        Ok(())
    };
    valkey.subscriber(sender).await
}

mod health;
mod run;
pub use health::{Backlog, GapHealth, PollerHealth, ReadHealth};
use run::{Loop, Shared};

#[cfg(test)]
mod tests {
    use super::run::{LONGEST_INTERVAL, due_after, usable};
    use super::*;

    #[test]
    fn huge_intervals_never_overflow_the_clock() {
        let now = tokio::time::Instant::now();
        assert!(due_after(now, Duration::MAX).is_some_and(|d| d > now));
        assert_eq!(usable(Duration::MAX), LONGEST_INTERVAL);
        assert_eq!(usable(Duration::ZERO), Duration::from_millis(1));
        // The loop's timers take the longest interval.
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let mut i = tokio::time::interval(usable(Duration::MAX));
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            i.tick().await;
            assert!(tokio::time::timeout(Duration::from_millis(10), i.tick()).await.is_err());
        });
        assert_eq!(Duration::MAX.saturating_mul(10), Duration::MAX);
    }
}
