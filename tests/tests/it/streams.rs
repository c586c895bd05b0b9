//! The streams helper and the poller against a real Valkey.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use microdcs_tests::change_channel;
use microdcs_tests::{FaultProxy, command_calls, created, server, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{
    Document, MicroDcsConfig, PutOutcome, Valkey, changes::Change, changes::ChangeKind, changes::Changes,
    config::ValkeyConfig, poller::BoxError, poller::BoxFuture, poller::Poller, poller::StreamConsumer, schema::Feed,
    store::DeleteOutcome, streams::StreamEntry, streams::Streams,
};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "jobresponse")]
struct JobResponse {
    id: String,
    scope: String,
    n: u32,
}

/// Sends every handled entry (scope, id field) to a channel; fails the first `fail` batches.
struct Collect {
    tx: mpsc::UnboundedSender<(String, String, Instant)>,
    fail: AtomicU32,
    deliveries: Arc<AtomicU32>,
    feed: Feed<'static>,
}

impl StreamConsumer for Collect {
    fn feed(&self) -> Feed<'_> {
        self.feed
    }
    fn group(&self) -> &str {
        "publisher"
    }
    fn handle<'a>(&'a self, scope: &'a str, entries: &'a [StreamEntry]) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            self.deliveries.fetch_add(entries.len() as u32, Ordering::SeqCst);
            if self.fail.load(Ordering::SeqCst) > 0 {
                self.fail.fetch_sub(1, Ordering::SeqCst);
                return Err("simulated failure".into());
            }
            for e in entries {
                let _ = self.tx.send((scope.to_owned(), e.field("id").unwrap_or_default().to_owned(), Instant::now()));
            }
            Ok(())
        })
    }
}

fn config(hostport: &str, prefix: &str, poll: &str, refresh: &str) -> ValkeyConfig {
    let mut c = MicroDcsConfig::default();
    c.set("Valkey:ConnectionString", hostport).unwrap();
    c.set("Valkey:KeyPrefix", prefix).unwrap();
    c.set("Valkey:PollInterval", poll).unwrap();
    c.set("Valkey:ScopeRefreshInterval", refresh).unwrap();
    c.valkey
}

async fn next(
    rx: &mut mpsc::UnboundedReceiver<(String, String, Instant)>,
    within: Duration,
) -> Option<(String, String, Instant)> {
    tokio::time::timeout(within, rx.recv()).await.ok().flatten()
}

#[tokio::test]
async fn a_put_reaches_the_consumer_by_its_nudge() {
    let s = server();
    // A long poll interval: an entry arriving quickly came through the nudge.
    let valkey = Valkey::connect(&config(&s.host_port(), unique_prefix("nudge").as_str(), "30s", "30s")).await.unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let poller = Poller::new(valkey.clone(), "instance-1")
        .consumer(Collect {
            tx,
            fail: AtomicU32::new(0),
            deliveries: Arc::default(),
            feed: JobResponse::SPEC.feed().expect("has a change stream"),
        })
        .start()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let store = Feeds::open(valkey.clone()).store::<JobResponse>();
    let t0 = Instant::now();
    assert!(matches!(
        store.create(&JobResponse { id: "r-1".into(), scope: "s1".into(), n: 1 }).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    let (scope, id, at) = next(&mut rx, Duration::from_secs(10)).await.expect("delivered by the nudge");
    assert_eq!((scope.as_str(), id.as_str()), ("s1", "r-1"));
    assert!(at.duration_since(t0) < Duration::from_secs(10), "well before the 30 s poll");
    // A second write to the now known scope.
    assert!(matches!(
        store.create(&JobResponse { id: "r-2".into(), scope: "s1".into(), n: 2 }).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    assert_eq!(next(&mut rx, Duration::from_secs(10)).await.unwrap().1, "r-2");
    poller.shutdown().await;
}

/// The stream and its group lost (a server restarted without its data): the
/// next write makes the stream again without the group, and the poller
/// makes the group again instead of failing every read from then on.
#[tokio::test]
async fn a_lost_consumer_group_is_made_again() {
    let s = server();
    let prefix = unique_prefix("nogroup");
    let valkey = Valkey::connect(&config(&s.host_port(), prefix.as_str(), "30s", "30s")).await.unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let poller = Poller::new(valkey.clone(), "instance-1")
        .consumer(Collect {
            tx,
            fail: AtomicU32::new(0),
            deliveries: Arc::default(),
            feed: JobResponse::SPEC.feed().expect("has a change stream"),
        })
        .start()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let store = Feeds::open(valkey.clone()).store::<JobResponse>();
    let _ = store.create(&JobResponse { id: "r-1".into(), scope: "s1".into(), n: 1 }).await.unwrap();
    assert_eq!(next(&mut rx, Duration::from_secs(10)).await.expect("delivered").1, "r-1");
    let mut raw = ConnectionManager::new(redis::Client::open(s.url()).unwrap()).await.unwrap();
    let keys: Vec<String> =
        redis::cmd("KEYS").arg(format!("{}:*changes*", prefix.as_str())).query_async(&mut raw).await.unwrap();
    assert!(!keys.is_empty());
    for k in &keys {
        let _: () = redis::cmd("DEL").arg(k).query_async(&mut raw).await.unwrap();
    }
    let _ = store.create(&JobResponse { id: "r-2".into(), scope: "s1".into(), n: 2 }).await.unwrap();
    assert_eq!(next(&mut rx, Duration::from_secs(10)).await.expect("delivered after the group was lost").1, "r-2");
    poller.shutdown().await;
}

/// A document type with its own change stream, nudge channel and registry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(
    kind = "alarm",
    changes = "alarms:changes:{scope}",
    nudge = "alarms:wake:{kind}",
    registry = "alarms:scopes"
)]
struct Alarm {
    id: String,
    scope: String,
}

microdcs_valkey::keyspace! {
    /// The stream tests' document types; the alarm's own feed is declared.
    Feeds {
        documents: [JobResponse, Alarm],
        alarm_changes: stream("alarms:changes:{scope}"),
        alarm_wake: channel("alarms:wake:{kind}"),
        alarm_scopes: set("alarms:scopes"),
    }
}

#[tokio::test]
async fn custom_change_stream_nudge_and_registry_are_honoured_end_to_end() {
    let s = server();
    // Polls far apart: only the custom nudge channel can deliver in time.
    let prefix = unique_prefix("custom-feed");
    let valkey = Valkey::connect(&config(&s.host_port(), prefix.as_str(), "30s", "30s")).await.unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let feed = Alarm::SPEC.feed().expect("has a change stream");
    let poller = Poller::new(valkey.clone(), "instance-1")
        .consumer(Collect { tx, fail: AtomicU32::new(0), deliveries: Arc::default(), feed })
        .start()
        .await
        .unwrap();
    let mut con = valkey.connection();
    let channel = format!("{}:alarms:wake:alarm", prefix.as_str());
    let (subscribers,): (Vec<(String, u64)>,) =
        redis::pipe().cmd("PUBSUB").arg("NUMSUB").arg(&channel).query_async(&mut con).await.unwrap();
    assert_eq!(subscribers[0].1, 1, "the poller listens on the declared nudge channel");
    let t0 = Instant::now();
    created(&Feeds::open(valkey.clone()).store::<Alarm>(), &Alarm { id: "a-1".into(), scope: "s1".into() }).await;
    let (scope, id, at) = next(&mut rx, Duration::from_secs(10)).await.expect("delivered by the custom nudge");
    assert_eq!((scope.as_str(), id.as_str()), ("s1", "a-1"));
    assert!(at.duration_since(t0) < Duration::from_secs(10), "well before the 30 s poll");
    // The entry went to the declared stream and the scope to the declared
    // registry, and nothing to the defaults.
    let stream_len: u64 =
        redis::cmd("XLEN").arg(format!("{}:alarms:changes:s1", prefix.as_str())).query_async(&mut con).await.unwrap();
    assert_eq!(stream_len, 1);
    let registered: bool = redis::cmd("SISMEMBER")
        .arg(format!("{}:alarms:scopes", prefix.as_str()))
        .arg("s1")
        .query_async(&mut con)
        .await
        .unwrap();
    assert!(registered);
    let default_keys: Vec<String> =
        redis::cmd("KEYS").arg(format!("{}:changes:*", prefix.as_str())).query_async(&mut con).await.unwrap();
    assert!(default_keys.is_empty(), "{default_keys:?}");
    poller.shutdown().await;
}

async fn next_change(rx: &mut mpsc::UnboundedReceiver<Change<Alarm>>) -> Change<Alarm> {
    let got = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
    got.ok().flatten().expect("a change well before the 30 s poll")
}

#[tokio::test]
async fn typed_changes_carry_versions_and_kinds_from_the_spec() {
    let s = server();
    let prefix = unique_prefix("typed-changes");
    // Polls far apart: the custom nudge channel must wake the consumer.
    let valkey = Valkey::connect(&config(&s.host_port(), prefix.as_str(), "30s", "30s")).await.unwrap();
    let alarms = Feeds::open(valkey.clone()).store::<Alarm>();
    let (handler, mut rx) = change_channel::<Alarm>();
    let poller = Poller::new(valkey.clone(), "instance-1")
        .consumer(Changes::new(alarms.clone(), "audit", handler).fetching())
        .start()
        .await
        .unwrap();
    let a = Alarm { id: "a-1".into(), scope: "s1".into() };
    assert_eq!(created(&alarms, &a).await, 1);
    let c = next_change(&mut rx).await;
    assert_eq!((c.kind, c.version, c.id.as_str(), c.scope.as_str()), (ChangeKind::Created, 1, "a-1", "s1"));
    assert_eq!(c.document.as_ref().map(|d| &d.doc), Some(&a), "fetched");
    let read = alarms.get("a-1").await.unwrap().unwrap();
    assert_eq!(alarms.update(&read, &a).op("op-7").await.unwrap(), PutOutcome::Written { version: 2 });
    let c = next_change(&mut rx).await;
    assert_eq!((c.kind, c.version), (ChangeKind::Updated, 2));
    assert_eq!(c.op, microdcs_valkey::schema::lua::stored_op_id("op-7"), "the stored form of the caller's op id");
    let read = alarms.get("a-1").await.unwrap().unwrap();
    assert!(matches!(alarms.delete(&read).await.unwrap(), DeleteOutcome::Deleted { version: 2 }));
    let c = next_change(&mut rx).await;
    assert_eq!((c.kind, c.version), (ChangeKind::Deleted, 2));
    assert!(c.document.is_none());
    // Another type's entry in the same stream is passed over, and a corrupt
    // entry is counted, never handed out.
    let stream = Alarm::SPEC.feed().expect("has a change stream").stream.replace("{scope}", "s1");
    let mut con = valkey.connection();
    let key = format!("{}:{stream}", prefix.as_str());
    let _: String = redis::cmd("XADD")
        .arg(&key)
        .arg("*")
        .arg("kind")
        .arg("other")
        .arg("id")
        .arg("x")
        .query_async(&mut con)
        .await
        .unwrap();
    let _: String = redis::cmd("XADD")
        .arg(&key)
        .arg("*")
        .arg("kind")
        .arg(Alarm::SPEC.kind)
        .arg("id")
        .arg("a-9")
        .arg("v")
        .arg("007")
        .arg("op")
        .arg("o")
        .arg("change")
        .arg("created")
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(created(&alarms, &Alarm { id: "a-2".into(), scope: "s1".into() }).await, 1);
    let c = next_change(&mut rx).await;
    assert_eq!((c.id.as_str(), c.version), ("a-2", 1), "only the good entry of this kind");
    assert_eq!(valkey.metrics().stream_entries_corrupt(), 1);
    poller.shutdown().await;
}

#[tokio::test]
async fn a_new_scope_written_elsewhere_is_discovered() {
    let s = server();
    let prefix = unique_prefix("scopes");
    let valkey = Valkey::connect(&config(&s.host_port(), prefix.as_str(), "30s", "300ms")).await.unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let poller = Poller::new(valkey.clone(), "instance-1")
        .consumer(Collect {
            tx,
            fail: AtomicU32::new(0),
            deliveries: Arc::default(),
            feed: JobResponse::SPEC.feed().expect("has a change stream"),
        })
        .start()
        .await
        .unwrap();
    // Another process: registers scope s9 and appends, without any nudge.
    let mut other = ConnectionManager::new(redis::Client::open(s.url()).unwrap()).await.unwrap();
    let p = prefix.as_str();
    let _: () = redis::cmd("XADD")
        .arg(format!("{p}:changes:s9"))
        .arg("*")
        .arg("id")
        .arg("x-1")
        .query_async(&mut other)
        .await
        .unwrap();
    let _: () = redis::cmd("SADD").arg(format!("{p}:scopes")).arg("s9").query_async(&mut other).await.unwrap();
    let t0 = Instant::now();
    let (scope, id, at) = next(&mut rx, Duration::from_secs(5)).await.expect("discovered");
    assert_eq!((scope.as_str(), id.as_str()), ("s9", "x-1"));
    assert!(at.duration_since(t0) < Duration::from_secs(2), "within about one ScopeRefreshInterval");
    poller.shutdown().await;
}

#[tokio::test]
async fn a_failing_consumer_gets_its_entries_again() {
    let s = server();
    let valkey =
        Valkey::connect(&config(&s.host_port(), unique_prefix("fail").as_str(), "200ms", "30s")).await.unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let deliveries = Arc::new(AtomicU32::new(0));
    let poller = Poller::new(valkey.clone(), "instance-1")
        .consumer(Collect {
            tx,
            fail: AtomicU32::new(2),
            deliveries: deliveries.clone(),
            feed: JobResponse::SPEC.feed().expect("has a change stream"),
        })
        .start()
        .await
        .unwrap();
    let store = Feeds::open(valkey.clone()).store::<JobResponse>();
    let _ = store.create(&JobResponse { id: "r-1".into(), scope: "s1".into(), n: 1 }).await.unwrap();
    let (_, id, _) = next(&mut rx, Duration::from_secs(5)).await.expect("delivered after two failures");
    assert_eq!(id, "r-1");
    assert_eq!(deliveries.load(Ordering::SeqCst), 3, "handed over three times, acknowledged once");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(rx.try_recv().is_err(), "acknowledged entries do not come again");
    let pending: Vec<redis::Value> = redis::cmd("XPENDING")
        .arg(format!("{}:changes:s1", valkey.prefix()))
        .arg("publisher")
        .query_async(&mut valkey.connection())
        .await
        .unwrap();
    assert_eq!(pending.first(), Some(&redis::Value::Int(0)));
    poller.shutdown().await;
}

#[tokio::test]
async fn autoclaim_counts_entries_deleted_while_pending() {
    let s = server();
    let valkey = Valkey::connect(&config(&s.host_port(), unique_prefix("claim").as_str(), "1s", "5s")).await.unwrap();
    let streams = Streams::new(valkey.clone());
    let key = format!("{}:sfc:work:s1", valkey.prefix());
    streams.create_group(&key, "engine").await.unwrap();
    streams.create_group(&key, "engine").await.unwrap(); // an existing group is fine
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(streams.append(&key, &[("step", format!("{i}").as_bytes())]).await.unwrap());
    }
    let got = streams.read(&key, "engine", "dead-worker", 10).await.unwrap();
    assert_eq!(got.len(), 3);
    let _: i64 = redis::cmd("XDEL").arg(&key).arg(&ids[1]).query_async(&mut valkey.connection()).await.unwrap();
    let claimed = streams.autoclaim(&key, "engine", "live-worker", Duration::ZERO, 10).await.unwrap();
    let claimed_ids: Vec<&str> = claimed.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(claimed_ids, [ids[0].as_str(), ids[2].as_str()], "the deleted entry is never handed out");
    assert_eq!(valkey.metrics().stream_entries_lost(), 1);
    // Work streams have no length limit.
    let len: u64 = redis::cmd("XLEN").arg(&key).query_async(&mut valkey.connection()).await.unwrap();
    assert_eq!(len, 2);
}

#[tokio::test]
async fn trim_keeps_what_a_lagging_group_has_not_seen() {
    let s = server();
    let valkey = Valkey::connect(&config(&s.host_port(), unique_prefix("trim").as_str(), "1s", "5s")).await.unwrap();
    let streams = Streams::new(valkey.clone());
    let key = format!("{}:sfc:work:s1", valkey.prefix());
    streams.create_group(&key, "fast").await.unwrap();
    streams.create_group(&key, "slow").await.unwrap();
    let mut ids = Vec::new();
    for i in 0..600 {
        ids.push(streams.append(&key, &[("n", format!("{i}").as_bytes())]).await.unwrap());
    }
    let fast = streams.read(&key, "fast", "f", 1000).await.unwrap();
    assert_eq!(fast.len(), 600);
    streams.ack(&key, "fast", &ids).await.unwrap();
    let slow = streams.read(&key, "slow", "s", 100).await.unwrap();
    assert_eq!(slow.len(), 100);
    // The slow group acknowledges 90 of its 100: 10 stay pending.
    streams.ack(&key, "slow", &ids[..90]).await.unwrap();
    let removed = streams.trim_acknowledged(&key).await.unwrap();
    assert_eq!(removed, 90, "only what every group acknowledged");
    let left: Vec<(String, Vec<(String, String)>)> =
        redis::cmd("XRANGE").arg(&key).arg("-").arg("+").query_async(&mut valkey.connection()).await.unwrap();
    let left: Vec<&str> = left.iter().map(|(id, _)| id.as_str()).collect();
    let expected: Vec<&str> = ids[90..].iter().map(String::as_str).collect();
    assert_eq!(left, expected, "none of the 500 undelivered entries, none of the 10 pending");
    // Without groups nothing is trimmed.
    let lone = format!("{}:sfc:work:s2", valkey.prefix());
    streams.append(&lone, &[("n", b"1")]).await.unwrap();
    assert_eq!(streams.trim_acknowledged(&lone).await.unwrap(), 0);
}

#[tokio::test]
async fn trim_never_passes_a_rewound_group() {
    let s = server();
    let valkey =
        Valkey::connect(&config(&s.host_port(), unique_prefix("trim-rewind").as_str(), "1s", "5s")).await.unwrap();
    let streams = Streams::new(valkey.clone());
    let key = format!("{}:sfc:work:s1", valkey.prefix());
    streams.create_group(&key, "g").await.unwrap();
    let mut ids = Vec::new();
    for i in 0..10 {
        ids.push(streams.append(&key, &[("n", format!("{i}").as_bytes())]).await.unwrap());
    }
    assert_eq!(streams.read(&key, "g", "c", 100).await.unwrap().len(), 10);
    streams.ack(&key, "g", &ids[..6]).await.unwrap();
    // Entries 6..9 stay pending; the group is rewound to entry 2, so entries
    // 3.. will be handed out again.
    let mut con = valkey.connection();
    let () = redis::cmd("XGROUP").arg("SETID").arg(&key).arg("g").arg(&ids[2]).query_async(&mut con).await.unwrap();
    let removed = streams.trim_acknowledged(&key).await.unwrap();
    assert_eq!(removed, 3, "only entries 0..2, which the rewound group will not see again");
    let again = streams.read(&key, "g", "c", 100).await.unwrap();
    let again: Vec<&str> = again.iter().map(|e| e.id.as_str()).collect();
    let expected: Vec<&str> = ids[3..].iter().map(String::as_str).collect();
    assert_eq!(again, expected, "the rewound group gets entries 3..9 again");
}

struct Tick(Arc<AtomicU32>);

impl microdcs_valkey::poller::PollerTask for Tick {
    fn interval(&self) -> Duration {
        Duration::from_millis(100)
    }
    fn run(&self) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async move {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
    }
}

#[tokio::test]
async fn periodic_tasks_run_and_stop_on_shutdown() {
    let s = server();
    let valkey = Valkey::connect(&config(&s.host_port(), unique_prefix("task").as_str(), "1s", "5s")).await.unwrap();
    let runs = Arc::new(AtomicU32::new(0));
    let poller = Poller::new(valkey, "instance-1").task(Tick(runs.clone())).start().await.unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    poller.shutdown().await;
    let after = runs.load(Ordering::SeqCst);
    assert!(after >= 2, "ran {after} times");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(runs.load(Ordering::SeqCst), after, "nothing runs after shutdown");
}

/// A claim never hands out more than `count`: a step that passed over an
/// entry deleted while pending used to be followed by a full step.
#[tokio::test]
async fn autoclaim_returns_at_most_count() {
    let s = server();
    let valkey =
        Valkey::connect(&config(&s.host_port(), unique_prefix("claim-count").as_str(), "1s", "5s")).await.unwrap();
    let streams = Streams::new(valkey.clone());
    let stream = format!("{}:claim-count", valkey.prefix().as_str());
    streams.create_group(&stream, "g").await.unwrap();
    let mut ids = Vec::new();
    for i in 0..6u8 {
        ids.push(streams.append(&stream, &[("n", &[b'0' + i])]).await.unwrap());
    }
    assert_eq!(streams.read(&stream, "g", "crashed", 100).await.unwrap().len(), 6);
    let mut con = valkey.connection();
    let _: i64 = redis::cmd("XDEL").arg(&stream).arg(&ids[0]).query_async(&mut con).await.unwrap();
    let claimed = streams.autoclaim(&stream, "g", "c", Duration::ZERO, 2).await.unwrap();
    let got: Vec<&str> = claimed.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(got, [ids[1].as_str(), ids[2].as_str()], "at most 2, in order");
    // The rest is still there for the next claim.
    let claimed = streams.autoclaim(&stream, "g", "c", Duration::ZERO, Streams::MAX_COUNT + 1).await.unwrap();
    assert_eq!(claimed.len(), 5, "the two claimed before (idle 0) and the three left");
}

/// Tests that stop, restart or cut their server, kill its clients or count
/// its commands: each starts a server of its own (the cluster suite leaves
/// this module out).
mod standalone {
    use super::*;

    use microdcs_tests::own_server as server;

    #[tokio::test]
    async fn nudges_lost_while_the_subscription_was_down_are_made_up_at_once() {
        let s = server();
        let prefix = unique_prefix("resub");
        let proxy = FaultProxy::start(s.host_port()).await;
        let through = proxy.url().trim_start_matches("redis://").trim_end_matches('/').to_owned();
        // The poller reaches the server through the proxy; polls are 30 s apart,
        // so only the read after resubscribing can deliver in time.
        let valkey = Valkey::connect(&config(&through, prefix.as_str(), "30s", "30s")).await.unwrap();
        let direct = Valkey::connect(&config(&s.host_port(), prefix.as_str(), "30s", "30s")).await.unwrap();
        let mut admin = ConnectionManager::new(redis::Client::open(s.url()).unwrap()).await.unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let feed = JobResponse::SPEC.feed().expect("has a change stream");
        let poller = Poller::new(valkey.clone(), "instance-1")
            .consumer(Collect { tx, fail: AtomicU32::new(0), deliveries: Arc::default(), feed })
            .start()
            .await
            .unwrap();
        let store = Feeds::open(direct.clone()).store::<JobResponse>();
        created(&store, &JobResponse { id: "r-0".into(), scope: "s1".into(), n: 0 }).await;
        assert_eq!(next(&mut rx, Duration::from_secs(10)).await.unwrap().1, "r-0");
        // The subscription drops and cannot come back for a while.
        proxy.refuse_new_connections(true);
        let killed: i64 =
            redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub").query_async(&mut admin).await.unwrap();
        assert!(killed >= 1);
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Its nudge goes nowhere.
        created(&store, &JobResponse { id: "r-1".into(), scope: "s1".into(), n: 1 }).await;
        let channel = format!("{}:nudge:jobresponse", prefix.as_str());
        let (subscribers,): (Vec<(String, u64)>,) =
            redis::pipe().cmd("PUBSUB").arg("NUMSUB").arg(&channel).query_async(&mut admin).await.unwrap();
        assert_eq!(subscribers[0].1, 0, "nobody heard the nudge");
        tokio::time::sleep(Duration::from_millis(700)).await;
        let back = Instant::now();
        proxy.refuse_new_connections(false);
        let (_, id, at) = next(&mut rx, Duration::from_secs(15)).await.expect("made up after resubscribing");
        assert_eq!(id, "r-1");
        let took = at.duration_since(back);
        assert!(took < Duration::from_secs(12), "well before the 30 s poll: {took:?}");
        poller.shutdown().await;
    }

    #[tokio::test]
    async fn the_poller_never_sends_a_blocking_command() {
        let s = server();
        let proxy = FaultProxy::start(s.host_port()).await;
        let addr = proxy.url().trim_start_matches("redis://").trim_end_matches('/').to_owned();
        let valkey =
            Valkey::connect(&config(&addr, unique_prefix("poll-only").as_str(), "100ms", "100ms")).await.unwrap();
        let mut admin = ConnectionManager::new(redis::Client::open(s.url()).unwrap()).await.unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let poller = Poller::new(valkey.clone(), "instance-1")
            .consumer(Collect {
                tx,
                fail: AtomicU32::new(0),
                deliveries: Arc::default(),
                feed: JobResponse::SPEC.feed().expect("has a change stream"),
            })
            .start()
            .await
            .unwrap();
        let store = Feeds::open(valkey.clone()).store::<JobResponse>();
        for i in 0..5 {
            let _ = store.create(&JobResponse { id: format!("r-{i}"), scope: "s1".into(), n: i }).await.unwrap();
        }
        for _ in 0..5 {
            next(&mut rx, Duration::from_secs(5)).await.expect("delivered");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        poller.shutdown().await;
        assert!(proxy.commands() > 10, "the traffic went through the proxy");
        assert!(proxy.saw(b"XREADGROUP"), "the proxy sees the poller's reads");
        assert!(!proxy.saw(b"$5\r\nBLOCK\r\n"), "a read with BLOCK was sent");
        let calls = command_calls(&mut admin).await;
        for blocking in
            ["blpop", "brpop", "blmove", "brpoplpush", "bzpopmin", "bzpopmax", "blmpop", "bzmpop", "wait", "waitaof"]
        {
            assert!(!calls.contains_key(blocking), "{blocking} was called");
        }
        assert!(calls.get("xreadgroup").copied().unwrap_or(0) > 0);
    }

    #[tokio::test]
    async fn the_poller_reports_its_health() {
        let s = server();
        let prefix = unique_prefix("health");
        let proxy = FaultProxy::start(s.host_port()).await;
        let through = proxy.url().trim_start_matches("redis://").trim_end_matches('/').to_owned();
        let valkey = Valkey::connect(&config(&through, prefix.as_str(), "200ms", "200ms")).await.unwrap();
        let direct = Valkey::connect(&config(&s.host_port(), prefix.as_str(), "30s", "30s")).await.unwrap();
        let mut admin = ConnectionManager::new(redis::Client::open(s.url()).unwrap()).await.unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let feed = JobResponse::SPEC.feed().expect("has a change stream");
        let poller = Poller::new(valkey.clone(), "instance-1")
            .consumer(Collect { tx, fail: AtomicU32::new(0), deliveries: Arc::default(), feed })
            .start()
            .await
            .unwrap();
        let store = Feeds::open(direct.clone()).store::<JobResponse>();
        created(&store, &JobResponse { id: "r-0".into(), scope: "s1".into(), n: 0 }).await;
        assert_eq!(next(&mut rx, Duration::from_secs(10)).await.unwrap().1, "r-0");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let h = poller.health();
        let stream = format!("{}:changes:s1", prefix.as_str());
        assert!(h.running && h.subscribed, "{h:?}");
        assert!(h.registry.last_ok.is_some() && h.registry.errors == 0, "{h:?}");
        assert!(h.streams.get(&stream).is_some_and(|r| r.last_ok.is_some() && r.errors == 0), "{stream}: {h:?}");
        assert!(h.is_healthy(Duration::from_millis(500)), "{h:?}");

        // The poller's connections drop and cannot come back for a while.
        proxy.refuse_new_connections(true);
        let _: i64 = redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub").query_async(&mut admin).await.unwrap();
        let _: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .arg("SKIPME")
            .arg("yes")
            .query_async(&mut admin)
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let sick = loop {
            let h = poller.health();
            if !h.subscribed && h.registry.errors > 0 && !h.is_healthy(Duration::from_millis(300)) {
                break h;
            }
            assert!(Instant::now() < deadline, "the outage never showed: {h:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(sick.running, "the loop rides the outage out: {sick:?}");
        assert!(sick.registry.failing_since.is_some() && sick.registry.last_error.is_some(), "{sick:?}");

        // Back: healthy again, the failures counted, no longer failing.
        proxy.refuse_new_connections(false);
        let deadline = Instant::now() + Duration::from_secs(30);
        let well = loop {
            let h = poller.health();
            if h.subscribed && h.registry.failing_since.is_none() && h.is_healthy(Duration::from_millis(300)) {
                break h;
            }
            assert!(Instant::now() < deadline, "the poller never recovered: {h:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(well.registry.errors >= sick.registry.errors, "{well:?}");
        created(&store, &JobResponse { id: "r-1".into(), scope: "s1".into(), n: 1 }).await;
        assert_eq!(next(&mut rx, Duration::from_secs(10)).await.unwrap().1, "r-1");
        poller.shutdown().await;
    }

    #[tokio::test]
    async fn entries_flow_while_the_subscription_is_down_and_nudges_return() {
        let s = server();
        let prefix = unique_prefix("killsub");
        // PollInterval 3 s: within one interval by the fallback poll; much sooner only by a nudge.
        let valkey = Valkey::connect(&config(&s.host_port(), prefix.as_str(), "3s", "30s")).await.unwrap();
        let mut admin = ConnectionManager::new(redis::Client::open(s.url()).unwrap()).await.unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let poller = Poller::new(valkey.clone(), "instance-1")
            .consumer(Collect {
                tx,
                fail: AtomicU32::new(0),
                deliveries: Arc::default(),
                feed: JobResponse::SPEC.feed().expect("has a change stream"),
            })
            .start()
            .await
            .unwrap();
        let store = Feeds::open(valkey.clone()).store::<JobResponse>();
        let _ = store.create(&JobResponse { id: "r-0".into(), scope: "s1".into(), n: 0 }).await.unwrap();
        assert_eq!(next(&mut rx, Duration::from_secs(5)).await.unwrap().1, "r-0");
        let channel = format!("{}:nudge:jobresponse", prefix.as_str());
        let killed: i64 =
            redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub").query_async(&mut admin).await.unwrap();
        assert!(killed >= 1, "the subscriber was killed");
        // Written while the subscription may be down: the fallback poll delivers it.
        let t0 = Instant::now();
        let _ = store.create(&JobResponse { id: "r-1".into(), scope: "s1".into(), n: 1 }).await.unwrap();
        let (_, id, at) = next(&mut rx, Duration::from_secs(10)).await.expect("delivered by the fallback poll");
        assert_eq!(id, "r-1");
        assert!(
            at.duration_since(t0) <= Duration::from_secs(5),
            "within one PollInterval (3 s) and a margin for a loaded machine: {:?}",
            at.duration_since(t0)
        );
        // The subscription comes back by itself.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let n: Vec<redis::Value> =
                redis::cmd("PUBSUB").arg("NUMSUB").arg(&channel).query_async(&mut admin).await.unwrap();
            if matches!(n.get(1), Some(redis::Value::Int(1))) {
                break;
            }
            assert!(Instant::now() < deadline, "not resubscribed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Nudges work again: delivered well inside the 3 s PollInterval.
        let mut best = Duration::MAX;
        for i in 2..5 {
            let t0 = Instant::now();
            let _ = store.create(&JobResponse { id: format!("r-{i}"), scope: "s1".into(), n: i }).await.unwrap();
            let (_, id, at) = next(&mut rx, Duration::from_secs(10)).await.expect("delivered");
            assert_eq!(id, format!("r-{i}"));
            best = best.min(at.duration_since(t0));
        }
        assert!(best < Duration::from_millis(1500), "no delivery faster than the fallback poll: {best:?}");
        poller.shutdown().await;
    }
}
