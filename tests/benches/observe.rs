//! What the metrics and spans of an operation cost: one caller's put p50
//! on loopback with nothing installed (the facade's macros and a disabled
//! span only), with a metrics recorder, and with the recorder and a
//! tracing subscriber that takes every span, in alternating rounds of one
//! run. Prints the ratios against nothing installed; asserts nothing about
//! time. `cargo bench -p microdcs-tests --bench observe` (`-- --quick`
//! for a short run).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use microdcs_tests::fixtures::{JobResponse, Plant};
use microdcs_valkey::testing::{ValkeyServer, unique_prefix};
use microdcs_valkey::{Expect, Valkey};

/// A recorder as cheap as a real exporter's hot path: one atomic add per
/// counter increment or histogram record.
#[derive(Default)]
struct Atomic(AtomicU64);

impl metrics::CounterFn for Atomic {
    fn increment(&self, v: u64) {
        self.0.fetch_add(v, Ordering::Relaxed);
    }
    fn absolute(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }
}

impl metrics::HistogramFn for Atomic {
    fn record(&self, v: f64) {
        self.0.fetch_add(v.to_bits() & 1, Ordering::Relaxed);
    }
}

impl metrics::GaugeFn for Atomic {
    fn increment(&self, _: f64) {}
    fn decrement(&self, _: f64) {}
    fn set(&self, _: f64) {}
}

struct Counting(Arc<Atomic>);

impl Recorder for Counting {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.0.clone())
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.0.clone())
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.0.clone())
    }
}

/// A subscriber that takes every span and event and keeps nothing.
struct Taking(AtomicU64);

impl tracing::Subscriber for Taking {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(self.0.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

async fn puts(valkey: &Valkey, n: usize) -> Vec<Duration> {
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let doc = JobResponse::new(&format!("r-{}", i % 50), "s1", &format!("o-{}", i % 50), &["Queued"]);
        let t = Instant::now();
        let _ = store.put(&doc, Expect::Any).await.unwrap_or_else(|e| panic!("{e}"));
        out.push(t.elapsed());
    }
    out
}

fn p50(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e6
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, n) = if quick { (3, 300) } else { (8, 1500) };
    let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
    // One thread: the recorder and subscriber set for a round reach every
    // poll of its operations.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let valkey = rt
        .block_on(Valkey::connect_url(server.url(), unique_prefix("observe-bench"), Default::default()))
        .unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(puts(&valkey, 200)); // warm-up: scripts loaded, connection hot
    let recorder = Counting(Arc::default());
    let (mut none, mut recorded, mut traced) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        none.extend(rt.block_on(puts(&valkey, n)));
        recorded.extend(metrics::with_local_recorder(&recorder, || rt.block_on(puts(&valkey, n))));
        let subscriber = Taking(AtomicU64::new(0));
        traced.extend(tracing::subscriber::with_default(subscriber, || {
            metrics::with_local_recorder(&recorder, || rt.block_on(puts(&valkey, n)))
        }));
    }
    let base = p50(none);
    println!("put p50, one caller, loopback ({rounds} alternating rounds of {n}):");
    println!("| installed | p50 µs | vs nothing |");
    println!("|---|---:|---:|");
    println!("| nothing (macros and disabled span only) | {base:.1} | 1.00 |");
    for (name, v) in [("metrics recorder", recorded), ("recorder + subscriber taking every span", traced)] {
        let p = p50(v);
        println!("| {name} | {p:.1} | {:.3} |", p / base);
    }
    println!("(records made: {})", recorder.0.0.load(Ordering::Relaxed));
}
