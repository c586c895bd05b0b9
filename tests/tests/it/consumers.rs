//! Consumers that never lose silently: a consumer that falls behind past the
//! change stream's bound is told what it lost, and one slow consumer does
//! not hold back the others. Against a real Valkey.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use microdcs_tests::{server, unique_prefix};
use microdcs_valkey::poller::GapOutcome;
use microdcs_valkey::streams::Gap;
use microdcs_valkey::{
    Document, MicroDcsConfig, PutOutcome, Valkey, changes::Change, changes::ChangeKind, changes::Changes,
    config::ValkeyConfig, poller::BoxError, poller::BoxFuture, poller::Poller, poller::StreamConsumer, schema::Feed,
    streams::StreamEntry,
};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "order", list(key = "order:list:{scope}", score = n))]
struct Order {
    id: String,
    scope: String,
    n: u32,
}

microdcs_valkey::keyspace! {
    /// The consumer tests' document type.
    Orders {
        documents: [Order],
    }
}

fn config(hostport: &str, prefix: &str, max_len: u64) -> ValkeyConfig {
    let mut c = MicroDcsConfig::default();
    c.set("Valkey:ConnectionString", hostport).unwrap();
    c.set("Valkey:KeyPrefix", prefix).unwrap();
    c.set("Valkey:PollInterval", "200ms").unwrap();
    c.set("Valkey:ScopeRefreshInterval", "200ms").unwrap();
    c.set("Valkey:ChangeStreamMaxLength", &max_len.to_string()).unwrap();
    c.valkey
}

/// What a consumer saw: the document ids of the entries handed to it, the
/// entry ids in the order handed over, and the gaps it was told of.
#[derive(Default)]
struct Seen {
    ids: Mutex<BTreeSet<String>>,
    order: Mutex<Vec<String>>,
    gaps: Mutex<Vec<Gap>>,
}

impl Seen {
    fn count(&self) -> usize {
        self.ids.lock().unwrap().len()
    }
    fn has(&self, id: &str) -> bool {
        self.ids.lock().unwrap().contains(id)
    }
}

/// A consumer that waits at its gate before it handles a batch: closed, it
/// falls behind as long as the test wants.
struct Gated {
    seen: Arc<Seen>,
    gate: watch::Receiver<bool>,
}

impl StreamConsumer for Gated {
    fn feed(&self) -> Feed<'_> {
        Order::SPEC.feed().expect("has a change stream")
    }
    fn group(&self) -> &str {
        "indexer"
    }
    fn handle<'a>(&'a self, _scope: &'a str, entries: &'a [StreamEntry]) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            let mut gate = self.gate.clone();
            gate.wait_for(|open| *open).await.map_err(|_| "the test ended")?;
            let mut ids = self.seen.ids.lock().unwrap();
            for e in entries {
                ids.insert(e.field("id").unwrap_or_default().to_owned());
                self.seen.order.lock().unwrap().push(e.id.clone());
            }
            Ok(())
        })
    }
    fn gap<'a>(&'a self, _scope: &'a str, gap: &'a Gap) -> BoxFuture<'a, Result<GapOutcome, BoxError>> {
        Box::pin(async move {
            self.seen.gaps.lock().unwrap().push(gap.clone());
            Ok(GapOutcome::NotRecovered)
        })
    }
}

/// Waits, within a bound that only a broken poller reaches, until `done`.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..600 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never happened: {what}");
}

const WRITES: u32 = 1_000;

/// Waits until the indexer group holds one entry pending: the first change
/// was handed over and its consumer waits at the gate.
async fn until_pending(con: &mut microdcs_valkey::client::Connection, stream: &str) {
    for _ in 0..600 {
        let pending: Vec<microdcs_valkey::redis::Value> = microdcs_valkey::redis::cmd("XPENDING")
            .arg(stream)
            .arg("indexer")
            .query_async(con)
            .await
            .unwrap_or_default();
        if pending.first() == Some(&microdcs_valkey::redis::Value::Int(1)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the first change was never handed over");
}

/// Starts a gated consumer, lets it take the first change and stop at its
/// gate, writes `WRITES` more changes, opens the gate and waits until the
/// last change arrived. The poller, what the consumer saw, and the handle.
async fn fall_behind(
    max_len: u64,
    name: &str,
) -> (microdcs_valkey::poller::PollerHandle, Arc<Seen>, Valkey, microdcs_tests::ValkeyServer) {
    let s = server();
    let valkey = Valkey::connect(&config(&s.host_port(), unique_prefix(name).as_str(), max_len)).await.unwrap();
    let seen = Arc::new(Seen::default());
    let (open, gate) = watch::channel(false);
    let poller =
        Poller::new(valkey.clone(), "instance-1").consumer(Gated { seen: seen.clone(), gate }).start().await.unwrap();
    let store = Orders::open(valkey.clone()).store::<Order>();
    let write = |n: u32| {
        let store = store.clone();
        async move {
            let doc = Order { id: format!("o-{n}"), scope: "t1".into(), n };
            assert!(matches!(store.create(&doc).await.unwrap(), PutOutcome::Written { .. }));
        }
    };
    write(0).await;
    // The first change is handed over and held at the gate.
    let stream = format!("{}:changes:t1", valkey.prefix().as_str());
    let mut con = valkey.connection();
    until_pending(&mut con, &stream).await;
    for n in 1..=WRITES {
        write(n).await;
    }
    let _ = open.send(true);
    let last = format!("o-{WRITES}");
    until("the last change arrived", || seen.has(&last)).await;
    (poller, seen, valkey, s)
}

/// The indexer stopped while writes ran past the bound: it is told of the
/// gap with the last entry it had and the first it gets, every change it
/// did not get is counted, and health is unhealthy until the gap is dealt with.
#[tokio::test]
async fn a_consumer_that_falls_behind_past_the_bound_is_told_what_it_lost() {
    let (poller, seen, valkey, _server) = fall_behind(50, "gap").await;
    let got = seen.count() as u64;
    let lost = valkey.metrics().stream_entries_lost();
    assert!(got < u64::from(WRITES), "the bound trimmed unread changes: got {got}");
    assert_eq!(got + lost, u64::from(WRITES) + 1, "every change is either delivered or counted as lost");
    let gaps = seen.gaps.lock().unwrap().clone();
    assert_eq!(gaps.len(), 1, "one gap, told once: {gaps:?}");
    assert_eq!(valkey.metrics().stream_gaps(), 1);
    let gap = &gaps[0];
    assert_eq!(gap.lost, Some(lost), "{gap:?}");
    let order = seen.order.lock().unwrap().clone();
    assert_eq!(gap.last_had, order[0], "the last entry it had: the one held at the gate");
    assert_eq!(gap.first_gets.as_deref(), Some(order[1].as_str()), "the first entry it gets after the gap");
    let stream = format!("{}:changes:t1", valkey.prefix().as_str());
    assert_eq!(gap.stream, stream);
    let h = poller.health();
    assert!(!h.is_healthy(Duration::from_secs(3600)), "a loss turns health unhealthy: {h:?}");
    let g = &h.gaps[&stream];
    assert_eq!((g.gaps, g.lost, g.recovered), (1, lost, false), "{g:?}");
    // Dealt with by the operator: healthy again (once a backlog sample sees
    // the consumer caught up), the gap still on record.
    poller.clear_gaps();
    until("healthy after the gap was cleared", || poller.health().is_healthy(Duration::from_secs(3600))).await;
    assert_eq!(poller.health().gaps[&stream].gaps, 1);
    poller.shutdown().await;
}

/// A typed consumer that resyncs: after the gap it gets every document of
/// the scope as stored now, and health is not held down.
#[tokio::test]
async fn a_resyncing_consumer_gets_the_documents_as_stored_after_a_gap() {
    let s = server();
    let valkey = Valkey::connect(&config(&s.host_port(), unique_prefix("resync").as_str(), 50)).await.unwrap();
    let store = Orders::open(valkey.clone()).store::<Order>();
    let (open, gate) = watch::channel(false);
    let seen: Arc<Mutex<Vec<Change<Order>>>> = Arc::default();
    let into = seen.clone();
    let handler = move |_scope: String, changes: Vec<Change<Order>>| {
        let gate = gate.clone();
        let into = into.clone();
        async move {
            let mut gate = gate;
            gate.wait_for(|open| *open).await.map_err(|_| "the test ended")?;
            into.lock().unwrap().extend(changes);
            Ok::<(), BoxError>(())
        }
    };
    let poller = Poller::new(valkey.clone(), "instance-1")
        .consumer(Changes::new(store.clone(), "indexer", handler).resyncing())
        .start()
        .await
        .unwrap();
    let write = |n: u32| {
        let store = store.clone();
        async move {
            let doc = Order { id: format!("o-{n}"), scope: "t1".into(), n };
            assert!(matches!(store.create(&doc).await.unwrap(), PutOutcome::Written { .. }));
        }
    };
    write(0).await;
    let stream = format!("{}:changes:t1", valkey.prefix().as_str());
    let mut con = valkey.connection();
    until_pending(&mut con, &stream).await;
    for n in 1..=WRITES {
        write(n).await;
    }
    let _ = open.send(true);
    let last = format!("o-{WRITES}");
    until("the last document arrived", || seen.lock().unwrap().iter().any(|c| c.id == last)).await;
    until("the resync ended", || {
        let c = seen.lock().unwrap();
        let resynced: BTreeSet<&str> =
            c.iter().filter(|c| c.kind == ChangeKind::Resynced).map(|c| c.id.as_str()).collect();
        resynced.len() == WRITES as usize + 1
    })
    .await;
    let c = seen.lock().unwrap().clone();
    let all: BTreeSet<&str> = c.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(all.len(), WRITES as usize + 1, "every document reached the consumer");
    assert!(c.iter().filter(|c| c.kind == ChangeKind::Resynced).all(|c| c.document.is_some() && c.entry_id.is_empty()));
    assert_eq!(valkey.metrics().stream_gaps(), 1);
    assert!(poller.health().gaps[&stream].recovered);
    until("healthy: the gap recovered, the consumer caught up", || {
        poller.health().is_healthy(Duration::from_secs(3600))
    })
    .await;
    poller.shutdown().await;
}

/// With the bound above the backlog, nothing is lost at all.
#[tokio::test]
async fn with_the_bound_above_the_backlog_nothing_is_lost() {
    let (poller, seen, valkey, _server) = fall_behind(100_000, "nogap").await;
    assert_eq!(seen.count() as u64, u64::from(WRITES) + 1);
    assert_eq!(valkey.metrics().stream_entries_lost(), 0);
    let h = poller.health();
    assert!(h.is_healthy(Duration::from_secs(3600)), "{h:?}");
    poller.shutdown().await;
}

/// Counts what it is handed; `pause` per batch makes it slow.
struct Counting {
    group: &'static str,
    pause: Duration,
    seen: Arc<Seen>,
}

impl StreamConsumer for Counting {
    fn feed(&self) -> Feed<'_> {
        Order::SPEC.feed().expect("has a change stream")
    }
    fn group(&self) -> &str {
        self.group
    }
    fn handle<'a>(&'a self, _scope: &'a str, entries: &'a [StreamEntry]) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            tokio::time::sleep(self.pause).await;
            let mut ids = self.seen.ids.lock().unwrap();
            for e in entries {
                ids.insert(e.field("id").unwrap_or_default().to_owned());
            }
            Ok(())
        })
    }
}

/// A slow consumer (2 s a batch) and a fast one in one poller, over three
/// scopes: the fast one keeps up (under 100 entries behind) and a new
/// scope's groups exist as soon as its first change does, while the slow
/// one is still busy with its first scope.
#[tokio::test]
async fn a_slow_consumer_delays_only_itself() {
    let s = server();
    let valkey = Valkey::connect(&config(&s.host_port(), unique_prefix("slowfast").as_str(), 100_000)).await.unwrap();
    let slow = Arc::new(Seen::default());
    let fast = Arc::new(Seen::default());
    let poller = Poller::new(valkey.clone(), "instance-1")
        .consumer(Counting { group: "slow", pause: Duration::from_secs(2), seen: slow.clone() })
        .consumer(Counting { group: "fast", pause: Duration::ZERO, seen: fast.clone() })
        .start()
        .await
        .unwrap();
    let store = Orders::open(valkey.clone()).store::<Order>();
    let written = std::cell::Cell::new(0usize);
    let write = |scope: &str, n: u32| {
        written.set(written.get() + 1);
        let store = store.clone();
        let doc = Order { id: format!("{scope}-{n}"), scope: scope.into(), n };
        async move {
            assert!(matches!(store.create(&doc).await.unwrap(), PutOutcome::Written { .. }));
        }
    };
    // The slow consumer gets a backlog on t1 that takes it a minute.
    for n in 0..3_000 {
        write("t1", n).await;
    }
    until("the fast consumer has t1", || fast.count() == 3_000).await;
    // New scopes: their groups appear and the fast consumer reads them while
    // the slow one still works through t1.
    let mut con = valkey.connection();
    for scope in ["t2", "t3"] {
        write(scope, 0).await;
    }
    for scope in ["t2", "t3"] {
        let stream = format!("{}:changes:{scope}", valkey.prefix().as_str());
        let mut found = false;
        for _ in 0..50 {
            let groups: Vec<microdcs_valkey::redis::Value> = microdcs_valkey::redis::cmd("XINFO")
                .arg("GROUPS")
                .arg(&stream)
                .query_async(&mut con)
                .await
                .unwrap_or_default();
            if groups.len() == 2 {
                found = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(found, "both groups of {scope} within 5 s of its first change");
    }
    until("the fast consumer has t2 and t3", || fast.has("t2-0") && fast.has("t3-0")).await;
    // Writes over the three scopes: the fast consumer stays close behind.
    for round in 1..=10u32 {
        for n in 0..30 {
            for scope in ["t1", "t2", "t3"] {
                write(scope, 10_000 + round * 100 + n).await;
            }
        }
        let behind = |fast: &Seen| written.get() - fast.count();
        for _ in 0..100 {
            if behind(&fast) < 100 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(behind(&fast) < 100, "round {round}: the fast consumer is {} behind", behind(&fast));
    }
    assert!(slow.count() < 3_000, "the slow consumer is still at its backlog: {}", slow.count());
    // Health sees it per consumer and scope: the slow one behind on t1 (its
    // oldest waiting change older than the grace), the fast one nowhere.
    let t1 = format!("{}:changes:t1", valkey.prefix().as_str());
    let grace = Duration::from_secs(2);
    until("health shows the slow consumer behind on t1", || {
        let h = poller.health();
        h.backlog.get(&(t1.clone(), "slow".to_owned())).is_some_and(|b| {
            b.scope == "t1" && b.oldest_waiting.is_some_and(|t| t.elapsed().unwrap_or_default() > grace)
        }) && !h.is_healthy(grace)
    })
    .await;
    let h = poller.health();
    for scope in ["t1", "t2", "t3"] {
        let key = (format!("{}:changes:{scope}", valkey.prefix().as_str()), "fast".to_owned());
        let b = h.backlog.get(&key).unwrap_or_else(|| panic!("no sample of {key:?}: {h:?}"));
        assert!(b.lag.is_some_and(|l| l < 100), "{key:?}: {b:?}");
    }
    poller.shutdown().await;
}

/// Retention follows the readers: entries every group has read go, entries
/// a group has not read stay.
#[tokio::test]
async fn read_entries_are_trimmed_unread_ones_stay() {
    let s = server();
    let valkey = Valkey::connect(&config(&s.host_port(), unique_prefix("retain").as_str(), 100_000)).await.unwrap();
    let stream = format!("{}:changes:t1", valkey.prefix().as_str());
    // A group whose consumer is not running: what it has not read must stay.
    microdcs_valkey::streams::Streams::new(valkey.clone()).create_group(&stream, "offline").await.unwrap();
    let fast = Arc::new(Seen::default());
    let poller = Poller::new(valkey.clone(), "instance-1")
        .consumer(Counting { group: "fast", pause: Duration::ZERO, seen: fast.clone() })
        .start()
        .await
        .unwrap();
    let store = Orders::open(valkey.clone()).store::<Order>();
    for n in 0..200 {
        let doc = Order { id: format!("o-{n}"), scope: "t1".into(), n };
        assert!(matches!(store.create(&doc).await.unwrap(), PutOutcome::Written { .. }));
    }
    until("the consumer has every change", || fast.count() == 200).await;
    let mut con = valkey.connection();
    let len = |con: &mut microdcs_valkey::client::Connection| {
        let mut con = con.clone();
        let stream = stream.clone();
        async move { microdcs_valkey::redis::cmd("XLEN").arg(&stream).query_async::<u64>(&mut con).await.unwrap() }
    };
    // Several polls (each samples and trims): the offline group keeps all.
    let sampled = |h: &microdcs_valkey::poller::PollerHealth| {
        h.backlog.get(&(stream.clone(), "fast".to_owned())).map(|b| b.sampled_at)
    };
    let first = loop {
        if let Some(t) = sampled(&poller.health()) {
            break t;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    until("three more samples", || sampled(&poller.health()).is_some_and(|t| t > first + Duration::from_millis(400)))
        .await;
    assert_eq!(len(&mut con).await, 200, "entries a group has not read stay");
    // Once that group goes, everything has been read by every group: trimmed.
    let _: i64 = microdcs_valkey::redis::cmd("XGROUP")
        .arg("DESTROY")
        .arg(&stream)
        .arg("offline")
        .query_async(&mut con)
        .await
        .unwrap();
    for _ in 0..600 {
        if len(&mut con).await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(len(&mut con).await, 0, "entries every group has read are trimmed");
    poller.shutdown().await;
}

/// Tracks how many batches are in its `handle` at once, each taking
/// `pause`.
struct InFlight {
    now: Arc<std::sync::atomic::AtomicUsize>,
    most: Arc<std::sync::atomic::AtomicUsize>,
    seen: Arc<Seen>,
}

impl StreamConsumer for InFlight {
    fn feed(&self) -> Feed<'_> {
        Order::SPEC.feed().expect("has a change stream")
    }
    fn group(&self) -> &str {
        "one-at-a-time"
    }
    fn handle<'a>(&'a self, _scope: &'a str, entries: &'a [StreamEntry]) -> BoxFuture<'a, Result<(), BoxError>> {
        use std::sync::atomic::Ordering::SeqCst;
        Box::pin(async move {
            let now = self.now.fetch_add(1, SeqCst) + 1;
            self.most.fetch_max(now, SeqCst);
            tokio::time::sleep(Duration::from_millis(300)).await;
            {
                let mut ids = self.seen.ids.lock().unwrap();
                for e in entries {
                    ids.insert(e.field("id").unwrap_or_default().to_owned());
                }
            }
            self.now.fetch_sub(1, SeqCst);
            Ok(())
        })
    }
}

/// `ConsumerScopesAtOnce = 1`: with changes waiting in three scopes, a
/// slow consumer is never in two scopes' batches at once (with the default
/// of 8 all three are drained together).
#[tokio::test]
async fn consumer_scopes_at_once_bounds_the_scopes_in_flight() {
    let s = server();
    let mut c = config(&s.host_port(), unique_prefix("atonce").as_str(), 100_000);
    c.consumer_scopes_at_once = 1;
    let valkey = Valkey::connect(&c).await.unwrap();
    let store = Orders::open(valkey.clone()).store::<Order>();
    // Written before the poller starts: its first poll finds all three
    // scopes waiting at once.
    for scope in ["t1", "t2", "t3"] {
        for n in 0..2 {
            let doc = Order { id: format!("{scope}-{n}"), scope: scope.into(), n };
            assert!(matches!(store.create(&doc).await.unwrap(), PutOutcome::Written { .. }));
        }
    }
    let seen = Arc::new(Seen::default());
    let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let poller = Poller::new(valkey.clone(), "instance-1")
        .consumer(InFlight { now: Arc::default(), most: most.clone(), seen: seen.clone() })
        .start()
        .await
        .unwrap();
    until("every change handled", || seen.count() == 6).await;
    assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 1, "one scope's batch at a time");
    poller.shutdown().await;
}

/// `ConsumerLagLimit` is the health's lag threshold; unset, it is half of
/// `ChangeStreamMaxLength`.
#[tokio::test]
async fn consumer_lag_limit_is_the_health_threshold() {
    let s = server();
    for (limit, max_len, expected) in [(Some(7), 100, 7), (None, 100, 50), (None, 1, 1)] {
        let mut c = config(&s.host_port(), unique_prefix("laglimit").as_str(), max_len);
        c.consumer_lag_limit = limit;
        let valkey = Valkey::connect(&c).await.unwrap();
        let poller = Poller::new(valkey, "instance-1")
            .consumer(Counting { group: "fast", pause: Duration::ZERO, seen: Arc::default() })
            .start()
            .await
            .unwrap();
        assert_eq!(poller.health().lag_limit, expected, "{limit:?} with ChangeStreamMaxLength {max_len}");
        poller.shutdown().await;
    }
    // A handle from a URL: half the stream bound of its write options too.
    let write = microdcs_valkey::config::WriteOptions { change_stream_max_len: 100, ..Default::default() };
    let valkey = Valkey::connect_url(s.url(), unique_prefix("laglimit-url"), write).await.unwrap();
    let poller = Poller::new(valkey, "instance-1")
        .consumer(Counting { group: "fast", pause: Duration::ZERO, seen: Arc::default() })
        .start()
        .await
        .unwrap();
    assert_eq!(poller.health().lag_limit, 50, "connect_url with a stream bound of 100");
    poller.shutdown().await;
}

/// A gated consumer of its own group that answers a gap with `recovered`
/// after `think` (so the test orders the tellings).
struct OwnGroup {
    group: &'static str,
    recovered: bool,
    think: Duration,
    seen: Arc<Seen>,
    gate: watch::Receiver<bool>,
}

impl StreamConsumer for OwnGroup {
    fn feed(&self) -> Feed<'_> {
        Order::SPEC.feed().expect("has a change stream")
    }
    fn group(&self) -> &str {
        self.group
    }
    fn handle<'a>(&'a self, _scope: &'a str, entries: &'a [StreamEntry]) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            let mut gate = self.gate.clone();
            gate.wait_for(|open| *open).await.map_err(|_| "the test ended")?;
            let mut ids = self.seen.ids.lock().unwrap();
            for e in entries {
                ids.insert(e.field("id").unwrap_or_default().to_owned());
            }
            Ok(())
        })
    }
    fn gap<'a>(&'a self, _scope: &'a str, gap: &'a Gap) -> BoxFuture<'a, Result<GapOutcome, BoxError>> {
        Box::pin(async move {
            tokio::time::sleep(self.think).await;
            self.seen.gaps.lock().unwrap().push(gap.clone());
            Ok(if self.recovered { GapOutcome::Recovered } else { GapOutcome::NotRecovered })
        })
    }
}

/// Two consumers of one stream, each with its own group, both past the
/// bound: one makes up for its gap, the other does not. The one that
/// recovered answers last, and health stays unhealthy: one group's
/// recovery says nothing of the other's loss.
#[tokio::test]
async fn one_group_s_recovery_does_not_hide_another_group_s_loss() {
    let s = server();
    let valkey = Valkey::connect(&config(&s.host_port(), unique_prefix("gap-groups").as_str(), 50)).await.unwrap();
    let (a, b) = (Arc::new(Seen::default()), Arc::new(Seen::default()));
    let (open, gate) = watch::channel(false);
    let lost =
        OwnGroup { group: "archive", recovered: false, think: Duration::ZERO, seen: a.clone(), gate: gate.clone() };
    let made_up =
        OwnGroup { group: "search", recovered: true, think: Duration::from_millis(800), seen: b.clone(), gate };
    let poller = Poller::new(valkey.clone(), "instance-1").consumer(lost).consumer(made_up).start().await.unwrap();
    let store = Orders::open(valkey.clone()).store::<Order>();
    let write = |n: u32| {
        let store = store.clone();
        async move {
            let doc = Order { id: format!("o-{n}"), scope: "t1".into(), n };
            assert!(matches!(store.create(&doc).await.unwrap(), PutOutcome::Written { .. }));
        }
    };
    write(0).await;
    let stream = format!("{}:changes:t1", valkey.prefix().as_str());
    until("both groups hold the first change", || {
        let h = poller.health();
        ["archive", "search"].iter().all(|g| h.backlog.contains_key(&(stream.clone(), (*g).to_owned())))
    })
    .await;
    for n in 1..=WRITES {
        write(n).await;
    }
    let _ = open.send(true);
    let last = format!("o-{WRITES}");
    until("both got the last change", || a.has(&last) && b.has(&last)).await;
    until("both were told", || !a.gaps.lock().unwrap().is_empty() && !b.gaps.lock().unwrap().is_empty()).await;
    let h = poller.health();
    let g = &h.gaps[&stream];
    assert!(!g.recovered, "the archive group's loss stays open: {g:?}");
    assert_eq!(g.open, BTreeSet::from(["archive".to_owned()]), "{g:?}");
    assert!(!h.is_healthy(Duration::from_secs(3600)), "{h:?}");
    poller.clear_gaps();
    assert!(poller.health().gaps[&stream].recovered);
    poller.shutdown().await;
}

/// The group went missing (a replica promoted before it learnt the group,
/// or someone destroyed it) while entries it had not read were trimmed:
/// the poller makes the group again and tells the consumer of a gap whose
/// loss is unknown, instead of passing over what may have been lost.
#[tokio::test]
async fn a_group_made_again_after_a_trim_is_told_a_gap() {
    let s = server();
    let valkey = Valkey::connect(&config(&s.host_port(), unique_prefix("gap-nogroup").as_str(), 50)).await.unwrap();
    let seen = Arc::new(Seen::default());
    let (_open, gate) = watch::channel(true);
    let poller =
        Poller::new(valkey.clone(), "instance-1").consumer(Gated { seen: seen.clone(), gate }).start().await.unwrap();
    let store = Orders::open(valkey.clone()).store::<Order>();
    let doc = |n: u32| Order { id: format!("o-{n}"), scope: "t1".into(), n };
    assert!(matches!(store.create(&doc(0)).await.unwrap(), PutOutcome::Written { .. }));
    until("the first change arrived", || seen.has("o-0")).await;
    assert!(seen.gaps.lock().unwrap().is_empty());
    // In one step, so the poller cannot make the group again in between:
    // the group goes, and entries it never read come and are trimmed.
    let stream = format!("{}:changes:t1", valkey.prefix().as_str());
    let script = "redis.call('XGROUP', 'DESTROY', KEYS[1], 'indexer') \
                  for i = 1, 1000 do redis.call('XADD', KEYS[1], 'MAXLEN', '~', '50', '*', 'id', 'lost-' .. i) end \
                  return 1";
    let _: i64 = microdcs_valkey::redis::cmd("EVAL")
        .arg(script)
        .arg(1)
        .arg(&stream)
        .query_async(&mut valkey.connection())
        .await
        .unwrap();
    assert!(matches!(store.create(&doc(1)).await.unwrap(), PutOutcome::Written { .. }));
    until("the change after the loss arrived", || seen.has("o-1")).await;
    let gaps = seen.gaps.lock().unwrap().clone();
    assert_eq!(gaps.len(), 1, "told once: {gaps:?}");
    assert_eq!((gaps[0].lost, gaps[0].last_had.as_str()), (None, "0-0"), "{gaps:?}");
    assert_eq!(valkey.metrics().stream_gaps(), 1);
    let h = poller.health();
    assert!(!h.gaps[&stream].recovered, "{h:?}");
    assert!(!h.is_healthy(Duration::from_secs(3600)));
    poller.shutdown().await;
}

/// A poller task that sets `started` and then waits at its gate.
struct Blocking {
    started: Arc<std::sync::atomic::AtomicBool>,
    gate: watch::Receiver<bool>,
}

impl microdcs_valkey::poller::PollerTask for Blocking {
    fn interval(&self) -> Duration {
        Duration::from_millis(50)
    }
    fn run(&self) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async move {
            self.started.store(true, std::sync::atomic::Ordering::SeqCst);
            let mut gate = self.gate.clone();
            gate.wait_for(|open| *open).await.map_err(|_| "the test ended")?;
            Ok(())
        })
    }
}

/// A long run of a periodic task (a sweep over many scopes) does not hold
/// the consumers: a change written while the task runs reaches its
/// consumer before the task ends. The task here ends only once it has.
#[tokio::test]
async fn a_long_periodic_task_does_not_hold_the_consumers() {
    let s = server();
    let valkey = Valkey::connect(&config(&s.host_port(), unique_prefix("task-long").as_str(), 1000)).await.unwrap();
    let seen = Arc::new(Seen::default());
    let (_open, consumer_gate) = watch::channel(true);
    let (release, gate) = watch::channel(false);
    let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = Poller::new(valkey.clone(), "instance-1")
        .consumer(Gated { seen: seen.clone(), gate: consumer_gate })
        .task(Blocking { started: started.clone(), gate })
        .start()
        .await
        .unwrap();
    until("the task runs", || started.load(std::sync::atomic::Ordering::SeqCst)).await;
    let store = Orders::open(valkey.clone()).store::<Order>();
    let doc = Order { id: "o-1".into(), scope: "t1".into(), n: 1 };
    assert!(matches!(store.create(&doc).await.unwrap(), PutOutcome::Written { .. }));
    until("the change reached its consumer while the task ran", || seen.has("o-1")).await;
    let _ = release.send(true);
    poller.shutdown().await;
}
