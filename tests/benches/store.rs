//! Store benchmark: prints a table, asserts nothing about time.
//!
//! `cargo bench -p microdcs-tests --bench store` (starts its own valkey-server).
//! Compares the typed store with (a) the raw EVALSHA of the same generated
//! script through `redis` and (b) a hand-written WATCH/MULTI/EXEC
//! read-modify-write of the same layout, all in the same run.

use microdcs_tests::fixtures::Plant;
use std::time::{Duration, Instant};

use microdcs_tests::{FaultProxy, ValkeyServer, command_calls, command_usec, unique_prefix};
use microdcs_valkey::redis::{self, Script, aio::ConnectionManager};
use microdcs_valkey::{Document, PutOutcome, Store, Valkey, WriteOptions};

use microdcs_tests::fixtures::JobResponse;

fn doc(i: usize, step: u64) -> JobResponse {
    JobResponse {
        id: format!("r-{i}"),
        scope: "s1".into(),
        job_order_id: format!("o-{i}"),
        // A response's start time does not change; its state does.
        start_time: 1_700_000_000_000 + i as i64,
        state: vec![if step.is_multiple_of(2) { "Running".into() } else { "Held".into() }],
        data: "x".repeat(200),
    }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The raw baseline: the same generated script, keys and arguments built by
/// hand once, only the op id and version varying.
struct Raw {
    script: Script,
    con: ConnectionManager,
    prefix: String,
}

impl Raw {
    async fn put(&mut self, i: usize, step: u64) {
        let d = doc(i, step);
        let text = serde_json::to_string(&d).unwrap();
        let p = &self.prefix;
        let state = d.normalized_state();
        let prev = if step.is_multiple_of(2) { "Held" } else { "Running" };
        let old_present = if step == 0 { "0" } else { "1" };
        let op = format!("raw-{i}-{step}");
        let _: redis::Value = self
            .script
            .key(format!("{p}:jobresponse:r-{i}"))
            .key(format!("{p}:changes:s1"))
            .key(format!("{p}:scopes"))
            .key(format!("{p}:jobresponse:list:s1"))
            .key(format!("{p}:jobresponse:byorder:o-{i}"))
            .key(format!("{p}:jobresponse:byorder:o-{i}"))
            .key(format!("{p}:jobresponse:bystate:s1:{state}"))
            .key(format!("{p}:jobresponse:bystate:s1:{prev}"))
            .arg("any")
            .arg(&op)
            .arg(format!("r-{i}"))
            .arg("s1")
            .arg(&text)
            .arg("jobresponse")
            .arg(format!("{p}:nudge:jobresponse"))
            .arg("5000")
            .arg(d.start_time.to_string())
            .arg("1")
            .arg(format!("o-{i}"))
            .arg(old_present)
            .arg(format!("o-{i}"))
            .arg("1")
            .arg(&state)
            .arg(old_present)
            .arg(prev)
            .invoke_async(&mut self.con)
            .await
            .unwrap();
    }
}

/// The hand-written WATCH/MULTI/EXEC read-modify-write of the same layout.
async fn watch_put(con: &mut redis::aio::MultiplexedConnection, prefix: &str, i: usize, step: u64) -> bool {
    let key = format!("{prefix}:jobresponse:r-{i}");
    let _: () = redis::cmd("WATCH").arg(&key).query_async(con).await.unwrap();
    let (v, old_state): (Option<u64>, Option<String>) =
        redis::cmd("HMGET").arg(&key).arg("v").arg("state").query_async(con).await.unwrap();
    let d = doc(i, step);
    let text = serde_json::to_string(&d).unwrap();
    let state = d.normalized_state();
    let newv = v.unwrap_or(0) + 1;
    let mut pipe = redis::pipe();
    pipe.atomic()
        .hset_multiple(
            &key,
            &[
                ("v", newv.to_string()),
                ("scope", "s1".into()),
                ("doc", text),
                ("state", state.clone()),
                ("order", format!("o-{i}")),
            ],
        )
        .ignore();
    if let Some(old) = old_state {
        pipe.srem(format!("{prefix}:jobresponse:bystate:s1:{old}"), format!("r-{i}")).ignore();
    }
    pipe.sadd(format!("{prefix}:jobresponse:bystate:s1:{state}"), format!("r-{i}"))
        .ignore()
        .set(format!("{prefix}:jobresponse:byorder:o-{i}"), format!("r-{i}"))
        .ignore()
        .zadd(format!("{prefix}:jobresponse:list:s1"), format!("r-{i}"), d.start_time)
        .ignore()
        .cmd("XADD")
        .arg(format!("{prefix}:changes:s1"))
        .arg("MAXLEN")
        .arg("~")
        .arg(5000)
        .arg("*")
        .arg("id")
        .arg(format!("r-{i}"))
        .arg("v")
        .arg(newv)
        .ignore()
        .sadd(format!("{prefix}:scopes"), "s1")
        .ignore()
        .publish(format!("{prefix}:nudge:jobresponse"), "s1")
        .ignore();
    let r: Option<()> = pipe.query_async(con).await.unwrap();
    r.is_some()
}

async fn store_throughput(store: &Store<JobResponse>, callers: usize, per_caller: usize, base: usize) -> f64 {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..callers {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let i = base + c;
            assert!(matches!(store.create(&doc(i, 0)).await.unwrap(), PutOutcome::Written { .. }));
            let mut read = store.get(&format!("r-{i}")).await.unwrap().unwrap();
            for step in 1..per_caller as u64 {
                let out = store.update_in_place(&mut read, doc(i, step)).await.unwrap();
                assert!(matches!(out, PutOutcome::Written { .. }), "{out:?}");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (callers * per_caller) as f64 / start.elapsed().as_secs_f64()
}

async fn raw_throughput(
    script: &Script,
    con: &ConnectionManager,
    prefix: &str,
    callers: usize,
    per_caller: usize,
    base: usize,
) -> f64 {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..callers {
        let mut r = Raw { script: script.clone(), con: con.clone(), prefix: prefix.to_owned() };
        tasks.push(tokio::spawn(async move {
            for step in 0..per_caller as u64 {
                r.put(base + c, step).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (callers * per_caller) as f64 / start.elapsed().as_secs_f64()
}

async fn watch_throughput(url: &str, prefix: &str, callers: usize, per_caller: usize, base: usize) -> (f64, u64) {
    let client = redis::Client::open(url).unwrap();
    let mut cons = Vec::new();
    for _ in 0..callers {
        // WATCH is per connection: one connection per writer.
        cons.push(client.get_multiplexed_async_connection().await.unwrap());
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (c, mut con) in cons.into_iter().enumerate() {
        let prefix = prefix.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut aborted = 0;
            for step in 0..per_caller as u64 {
                while !watch_put(&mut con, &prefix, base + c, step).await {
                    aborted += 1;
                }
            }
            aborted
        }));
    }
    let mut aborted = 0;
    for t in tasks {
        aborted += t.await.unwrap();
    }
    ((callers * per_caller) as f64 / start.elapsed().as_secs_f64(), aborted)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 300 } else { 3000 };
    let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
    let prefix = unique_prefix("bench");
    let p = prefix.as_str().to_owned();
    let write = WriteOptions::default();
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), write).await.unwrap();
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    let con = valkey.connection();
    let mut stats_con = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let script = Script::new(JobResponse::PUT_SCRIPT);
    let mut raw = Raw { script: script.clone(), con: con.clone(), prefix: p.clone() };

    // Warm up.
    raw.put(0, 0).await;
    assert!(matches!(store.create(&doc(1, 0)).await.unwrap(), PutOutcome::Written { .. }));

    // 1 caller latency: put (update with known version) and get.
    let mut read = store.get("r-1").await.unwrap().unwrap();
    let mut store_put = Vec::with_capacity(n);
    let usec_before = command_usec(&mut stats_con).await;
    let before = command_calls(&mut stats_con).await;
    for step in 1..=n as u64 {
        let t = Instant::now();
        let out = store.update_in_place(&mut read, doc(1, step)).await.unwrap();
        store_put.push(t.elapsed());
        assert!(matches!(out, PutOutcome::Written { .. }));
    }
    let after = command_calls(&mut stats_con).await;
    let evalsha_per_put = (after["evalsha"] - before.get("evalsha").copied().unwrap_or(0)) as f64 / n as f64;
    let usec_after = command_usec(&mut stats_con).await;
    let server_usec = |cmds: &[&str],
                       a: &std::collections::BTreeMap<String, (u64, u64)>,
                       b: &std::collections::BTreeMap<String, (u64, u64)>| {
        cmds.iter().map(|c| a.get(*c).map_or(0, |x| x.1) - b.get(*c).map_or(0, |x| x.1)).sum::<u64>() as f64 / n as f64
    };
    let store_server_us = server_usec(&["evalsha"], &usec_after, &usec_before);
    let mut raw_put = Vec::with_capacity(n);
    for step in 1..=n as u64 {
        let t = Instant::now();
        raw.put(0, step).await;
        raw_put.push(t.elapsed());
    }
    let mut store_get = Vec::with_capacity(n);
    let before = command_calls(&mut stats_con).await;
    for _ in 0..n {
        let t = Instant::now();
        let got = store.get("r-1").await.unwrap();
        store_get.push(t.elapsed());
        assert!(got.is_some());
    }
    let after = command_calls(&mut stats_con).await;
    let hgetall_per_get = (after["hgetall"] - before.get("hgetall").copied().unwrap_or(0)) as f64 / n as f64;
    let mut raw_get = Vec::with_capacity(n);
    let mut rc = con.clone();
    let key = format!("{p}:jobresponse:r-1");
    for _ in 0..n {
        let t = Instant::now();
        let _: std::collections::HashMap<String, Vec<u8>> =
            redis::cmd("HGETALL").arg(&key).query_async(&mut rc).await.unwrap();
        raw_get.push(t.elapsed());
    }
    // WATCH/MULTI/EXEC at 1 caller.
    let client = redis::Client::open(server.url()).unwrap();
    let mut wcon = client.get_multiplexed_async_connection().await.unwrap();
    let mut watch_lat = Vec::with_capacity(n);
    let usec_before = command_usec(&mut stats_con).await;
    let before = command_calls(&mut stats_con).await;
    for step in 0..n as u64 {
        let t = Instant::now();
        assert!(watch_put(&mut wcon, &p, 2, step).await);
        watch_lat.push(t.elapsed());
    }
    let after = command_calls(&mut stats_con).await;
    let usec_after = command_usec(&mut stats_con).await;
    let watch_server_us = server_usec(&["watch", "hmget", "multi", "exec"], &usec_after, &usec_before);
    let rt_watch = ["watch", "hmget", "multi", "exec"]
        .iter()
        .map(|c| after.get(*c).copied().unwrap_or(0) - before.get(*c).copied().unwrap_or(0))
        .sum::<u64>() as f64
        / n as f64;
    for v in [&mut store_put, &mut raw_put, &mut store_get, &mut raw_get, &mut watch_lat] {
        v.sort();
    }

    println!("## Latency, 1 caller, {n} operations each (microseconds)\n");
    println!("| operation | p50 | p99 | p50 ratio to raw |");
    println!("|---|---|---|---|");
    let row = |name: &str, v: &[Duration], base: &[Duration]| {
        println!(
            "| {name} | {:.1} | {:.1} | {:.2} |",
            us(pct(v, 0.5)),
            us(pct(v, 0.99)),
            us(pct(v, 0.5)) / us(pct(base, 0.5))
        );
    };
    row("store put (CAS update, known version)", &store_put, &raw_put);
    row("raw EVALSHA of the same script", &raw_put, &raw_put);
    row("WATCH/MULTI/EXEC read-modify-write", &watch_lat, &raw_put);
    row("store get", &store_get, &raw_get);
    row("raw HGETALL", &raw_get, &raw_get);

    println!("\n## Throughput, writers on distinct documents (operations per second)\n");
    println!(
        "| callers | store (1 multiplexed conn) | raw EVALSHA (same conn) | store / raw | WATCH/MULTI (1 conn per writer) | store / WATCH | WATCH aborts |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut base = 1000;
    // Three interleaved rounds per row; the median of each column is shown
    // (the machine is shared: single runs vary by 30 % and more).
    for callers in [1usize, 16, 64] {
        let per = (n * 2 / callers).max(50);
        let (mut ss, mut rs, mut ws, mut aborted) = (Vec::new(), Vec::new(), Vec::new(), 0);
        for _ in 0..3 {
            ss.push(store_throughput(&store, callers, per, base).await);
            base += callers;
            rs.push(raw_throughput(&script, &con, &p, callers, per, base).await);
            base += callers;
            let (w, a) = watch_throughput(server.url(), &p, callers, per, base).await;
            ws.push(w);
            aborted += a;
            base += callers;
        }
        let (s, r, w) = (median(ss), median(rs), median(ws));
        println!("| {callers} | {s:.0} | {r:.0} | {:.2} | {w:.0} | {:.2} | {aborted} |", s / r, s / w);
    }

    // A simulated network: every chunk delayed 1 ms each way (2 ms round
    // trip), so round trips cost what they cost between hosts.
    let proxy = FaultProxy::start_with_delay(server.host_port(), Duration::from_millis(1)).await;
    let net = Valkey::connect_url(&proxy.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let net_store = Plant::open(net.clone()).store::<JobResponse>();
    let net_con = net.connection();
    println!("\n## Throughput over a simulated network (1 ms each way), writers on distinct documents\n");
    println!(
        "| callers | store (1 multiplexed conn) | raw EVALSHA (same conn) | store / raw | WATCH/MULTI (1 conn per writer) | store / WATCH |"
    );
    println!("|---|---|---|---|---|---|");
    for callers in [1usize, 16, 64] {
        let per = if quick { 20 } else { 100 };
        let s = store_throughput(&net_store, callers, per, base).await;
        base += callers;
        let r = raw_throughput(&script, &net_con, &p, callers, per, base).await;
        base += callers;
        let (w, _) = watch_throughput(&proxy.url(), &p, callers, per, base).await;
        base += callers;
        println!("| {callers} | {s:.0} | {r:.0} | {:.2} | {w:.0} | {:.2} |", s / r, s / w);
    }

    println!("\n## Round trips per operation\n");
    println!("| operation | commands sent by the client per op (commandstats) |");
    println!("|---|---|");
    println!("| store put (update) | {evalsha_per_put:.2} EVALSHA |");
    println!("| store get | {hgetall_per_get:.2} HGETALL |");
    println!("| WATCH/MULTI/EXEC | {rt_watch:.2} (WATCH, HMGET, MULTI, EXEC; MULTI..EXEC pipelined: 3 round trips) |");
    println!("\n## Server time per write (INFO commandstats usec)\n");
    println!("| path | server microseconds per write |");
    println!("|---|---|");
    println!("| store put: EVALSHA of the generated script | {store_server_us:.1} |");
    println!("| WATCH + HMGET + MULTI + EXEC | {watch_server_us:.1} |");
    drop(server);
}
