//! Change-feed retention and consumers (issue 43), on one fresh local
//! server: (a) memory held by 1,000 change entries a group has not read,
//! against the same 1,000 read and trimmed; (b) consumer throughput with one
//! consumer and with four on one poller, over three scopes; (c) the put
//! script's server time and the poller's trim script's, from `INFO
//! commandstats`. Prints tables; asserts only that every entry arrived.
//! A shared 2-core machine: compare the ratios of one run, not absolutes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use microdcs_tests::{ValkeyServer, unique_prefix};
use microdcs_valkey::{
    Document, MicroDcsConfig, PutOutcome, Valkey, client::Connection, poller::BoxError, poller::BoxFuture,
    poller::Poller, poller::StreamConsumer, redis, schema::Feed, streams::StreamEntry, streams::Streams,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "order")]
struct Order {
    id: String,
    scope: String,
    n: u32,
}

microdcs_valkey::keyspace! { Bench { documents: [Order] } }

const SCOPES: [&str; 3] = ["t1", "t2", "t3"];

/// Counts the entries handed to it; does nothing else.
struct Count {
    group: String,
    handled: Arc<AtomicU64>,
}

impl StreamConsumer for Count {
    fn feed(&self) -> Feed<'_> {
        Order::SPEC.feed().expect("has a change stream")
    }
    fn group(&self) -> &str {
        &self.group
    }
    fn handle<'a>(&'a self, _scope: &'a str, entries: &'a [StreamEntry]) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            self.handled.fetch_add(entries.len() as u64, Ordering::Relaxed);
            Ok(())
        })
    }
}

async fn connect(server: &ValkeyServer, name: &str) -> Valkey {
    let mut c = MicroDcsConfig::default();
    c.set("Valkey:ConnectionString", &server.host_port()).unwrap();
    c.set("Valkey:KeyPrefix", unique_prefix(name).as_str()).unwrap();
    c.set("Valkey:PollInterval", "200ms").unwrap();
    c.set("Valkey:ScopeRefreshInterval", "200ms").unwrap();
    // Above every backlog here: nothing is trimmed unread.
    c.set("Valkey:ChangeStreamMaxLength", "1000000").unwrap();
    Valkey::connect(&c.valkey).await.unwrap()
}

/// `n` creates in each of `scopes`, by 8 writers at once.
async fn write(valkey: &Valkey, scopes: &[&str], n: u32) {
    let store = Bench::open(valkey.clone()).store::<Order>();
    let mut set = tokio::task::JoinSet::new();
    for w in 0..8u32 {
        let store = store.clone();
        let scopes: Vec<String> = scopes.iter().map(|s| (*s).to_owned()).collect();
        set.spawn(async move {
            for scope in &scopes {
                for i in (w..n).step_by(8) {
                    let doc = Order { id: format!("{scope}-{i}"), scope: scope.clone(), n: i };
                    assert!(matches!(store.create(&doc).await.unwrap(), PutOutcome::Written { .. }));
                }
            }
        });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap();
    }
}

fn stream(valkey: &Valkey, scope: &str) -> String {
    format!("{}:changes:{scope}", valkey.prefix().as_str())
}

async fn used_memory(con: &mut Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("memory").query_async(con).await.unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("INFO memory has used_memory")
}

async fn memory_usage(con: &mut Connection, key: &str) -> i64 {
    redis::cmd("MEMORY").arg("USAGE").arg(key).arg("SAMPLES").arg(0).query_async(con).await.unwrap()
}

async fn xlen(con: &mut Connection, key: &str) -> u64 {
    redis::cmd("XLEN").arg(key).query_async(con).await.unwrap()
}

/// `(calls, usec_per_call)` of `command` in `INFO commandstats`.
async fn commandstat(con: &mut Connection, command: &str) -> (u64, f64) {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(con).await.unwrap();
    let prefix = format!("cmdstat_{command}:");
    let Some(line) = info.lines().find_map(|l| l.strip_prefix(prefix.as_str())) else { return (0, 0.0) };
    let field = |name: &str| {
        line.split(',').find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('='))).unwrap_or("0").to_owned()
    };
    (field("calls").parse().unwrap(), field("usec_per_call").parse().unwrap())
}

async fn reset_stats(con: &mut Connection) {
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(con).await.unwrap();
}

/// Waits until `done` (bounded: a broken poller panics instead of hanging).
async fn until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    for _ in 0..6000 {
        if done().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}

/// Memory: 1,000 changes left unread by an offline group, against 1,000
/// read by a running consumer and trimmed.
async fn memory(server: &ValkeyServer) {
    const N: u32 = 1_000;
    // Unread: a group that exists but never reads.
    let unread = connect(server, "ret-unread").await;
    let mut con = unread.connection();
    let key = stream(&unread, "t1");
    Streams::new(unread.clone()).create_group(&key, "offline").await.unwrap();
    let stream_before = memory_usage(&mut con, &key).await;
    let before = used_memory(&mut con).await;
    write(&unread, &["t1"], N).await;
    let unread_used = used_memory(&mut con).await - before;
    let unread_stream = memory_usage(&mut con, &key).await - stream_before;
    let unread_len = xlen(&mut con, &key).await;

    // Read and trimmed: a consumer reads them, the poll trims them.
    let read = connect(server, "ret-read").await;
    let mut con = read.connection();
    let key = stream(&read, "t1");
    Streams::new(read.clone()).create_group(&key, "reader").await.unwrap();
    let stream_before = memory_usage(&mut con, &key).await;
    let before = used_memory(&mut con).await;
    let handled = Arc::new(AtomicU64::new(0));
    let poller = Poller::new(read.clone(), "bench")
        .consumer(Count { group: "reader".into(), handled: handled.clone() })
        .start()
        .await
        .unwrap();
    write(&read, &["t1"], N).await;
    until("every change read", async || handled.load(Ordering::Relaxed) == u64::from(N)).await;
    until("the read entries trimmed", async || xlen(&mut con.clone(), &key).await == 0).await;
    poller.shutdown().await;
    let read_used = used_memory(&mut con).await - before;
    let read_stream = memory_usage(&mut con, &key).await - stream_before;

    println!("\n## (a) Memory held per {N} changes (one scope, one group)\n");
    println!("| | stream entries left | stream key (`MEMORY USAGE`) | `used_memory` delta (documents included) |");
    println!("|---|---:|---:|---:|");
    println!("| unread (group offline) | {unread_len} | {unread_stream} B | {unread_used} B |");
    println!("| read and trimmed (consumer running) | 0 | {read_stream} B | {read_used} B |");
    println!(
        "| difference: the unread entries | | {} B ({:.0} B per change) | {} B ({:.0} B per change) |",
        unread_stream - read_stream,
        (unread_stream - read_stream) as f64 / f64::from(N),
        unread_used - read_used,
        (unread_used - read_used) as f64 / f64::from(N)
    );
}

/// Throughput: `per_scope` changes in each of 3 scopes written first, then
/// a poller with `consumers` consumers (a group each) started; the time
/// until every consumer has every entry. Returns entries/s summed over the
/// consumers, that time, and the run's `(XTRIM calls, usec per call)`.
async fn throughput(server: &ValkeyServer, consumers: usize, per_scope: u32) -> (f64, Duration, (u64, f64)) {
    let valkey = connect(server, &format!("ret-tp{consumers}")).await;
    let mut con = valkey.connection();
    write(&valkey, &SCOPES, per_scope).await;
    let total = u64::from(per_scope) * SCOPES.len() as u64;
    reset_stats(&mut con).await;
    let counters: Vec<Arc<AtomicU64>> = (0..consumers).map(|_| Arc::new(AtomicU64::new(0))).collect();
    let mut poller = Poller::new(valkey.clone(), "bench");
    for (i, c) in counters.iter().enumerate() {
        poller = poller.consumer(Count { group: format!("c{i}"), handled: c.clone() });
    }
    let start = Instant::now();
    let poller = poller.start().await.unwrap();
    until("every consumer has every entry", async || counters.iter().all(|c| c.load(Ordering::Relaxed) == total)).await;
    let took = start.elapsed();
    // Let the next polls trim what every group has read.
    for scope in SCOPES {
        let key = stream(&valkey, scope);
        until("read entries trimmed", async || xlen(&mut con.clone(), &key).await == 0).await;
    }
    poller.shutdown().await;
    let xtrim = commandstat(&mut con, "xtrim").await;
    let delivered = total * consumers as u64;
    (delivered as f64 / took.as_secs_f64(), took, xtrim)
}

/// The put script's server time over fresh writes (no poller running, so
/// every EVALSHA is a put), and the trim script's on a stream of 1,000
/// entries with `groups` groups (nothing to remove: the cost paid at every
/// poll of a quiet stream).
async fn server_time(server: &ValkeyServer) -> ((u64, f64), Vec<(usize, f64, f64)>) {
    let valkey = connect(server, "ret-put").await;
    let mut con = valkey.connection();
    reset_stats(&mut con).await;
    write(&valkey, &SCOPES, 1_000).await;
    let put = commandstat(&mut con, "evalsha").await;
    let streams = Streams::new(valkey.clone());
    let mut trims = Vec::new();
    for (scope, groups) in [("t1", 1usize), ("t2", 4)] {
        let key = stream(&valkey, scope);
        for g in 0..groups {
            streams.create_group(&key, &format!("g{g}")).await.unwrap();
        }
        reset_stats(&mut con).await;
        for _ in 0..200 {
            streams.trim_acknowledged(&key).await.unwrap();
        }
        let (_, script) = commandstat(&mut con, "evalsha").await;
        let (_, xtrim) = commandstat(&mut con, "xtrim").await;
        trims.push((groups, script, xtrim));
    }
    (put, trims)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let per_scope = if quick { 300 } else { 5_000 };
    let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));

    memory(&server).await;

    let (one, one_took, one_trim) = throughput(&server, 1, per_scope).await;
    let (four, four_took, four_trim) = throughput(&server, 4, per_scope).await;
    println!("\n## (b) Consumer throughput, {per_scope} changes in each of 3 scopes, one poller\n");
    println!("| consumers | entries delivered | time | entries/s (all consumers) | per consumer | vs one |");
    println!("|---:|---:|---:|---:|---:|---:|");
    let total = u64::from(per_scope) * 3;
    println!("| 1 | {total} | {:.0} ms | {one:.0} | {one:.0} | 1.00 |", one_took.as_secs_f64() * 1e3);
    println!(
        "| 4 | {} | {:.0} ms | {four:.0} | {:.0} | {:.2} |",
        total * 4,
        four_took.as_secs_f64() * 1e3,
        four / 4.0,
        four / one
    );
    println!("\nTrims in those runs (XTRIM MINID inside the trim script, from `INFO commandstats`):\n");
    println!("| consumers | XTRIM calls | usec per call |");
    println!("|---:|---:|---:|");
    println!("| 1 | {} | {:.2} |", one_trim.0, one_trim.1);
    println!("| 4 | {} | {:.2} |", four_trim.0, four_trim.1);

    let (put, trims) = server_time(&server).await;
    println!("\n## (c) Server time (`INFO commandstats`)\n");
    println!("| | calls | usec per call |");
    println!("|---|---:|---:|");
    println!("| put script (EVALSHA, creates, no poller running) | {} | {:.2} |", put.0, put.1);
    for (groups, script, xtrim) in trims {
        println!(
            "| trim script on a quiet stream of 1,000 unread entries, {groups} group(s): EVALSHA (XTRIM inside) | 200 | {script:.2} ({xtrim:.2}) |"
        );
    }
    println!("\nThe trim script runs once per stream per PollInterval (default 1 s).");
}
