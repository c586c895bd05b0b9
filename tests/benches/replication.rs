//! What waiting for a replica costs, on a primary and a replica on
//! loopback, in one run:
//!
//! 1. one caller's put p50/p99 without a wait, waiting for one replica
//!    (`WAIT 1`) and for the append-only files (`WAITAOF 1 1`);
//! 2. head of line: the latency of callers that do not wait while other
//!    callers' writes wait for a replica that does not answer (stopped, so
//!    every wait runs its whole timeout), once with the waits on the
//!    connection of their own (what `Valkey::connect` does) and once on
//!    the shared connection (a handle made by `Valkey::from_manager`).
//!
//! Prints tables with ratios against the no-wait baseline; asserts nothing
//! about time. `cargo bench -p microdcs-tests --bench replication`
//! (`-- --quick` for a short run).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use microdcs_tests::fixtures::{JobResponse, Plant};
use microdcs_valkey::redis;
use microdcs_valkey::testing::{ValkeyServer, command, unique_prefix};
use microdcs_valkey::{Expect, Valkey, config::Durability, config::WriteOptions};

fn pair() -> (ValkeyServer, ValkeyServer) {
    let fast = ["--appendonly", "yes", "--appendfsync", "always", "--repl-diskless-sync-delay", "0"];
    let primary = ValkeyServer::start_local(&fast).unwrap_or_else(|e| panic!("{e}"));
    let port = primary.port().to_string();
    let mut args = fast.to_vec();
    args.extend(["--replicaof", "127.0.0.1", &port]);
    let replica = ValkeyServer::start_local(&args).unwrap_or_else(|e| panic!("{e}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !command(&replica, &["INFO", "replication"]).unwrap_or_default().contains("master_link_status:up") {
        assert!(Instant::now() < deadline, "the replica never caught up");
        std::thread::sleep(Duration::from_millis(50));
    }
    (primary, replica)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn p50_p99(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    (percentile(&v, 0.5), percentile(&v, 0.99))
}

async fn puts(valkey: &Valkey, n: usize, durability: Durability, tag: &str) -> Vec<Duration> {
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let doc = JobResponse::new(&format!("{tag}-{}", i % 50), "s1", &format!("{tag}-o-{}", i % 50), &["Queued"]);
        let t = Instant::now();
        match store.put(&doc, Expect::Any).durability(durability).await {
            Ok(_) | Err(microdcs_valkey::Error::NotReplicated { .. }) => {}
            Err(e) => panic!("{e}"),
        }
        out.push(t.elapsed());
    }
    out
}

/// p50/p99 of `callers` writers that do not wait, while `waiters` writers
/// on the same handle wait for a stopped replica.
async fn head_of_line(valkey: &Valkey, callers: usize, waiters: usize, n: usize) -> (f64, f64) {
    let stop = Arc::new(AtomicBool::new(false));
    let wait = Durability::replicas(1).with_timeout(Duration::from_millis(20));
    let mut background = Vec::new();
    for w in 0..waiters {
        let (valkey, stop) = (valkey.clone(), stop.clone());
        background.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                puts(&valkey, 5, wait, &format!("w{w}")).await;
            }
        }));
    }
    let mut tasks = Vec::new();
    for c in 0..callers {
        let valkey = valkey.clone();
        tasks.push(tokio::spawn(async move { puts(&valkey, n, Durability::NONE, &format!("c{c}")).await }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    for b in background {
        b.await.unwrap();
    }
    p50_p99(all)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 300 } else { 2000 };
    let (primary, replica) = pair();
    let write = WriteOptions::default();
    let valkey = Valkey::connect_url(primary.url(), unique_prefix("bench-repl"), write.clone()).await.unwrap();

    // Warm up the script cache and both connections.
    puts(&valkey, 50, Durability::replicas(1), "warm").await;
    let base = p50_p99(puts(&valkey, n, Durability::NONE, "a").await);
    let one = p50_p99(puts(&valkey, n, Durability::replicas(1), "b").await);
    // The replicas report what their files hold about once a second, so
    // a wait for a replica's file is slow: a few samples only.
    let aof = p50_p99(puts(&valkey, 20, Durability::replicas(1).with_aof(), "c").await);
    let local = p50_p99(puts(&valkey, 20, Durability::replicas(0).with_aof(), "d").await);
    println!("## One caller, {n} puts each (microseconds)\n");
    println!("| write | p50 | p99 | p50 ratio to no wait |");
    println!("|---|---|---|---|");
    for (name, (p50, p99)) in [
        ("no wait", base),
        ("WAIT 1 (one replica)", one),
        ("WAITAOF 1 1 (appendfsync always; 20 puts)", aof),
        ("WAITAOF 1 0 (the primary's file only; 20 puts)", local),
    ] {
        println!("| {name} | {p50:.1} | {p99:.1} | {:.2} |", p50 / base.0);
    }

    // Head of line: the replica stops answering, every wait runs 20 ms.
    let pid = replica.pid().expect("local replica");
    let kill = |sig: &str| {
        std::process::Command::new("kill").args([sig, &pid.to_string()]).status().expect("kill");
    };
    let callers = 4;
    let m = n / 4;
    let quiet = head_of_line(&valkey, callers, 0, m).await;
    kill("-STOP");
    let own = head_of_line(&valkey, callers, 2, m).await;
    let client = redis::Client::open(primary.url()).unwrap();
    let manager = redis::aio::ConnectionManager::new(client).await.unwrap();
    let shared_handle = Valkey::from_manager(manager, unique_prefix("bench-repl-shared"), write);
    puts(&shared_handle, 20, Durability::NONE, "warm").await;
    let shared = head_of_line(&shared_handle, callers, 2, m).await;
    kill("-CONT");
    println!(
        "\n## Callers that do not wait, while 2 others wait 20 ms each for a stopped replica ({callers} callers x {m} puts)\n"
    );
    println!("| waits run on | p50 | p99 | p50 ratio to no waiters |");
    println!("|---|---|---|---|");
    for (name, (p50, p99)) in [
        ("(no waiters)", quiet),
        ("a connection of their own (Valkey::connect)", own),
        ("the shared connection (Valkey::from_manager)", shared),
    ] {
        println!("| {name} | {p50:.1} | {p99:.1} | {:.2} |", p50 / quiet.0);
    }
}
