//! Verify and rebuild throughput and memory: prints a table, asserts nothing
//! about time. `cargo bench -p microdcs-tests --bench maintenance [-- --quick]`.
//!
//! Beside a bare `SCAN` + `HGETALL` pass over the same documents (the least
//! any verification must do), in the same run; peak client memory (VmHWM,
//! reset before each measurement) at 10k and 100k documents; and the server's
//! SLOWLOG for commands over 5 ms during rebuild.

use microdcs_tests::fixtures::Plant;
use std::collections::HashMap;
use std::time::Instant;

use microdcs_tests::{ValkeyServer, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{PutOutcome, Valkey, config::WriteOptions, store::MaintenanceOptions};

use microdcs_tests::fixtures::JobResponse;

fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmHWM:").map(|v| v.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0))
            })
        })
        .unwrap_or(0)
}

fn reset_peak() {
    // Linux: writing 5 resets the peak resident set size to the current one.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

async fn seed(valkey: &Valkey, n: usize) {
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    let workers = 64;
    let mut tasks = Vec::new();
    for w in 0..workers {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut i = w;
            while i < n {
                let doc = JobResponse {
                    id: format!("r-{i}"),
                    scope: format!("s{}", i % 20),
                    job_order_id: format!("o-{i}"),
                    start_time: i as i64,
                    state: vec![["Running", "Held", "Complete"][i % 3].to_owned()],
                    data: "x".repeat(200),
                };
                assert!(matches!(store.create(&doc).await.unwrap(), PutOutcome::Written { .. }));
                i += workers;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

async fn bare_pass(con: &mut ConnectionManager, prefix: &str, batch: usize) -> (u64, f64) {
    let start = Instant::now();
    let pattern = format!("{prefix}:jobresponse:*");
    let mut cursor = 0u64;
    let mut n = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(batch)
            .arg("TYPE")
            .arg("hash")
            .query_async(con)
            .await
            .unwrap();
        if !keys.is_empty() {
            let mut p = redis::pipe();
            for k in &keys {
                p.cmd("HGETALL").arg(k);
            }
            let maps: Vec<HashMap<String, Vec<u8>>> = p.query_async(con).await.unwrap();
            n += maps.len() as u64;
        }
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    (n, start.elapsed().as_secs_f64())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes: &[usize] = if quick { &[2_000, 10_000] } else { &[10_000, 100_000] };
    let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
    let mut con = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let batch = 500;
    println!(
        "| documents | bare SCAN+HGETALL docs/s | verify docs/s | verify / bare (time) | rebuild docs/s | verify peak RSS (MiB) | rebuild peak RSS (MiB) | SLOWLOG entries > 5 ms during rebuild |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for &n in sizes {
        let prefix = unique_prefix("maint");
        let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
        seed(&valkey, n).await;
        let store = Plant::open(valkey.clone()).store::<JobResponse>();
        let opts = MaintenanceOptions { batch, ..MaintenanceOptions::default() };
        // One warm-up pass, then three interleaved rounds of bare and
        // verify; the medians are compared (a single cold run is noise on
        // a shared machine).
        let _ = bare_pass(&mut con, prefix.as_str(), batch).await;
        let (mut bares, mut verifies) = (Vec::new(), Vec::new());
        let mut verify_peak = 0;
        for round in 0..3 {
            let (bare_n, bare_s) = bare_pass(&mut con, prefix.as_str(), batch).await;
            assert_eq!(bare_n as usize, n);
            bares.push(bare_s);
            reset_peak();
            let t = Instant::now();
            let v = store.verify(&opts).await.unwrap();
            verifies.push(t.elapsed().as_secs_f64());
            if round == 0 {
                verify_peak = peak_kib();
            }
            assert!(v.is_clean() && v.documents as usize == n, "{:?}", v.differences.first());
        }
        let (bare_s, verify_s) = (median(bares), median(verifies));
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("slowlog-log-slower-than")
            .arg(5000)
            .query_async(&mut con)
            .await
            .unwrap();
        let _: () = redis::cmd("SLOWLOG").arg("RESET").query_async(&mut con).await.unwrap();
        reset_peak();
        let t = Instant::now();
        let r = store.rebuild(&opts).await.unwrap();
        let rebuild_s = t.elapsed().as_secs_f64();
        let rebuild_peak = peak_kib();
        assert!(r.is_clean());
        let slow: Vec<redis::Value> = redis::cmd("SLOWLOG").arg("GET").arg(128).query_async(&mut con).await.unwrap();
        println!(
            "| {n} | {:.0} | {:.0} | {:.2} | {:.0} | {:.1} | {:.1} | {} |",
            n as f64 / bare_s,
            n as f64 / verify_s,
            verify_s / bare_s,
            n as f64 / rebuild_s,
            verify_peak as f64 / 1024.0,
            rebuild_peak as f64 / 1024.0,
            slow.len()
        );
        // Drop this size's keys before the next one.
        let _: () = redis::cmd("FLUSHALL").query_async(&mut con).await.unwrap();
    }
}
