//! The metrics and spans of public operations, seen by a test recorder
//! and a test subscriber installed for this binary: names, labels and
//! outcomes for a write, a read, a conflict, an error and a retry after a
//! cut connection; a span per operation with the database-client
//! attributes; and no secret anywhere in them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use microdcs_tests::{FaultProxy, ValkeyServer, unique_prefix};
use microdcs_valkey::observe::{CONTENTION_RETRIES, OPERATION_DURATION, OPERATIONS, RETRIES};
use microdcs_valkey::{Document, Expect, PutOutcome, Valkey, client::Metrics, config::WriteOptions};
use serde::{Deserialize, Serialize};

/// A document kind only this binary writes, so its labels are ours alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "obsdoc")]
struct ObsDoc {
    id: String,
    scope: String,
    n: u32,
}

/// The skip test's own kind: its consumer reads a stream it shares with `ObsOther`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "obsskip")]
struct ObsSkip {
    id: String,
    scope: String,
}

/// The other kind on the skip test's stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "obsother")]
struct ObsOther {
    id: String,
    scope: String,
}

/// The poller test's own kind, so the two tests never count each other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "obspoll")]
struct ObsPoll {
    id: String,
    scope: String,
    n: u32,
}

/// The contention test's own kind: writers race on one document's index field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "obsrace", group(key = "obsrace:state:{scope}:{state}"))]
struct ObsRace {
    id: String,
    scope: String,
    state: String,
}

/// The scope test's own kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "obsscope")]
struct ObsScope {
    id: String,
    scope: String,
    n: u32,
}

/// The backlog test's own kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "obslag")]
struct ObsLag {
    id: String,
    scope: String,
    n: u32,
}

/// The reads and maintenance test's own kind: a list, a sorted index and a
/// unique index, so every read has something to read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(
    kind = "obsread",
    list(key = "obsread:list:{scope}"),
    sorted(key = "obsread:due:{scope}", score = due, name = "due"),
    unique(key = "obsread:byname:{name}", name = "by_name")
)]
struct ObsRead {
    id: String,
    scope: String,
    name: String,
    due: i64,
}

microdcs_valkey::keyspace! {
    Obs {
        documents: [ObsDoc, ObsPoll, ObsRace, ObsLag, ObsScope, ObsRead, ObsSkip, ObsOther],
        obs_hits: counter("obshits:{scope}"),
        obs_tally: hash("obstally:{scope}"),
    }
}

/// Every record: metric name, labels, value (1 per increment for a
/// counter, the value for a histogram).
type Records = Mutex<Vec<(String, Vec<(String, String)>, f64)>>;

static RECORDS: LazyLock<Arc<Records>> = LazyLock::new(Arc::default);

struct Capture;

struct Sink {
    name: String,
    labels: Vec<(String, String)>,
}

impl Sink {
    fn push(&self, v: f64) {
        RECORDS.lock().unwrap().push((self.name.clone(), self.labels.clone(), v));
    }
}

impl metrics::CounterFn for Sink {
    fn increment(&self, value: u64) {
        self.push(value as f64);
    }
    fn absolute(&self, value: u64) {
        self.push(value as f64);
    }
}

impl metrics::HistogramFn for Sink {
    fn record(&self, value: f64) {
        self.push(value);
    }
}

impl metrics::GaugeFn for Sink {
    fn increment(&self, value: f64) {
        self.push(value);
    }
    fn decrement(&self, value: f64) {
        self.push(-value);
    }
    fn set(&self, value: f64) {
        self.push(value);
    }
}

fn sink(key: &Key) -> Arc<Sink> {
    let labels = key.labels().map(|l| (l.key().to_owned(), l.value().to_owned())).collect();
    Arc::new(Sink { name: key.name().to_owned(), labels })
}

impl Recorder for Capture {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(sink(key))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(sink(key))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(sink(key))
    }
}

/// A span's name and every field recorded on it.
type SpanFields = (String, Vec<(String, String)>);

/// Spans by id, and every event's fields.
#[derive(Default)]
struct SpanLog {
    next: AtomicU64,
    spans: Mutex<HashMap<u64, SpanFields>>,
    events: Mutex<Vec<Vec<(String, String)>>>,
}

static SPANS: LazyLock<Arc<SpanLog>> = LazyLock::new(Arc::default);

struct Fields(Vec<(String, String)>);

impl tracing::field::Visit for Fields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
}

struct Subscriber(Arc<SpanLog>);

thread_local! {
    /// The spans entered on this thread, innermost last, as a real
    /// subscriber tracks them: what `Span::current()` answers.
    static ENTERED: std::cell::RefCell<Vec<(u64, &'static tracing::Metadata<'static>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

static METAS: LazyLock<Mutex<HashMap<u64, &'static tracing::Metadata<'static>>>> = LazyLock::new(Mutex::default);

impl tracing::Subscriber for Subscriber {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let id = self.0.next.fetch_add(1, Ordering::SeqCst) + 1;
        let mut f = Fields(Vec::new());
        span.record(&mut f);
        self.0.spans.lock().unwrap().insert(id, (span.metadata().name().to_owned(), f.0));
        METAS.lock().unwrap().insert(id, span.metadata());
        tracing::span::Id::from_u64(id)
    }
    fn record(&self, span: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut f = Fields(Vec::new());
        values.record(&mut f);
        if let Some(s) = self.0.spans.lock().unwrap().get_mut(&span.into_u64()) {
            s.1.extend(f.0);
        }
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut f = Fields(Vec::new());
        event.record(&mut f);
        self.0.events.lock().unwrap().push(f.0);
    }
    fn enter(&self, id: &tracing::span::Id) {
        if let Some(meta) = METAS.lock().unwrap().get(&id.into_u64()).copied() {
            ENTERED.with(|e| e.borrow_mut().push((id.into_u64(), meta)));
        }
    }
    fn exit(&self, id: &tracing::span::Id) {
        ENTERED.with(|e| {
            let mut e = e.borrow_mut();
            if let Some(at) = e.iter().rposition(|(i, _)| *i == id.into_u64()) {
                e.remove(at);
            }
        });
    }
    fn current_span(&self) -> tracing_core::span::Current {
        ENTERED.with(|e| match e.borrow().last() {
            Some((id, meta)) => tracing_core::span::Current::new(tracing::span::Id::from_u64(*id), meta),
            None => tracing_core::span::Current::none(),
        })
    }
}

fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        metrics::set_global_recorder(Capture).expect("the only recorder of this binary");
        tracing::subscriber::set_global_default(Subscriber(SPANS.clone())).expect("the only subscriber");
    });
}

fn label<'a>(labels: &'a [(String, String)], name: &str) -> Option<&'a str> {
    labels.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// The records of `name` for our kind with operation `op` and outcome `outcome`.
fn of(name: &str, op: &str, outcome: &str) -> Vec<(Vec<(String, String)>, f64)> {
    RECORDS
        .lock()
        .unwrap()
        .iter()
        .filter(|(n, l, _)| {
            n == name
                && label(l, "microdcs.target") == Some("obsdoc")
                && label(l, "db.operation.name") == Some(op)
                && label(l, "microdcs.outcome") == Some(outcome)
        })
        .map(|(_, l, v)| (l.clone(), *v))
        .collect()
}

/// The sum of `name` with `microdcs.reason` `why`.
fn reason(name: &str, why: &str) -> f64 {
    RECORDS
        .lock()
        .unwrap()
        .iter()
        .filter(|(n, l, _)| n == name && label(l, "microdcs.reason") == Some(why))
        .map(|(_, _, v)| v)
        .sum()
}

fn count(name: &str) -> f64 {
    RECORDS.lock().unwrap().iter().filter(|(n, _, _)| n == name).map(|(_, _, v)| v).sum()
}

#[tokio::test]
async fn operations_report_counts_durations_and_spans_by_outcome() {
    install();
    let server = ValkeyServer::start_local(&["--requirepass", "Obs-Secret-Pw-99"]).unwrap_or_else(|e| panic!("{e}"));
    let proxy = FaultProxy::start(server.host_port()).await;
    let url = proxy.url().replace("redis://", "redis://:Obs-Secret-Pw-99@");
    let write = WriteOptions { retry_delay: Duration::from_millis(50), ..WriteOptions::default() };
    let valkey = Valkey::connect_url(&url, unique_prefix("obs"), write).await.unwrap();
    let store = Obs::open(valkey.clone()).store::<ObsDoc>();

    // A write.
    let doc = ObsDoc { id: "o-1".into(), scope: "s1".into(), n: 1 };
    assert_eq!(store.create(&doc).await.unwrap(), PutOutcome::Written { version: 1 });
    let written = of(OPERATION_DURATION, "create", "written");
    assert_eq!(written.len(), 1, "one duration for the create");
    let (labels, seconds) = &written[0];
    assert_eq!(label(labels, "db.system.name"), Some("valkey"));
    assert_eq!(label(labels, "error.type"), Some(""));
    assert!(*seconds > 0.0 && *seconds < 5.0, "a duration in seconds: {seconds}");
    assert_eq!(of(OPERATIONS, "create", "written").len(), 1);

    // A read, found and not found.
    let read = store.get("o-1").await.unwrap().unwrap();
    assert!(store.get("o-2").await.unwrap().is_none());
    assert_eq!(of(OPERATION_DURATION, "get", "found").len(), 1);
    assert_eq!(of(OPERATION_DURATION, "get", "not_found").len(), 1);

    // A conflict: the read is stale once another write went in between.
    let newer = ObsDoc { n: 2, ..doc.clone() };
    let _ = store.put(&newer, Expect::Any).await.unwrap();
    let stale = store.update(&read, &ObsDoc { n: 3, ..doc.clone() }).await.unwrap();
    assert!(matches!(stale, PutOutcome::Conflict { .. }), "{stale:?}");
    assert_eq!(of(OPERATION_DURATION, "update", "conflict").len(), 1);
    assert_eq!(of(OPERATION_DURATION, "put", "written").len(), 1);

    // An error, by its class.
    let e = store.put(&ObsDoc { id: String::new(), ..doc.clone() }, Expect::Any).await.unwrap_err();
    let failed = of(OPERATION_DURATION, "put", "error");
    assert_eq!(failed.len(), 1, "{e}");
    assert_eq!(label(&failed[0].0, "error.type"), Some(e.class()));
    assert_eq!(e.class(), "invalid_input");

    // A retry after a cut reply: counted once, and the write still one
    // `written` operation.
    let retries_before = count(Metrics::WRITE_RETRIES);
    let unknown_before = reason(RETRIES, "unknown_outcome");
    let read = store.get("o-1").await.unwrap().unwrap();
    proxy.cut_after_request_containing(b"EVALSHA").await;
    let out = store.update(&read, &ObsDoc { n: 4, ..doc.clone() }).await.unwrap();
    assert_eq!(proxy.cuts(), 1);
    assert!(matches!(out, PutOutcome::Written { .. }), "{out:?}");
    assert_eq!(count(Metrics::WRITE_RETRIES) - retries_before, 1.0, "one retry, through the facade");
    assert_eq!(reason(RETRIES, "unknown_outcome") - unknown_before, 1.0, "one retry by its reason");
    assert!(count(Metrics::WRITE_ALREADY_APPLIED) >= 1.0);
    assert_eq!(of(OPERATION_DURATION, "update", "written").len(), 1);
    assert_eq!(valkey.metrics().write_retries(), 1, "the handle's own counter agrees");

    // Families report under their declared names, by operation.
    let hits = Obs::obs_hits(&Obs::open(valkey.clone()), "s1").unwrap();
    assert_eq!(hits.increment(2).await.unwrap(), 2);
    assert_eq!(hits.get().await.unwrap(), 2);
    hits.reset().await.unwrap();
    let tally = Obs::obs_tally(&Obs::open(valkey.clone()), "s1").unwrap();
    assert_eq!(tally.increment("a", 5).await.unwrap(), 5);
    let family_ops = |family: &str| -> Vec<(String, String)> {
        RECORDS
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, l, _)| n == OPERATIONS && label(l, "microdcs.target") == Some(family))
            .map(|(_, l, _)| {
                (label(l, "db.operation.name").unwrap().to_owned(), label(l, "microdcs.outcome").unwrap().to_owned())
            })
            .collect()
    };
    // Each call once: `reset` is not also counted as a `set`, nor `get` twice.
    assert_eq!(
        family_ops("obs_hits"),
        [("increment", "ok"), ("get", "ok"), ("reset", "ok")].map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    assert_eq!(family_ops("obs_tally"), [("increment".to_owned(), "ok".to_owned())]);

    // Leases report under their family.
    use microdcs_valkey::lease::LeaseBackend;
    let leases = microdcs_valkey::lease::LeaseStore::new(valkey.clone());
    let before = RECORDS.lock().unwrap().len();
    let _ = leases.acquire("obs-leader", "node-1", Duration::from_secs(30), "q-1").await.unwrap();
    let lease_ops: Vec<_> = RECORDS.lock().unwrap()[before..]
        .iter()
        .filter(|(n, l, _)| n == OPERATION_DURATION && label(l, "microdcs.target") == Some("lease"))
        .map(|(_, l, _)| {
            (label(l, "db.operation.name").map(str::to_owned), label(l, "microdcs.outcome").map(str::to_owned))
        })
        .collect();
    assert!(lease_ops.contains(&(Some("acquire".into()), Some("acquired".into()))), "{lease_ops:?}");

    // A span per operation with the database-client attributes and the outcome.
    {
        let spans = SPANS.spans.lock().unwrap();
        let ours: Vec<&Vec<(String, String)>> = spans
            .values()
            .filter(|(name, f)| name == "microdcs.valkey" && label(f, "microdcs.target") == Some("obsdoc"))
            .map(|(_, f)| f)
            .collect();
        let create = ours.iter().find(|f| label(f, "db.operation.name") == Some("create")).expect("a create span");
        assert_eq!(label(create, "db.system.name"), Some("valkey"));
        assert_eq!(label(create, "microdcs.outcome"), Some("written"));
        let bad = ours.iter().find(|f| label(f, "microdcs.outcome") == Some("error")).expect("the failed put's span");
        assert_eq!(label(bad, "error.type"), Some("invalid_input"));
        assert!(ours.len() >= 8, "one span per operation: {}", ours.len());
        // No secret in any span or event field, or metric label.
        let everything = format!("{:?}{:?}{:?}", *spans, SPANS.events.lock().unwrap(), RECORDS.lock().unwrap());
        assert!(!everything.contains("Obs-Secret-Pw-99"), "a password reached a span, event or label");
        // Scopes are off the spans unless `TraceScopes` is set.
        assert!(ours.iter().all(|f| label(f, "microdcs.scope").is_none()), "a scope on a span by default");
        // Ids and keys are for logs at most, never a span field or a label.
        let labelled = format!("{:?}{:?}", *spans, RECORDS.lock().unwrap());
        assert!(!labelled.contains("o-1"), "a document id reached a span or a label");
    }
    // The retry's event inside the span names no key either (a key holds
    // the scope and the id), unless `TraceScopes` is set.
    let retry_events = || -> Vec<Vec<(String, String)>> {
        SPANS
            .events
            .lock()
            .unwrap()
            .iter()
            .filter(|f| label(f, "message").is_some_and(|m| m.contains("outcome unknown")))
            .cloned()
            .collect()
    };
    let seen = retry_events();
    assert!(!seen.is_empty(), "the retry's event");
    assert!(seen.iter().all(|f| label(f, "key").is_none() && !format!("{f:?}").contains("o-1")), "{seen:?}");
    valkey.set_scopes_in_spans(true);
    let read = store.get("o-1").await.unwrap().unwrap();
    proxy.cut_after_request_containing(b"EVALSHA").await;
    let out = store.update(&read, &ObsDoc { n: 5, ..doc.clone() }).await.unwrap();
    assert!(matches!(out, PutOutcome::Written { .. }), "{out:?}");
    let keyed: Vec<_> = retry_events().into_iter().filter_map(|f| label(&f, "key").map(str::to_owned)).collect();
    assert!(keyed.iter().any(|k| k.ends_with("o-1")), "with TraceScopes the retry names its key: {keyed:?}");
}

/// Takes every entry and counts them.
struct Take(Arc<AtomicU64>);

impl microdcs_valkey::poller::StreamConsumer for Take {
    fn feed(&self) -> microdcs_valkey::schema::Feed<'_> {
        ObsPoll::SPEC.feed().expect("has a change stream")
    }
    fn group(&self) -> &str {
        "obs"
    }
    fn handle<'a>(
        &'a self,
        _: &'a str,
        entries: &'a [microdcs_valkey::streams::StreamEntry],
    ) -> microdcs_valkey::poller::BoxFuture<'a, Result<(), microdcs_valkey::poller::BoxError>> {
        self.0.fetch_add(entries.len() as u64, Ordering::SeqCst);
        Box::pin(async { Ok(()) })
    }
}

#[tokio::test]
async fn the_poller_counts_nudges_and_handled_entries_by_kind() {
    install();
    let server = ValkeyServer::start().unwrap_or_else(|e| panic!("{e}"));
    let mut config = microdcs_valkey::MicroDcsConfig::default();
    config.set("Valkey:ConnectionString", &server.host_port()).unwrap();
    config.set("Valkey:KeyPrefix", unique_prefix("obs-poller").as_str()).unwrap();
    config.set("Valkey:PollInterval", "30s").unwrap();
    config.set("Valkey:ScopeRefreshInterval", "100ms").unwrap();
    let valkey = Valkey::connect(&config.valkey).await.unwrap();
    let taken = Arc::new(AtomicU64::new(0));
    let poller = microdcs_valkey::poller::Poller::new(valkey.clone(), "i-1")
        .consumer(Take(taken.clone()))
        .start()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let nudges_before = count(microdcs_valkey::observe::POLLER_NUDGES);
    let store = Obs::open(valkey.clone()).store::<ObsPoll>();
    for n in 0..3 {
        let _ = store.create(&ObsPoll { id: format!("p-{n}"), scope: "s1".into(), n }).await.unwrap();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while taken.load(Ordering::SeqCst) < 3 {
        assert!(std::time::Instant::now() < deadline, "the entries never arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    poller.shutdown().await;
    let handled: f64 = RECORDS
        .lock()
        .unwrap()
        .iter()
        .filter(|(n, l, _)| {
            n == microdcs_valkey::observe::POLLER_ENTRIES
                && label(l, "microdcs.target") == Some("obspoll")
                && label(l, "microdcs.outcome") == Some("handled")
        })
        .map(|(_, _, v)| v)
        .sum();
    assert!(handled >= 3.0, "handled entries counted: {handled}");
    assert!(count(microdcs_valkey::observe::POLLER_NUDGES) > nudges_before, "nudges counted");
}

/// A typed consumer on a change stream shared with another type: only the
/// changes of its own type count as handled; the others as skipped.
#[tokio::test]
async fn entries_of_other_kinds_count_as_skipped_not_handled() {
    install();
    let server = ValkeyServer::start().unwrap_or_else(|e| panic!("{e}"));
    let mut config = microdcs_valkey::MicroDcsConfig::default();
    config.set("Valkey:ConnectionString", &server.host_port()).unwrap();
    config.set("Valkey:KeyPrefix", unique_prefix("obs-skip").as_str()).unwrap();
    config.set("Valkey:PollInterval", "100ms").unwrap();
    config.set("Valkey:ScopeRefreshInterval", "100ms").unwrap();
    let valkey = Valkey::connect(&config.valkey).await.unwrap();
    let keyspace = Obs::open(valkey.clone());
    let (handler, mut rx) = microdcs_tests::change_channel::<ObsSkip>();
    let poller = microdcs_valkey::poller::Poller::new(valkey.clone(), "i-1")
        .consumer(microdcs_valkey::changes::Changes::new(keyspace.store::<ObsSkip>(), "skip", handler))
        .start()
        .await
        .unwrap();
    let others = keyspace.store::<ObsOther>();
    let mine = keyspace.store::<ObsSkip>();
    for n in 0..5 {
        let _ = others.create(&ObsOther { id: format!("d-{n}"), scope: "s1".into() }).await.unwrap();
    }
    for n in 0..2 {
        let _ = mine.create(&ObsSkip { id: format!("k-{n}"), scope: "s1".into() }).await.unwrap();
    }
    for _ in 0..2 {
        tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("delivered").unwrap();
    }
    poller.shutdown().await;
    let by_outcome = |outcome: &str| -> f64 {
        RECORDS
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, l, _)| {
                n == microdcs_valkey::observe::POLLER_ENTRIES
                    && label(l, "microdcs.target") == Some("obsskip")
                    && label(l, "microdcs.outcome") == Some(outcome)
            })
            .map(|(_, _, v)| v)
            .sum()
    };
    assert_eq!(by_outcome("handled"), 2.0, "only its own type's changes are handled");
    assert_eq!(by_outcome("skipped"), 5.0, "the other type's changes are skipped");
}

#[tokio::test]
async fn writers_racing_on_index_fields_count_contention_retries() {
    install();
    let server = ValkeyServer::start().unwrap_or_else(|e| panic!("{e}"));
    let valkey = Valkey::connect_url(server.url(), unique_prefix("obs-race"), WriteOptions::default()).await.unwrap();
    let store = Obs::open(valkey).store::<ObsRace>();
    let contended = || -> f64 {
        RECORDS
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, l, _)| n == CONTENTION_RETRIES && label(l, "microdcs.target") == Some("obsrace"))
            .map(|(_, _, v)| v)
            .sum()
    };
    // Overwrites that each move the document between two group sets: a
    // writer whose read of the index fields is overtaken is sent back by
    // the script and tries again. Rounds until one was (bounded).
    for round in 0..20 {
        let mut tasks = Vec::new();
        for w in 0..16 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..20 {
                    let state = if (w + i + round) % 2 == 0 { "a" } else { "b" };
                    let doc = ObsRace { id: "race-1".into(), scope: "s1".into(), state: state.into() };
                    let out = store.put(&doc, Expect::Any).await.unwrap();
                    assert!(matches!(out, PutOutcome::Written { .. }), "{out:?}");
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        if contended() > 0.0 {
            break;
        }
    }
    assert!(contended() > 0.0, "no contention retry was counted in 20 rounds of 16 racing writers");
    // The index stays exact through the races.
    assert!(store.verify(&Default::default()).await.unwrap().is_clean());
}

/// Fails every batch, so entries stay pending.
struct Refuse;

impl microdcs_valkey::poller::StreamConsumer for Refuse {
    fn feed(&self) -> microdcs_valkey::schema::Feed<'_> {
        ObsLag::SPEC.feed().expect("has a change stream")
    }
    fn group(&self) -> &str {
        "obs-lag"
    }
    fn handle<'a>(
        &'a self,
        _: &'a str,
        _: &'a [microdcs_valkey::streams::StreamEntry],
    ) -> microdcs_valkey::poller::BoxFuture<'a, Result<(), microdcs_valkey::poller::BoxError>> {
        Box::pin(async { Err("not now".into()) })
    }
}

#[tokio::test]
async fn the_poller_samples_pending_entries_and_lag_per_stream() {
    install();
    let server = ValkeyServer::start().unwrap_or_else(|e| panic!("{e}"));
    let mut config = microdcs_valkey::MicroDcsConfig::default();
    config.set("Valkey:ConnectionString", &server.host_port()).unwrap();
    config.set("Valkey:KeyPrefix", unique_prefix("obs-lag").as_str()).unwrap();
    config.set("Valkey:PollInterval", "100ms").unwrap();
    config.set("Valkey:ScopeRefreshInterval", "100ms").unwrap();
    let valkey = Valkey::connect(&config.valkey).await.unwrap();
    let store = Obs::open(valkey.clone()).store::<ObsLag>();
    for n in 0..5 {
        let _ = store.create(&ObsLag { id: format!("l-{n}"), scope: "s1".into(), n }).await.unwrap();
    }
    let poller = microdcs_valkey::poller::Poller::new(valkey.clone(), "i-1").consumer(Refuse).start().await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    // Every entry was delivered and refused: all five pending, none left to deliver.
    let backlog = loop {
        let health = poller.health();
        // The only stream of this prefix: scope `s1`'s change stream.
        if let Some((key, b)) = health.backlog.iter().find(|(_, b)| b.pending == 5) {
            assert!(key.0.ends_with(":s1") && key.1 == "obs-lag" && b.scope == "s1", "{key:?}");
            break b.clone();
        }
        assert!(std::time::Instant::now() < deadline, "no backlog sample of five pending: {health:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(backlog.lag, Some(0), "{backlog:?}");
    poller.shutdown().await;
    let gauge = |name: &str| -> Vec<f64> {
        RECORDS
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && label(l, "microdcs.target") == Some("obslag")
                    && label(l, "messaging.consumer.group.name") == Some("obs-lag")
            })
            .map(|(_, _, v)| *v)
            .collect()
    };
    assert!(gauge(microdcs_valkey::observe::POLLER_PENDING).contains(&5.0), "the pending gauge was set to 5");
    assert!(gauge(microdcs_valkey::observe::POLLER_LAG).contains(&0.0), "the lag gauge was set");
}

#[tokio::test]
async fn trace_scopes_puts_the_scope_on_spans_and_never_on_metrics() {
    install();
    let server = ValkeyServer::start().unwrap_or_else(|e| panic!("{e}"));
    let mut config = microdcs_valkey::MicroDcsConfig::default();
    config.set("Valkey:ConnectionString", &server.host_port()).unwrap();
    config.set("Valkey:KeyPrefix", unique_prefix("obs-scope").as_str()).unwrap();
    config.set("Valkey:TraceScopes", "true").unwrap();
    let valkey = Valkey::connect(&config.valkey).await.unwrap();
    let store = Obs::open(valkey.clone()).store::<ObsScope>();
    let doc = ObsScope { id: "sc-1".into(), scope: "tenant-a".into(), n: 1 };
    let _ = store.create(&doc).await.unwrap();
    let _ = store.get("sc-1").await.unwrap().unwrap();
    let _ = store.delete_id("sc-1", microdcs_valkey::store::DeleteExpect::Any).await.unwrap();
    let scopes_of = |op: &str| -> Vec<Option<String>> {
        SPANS
            .spans
            .lock()
            .unwrap()
            .values()
            .filter(|(name, f)| {
                name == "microdcs.valkey"
                    && label(f, "microdcs.target") == Some("obsscope")
                    && label(f, "db.operation.name") == Some(op)
            })
            .map(|(_, f)| label(f, "microdcs.scope").map(str::to_owned))
            .collect()
    };
    for op in ["create", "get", "delete"] {
        assert_eq!(scopes_of(op), [Some("tenant-a".to_owned())], "{op}");
    }
    // Switched off on the handle (and its clones): no scope on the next span.
    valkey.set_scopes_in_spans(false);
    let _ = store.get("sc-1").await.unwrap();
    assert_eq!(scopes_of("get").iter().filter(|s| s.is_none()).count(), 1);
    let labels = format!("{:?}", RECORDS.lock().unwrap());
    assert!(!labels.contains("tenant-a"), "a scope reached a metric label");
}

/// The spans of kind `target` and operation `op`, with their fields.
fn spans_of(target: &str, op: &str) -> Vec<Vec<(String, String)>> {
    SPANS
        .spans
        .lock()
        .unwrap()
        .values()
        .filter(|(name, f)| {
            name == "microdcs.valkey"
                && label(f, "microdcs.target") == Some(target)
                && label(f, "db.operation.name") == Some(op)
        })
        .map(|(_, f)| f.clone())
        .collect()
}

/// Every read and maintenance call of a store is one operation: one count,
/// one duration and one span (a call made of others, `docs` of `ids`, is
/// not counted twice); with `TraceScopes` off no span or event field
/// carries the scope, an id or a key holding them, and with it on the
/// calls about one scope carry it on their span.
#[tokio::test]
async fn reads_and_maintenance_are_operations_and_keep_scopes_off_by_default() {
    install();
    const SCOPE: &str = "scope-q7h";
    // Its own server: the one-page `scan` below must see only this test's keys.
    let server = microdcs_tests::own_server();
    let prefix = unique_prefix("obs-reads");
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let store = Obs::open(valkey.clone()).store::<ObsRead>();
    for n in 1..=2 {
        let doc = ObsRead { id: format!("rd-q7h-{n}"), scope: SCOPE.into(), name: format!("name-q7h-{n}"), due: n };
        assert!(matches!(store.create(&doc).await.unwrap(), PutOutcome::Written { .. }));
    }
    let page = microdcs_valkey::Page::first(10);
    assert_eq!(store.ids(ObsRead::due(SCOPE), page.clone()).await.unwrap().ids.len(), 2);
    assert_eq!(store.list(SCOPE, page.clone()).await.unwrap().ids.len(), 2);
    assert_eq!(store.range(ObsRead::due(SCOPE), f64::NEG_INFINITY, f64::INFINITY, false, 10).await.unwrap().len(), 2);
    assert_eq!(store.docs(ObsRead::due(SCOPE), page.clone()).await.unwrap().documents.len(), 2);
    assert_eq!(store.scan(0, 1000).await.unwrap().documents.len(), 2);
    assert_eq!(store.scopes(page.clone()).await.unwrap().ids, [SCOPE]);
    assert!(store.verify(&Default::default()).await.unwrap().is_clean());
    // A unique entry whose document is missing: `find` passes it over with
    // a warning, which must not name the key or the id either.
    let ghost = ObsRead::by_name_key(&prefix, "name-q7h-ghost").unwrap();
    let client = microdcs_valkey::redis::Client::open(server.url()).unwrap();
    let mut raw = client.get_multiplexed_async_connection().await.unwrap();
    let () = microdcs_valkey::redis::cmd("SET").arg(&ghost).arg("rd-q7h-ghost").query_async(&mut raw).await.unwrap();
    assert!(store.find(ObsRead::by_name("name-q7h-1")).await.unwrap().is_some());
    assert!(store.find(ObsRead::by_name("name-q7h-ghost")).await.unwrap().is_none());
    assert_eq!(store.get_many(&["rd-q7h-1", "rd-q7h-2"]).await.unwrap().len(), 2);

    let counted = |op: &str| -> usize {
        RECORDS
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, l, _)| {
                n == OPERATIONS
                    && label(l, "microdcs.target") == Some("obsread")
                    && label(l, "db.operation.name") == Some(op)
            })
            .count()
    };
    let calls = [
        ("ids", 1),
        ("list", 1),
        ("range", 1),
        ("docs", 1),
        ("scan", 1),
        ("scopes", 1),
        ("verify", 1),
        ("find", 2),
        ("get_many", 1),
    ];
    for (op, n) in calls {
        assert_eq!(counted(op), n, "operations counted for `{op}`");
        let timed = RECORDS
            .lock()
            .unwrap()
            .iter()
            .filter(|(name, l, _)| {
                name == OPERATION_DURATION
                    && label(l, "microdcs.target") == Some("obsread")
                    && label(l, "db.operation.name") == Some(op)
                    && label(l, "microdcs.outcome").is_some_and(|o| o != "error")
            })
            .count();
        assert_eq!(timed, n, "durations of `{op}`");
        let spans = spans_of("obsread", op);
        assert_eq!(spans.len(), n, "spans of `{op}`");
        for f in &spans {
            assert_eq!(label(f, "db.system.name"), Some("valkey"), "{op}");
            assert!(label(f, "microdcs.outcome").is_some_and(|o| o != "error"), "{op}: {f:?}");
            assert_eq!(label(f, "microdcs.scope"), None, "{op}: a scope on a span by default");
        }
    }
    let warned = SPANS
        .events
        .lock()
        .unwrap()
        .iter()
        .any(|f| label(f, "message").is_some_and(|m| m.contains("points at a missing document")));
    assert!(warned, "the passed-over unique entry is logged");
    // Neither the scope nor an id (nor a key holding them) in any span or
    // event field, or metric label.
    let everything =
        format!("{:?}{:?}{:?}", *SPANS.spans.lock().unwrap(), SPANS.events.lock().unwrap(), RECORDS.lock().unwrap());
    for secret in ["scope-q7h", "rd-q7h", "name-q7h"] {
        assert!(!everything.contains(secret), "`{secret}` reached a span, an event or a label");
    }

    // With `TraceScopes` on, a call about one scope carries it on its span.
    valkey.set_scopes_in_spans(true);
    let _ = store.ids(ObsRead::due(SCOPE), page.clone()).await.unwrap();
    let _ = store.list(SCOPE, page.clone()).await.unwrap();
    let _ = store.range(ObsRead::due(SCOPE), 0.0, 10.0, false, 10).await.unwrap();
    let _ = store.docs(ObsRead::due(SCOPE), page.clone()).await.unwrap();
    let scoped = microdcs_valkey::store::MaintenanceOptions { scope: Some(SCOPE), ..Default::default() };
    let _ = store.verify(&scoped).await.unwrap();
    let _ = store.find(ObsRead::by_name("name-q7h-1")).await.unwrap().unwrap();
    let _ = store.get_many(&["rd-q7h-1", "rd-q7h-2"]).await.unwrap();
    for op in ["ids", "list", "range", "docs", "verify", "find", "get_many"] {
        let scopes: Vec<Option<String>> =
            spans_of("obsread", op).iter().map(|f| label(f, "microdcs.scope").map(str::to_owned)).collect();
        assert!(scopes.contains(&Some(SCOPE.to_owned())), "{op}: {scopes:?}");
    }
    let labels = format!("{:?}", RECORDS.lock().unwrap());
    assert!(!labels.contains(SCOPE), "a scope reached a metric label");
}
