//! The store on a Valkey Cluster against one server, in the same run:
//! p50/p99 of put, get and step from one caller, for an island (tagged
//! prefix) and for the plant sharded by scope; write throughput of islands
//! spread over 1, 2 and 3 primaries and of one sharded island's scopes
//! spread the same way; and the cluster bus cost of a nudge sent by
//! `PUBLISH` against `SPUBLISH`. Prints tables with ratios against the
//! standalone baseline; asserts nothing about time.
//!
//! `cargo bench -p microdcs-tests --bench cluster` (`-- --quick` for a
//! short run).

use std::time::{Duration, Instant};

use microdcs_examples::plant::sharded::{self, ShardedPlant};
use microdcs_tests::fixtures::{JobResponse, Plant, SfcState};
use microdcs_valkey::config::Secret;
use microdcs_valkey::testing::{ValkeyCluster, ValkeyServer, unique_island, unique_prefix};
use microdcs_valkey::{
    Expect, MicroDcsConfig, Valkey, config::Placement, config::ValkeyConfig, store::Effects, store::WorkEntry,
};

/// A handle for the sharded plant: an untagged prefix, `Placement=sharded`.
async fn connect_sharded(connection_string: String, name: &str) -> Valkey {
    let config = ValkeyConfig {
        connection_string: Secret::new(connection_string),
        key_prefix: unique_prefix(name).as_str().to_owned(),
        placement: Placement::Sharded,
        ..MicroDcsConfig::default().valkey
    };
    Valkey::connect(&config).await.unwrap_or_else(|e| panic!("{e}"))
}

/// As [`sample`], on the sharded plant in scope `s1`.
async fn sample_sharded(valkey: &Valkey, n: usize, into: &mut [Vec<Duration>; 3]) {
    let plant = ShardedPlant::open(valkey.clone());
    let responses = plant.store::<sharded::JobResponse>();
    let states = plant.store::<sharded::SfcState>();
    let effects = Effects::new().work(WorkEntry::new().field("step", "mix"));
    for i in 0..n {
        let doc = sharded::JobResponse::new(&format!("r-{}", i % 50), "s1", &format!("o-{}", i % 50), &["Queued"]);
        let t = Instant::now();
        let _ = responses.put(&doc, Expect::Any).await.unwrap();
        into[0].push(t.elapsed());
        let t = Instant::now();
        let _ = responses.get_in("s1", &doc.id).await.unwrap();
        into[1].push(t.elapsed());
        let job = sharded::SfcState {
            job_id: format!("j-{i}"),
            scope: "s1".into(),
            step: "mix".into(),
            deadline: None,
            running: true,
            wait_type: None,
            wait_start: None,
        };
        let t = Instant::now();
        let _ = states.step(None, &job, &effects).await.unwrap();
        into[2].push(t.elapsed());
    }
}

/// Writes per second of one sharded handle, one writer task per scope.
async fn sharded_throughput(valkey: &Valkey, scopes: &[String], per: usize) -> f64 {
    let started = Instant::now();
    let tasks: Vec<_> = scopes
        .iter()
        .cloned()
        .map(|scope| {
            let responses = ShardedPlant::open(valkey.clone()).store::<sharded::JobResponse>();
            tokio::spawn(async move {
                for i in 0..per {
                    let id = format!("r-{}", i % 20);
                    let doc = sharded::JobResponse::new(&id, &scope, &format!("o-{}", i % 20), &["Queued"]);
                    let _ = responses.put(&doc, Expect::Any).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    (scopes.len() * per) as f64 / started.elapsed().as_secs_f64()
}

/// Scopes whose slots land on the first `primaries` primaries,
/// `per_primary` each.
fn scopes_on(cluster: &ValkeyCluster, primaries: usize, per_primary: usize) -> Vec<String> {
    let (mut out, mut count, mut n) = (Vec::new(), vec![0; primaries], 0);
    while count.iter().any(|&c| c < per_primary) {
        n += 1;
        let scope = format!("site-{n}");
        let owner = cluster.primary_of(microdcs_schema::slot::key_slot(scope.as_bytes())).unwrap();
        if owner < primaries && count[owner] < per_primary {
            count[owner] += 1;
            out.push(scope);
        }
    }
    out
}

/// The cluster bus messages of each kind every node has sent so far
/// (`cluster_stats_messages_<kind>_sent` of `CLUSTER INFO`), summed.
fn bus_sent(cluster: &ValkeyCluster, kind: &str) -> u64 {
    let field = format!("cluster_stats_messages_{kind}_sent:");
    cluster
        .nodes()
        .iter()
        .map(|node| {
            let client = microdcs_valkey::redis::Client::open(node.url()).unwrap();
            let mut con = client.get_connection().unwrap();
            let info: String = microdcs_valkey::redis::cmd("CLUSTER").arg("INFO").query(&mut con).unwrap();
            info.lines().find_map(|l| l.strip_prefix(&field)).map_or(0, |v| v.trim().parse().unwrap_or(0))
        })
        .sum()
}

/// Bus messages and microseconds per nudge of `n` nudges sent with `cmd`
/// (`PUBLISH` or `SPUBLISH`) on a scope's channel, through the node that
/// serves the channel's slot.
fn bus_cost(cluster: &ValkeyCluster, cmd: &str, kind: &str, n: usize) -> (f64, f64) {
    let channel = "nudge:jobresponse:{s1}";
    let node = &cluster.nodes()[cluster.primary_of(microdcs_schema::slot::key_slot(channel.as_bytes())).unwrap()];
    let client = microdcs_valkey::redis::Client::open(node.url()).unwrap();
    let mut con = client.get_connection().unwrap();
    let before = bus_sent(cluster, kind);
    let started = Instant::now();
    for _ in 0..n {
        let _: i64 = microdcs_valkey::redis::cmd(cmd).arg(channel).arg("s1").query(&mut con).unwrap();
    }
    let micros = started.elapsed().as_secs_f64() * 1e6 / n as f64;
    // Bus messages leave asynchronously: give them a moment.
    std::thread::sleep(Duration::from_millis(300));
    ((bus_sent(cluster, kind) - before) as f64 / n as f64, micros)
}

/// Bus messages per write of `n` puts through the library on the sharded
/// plant: job responses, whose writes nudge per scope (`SPUBLISH`), and
/// work masters, whose writes nudge on the kind's channel (`PUBLISH`).
async fn bus_per_write(cluster: &ValkeyCluster, valkey: &Valkey, n: usize) -> [(&'static str, f64); 2] {
    let plant = ShardedPlant::open(valkey.clone());
    let (responses, masters) = (plant.store::<sharded::JobResponse>(), plant.store::<sharded::WorkMaster>());
    let sent = || bus_sent(cluster, "publish") + bus_sent(cluster, "publishshard");
    let before = sent();
    for i in 0..n {
        let doc = sharded::JobResponse::new(&format!("b-{i}"), "s1", &format!("bo-{i}"), &["Queued"]);
        let _ = responses.put(&doc, Expect::Any).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mid = sent();
    for i in 0..n {
        let doc = sharded::WorkMaster { id: format!("b-{i}"), scope: "s1".into(), name: "mixer".into() };
        let _ = masters.put(&doc, Expect::Any).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = sent();
    [
        ("job response put (`nudge:{kind}:{#scope}`, `SPUBLISH`)", (mid - before) as f64 / n as f64),
        ("work master put (`nudge:{kind}`, `PUBLISH`)", (after - mid) as f64 / n as f64),
    ]
}

async fn connect(connection_string: String, name: &str) -> Valkey {
    let config = ValkeyConfig {
        connection_string: Secret::new(connection_string),
        key_prefix: unique_island(name).as_str().to_owned(),
        ..MicroDcsConfig::default().valkey
    };
    Valkey::connect(&config).await.unwrap_or_else(|e| panic!("{e}"))
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

/// Samples of `n` calls each of put, get and step, added to `into`.
async fn sample(valkey: &Valkey, n: usize, into: &mut [Vec<Duration>; 3]) {
    let plant = Plant::open(valkey.clone());
    let responses = plant.store::<JobResponse>();
    let states = plant.store::<SfcState>();
    let effects = Effects::new().work(WorkEntry::new().field("step", "mix"));
    for i in 0..n {
        let doc = JobResponse::new(&format!("r-{}", i % 50), "s1", &format!("o-{}", i % 50), &["Queued"]);
        let t = Instant::now();
        let _ = responses.put(&doc, Expect::Any).await.unwrap();
        into[0].push(t.elapsed());
        let t = Instant::now();
        let _ = responses.get(&doc.id).await.unwrap();
        into[1].push(t.elapsed());
        let job = SfcState {
            job_id: format!("j-{i}"),
            scope: "s1".into(),
            step: "mix".into(),
            deadline: None,
            running: true,
            wait_type: None,
            wait_start: None,
        };
        let t = Instant::now();
        let _ = states.step(None, &job, &effects).await.unwrap();
        into[2].push(t.elapsed());
    }
}

/// p50 and p99 in microseconds of each operation's samples.
fn summary(samples: &mut [Vec<Duration>; 3]) -> [(f64, f64); 3] {
    let mut out = [(0.0, 0.0); 3];
    for (slot, v) in samples.iter_mut().enumerate() {
        v.sort();
        out[slot] = (percentile(v, 0.5), percentile(v, 0.99));
    }
    out
}

/// Writes per second of `islands` islands, one writer task each, for `per`
/// puts per writer.
async fn throughput(islands: &[Valkey], per: usize) -> f64 {
    let started = Instant::now();
    let tasks: Vec<_> = islands
        .iter()
        .cloned()
        .map(|valkey| {
            tokio::spawn(async move {
                let responses = Plant::open(valkey).store::<JobResponse>();
                for i in 0..per {
                    let doc = JobResponse::new(&format!("r-{}", i % 20), "s1", &format!("o-{}", i % 20), &["Queued"]);
                    let _ = responses.put(&doc, Expect::Any).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    (islands.len() * per) as f64 / started.elapsed().as_secs_f64()
}

/// Islands whose tags land on the first `primaries` primaries, `per_primary` each.
async fn islands_on(cluster: &ValkeyCluster, primaries: usize, per_primary: usize) -> Vec<Valkey> {
    let mut out = Vec::new();
    let mut count = vec![0; primaries];
    let mut n = 0;
    while count.iter().any(|&c| c < per_primary) {
        n += 1;
        let valkey = connect(cluster.connection_string(), &format!("tp-{n}")).await;
        let owner = cluster.primary_of(valkey.prefix().slot().unwrap()).unwrap();
        if owner < primaries && count[owner] < per_primary {
            count[owner] += 1;
            out.push(valkey);
        }
    }
    out
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 300 } else { 3000 };
    let per = if quick { 300 } else { 2000 };

    let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    let single_node = ValkeyCluster::start_local(1, 0).unwrap_or_else(|e| panic!("{e}"));
    let one_node_formed = started.elapsed();
    let cluster = ValkeyCluster::start_local(3, 1).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "cluster forming: 1 node {:.2} s, 3 primaries + 3 replicas {:.2} s",
        one_node_formed.as_secs_f64(),
        cluster.formed_in().as_secs_f64()
    );

    let standalone = connect(server.host_port(), "lat-standalone").await;
    let one = connect(single_node.connection_string(), "lat-one").await;
    let six = connect(cluster.connection_string(), "lat-six").await;
    let sharded_six = connect_sharded(cluster.connection_string(), "lat-sharded").await;
    // Warm up each (script loads, connections), then interleave rounds so
    // drift on a shared machine reaches every setup alike.
    let setups = [&standalone, &one, &six];
    let mut samples: [[Vec<Duration>; 3]; 4] = Default::default();
    let mut warm: [Vec<Duration>; 3] = Default::default();
    for v in setups {
        sample(v, 20, &mut warm).await;
    }
    sample_sharded(&sharded_six, 20, &mut warm).await;
    const ROUNDS: usize = 10;
    for _ in 0..ROUNDS {
        for (i, v) in setups.iter().enumerate() {
            sample(v, n / ROUNDS, &mut samples[i]).await;
        }
        sample_sharded(&sharded_six, n / ROUNDS, &mut samples[3]).await;
    }
    let [mut a, mut b, mut c, mut d] = samples;
    let (base, on_one, on_six) = (summary(&mut a), summary(&mut b), summary(&mut c));
    let on_sharded = summary(&mut d);
    println!("\n## Latency, 1 caller, {n} operations each (microseconds, ratio of p50 to standalone)\n");
    println!(
        "| operation | standalone p50 / p99 | 1-node cluster p50 / p99 | ratio | 3+3 cluster p50 / p99 | ratio | 3+3 sharded p50 / p99 | ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (i, name) in ["put", "get", "step"].iter().enumerate() {
        println!(
            "| {name} | {:.0} / {:.0} | {:.0} / {:.0} | {:.2}x | {:.0} / {:.0} | {:.2}x | {:.0} / {:.0} | {:.2}x |",
            base[i].0,
            base[i].1,
            on_one[i].0,
            on_one[i].1,
            on_one[i].0 / base[i].0,
            on_six[i].0,
            on_six[i].1,
            on_six[i].0 / base[i].0,
            on_sharded[i].0,
            on_sharded[i].1,
            on_sharded[i].0 / base[i].0
        );
    }

    println!("\n## Throughput, 4 islands, one writer each, {per} puts per writer (writes per second)\n");
    println!("| islands on | writes/s | ratio to 1 primary |");
    println!("|---|---|---|");
    let mut first = 0.0;
    for primaries in 1..=3 {
        let islands = islands_on(&cluster, primaries, 4usize.div_ceil(primaries)).await;
        let islands = &islands[..4.min(islands.len())];
        let rate = throughput(islands, per).await;
        if primaries == 1 {
            first = rate;
        }
        println!("| {primaries} primaries | {rate:.0} | {:.2}x |", rate / first);
    }

    println!(
        "\n## Throughput, one sharded island, 4 scopes, one writer each, {per} puts per writer (writes per second)\n"
    );
    println!("| scopes on | writes/s | ratio to 1 primary |");
    println!("|---|---|---|");
    let mut first = 0.0;
    for primaries in 1..=3 {
        let scopes = scopes_on(&cluster, primaries, 4usize.div_ceil(primaries));
        let rate = sharded_throughput(&sharded_six, &scopes[..4.min(scopes.len())], per).await;
        if primaries == 1 {
            first = rate;
        }
        println!("| {primaries} primaries | {rate:.0} | {:.2}x |", rate / first);
    }

    let nudges = if quick { 500 } else { 5000 };
    println!("\n## Nudge bus cost on 3 primaries + 3 replicas, {nudges} nudges each\n");
    println!("| sent with | bus messages per nudge | us per nudge (one caller) |");
    println!("|---|---|---|");
    for (cmd, kind) in [("PUBLISH", "publish"), ("SPUBLISH", "publishshard")] {
        let (messages, micros) = bus_cost(&cluster, cmd, kind, nudges);
        println!("| `{cmd}` | {messages:.2} | {micros:.0} |");
    }
    println!("\n## Nudge bus cost through the library, sharded plant on 3+3, {nudges} puts each\n");
    println!("| write | bus messages per write |");
    println!("|---|---|");
    for (what, messages) in bus_per_write(&cluster, &sharded_six, nudges).await {
        println!("| {what} | {messages:.2} |");
    }
}
