//! The poller, one per instance: reads a scope's stream at once when a write
//! script publishes a nudge on the feed's channel (`{prefix}:nudge:{kind}` by
//! default),
//! reads every stream each `PollInterval` because pub/sub can lose messages,
//! reads again at once after a read that returned entries, refreshes the
//! scope registry each `ScopeRefreshInterval` and creates consumer groups for
//! new scopes. No blocking command anywhere: every read returns at once.
//!
//! The nudge subscription runs on its own RESP3 connection with automatic
//! resubscription; when it drops, the poller pings it back to life while the
//! fallback poll keeps entries flowing.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::client::Valkey;
use crate::error::Result;
use crate::retry;
use crate::streams::{Entry, Streams};
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
    fn handle<'a>(&'a self, scope: &'a str, entries: &'a [Entry]) -> BoxFuture<'a, std::result::Result<(), BoxError>>;
}

/// Periodic work run by the poller (for example the SFC sweep).
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
}

impl std::fmt::Debug for Poller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Poller")
            .field("consumer_name", &self.consumer_name)
            .field("consumers", &self.consumers.len())
            .finish_non_exhaustive()
    }
}

struct Plan {
    consumer: Arc<dyn StreamConsumer>,
    stream: KeyTemplate,
    /// The rendered nudge channel.
    channel: String,
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
            let channel = render("nudge", &template("nudge", feed.nudge)?, &[feed.kind])?;
            let registry = render("registry", &template("registry", feed.registry)?, &[])?;
            plans.push(Plan { consumer: c.clone(), stream, channel, registry });
        }
        let (nudge_tx, nudge_rx) = mpsc::unbounded_channel::<Nudge>();
        let sub = self.valkey.pubsub_connection(nudge_tx.clone()).await?;
        let channels: BTreeSet<String> = plans.iter().map(|p| p.channel.clone()).collect();
        let timeout = self.valkey.response_timeout();
        for ch in &channels {
            let mut sub_con = sub.clone();
            retry::bounded(timeout, async move { sub_con.subscribe(ch).await }).await?;
        }
        let (stop, stop_rx) = watch::channel(false);
        let state = Loop {
            streams: Streams::new(self.valkey.clone()),
            valkey: self.valkey,
            consumer_name: self.consumer_name,
            plans,
            tasks: self.tasks,
            scopes: BTreeMap::new(),
            sub,
            events: nudge_tx,
            stop: stop_rx.clone(),
        };
        let join = tokio::spawn(state.run(nudge_rx, stop_rx));
        Ok(PollerHandle { stop, join })
    }
}

#[derive(Debug)]
enum Nudge {
    Scope {
        channel: String,
        scope: String,
    },
    Disconnected,
    /// The subscription is back: nudges sent while it was down are lost, so
    /// every known stream is read once at once instead of at the next poll.
    Resubscribed,
}

impl Valkey {
    /// A RESP3 connection for pub/sub whose push messages (nudges) go to `tx`;
    /// it resubscribes by itself after a reconnect.
    async fn pubsub_connection(&self, tx: mpsc::UnboundedSender<Nudge>) -> Result<ConnectionManager> {
        let client = self.resp3_client().ok_or_else(|| crate::Error::InvalidArgument("this handle has no client for a pub/sub connection: make it with Valkey::connect or Valkey::connect_url".into()))?;
        let sender = move |info: PushInfo| -> std::result::Result<(), ()> {
            match info.kind {
                PushKind::Message => {
                    let text = |v: Option<&Value>| match v {
                        Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
                        Some(Value::SimpleString(s)) => s.clone(),
                        _ => String::new(),
                    };
                    let _ = tx.send(Nudge::Scope { channel: text(info.data.first()), scope: text(info.data.get(1)) });
                }
                PushKind::Disconnection => {
                    let _ = tx.send(Nudge::Disconnected);
                }
                _ => {}
            }
            Ok(())
        };
        let config = self.manager_config().set_push_sender(sender).set_automatic_resubscription();
        // The manager's first connection retries with backoff on its own,
        // for far longer than the connect timeout that bounds start-up.
        let timeout = config.connection_timeout().unwrap_or(crate::defaults::CONNECT_TIMEOUT);
        Ok(retry::bounded(timeout, ConnectionManager::new_with_config(client, config)).await?)
    }
}

struct Loop {
    valkey: Valkey,
    streams: Streams,
    consumer_name: String,
    plans: Vec<Plan>,
    tasks: Vec<Arc<dyn PollerTask>>,
    /// Known scopes per registry key.
    scopes: BTreeMap<String, BTreeSet<String>>,
    sub: ConnectionManager,
    /// For the resubscription task to report back.
    events: mpsc::UnboundedSender<Nudge>,
    /// Turns `true` (or closes) when the loop should stop.
    stop: watch::Receiver<bool>,
}

/// The longest interval used: adding more to an instant can overflow the
/// clock (a panic in the loop's task), and thirty years is never anyway.
const LONGEST_INTERVAL: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

/// An interval as the loop uses it: at least 1 ms (a zero period is refused
/// by the timer), at most [`LONGEST_INTERVAL`].
fn usable(d: Duration) -> Duration {
    d.clamp(Duration::from_millis(1), LONGEST_INTERVAL)
}

/// When a task is due next: `from` plus its interval, or never when that
/// cannot be represented.
fn due_after(from: tokio::time::Instant, interval: Duration) -> Option<tokio::time::Instant> {
    from.checked_add(usable(interval))
}

impl Loop {
    async fn run(mut self, mut nudges: mpsc::UnboundedReceiver<Nudge>, mut stop: watch::Receiver<bool>) {
        let opts = self.valkey.poll_options().clone();
        let mut poll = tokio::time::interval(usable(opts.poll_interval));
        let mut refresh = tokio::time::interval(usable(opts.scope_refresh_interval));
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut task_due: Vec<Option<tokio::time::Instant>> =
            self.tasks.iter().map(|t| due_after(tokio::time::Instant::now(), t.interval())).collect();
        let mut task_tick = tokio::time::interval(Duration::from_millis(50));
        let mut resubscribing: Option<JoinHandle<()>> = None;
        loop {
            tokio::select! {
                biased;
                _ = stop.changed() => break,
                _ = refresh.tick() => self.refresh().await,
                _ = poll.tick() => self.poll_all().await,
                _ = task_tick.tick(), if !self.tasks.is_empty() => {
                    let now = tokio::time::Instant::now();
                    for (i, t) in self.tasks.iter().enumerate() {
                        if task_due[i].is_some_and(|due| now >= due) {
                            if let Err(e) = t.run().await {
                                tracing::warn!(error = %e, "poller task failed");
                            }
                            task_due[i] = due_after(now, t.interval());
                        }
                        if self.stopping() {
                            break;
                        }
                    }
                }
                Some(first) = nudges.recv() => {
                    // Coalesce the nudges waiting now: one drain per (channel, scope).
                    let mut wanted: BTreeSet<(String, String)> = BTreeSet::new();
                    let mut disconnected = false;
                    let mut resubscribed = false;
                    let mut next = Some(first);
                    while let Some(n) = next {
                        match n {
                            Nudge::Scope { channel, scope } => {
                                wanted.insert((channel, scope));
                            }
                            Nudge::Disconnected => disconnected = true,
                            Nudge::Resubscribed => resubscribed = true,
                        }
                        next = nudges.try_recv().ok();
                    }
                    if resubscribed {
                        self.drain_all().await;
                    }
                    if disconnected && resubscribing.as_ref().is_none_or(JoinHandle::is_finished) {
                        tracing::warn!("nudge subscription lost; reconnecting (the fallback poll covers the gap)");
                        let mut sub = self.sub.clone();
                        let mut stop = stop.clone();
                        let events = self.events.clone();
                        let timeout = self.valkey.response_timeout();
                        resubscribing = Some(tokio::spawn(async move {
                            // A command on the dead connection makes the manager
                            // reconnect and resubscribe; keep trying until it does.
                            let mut delay = Duration::from_millis(100);
                            loop {
                                let ping = redis::cmd("PING");
                                let pong: redis::RedisResult<Value> =
                                    retry::bounded(timeout, ping.query_async(&mut sub)).await;
                                if pong.is_ok() {
                                    tracing::info!("nudge subscription restored");
                                    let _ = events.send(Nudge::Resubscribed);
                                    return;
                                }
                                tokio::select! {
                                    _ = stop.changed() => return,
                                    () = tokio::time::sleep(delay) => {}
                                }
                                delay = (delay * 2).min(Duration::from_secs(5));
                            }
                        }));
                    }
                    for (channel, scope) in wanted {
                        if self.stopping() {
                            break;
                        }
                        let matching: Vec<usize> =
                            (0..self.plans.len()).filter(|i| self.plans[*i].channel == channel).collect();
                        for i in matching {
                            let registry = self.plans[i].registry.clone();
                            if !self.knows(&registry, &scope) {
                                if !self.registered(&registry, &scope).await {
                                    tracing::debug!(scope, "nudge for a scope the registry does not list; ignored");
                                    continue;
                                }
                                self.add_scope(&registry, &scope).await;
                            }
                            self.drain(i, &scope).await;
                        }
                    }
                }
            }
        }
        if let Some(h) = resubscribing {
            h.abort();
        }
    }

    /// Whether a stop was asked for (or the handle dropped).
    fn stopping(&self) -> bool {
        *self.stop.borrow() || self.stop.has_changed().is_err()
    }

    /// Runs `f` unless a stop comes first (`None` then): what is given up is
    /// a read, claim or acknowledge, after which the entries stay pending.
    async fn unless_stopped<T>(&self, f: impl Future<Output = T>) -> Option<T> {
        let mut stop = self.stop.clone();
        tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => None,
            v = f => Some(v),
        }
    }

    fn knows(&self, registry: &str, scope: &str) -> bool {
        self.scopes.get(registry).is_some_and(|s| s.contains(scope))
    }

    /// The registry keys the plans use, each once.
    fn registries(&self) -> BTreeSet<String> {
        self.plans.iter().map(|p| p.registry.clone()).collect()
    }

    async fn refresh(&mut self) {
        for registry in self.registries() {
            let cmd = redis::cmd("SMEMBERS").arg(&registry).clone();
            let cmd = &cmd;
            let read = retry::read(&self.valkey, |mut con| async move { cmd.query_async(&mut con).await });
            let Some(found): Option<redis::RedisResult<Vec<String>>> = self.unless_stopped(read).await else { return };
            match found {
                Ok(scopes) => {
                    for s in scopes {
                        if self.stopping() {
                            return;
                        }
                        if !self.knows(&registry, &s) {
                            self.add_scope(&registry, &s).await;
                            let on_registry: Vec<usize> =
                                (0..self.plans.len()).filter(|i| self.plans[*i].registry == registry).collect();
                            for i in on_registry {
                                self.drain(i, &s).await;
                            }
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot read the scope registry"),
            }
        }
    }

    /// Whether the scope registry lists `scope` (nudges name scopes; only registered ones are read).
    async fn registered(&self, registry: &str, scope: &str) -> bool {
        let cmd = redis::cmd("SISMEMBER").arg(registry).arg(scope).clone();
        let cmd = &cmd;
        let read = retry::read(&self.valkey, |mut con| async move { cmd.query_async::<bool>(&mut con).await });
        matches!(self.unless_stopped(read).await, Some(Ok(true)))
    }

    /// Creates the groups of every plan on `registry` for a new scope.
    async fn add_scope(&mut self, registry: &str, scope: &str) {
        for p in self.plans.iter().filter(|p| p.registry == registry) {
            if let Ok(key) = p.stream.render(self.valkey.prefix(), &[scope]) {
                match self.unless_stopped(self.streams.create_group(&key, p.consumer.group())).await {
                    Some(Ok(())) => {}
                    Some(Err(e)) => {
                        tracing::warn!(stream = key, error = %e, "cannot create the consumer group");
                        return;
                    }
                    None => return,
                }
            }
        }
        tracing::debug!(scope, "scope discovered");
        self.scopes.entry(registry.to_owned()).or_default().insert(scope.to_owned());
    }

    /// Every stream of every known scope, once (after a resubscription).
    async fn drain_all(&self) {
        for i in 0..self.plans.len() {
            let scopes: Vec<String> =
                self.scopes.get(&self.plans[i].registry).map(|s| s.iter().cloned().collect()).unwrap_or_default();
            for s in &scopes {
                if self.stopping() {
                    return;
                }
                self.drain(i, s).await;
            }
        }
    }

    /// Every stream of every scope: first take over entries another
    /// consumer left pending for long (a crashed instance), then drain.
    async fn poll_all(&mut self) {
        let min_idle = self.valkey.poll_options().poll_interval.saturating_mul(10).max(Duration::from_secs(30));
        for i in 0..self.plans.len() {
            let scopes: Vec<String> =
                self.scopes.get(&self.plans[i].registry).map(|s| s.iter().cloned().collect()).unwrap_or_default();
            for s in &scopes {
                if self.stopping() {
                    return;
                }
                let p = &self.plans[i];
                if let Ok(key) = p.stream.render(self.valkey.prefix(), &[s.as_str()]) {
                    // Claimed entries become our pending entries; the drain handles them.
                    let claim =
                        self.streams.autoclaim(&key, p.consumer.group(), &self.consumer_name, min_idle, batch(p));
                    match self.unless_stopped(claim).await {
                        Some(Ok(_)) => {}
                        Some(Err(e)) => tracing::warn!(stream = key, error = %e, "autoclaim failed"),
                        None => return,
                    }
                }
                self.drain(i, s).await;
            }
        }
    }

    /// Own pending entries first (a failed batch comes again), then new ones
    /// until a read returns nothing or the consumer fails.
    async fn drain(&self, plan: usize, scope: &str) {
        let p = &self.plans[plan];
        let Ok(key) = p.stream.render(self.valkey.prefix(), &[scope]) else { return };
        let group = p.consumer.group();
        let batch = batch(p);
        let mut pending = true;
        // At most this many batches per call, so one busy stream cannot hold
        // the loop (the rest comes with the next nudge or poll).
        let mut budget = 16u32;
        loop {
            if budget == 0 || self.stopping() {
                return;
            }
            budget -= 1;
            let got = if pending {
                self.unless_stopped(self.streams.read_from(&key, group, &self.consumer_name, batch, "0")).await
            } else {
                self.unless_stopped(self.streams.read(&key, group, &self.consumer_name, batch)).await
            };
            let entries = match got {
                None => return,
                Some(Ok(e)) => e,
                Some(Err(e)) => {
                    tracing::warn!(stream = key, error = %e, "stream read failed");
                    return;
                }
            };
            if entries.is_empty() {
                if pending {
                    pending = false;
                    continue;
                }
                return;
            }
            // A pending entry deleted from the stream comes back without
            // fields: it is lost, never handed to the consumer.
            let read_len = entries.len();
            let (entries, lost): (Vec<Entry>, Vec<Entry>) = entries.into_iter().partition(|e| !e.fields.is_empty());
            if !lost.is_empty() {
                let ids: Vec<String> = lost.iter().map(|e| e.id.clone()).collect();
                tracing::warn!(stream = key, lost = ids.len(), ids = ?ids, "stream entries were deleted while pending");
                self.valkey.metrics().add_entries_lost(ids.len() as u64);
                match self.unless_stopped(self.streams.ack(&key, group, &ids)).await {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        tracing::warn!(stream = key, error = %e, "acknowledge of lost entries failed");
                        return;
                    }
                    None => return,
                }
                if entries.is_empty() {
                    continue;
                }
            }
            match p.consumer.handle(scope, &entries).await {
                Ok(()) => {
                    let ids: Vec<String> = entries.iter().map(|e| e.id.clone()).collect();
                    match self.unless_stopped(self.streams.ack(&key, group, &ids)).await {
                        Some(Ok(_)) => {}
                        Some(Err(e)) => {
                            tracing::warn!(stream = key, error = %e, "acknowledge failed; the entries come again");
                            return;
                        }
                        // Stopping: the batch stays pending and comes again.
                        None => return,
                    }
                }
                Err(e) => {
                    tracing::warn!(stream = key, entries = entries.len(), error = %e, "consumer failed; entries stay pending");
                    return;
                }
            }
            if pending && read_len < batch {
                pending = false;
            }
        }
    }
}

/// A consumer's batch as used: from 1 to [`Streams::MAX_COUNT`].
fn batch(p: &Plan) -> usize {
    p.consumer.batch().clamp(1, Streams::MAX_COUNT)
}

#[cfg(test)]
mod tests {
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
