//! The poller's loop: nudges, the fallback poll, registry refreshes,
//! periodic tasks and drains, each call bounded and each step giving way to
//! a stop.
//!
//! Over 600 lines for now: the loop and the per-consumer workers it
//! starts share one state (plans, permits, health, gaps). The seam is the
//! worker (its drain and gap handling) against the loop; it is to be cut
//! there, not left to grow.

#[allow(clippy::wildcard_imports)]
use super::*;

mod bookkeeping;

/// What the loop and its workers share: the connection, the plans, the
/// health report and each consumer's failures.
pub(super) struct Shared {
    pub(super) valkey: Valkey,
    pub(super) streams: Streams,
    pub(super) consumer_name: String,
    pub(super) plans: Vec<ConsumerPlan>,
    /// Turns `true` (or closes) when the loop should stop.
    pub(super) stop: watch::Receiver<bool>,
    /// What the handle reports as the poller's health.
    pub(super) health: health::Recorder,
    /// Per consumer and scope whose last batch failed: not read again
    /// before this instant, and the pause that led to it (doubled at each
    /// failure, up to the poll interval), so a failing consumer is not
    /// called again at every nudge.
    pub(super) failing: std::sync::Mutex<BTreeMap<(usize, String), (tokio::time::Instant, Duration)>>,
    /// The last backlog sample (pending, lag) per consumer and scope,
    /// summed into the gauges at each poll.
    pub(super) samples: std::sync::Mutex<BTreeMap<(usize, String), (u64, u64)>>,
    /// Per consumer: how many of its scopes are drained at once (setting
    /// `ConsumerScopesAtOnce`): each scope has its own worker, and this
    /// bounds the calls into one consumer (and the connections' load) when
    /// many scopes have entries at the same time.
    pub(super) permits: Vec<Arc<tokio::sync::Semaphore>>,
    /// Per consumer and scope, the gap its consumer was told of and the
    /// stream was not yet read past: kept beyond one drain (which may end
    /// at its budget, a stop or a failed read right after the telling), so
    /// the next drain reads past it instead of telling, counting and
    /// resyncing the same gap again.
    pub(super) told: std::sync::Mutex<BTreeMap<(usize, String), Gap>>,
    /// Per consumer and scope, a gap no read will find again (its group
    /// was made again after entries were trimmed) that the consumer has
    /// not yet taken: told first at each drain until it is.
    pub(super) untold: std::sync::Mutex<BTreeMap<(usize, String), Gap>>,
}

pub(super) struct Loop {
    pub(super) shared: Arc<Shared>,
    pub(super) tasks: Vec<Arc<dyn PollerTask>>,
    /// Known scopes per registry key.
    pub(super) scopes: BTreeMap<String, BTreeSet<String>>,
    /// Shard channels of known scopes whose `SSUBSCRIBE` failed, tried
    /// again at each refresh.
    pub(super) unsubscribed: BTreeSet<String>,
    /// The shard channels subscribed, each with the scope whose nudges it
    /// carries.
    pub(super) shard_channels: BTreeMap<String, String>,
    pub(super) sub: Connection,
    /// For the resubscription task to report back.
    pub(super) events: mpsc::UnboundedSender<Nudge>,
    /// One worker per consumer and known scope: drains run there, so a
    /// slow consumer or a busy scope holds up only itself.
    pub(super) workers: BTreeMap<(usize, String), Worker>,
    /// The backlog sampling round in progress, if any.
    pub(super) sampling: Option<JoinHandle<()>>,
}

impl std::ops::Deref for Loop {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.shared
    }
}

/// The worker of one consumer and scope: woken by nudges, polls and its own
/// unfinished drains.
pub(super) struct Worker {
    wake: Arc<tokio::sync::Notify>,
    /// Set by the fallback poll: the next run also takes over entries left
    /// pending by others and samples the backlog.
    poll: Arc<std::sync::atomic::AtomicBool>,
    join: JoinHandle<()>,
}

/// The first pause after a consumer's batch failed.
const FIRST_FAILURE_PAUSE: Duration = Duration::from_millis(100);

/// The longest interval used: adding more to an instant can overflow the
/// clock (a panic in the loop's task), and thirty years is never anyway.
pub(super) const LONGEST_INTERVAL: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

/// An interval as the loop uses it: at least 1 ms (a zero period is refused
/// by the timer), at most [`LONGEST_INTERVAL`].
pub(super) fn usable(d: Duration) -> Duration {
    d.clamp(Duration::from_millis(1), LONGEST_INTERVAL)
}

/// When a task is due next: `from` plus its interval, or never when that
/// cannot be represented.
pub(super) fn due_after(from: tokio::time::Instant, interval: Duration) -> Option<tokio::time::Instant> {
    from.checked_add(usable(interval))
}

impl Loop {
    pub(super) async fn run(mut self, mut nudges: mpsc::UnboundedReceiver<Nudge>, mut stop: watch::Receiver<bool>) {
        let opts = self.valkey.poll_options().clone();
        let mut poll = tokio::time::interval(usable(opts.poll_interval));
        let mut refresh = tokio::time::interval(usable(opts.scope_refresh_interval));
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut task_due: Vec<Option<tokio::time::Instant>> =
            self.tasks.iter().map(|t| due_after(tokio::time::Instant::now(), t.interval())).collect();
        let mut task_tick = tokio::time::interval(Duration::from_millis(50));
        // Each task runs in a task of its own, one run at a time: a long
        // run (a sweep over many scopes) must not hold the nudges, the
        // polls that sample every backlog, or the registry refresh.
        let mut task_runs: Vec<Option<JoinHandle<()>>> = self.tasks.iter().map(|_| None).collect();
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
                        // A run still going when the next is due: the next
                        // waits for it (runs never overlap).
                        let idle = task_runs[i].as_ref().is_none_or(JoinHandle::is_finished);
                        if idle && task_due[i].is_some_and(|due| now >= due) {
                            task_due[i] = due_after(now, t.interval());
                            let t = t.clone();
                            task_runs[i] = Some(tokio::spawn(async move {
                                if let Err(e) = t.run().await {
                                    tracing::warn!(error = %e, "poller task failed");
                                    loop_error("task");
                                }
                            }));
                        }
                    }
                }
                Some(first) = nudges.recv() => {
                    // Coalesce the nudges waiting now: one drain per (channel, scope).
                    let mut wanted: BTreeSet<(String, String)> = BTreeSet::new();
                    let mut disconnected = false;
                    let mut resubscribed = false;
                    let mut shards_lost: BTreeSet<String> = BTreeSet::new();
                    let mut next = Some(first);
                    while let Some(n) = next {
                        match n {
                            Nudge::Scope { channel, scope } => {
                                metrics::counter!(crate::observe::POLLER_NUDGES).increment(1);
                                wanted.insert((channel, scope));
                            }
                            Nudge::Disconnected => {
                                disconnected = true;
                                self.health.subscribed(false);
                            }
                            Nudge::ShardLost(channel) => {
                                shards_lost.insert(channel);
                            }
                            Nudge::Resubscribed => {
                                resubscribed = true;
                                self.health.subscribed(true);
                            }
                        }
                        next = nudges.try_recv().ok();
                    }
                    if resubscribed {
                        self.drain_all().await;
                    }
                    for channel in shards_lost {
                        self.shard_moved(channel).await;
                    }
                    if disconnected && resubscribing.as_ref().is_none_or(JoinHandle::is_finished) {
                        tracing::warn!("nudge subscription lost; reconnecting (the fallback poll covers the gap)");
                        let mut sub = self.sub.clone();
                        let mut stop = stop.clone();
                        let events = self.events.clone();
                        let timeout = self.valkey.response_timeout();
                        let slot = self.valkey.prefix().slot();
                        resubscribing = Some(tokio::spawn(async move {
                            // A command on the dead connection makes the manager
                            // reconnect and resubscribe; keep trying until it does.
                            let mut delay = Duration::from_millis(100);
                            loop {
                                let ping = redis::cmd("PING");
                                let pong: redis::RedisResult<Value> =
                                    retry::bounded(timeout, sub.query_near(&ping, slot)).await;
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
                        let prefix = self.valkey.prefix();
                        let matching: Vec<usize> = (0..self.plans.len())
                            .filter(|i| self.plans[*i].channel.of(prefix, &scope).is_some_and(|c| c == channel))
                            .collect();
                        for i in matching {
                            let registry = self.plans[i].registry.clone();
                            if !self.knows(&registry, &scope) {
                                if !self.registered(&registry, &scope).await {
                                    tracing::debug!(scope, "nudge for a scope the registry does not list; ignored");
                                    continue;
                                }
                                self.add_scope(&registry, &scope).await;
                            }
                            self.wake(i, &scope);
                        }
                    }
                }
            }
        }
        if let Some(h) = resubscribing {
            h.abort();
        }
        // A task's run in hand ends as it would have in the loop.
        for h in task_runs.into_iter().flatten() {
            let _ = h.await;
        }
        if let Some(h) = self.sampling.take() {
            let _ = h.await;
        }
        // Each worker stops after the batch in hand.
        for (_, w) in std::mem::take(&mut self.workers) {
            w.wake.notify_one();
            let _ = w.join.await;
        }
    }

    /// Wakes the worker of consumer `plan` for `scope`, starting it if needed.
    fn wake(&mut self, plan: usize, scope: &str) {
        self.worker(plan, scope).wake.notify_one();
    }

    fn worker(&mut self, plan: usize, scope: &str) -> &Worker {
        let shared = self.shared.clone();
        self.workers.entry((plan, scope.to_owned())).or_insert_with(|| {
            let wake = Arc::new(tokio::sync::Notify::new());
            let poll = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let join = tokio::spawn(work(shared, plan, scope.to_owned(), wake.clone(), poll.clone()));
            Worker { wake, poll, join }
        })
    }

    fn knows(&self, registry: &str, scope: &str) -> bool {
        self.scopes.get(registry).is_some_and(|s| s.contains(scope))
    }

    /// The registry keys the plans use, each once.
    fn registries(&self) -> BTreeSet<String> {
        self.plans.iter().map(|p| p.registry.clone()).collect()
    }

    async fn refresh(&mut self) {
        for channel in std::mem::take(&mut self.unsubscribed) {
            match self.shard_subscribe(&channel).await {
                // Nudges sent while it was not subscribed are lost: read
                // the scope once now.
                Some(true) => self.drain_channel(&channel).await,
                Some(false) => {}
                None => return,
            }
        }
        for registry in self.registries() {
            let cmd = redis::cmd("SMEMBERS").arg(&registry).clone();
            let cmd = &cmd;
            let read = retry::read(&self.valkey, |mut con| async move { cmd.query_async(&mut con).await });
            let Some(found): Option<redis::RedisResult<Vec<String>>> = self.unless_stopped(read).await else { return };
            match found {
                Ok(scopes) => {
                    self.health.registry(Ok(()));
                    for s in scopes {
                        if self.stopping() {
                            return;
                        }
                        if !self.knows(&registry, &s) {
                            self.add_scope(&registry, &s).await;
                            let on_registry: Vec<usize> =
                                (0..self.plans.len()).filter(|i| self.plans[*i].registry == registry).collect();
                            for i in on_registry {
                                self.wake(i, &s);
                            }
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the scope registry");
                    loop_error("registry");
                    self.health.registry(Err(&e));
                }
            }
        }
    }

    /// A shard channel's subscription was dropped because its slot moved:
    /// subscribes again (the cluster connection finds the slot's new
    /// primary) and reads the scope's streams once, for the nudges lost
    /// meanwhile. A subscription that fails now is tried again at each
    /// refresh.
    async fn shard_moved(&mut self, channel: String) {
        let Some(scope) = self.shard_channels.get(&channel).cloned() else { return };
        tracing::info!(scope, "a scope's nudge channel moved with its slot; subscribing again");
        if self.shard_subscribe(&channel).await.is_some() {
            self.drain_channel(&channel).await;
        }
    }

    /// `SSUBSCRIBE channel`, bounded: `Some(true)` when subscribed,
    /// `Some(false)` when it failed (counted, and kept for the next
    /// refresh to try again), `None` when a stop came first.
    async fn shard_subscribe(&mut self, channel: &str) -> Option<bool> {
        let mut sub = self.sub.clone();
        let subscribed = retry::bounded(self.valkey.response_timeout(), async { sub.ssubscribe(channel).await });
        match self.unless_stopped(subscribed).await? {
            Ok(()) => Some(true),
            Err(e) => {
                let scope = self.shard_channels.get(channel).map_or("", String::as_str);
                tracing::warn!(scope, error = %e, "cannot subscribe to the scope's nudge channel yet");
                loop_error("subscribe");
                self.unsubscribed.insert(channel.to_owned());
                Some(false)
            }
        }
    }

    /// Reads once the streams whose nudges a shard channel carries.
    async fn drain_channel(&mut self, channel: &str) {
        let Some(scope) = self.shard_channels.get(channel).cloned() else { return };
        let prefix = self.valkey.prefix().clone();
        for i in 0..self.plans.len() {
            if self.plans[i].channel.of(&prefix, &scope).is_some_and(|c| c == channel) {
                self.wake(i, &scope);
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
                        loop_error("group");
                        return;
                    }
                    None => return,
                }
            }
        }
        // Shard channels are per scope: subscribed once the groups exist.
        // One that fails is tried again at each refresh; the fallback poll
        // reads the scope meanwhile.
        let channels: BTreeSet<String> = self
            .plans
            .iter()
            .filter(|p| p.registry == registry && matches!(p.channel, Channel::Scope(..)))
            .filter_map(|p| p.channel.of(self.valkey.prefix(), scope))
            .collect();
        for channel in channels {
            self.shard_channels.insert(channel.clone(), scope.to_owned());
            if self.shard_subscribe(&channel).await.is_none() {
                return;
            }
        }
        tracing::debug!(scope, "scope discovered");
        self.scopes.entry(registry.to_owned()).or_default().insert(scope.to_owned());
    }

    /// Every stream of every known scope, once (after a resubscription).
    async fn drain_all(&mut self) {
        for i in 0..self.plans.len() {
            let scopes: Vec<String> =
                self.scopes.get(&self.plans[i].registry).map(|s| s.iter().cloned().collect()).unwrap_or_default();
            for s in &scopes {
                self.wake(i, s);
            }
        }
    }

    /// Every stream of every scope: each worker first takes over entries
    /// another consumer left pending for long (a crashed instance), then
    /// drains. The backlogs are sampled (into health and the gauges) by a
    /// task of their own, so a worker busy in a long drain is still seen
    /// falling behind.
    async fn poll_all(&mut self) {
        let mut pairs = Vec::new();
        for i in 0..self.plans.len() {
            let scopes: Vec<String> =
                self.scopes.get(&self.plans[i].registry).map(|s| s.iter().cloned().collect()).unwrap_or_default();
            for s in scopes {
                let w = self.worker(i, &s);
                w.poll.store(true, std::sync::atomic::Ordering::Release);
                w.wake.notify_one();
                pairs.push((i, s));
            }
        }
        // One sampling round at a time: a slow server delays the next.
        if self.sampling.as_ref().is_none_or(JoinHandle::is_finished) {
            let shared = self.shared.clone();
            self.sampling = Some(tokio::spawn(async move {
                let mut trimmed = BTreeSet::new();
                for (plan, scope) in pairs {
                    if shared.stopping() {
                        return;
                    }
                    shared.sample(plan, &scope).await;
                    if let Ok(key) = shared.plans[plan].stream.render(shared.valkey.prefix(), &[scope.as_str()])
                        && trimmed.insert(key.clone())
                    {
                        shared.trim(&key).await;
                    }
                }
            }));
        }
    }
}

/// The worker of consumer `plan` for `scope`: waits to be woken, then
/// drains (after a poll also claims and samples) while one of the
/// consumer's permits is held; a drain that stopped at its budget wakes it
/// again, behind the other scopes waiting for a permit.
async fn work(
    shared: Arc<Shared>,
    plan: usize,
    scope: String,
    wake: Arc<tokio::sync::Notify>,
    poll: Arc<std::sync::atomic::AtomicBool>,
) {
    let mut stop = shared.stop.clone();
    loop {
        tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => return,
            () = wake.notified() => {}
        }
        let permits = shared.permits[plan].clone();
        let permit = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => return,
            p = permits.acquire_owned() => p,
        };
        let Ok(_permit) = permit else { return };
        let polled = poll.swap(false, std::sync::atomic::Ordering::AcqRel);
        if polled && !shared.claim(plan, &scope).await {
            return;
        }
        let (taken, more) = shared.drain(plan, &scope).await;
        if polled && taken > 0 {
            metrics::counter!(crate::observe::POLLER_FALLBACK_FOUND).increment(1);
        }
        if more {
            wake.notify_one();
        }
    }
}

impl Shared {
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

    /// Removes from `key` the entries every group of it has read and
    /// acknowledged ([`Streams::trim_acknowledged`], which keeps everything
    /// when the stream has no group): retention follows the readers, so the
    /// length bound of a change stream applies to entries not yet read.
    async fn trim(&self, key: &str) {
        match self.unless_stopped(self.streams.trim_acknowledged(key)).await {
            Some(Ok(removed)) if removed > 0 => {
                tracing::debug!(stream = key, removed, "entries every group has read trimmed");
            }
            Some(Ok(_)) | None => {}
            Some(Err(e)) => {
                tracing::warn!(stream = key, error = %e, "cannot trim the entries every group has read");
                loop_error("trim");
            }
        }
    }

    /// Takes over entries of `scope`'s stream another consumer left pending
    /// for long (a crashed instance): they become ours and the drain
    /// handles them. `false` when a stop came first.
    async fn claim(&self, plan: usize, scope: &str) -> bool {
        let min_idle = self.valkey.poll_options().poll_interval.saturating_mul(10).max(Duration::from_secs(30));
        let p = &self.plans[plan];
        let Ok(key) = p.stream.render(self.valkey.prefix(), &[scope]) else { return true };
        let claim = self.streams.autoclaim(&key, p.consumer.group(), &self.consumer_name, min_idle, batch(p));
        match self.unless_stopped(claim).await {
            Some(Ok(_)) => true,
            Some(Err(e)) => {
                tracing::warn!(stream = key, error = %e, "autoclaim failed");
                loop_error("autoclaim");
                true
            }
            None => false,
        }
    }

    /// The backlog of a plan's group on one scope's stream, recorded in
    /// the health report; `None` when it could not be read (counted as a
    /// `backlog` loop error) or the group is gone.
    async fn sample(&self, plan: usize, scope: &str) -> Option<(u64, Option<u64>)> {
        let p = &self.plans[plan];
        let key = p.stream.render(self.valkey.prefix(), &[scope]).ok()?;
        match self.unless_stopped(self.streams.groups(&key)).await? {
            Ok(groups) => {
                let g = groups.into_iter().find(|g| g.name == p.consumer.group())?;
                let oldest = match self.unless_stopped(self.streams.oldest_waiting(&key, &g)).await? {
                    Ok(ms) => ms,
                    Err(e) => {
                        tracing::warn!(stream = key, error = %e, "cannot read the age of the stream's backlog");
                        loop_error("backlog");
                        None
                    }
                };
                self.health.backlog(&key, scope, &g, oldest);
                let (kind, group) = (p.consumer.feed().kind, p.consumer.group());
                // The gauges: this consumer's backlog summed over its scopes.
                let (pending, lag) = {
                    let mut samples = self.samples.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    samples.insert((plan, scope.to_owned()), (g.pending, g.lag.unwrap_or(0)));
                    samples
                        .iter()
                        .filter(|((i, _), _)| {
                            let q = &self.plans[*i];
                            q.consumer.feed().kind == kind && q.consumer.group() == group
                        })
                        .fold((0u64, 0u64), |sum, (_, (pending, lag))| (sum.0 + pending, sum.1 + lag))
                };
                let labels =
                    [("microdcs.target", kind.to_owned()), ("messaging.consumer.group.name", group.to_owned())];
                metrics::gauge!(crate::observe::POLLER_PENDING, &labels).set(pending as f64);
                metrics::gauge!(crate::observe::POLLER_LAG, &labels).set(lag as f64);
                Some((g.pending, g.lag))
            }
            Err(e) => {
                tracing::warn!(stream = key, error = %e, "cannot sample the stream's backlog");
                loop_error("backlog");
                None
            }
        }
    }

    /// Own pending entries first (a failed batch comes again), then new ones
    /// until a read returns nothing or the consumer fails; a gap found on
    /// the way is told to the consumer before any entry after it.
    /// How many entries were taken off the stream (handled or skipped), and
    /// whether it stopped at its budget with entries perhaps left.
    async fn drain(&self, plan: usize, scope: &str) -> (usize, bool) {
        let p = &self.plans[plan];
        let mut handled = 0;
        if self.paused(plan, scope) {
            return (handled, false);
        }
        let Ok(key) = p.stream.render(self.valkey.prefix(), &[scope]) else { return (handled, false) };
        let group = p.consumer.group();
        let batch = batch(p);
        let mut pending = true;
        let mut group_made = false;
        if !self.tell_untold(plan, scope, &key).await {
            return (handled, false);
        }
        // A gap the consumer was told of: the next read moves past it.
        let mut told: Option<Gap> = self.told_gap(plan, scope, None);
        // At most this many batches per call, so one busy stream cannot hold
        // the loop (the rest comes with the next nudge or poll).
        let mut budget = 16u32;
        loop {
            if self.stopping() {
                return (handled, false);
            }
            if budget == 0 {
                return (handled, true);
            }
            budget -= 1;
            let got = if pending {
                self.unless_stopped(self.streams.read_from(&key, group, &self.consumer_name, batch, "0")).await
            } else {
                let read = self.streams.read_or_gap(&key, group, &self.consumer_name, batch, told.as_ref());
                match self.unless_stopped(read).await {
                    None => None,
                    Some(Ok(NewEntries::Gap(gap))) => {
                        if !self.tell_gap(plan, scope, &key, &gap).await {
                            return (handled, false);
                        }
                        told = self.told_gap(plan, scope, Some(Some(gap)));
                        continue;
                    }
                    Some(Ok(NewEntries::Entries(e))) => {
                        if told.is_some() {
                            told = self.told_gap(plan, scope, Some(None));
                        }
                        Some(Ok(e))
                    }
                    Some(Err(e)) => Some(Err(e)),
                }
            };
            let entries = match got {
                None => return (handled, false),
                Some(Ok(e)) => {
                    self.health.stream(&key, Ok(()));
                    e
                }
                // The group is gone (a server restarted without its data, a
                // replica promoted before it learned the group): made again
                // from the start of what the stream keeps, so nothing
                // written since is lost (some entries may come twice).
                Some(Err(e)) if crate::streams::is_no_group(&e) && !group_made => {
                    group_made = true;
                    tracing::warn!(stream = key, group, "consumer group missing; creating it again");
                    match self.unless_stopped(self.streams.make_group(&key, group)).await {
                        Some(Ok(removed)) => {
                            // Entries trimmed while the group was missing
                            // may be entries it never read: told as a gap
                            // whose loss is unknown, never passed over
                            // (kept until the consumer took it).
                            if removed > 0 {
                                self.lock_untold().insert((plan, scope.to_owned()), Gap::group_lost(&key));
                                if !self.tell_untold(plan, scope, &key).await {
                                    return (handled, false);
                                }
                            }
                            pending = true;
                            continue;
                        }
                        Some(Err(e)) => {
                            tracing::warn!(stream = key, error = %e, "consumer group cannot be created again");
                            loop_error("read");
                            self.health.stream(&key, Err(&e));
                            return (handled, false);
                        }
                        None => return (handled, false),
                    }
                }
                Some(Err(e)) => {
                    tracing::warn!(stream = key, error = %e, "stream read failed");
                    loop_error("read");
                    self.health.stream(&key, Err(&e));
                    return (handled, false);
                }
            };
            if entries.is_empty() {
                if pending {
                    pending = false;
                    continue;
                }
                return (handled, false);
            }
            // A pending entry deleted from the stream comes back without
            // fields: it is lost, never handed to the consumer.
            let read_len = entries.len();
            let (entries, lost): (Vec<StreamEntry>, Vec<StreamEntry>) =
                entries.into_iter().partition(|e| !e.fields.is_empty());
            if !lost.is_empty() {
                let ids: Vec<String> = lost.iter().map(|e| e.id.clone()).collect();
                tracing::warn!(stream = key, lost = ids.len(), ids = ?ids, "stream entries were deleted while pending");
                self.valkey.metrics().add_entries_lost(ids.len() as u64);
                match self.unless_stopped(self.streams.ack(&key, group, &ids)).await {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        tracing::warn!(stream = key, error = %e, "acknowledge of lost entries failed");
                        loop_error("ack");
                        return (handled, false);
                    }
                    None => return (handled, false),
                }
                if entries.is_empty() {
                    continue;
                }
            }
            let kind = p.consumer.feed().kind.to_owned();
            let ids: Vec<String> = entries.iter().map(|e| e.id.clone()).collect();
            // Entries of other kinds (a change stream shared by several
            // types) are acknowledged with the batch, never handed over.
            let (wanted, skipped): (Vec<StreamEntry>, Vec<StreamEntry>) =
                entries.into_iter().partition(|e| p.consumer.wants(e));
            let outcome = if wanted.is_empty() { Ok(()) } else { p.consumer.handle(scope, &wanted).await };
            match outcome {
                Ok(()) => {
                    let count = |outcome: &'static str, n: usize| {
                        if n > 0 {
                            metrics::counter!(crate::observe::POLLER_ENTRIES, "microdcs.target" => kind.clone(), "microdcs.outcome" => outcome)
                                .increment(n as u64);
                        }
                    };
                    count("handled", wanted.len());
                    count("skipped", skipped.len());
                    handled += ids.len();
                    self.recovered(plan, scope);
                    match self.unless_stopped(self.streams.ack(&key, group, &ids)).await {
                        Some(Ok(_)) => {}
                        Some(Err(e)) => {
                            tracing::warn!(stream = key, error = %e, "acknowledge failed; the entries come again");
                            loop_error("ack");
                            return (handled, false);
                        }
                        // Stopping: the batch stays pending and comes again.
                        None => return (handled, false),
                    }
                }
                Err(e) => {
                    metrics::counter!(crate::observe::POLLER_ENTRIES, "microdcs.target" => kind, "microdcs.outcome" => "failed")
                        .increment(wanted.len() as u64);
                    let pause = self.failed(plan, scope);
                    tracing::warn!(stream = key, entries = wanted.len(), error = %e, ?pause, "consumer failed; entries stay pending");
                    return (handled, false);
                }
            }
            if pending && read_len < batch {
                pending = false;
            }
        }
    }
}

/// Counts one failure of the loop, by kind.
fn loop_error(kind: &'static str) {
    metrics::counter!(crate::observe::POLLER_ERRORS, "error.type" => kind).increment(1);
}

/// A consumer's batch as used: from 1 to [`Streams::MAX_COUNT`].
fn batch(p: &ConsumerPlan) -> usize {
    p.consumer.batch().clamp(1, Streams::MAX_COUNT)
}
