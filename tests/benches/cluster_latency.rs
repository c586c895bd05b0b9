//! A cluster call against a standalone one, measured the way a user who
//! read only the README and the guide would (issue #40): `Valkey::connect`
//! with `MicroDcsConfig::default()`, the connection string naming one node,
//! the guide's `{island-7}` prefix, the README's `Order` and the guide's
//! `SfcState`, one caller, put (`Expect::Any`), get and step. Setups in one
//! run: one server, a second one server (the noise floor: what two
//! identical servers differ by on this machine), a one-node cluster, three
//! primaries without replicas and three with one replica each. Rounds are
//! interleaved so drift reaches every setup alike. Prints p50 and the ratio
//! to the first server; asserts nothing about time.
//!
//! `cargo bench -p microdcs-tests --bench cluster_latency` (`N=`, `ROUNDS=`
//! in the environment). `BUS=1`: the p50 of a get right after a `PUBLISH`,
//! after an `SPUBLISH` and after nothing, on each setup (what a nudge's
//! broadcast over the cluster bus costs the next call on shared cores).
//! `RAW=1`: a raw `GET` through a connection manager, a multiplexed
//! connection, the cluster client and the runtime's handles.

use std::time::{Duration, Instant};

use microdcs_valkey::testing::{ValkeyCluster, ValkeyServer};
use microdcs_valkey::{Document, Expect, MicroDcsConfig, Valkey, keyspace, store::Effects, store::WorkEntry};

/// The README's document.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, Document)]
#[microdcs(
    kind = "order",
    list(key = "order:list:{scope}", score = placed_at),
    group(key = "order:bystate:{scope}:{state}"),
)]
pub struct Order {
    /// Id.
    pub id: String,
    /// Scope.
    pub scope: String,
    /// State.
    pub state: String,
    /// When placed.
    pub placed_at: i64,
}

/// The guide's workflow step document.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, Document)]
#[microdcs(kind = "sfc", outbox(stream = "sfc:work:{scope}", events = "sfc:event:{scope}:{source}|{id}"))]
pub struct SfcState {
    /// Id.
    pub id: String,
    /// Scope.
    pub scope: String,
    /// Step.
    pub step: String,
}

keyspace! { Shop { documents: [Order, SfcState], work: stream("sfc:work:{scope}"), events: string("sfc:event:{scope}:{source}|{id}") } }

/// The guide's way: a configuration, `Valkey::connect`.
async fn connect(connection_string: String) -> Valkey {
    let mut config = MicroDcsConfig::default();
    config.valkey.connection_string = microdcs_valkey::config::Secret::new(connection_string);
    config.valkey.key_prefix = "{island-7}".to_owned();
    Valkey::connect(&config.valkey).await.unwrap_or_else(|e| panic!("{e}"))
}

/// `n` rounds of put, get, step, each timed into `into`.
async fn sample(valkey: &Valkey, n: usize, into: &mut [Vec<Duration>; 3]) {
    let shop = Shop::open(valkey.clone());
    let orders = shop.store::<Order>();
    let states = shop.store::<SfcState>();
    let effects = Effects::new().work(WorkEntry::new().field("action", "label"));
    for i in 0..n {
        let order = Order { id: format!("o-{}", i % 50), scope: "t".into(), state: "new".into(), placed_at: i as i64 };
        let t = Instant::now();
        let _ = orders.put(&order, Expect::Any).await.unwrap();
        into[0].push(t.elapsed());
        let t = Instant::now();
        let _ = orders.get(&order.id).await.unwrap();
        into[1].push(t.elapsed());
        let job = SfcState { id: format!("j-{i}"), scope: "t".into(), step: "mix".into() };
        let t = Instant::now();
        let _ = states.step(None, &job, &effects).await.unwrap();
        into[2].push(t.elapsed());
    }
}

/// `n` gets right after a `PUBLISH`, after an `SPUBLISH` and after nothing.
async fn sample_bus(valkey: &Valkey, n: usize, into: &mut [Vec<Duration>; 3]) {
    let orders = Shop::open(valkey.clone()).store::<Order>();
    let order = Order { id: "o-1".into(), scope: "t".into(), state: "new".into(), placed_at: 1 };
    let _ = orders.put(&order, Expect::Any).await.unwrap();
    let mut con = valkey.connection();
    for _ in 0..n {
        for (k, verb) in ["PUBLISH", "SPUBLISH", ""].iter().enumerate() {
            if !verb.is_empty() {
                let _: i64 = microdcs_valkey::redis::cmd(verb)
                    .arg("{island-7}:nudge:order")
                    .arg("t")
                    .query_async(&mut con)
                    .await
                    .unwrap();
            }
            let t = Instant::now();
            let _ = orders.get(&order.id).await.unwrap();
            into[k].push(t.elapsed());
        }
    }
}

fn p50(v: &mut [Duration]) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e6
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let (n, rounds) = (env("N", 3000), env("ROUNDS", 30));
    let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
    let server2 = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
    let one = ValkeyCluster::start_local(1, 0).unwrap_or_else(|e| panic!("{e}"));
    let three = ValkeyCluster::start_local(3, 0).unwrap_or_else(|e| panic!("{e}"));
    let six = ValkeyCluster::start_local(3, 1).unwrap_or_else(|e| panic!("{e}"));
    let first = |c: &ValkeyCluster| c.nodes()[0].host_port();
    let setups = [
        ("standalone", connect(server.host_port()).await),
        ("standalone again", connect(server2.host_port()).await),
        ("1-node cluster", connect(first(&one)).await),
        ("3+0 cluster", connect(first(&three)).await),
        ("3+3 cluster", connect(first(&six)).await),
    ];
    if std::env::var("PIN").is_ok() {
        let nodes = [&server, &server2].into_iter().chain(one.nodes()).chain(three.nodes()).chain(six.nodes());
        pin(nodes.collect());
    }
    if std::env::var("RAW").is_ok() {
        raw(&server, &one, &setups).await;
        return;
    }
    let bus = std::env::var("BUS").is_ok();
    let mut samples: Vec<[Vec<Duration>; 3]> = vec![Default::default(); setups.len()];
    let mut warm: [Vec<Duration>; 3] = Default::default();
    for (_, v) in &setups {
        sample(v, 50, &mut warm).await;
    }
    for _ in 0..rounds {
        for (i, (_, v)) in setups.iter().enumerate() {
            if bus {
                sample_bus(v, n / rounds, &mut samples[i]).await;
            } else {
                sample(v, n / rounds, &mut samples[i]).await;
            }
        }
    }
    let p: Vec<Vec<f64>> = samples.iter_mut().map(|s| s.iter_mut().map(|v| p50(v)).collect()).collect();
    print!("| {} |", if bus { "get right after" } else { "operation" });
    for (name, _) in &setups {
        print!(" {name} p50 (ratio) |");
    }
    println!();
    println!("|---|{}", "---|".repeat(setups.len()));
    let ops = if bus { ["PUBLISH", "SPUBLISH", "nothing"] } else { ["put", "get", "step"] };
    for (i, op) in ops.iter().enumerate() {
        print!("| {op} |");
        for row in &p {
            print!(" {:.0} ({:.2}x) |", row[i], row[i] / p[0][i]);
        }
        println!();
    }
}

/// Every thread of this process on CPU 0, every server on CPU 1
/// (`taskset`): the servers then never wait for a client thread on their
/// core, which otherwise makes one server of two identical ones up to 2.5x
/// slower for a whole run on this machine.
fn pin(servers: Vec<&ValkeyServer>) {
    let taskset = |args: &[&str]| {
        let ok = std::process::Command::new("taskset").args(args).output().is_ok_and(|o| o.status.success());
        assert!(ok, "taskset {args:?} failed");
    };
    taskset(&["-apc", "0", &std::process::id().to_string()]);
    for node in servers {
        let info = microdcs_valkey::testing::command(node, &["INFO", "server"]).unwrap();
        let pid = info.split("process_id:").nth(1).and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next()).unwrap();
        taskset(&["-apc", "1", pid]);
    }
}

/// A raw `GET` through each path, interleaved: what the client adds.
async fn raw(server: &ValkeyServer, one: &ValkeyCluster, setups: &[(&str, Valkey)]) {
    use microdcs_valkey::redis;
    let n = 3000;
    let mgr = redis::Client::open(server.url()).unwrap().get_connection_manager().await.unwrap();
    let mux = redis::Client::open(one.nodes()[0].url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let cluster =
        redis::cluster::ClusterClient::new(vec![one.nodes()[0].url()]).unwrap().get_async_connection().await.unwrap();
    let (ours_single, ours_cluster) = (setups[0].1.connection(), setups[2].1.connection());
    let names = [
        "connection manager, one server",
        "multiplexed connection, 1-node cluster",
        "redis cluster client (defaults), 1-node cluster",
        "runtime handle, one server",
        "runtime handle, 1-node cluster",
    ];
    let mut t: Vec<Vec<Duration>> = vec![Vec::new(); names.len()];
    for _ in 0..30 {
        for (i, slot) in t.iter_mut().enumerate() {
            for _ in 0..n / 30 {
                let mut c = redis::cmd("GET");
                c.arg("{island-7}:x");
                let s = Instant::now();
                let _: Option<String> = match i {
                    0 => c.query_async(&mut mgr.clone()).await.unwrap(),
                    1 => c.query_async(&mut mux.clone()).await.unwrap(),
                    2 => c.query_async(&mut cluster.clone()).await.unwrap(),
                    3 => c.query_async(&mut ours_single.clone()).await.unwrap(),
                    _ => c.query_async(&mut ours_cluster.clone()).await.unwrap(),
                };
                slot.push(s.elapsed());
            }
        }
    }
    println!("| path | raw GET p50 (us) |\n|---|---|");
    for (name, v) in names.iter().zip(&mut t) {
        println!("| {name} | {:.1} |", p50(v));
    }
}
