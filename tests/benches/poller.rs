//! Nudge-to-handle latency of the poller: from a document put returning to
//! the consumer handling its change entry, beside the PollInterval (the
//! latency without nudges). Prints a table; asserts nothing about time.

use std::time::{Duration, Instant};

use microdcs_tests::{ValkeyServer, unique_prefix};
use microdcs_valkey::{
    Document, MicroDcsConfig, PutOutcome, Valkey, poller::BoxError, poller::BoxFuture, poller::Poller,
    poller::StreamConsumer, schema::Feed, streams::StreamEntry,
};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "jobresponse")]
struct JobResponse {
    id: String,
    scope: String,
}

microdcs_valkey::keyspace! { Bench { documents: [JobResponse] } }

struct Timed(mpsc::UnboundedSender<(String, Instant)>);

impl StreamConsumer for Timed {
    fn feed(&self) -> Feed<'_> {
        JobResponse::SPEC.feed().expect("has a change stream")
    }
    fn group(&self) -> &str {
        "bench"
    }
    fn handle<'a>(&'a self, _scope: &'a str, entries: &'a [StreamEntry]) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            for e in entries {
                let _ = self.0.send((e.field("id").unwrap_or_default().to_owned(), Instant::now()));
            }
            Ok(())
        })
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 50 } else { 500 };
    let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
    let mut c = MicroDcsConfig::default();
    c.set("Valkey:ConnectionString", &server.host_port()).unwrap();
    c.set("Valkey:KeyPrefix", unique_prefix("pollbench").as_str()).unwrap();
    c.set("Valkey:PollInterval", "1s").unwrap();
    let valkey = Valkey::connect(&c.valkey).await.unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let poller = Poller::new(valkey.clone(), "bench").consumer(Timed(tx)).start().await.unwrap();
    let store = Bench::open(valkey.clone()).store::<JobResponse>();
    // Make the scope known first.
    assert!(matches!(
        store.create(&JobResponse { id: "warm".into(), scope: "s1".into() }).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    let _ = rx.recv().await;
    let mut lat = Vec::with_capacity(n);
    let mut put: Vec<Duration> = Vec::with_capacity(n);
    for i in 0..n {
        let id = format!("r-{i}");
        // From before the put: the handler may run before the put's reply arrives.
        let written = Instant::now();
        assert!(matches!(
            store.create(&JobResponse { id: id.clone(), scope: "s1".into() }).await.unwrap(),
            PutOutcome::Written { .. }
        ));
        put.push(written.elapsed());
        let (got, at) = rx.recv().await.unwrap();
        assert_eq!(got, id);
        lat.push(at.saturating_duration_since(written));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    poller.shutdown().await;
    lat.sort();
    put.sort();
    let pct = |p: f64| lat[((lat.len() as f64 - 1.0) * p).round() as usize];
    println!("| writes | put start to handled, p50 | p99 | max | the put alone, p50 | PollInterval (fallback bound) |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| {n} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {} ms |",
        pct(0.5).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        lat[lat.len() - 1].as_secs_f64() * 1e3,
        put[put.len() / 2].as_secs_f64() * 1e3,
        valkey.poll_options().poll_interval.as_millis()
    );
}
