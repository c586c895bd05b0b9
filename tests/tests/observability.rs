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
use microdcs_valkey::observe::{OPERATION_DURATION, OPERATIONS};
use microdcs_valkey::{Document, Expect, Metrics, PutOutcome, Valkey, WriteOptions};
use serde::{Deserialize, Serialize};

/// A document kind only this binary writes, so its labels are ours alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "obsdoc")]
struct ObsDoc {
    id: String,
    scope: String,
    n: u32,
}

/// The poller test's own kind, so the two tests never count each other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "obspoll")]
struct ObsPoll {
    id: String,
    scope: String,
    n: u32,
}

microdcs_valkey::keyspace! {
    Obs {
        documents: [ObsDoc, ObsPoll],
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

impl tracing::Subscriber for Subscriber {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let id = self.0.next.fetch_add(1, Ordering::SeqCst) + 1;
        let mut f = Fields(Vec::new());
        span.record(&mut f);
        self.0.spans.lock().unwrap().insert(id, (span.metadata().name().to_owned(), f.0));
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
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
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
    let read = store.get("o-1").await.unwrap().unwrap();
    proxy.cut_after_request_containing(b"EVALSHA").await;
    let out = store.update(&read, &ObsDoc { n: 4, ..doc.clone() }).await.unwrap();
    assert_eq!(proxy.cuts(), 1);
    assert!(matches!(out, PutOutcome::Written { .. }), "{out:?}");
    assert_eq!(count(Metrics::WRITE_RETRIES) - retries_before, 1.0, "one retry, through the facade");
    assert!(count(Metrics::WRITE_ALREADY_APPLIED) >= 1.0);
    assert_eq!(of(OPERATION_DURATION, "update", "written").len(), 1);
    assert_eq!(valkey.metrics().write_retries(), 1, "the handle's own counter agrees");

    // Leases report under their family.
    use microdcs_valkey::LeaseBackend;
    let leases = microdcs_valkey::LeaseStore::new(valkey.clone());
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
    // Ids and keys are for logs at most, never a span field or a label.
    let labelled = format!("{:?}{:?}", *spans, RECORDS.lock().unwrap());
    assert!(!labelled.contains("o-1"), "a document id reached a span or a label");
}

/// Takes every entry and counts them.
struct Take(Arc<AtomicU64>);

impl microdcs_valkey::StreamConsumer for Take {
    fn feed(&self) -> microdcs_valkey::Feed<'_> {
        ObsPoll::SPEC.feed().expect("has a change stream")
    }
    fn group(&self) -> &str {
        "obs"
    }
    fn handle<'a>(
        &'a self,
        _: &'a str,
        entries: &'a [microdcs_valkey::StreamEntry],
    ) -> microdcs_valkey::BoxFuture<'a, Result<(), microdcs_valkey::BoxError>> {
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
    let poller =
        microdcs_valkey::Poller::new(valkey.clone(), "i-1").consumer(Take(taken.clone())).start().await.unwrap();
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
