//! `-- --network`: throughput over a simulated network at 0.5, 1 and 2 ms
//! each way, against the ideal of pipelining (callers / round trip) and
//! against WATCH/MULTI with a connection per writer.

use std::time::Duration;

use microdcs_tests::command_usec;
use microdcs_tests::fixtures::{JobResponse, Plant};
use microdcs_valkey::client::Connection;
use microdcs_valkey::redis::aio::ConnectionManager;
use microdcs_valkey::testing::{FaultProxy, ValkeyServer, unique_prefix};
use microdcs_valkey::{Store, Valkey, config::WriteOptions};

use super::{store_throughput, watch_throughput};

/// A plain redis-rs client of `url` with Nagle off, as the runtime's own
/// connections have it, so the baselines are not held back by it.
pub(super) fn client(url: &str) -> microdcs_valkey::redis::Client {
    use microdcs_valkey::redis::IntoConnectionInfo;
    let info = url
        .into_connection_info()
        .unwrap()
        .set_tcp_settings(microdcs_valkey::redis::io::tcp::TcpSettings::default().set_nodelay(true));
    microdcs_valkey::redis::Client::open(info).unwrap()
}

pub(super) async fn network(server: &ValkeyServer, quick: bool) {
    let per = if quick { 20 } else { 100 };
    let mut stats = Connection::from(ConnectionManager::new(client(server.url())).await.unwrap());
    println!("\n## Throughput over a simulated network, writers on distinct documents (operations per second)\n");
    println!(
        "| each way | callers | ideal (callers / nominal RTT) | store (1 multiplexed conn) | store / ideal | store / (callers x 1 caller) | server us per write | bound (callers / (RTT + callers x server time)) | store / bound | store (4 conns) | WATCH/MULTI (1 conn per writer) | store / WATCH |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut base = 0;
    for delay_us in [500u64, 1000, 2000] {
        let delay = Duration::from_micros(delay_us);
        let proxy = FaultProxy::start_with_delay(server.host_port(), delay).await;
        let prefix = unique_prefix("net");
        let open = || async {
            let valkey = Valkey::connect_url(&proxy.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
            Plant::open(valkey).store::<JobResponse>()
        };
        let store = open().await;
        // Four handles, four connections: callers spread over them.
        let mut pool = Vec::new();
        for _ in 0..4 {
            pool.push(open().await);
        }
        let mut one = 0.0;
        let mut rtt = 0.0;
        for callers in [1usize, 16, 64] {
            let ideal = callers as f64 / (2.0 * delay.as_secs_f64());
            let before = command_usec(&mut stats).await.get("evalsha").copied().unwrap_or((0, 0));
            let s = store_throughput(&store, callers, per, base).await;
            let after = command_usec(&mut stats).await.get("evalsha").copied().unwrap_or((0, 0));
            let server_us = (after.1 - before.1) as f64 / (after.0 - before.0).max(1) as f64;
            base += callers;
            if callers == 1 {
                one = s;
                // The measured round trip of one caller, server time included.
                rtt = 1.0 / s - server_us / 1e6;
            }
            let bound = callers as f64 / (rtt + callers as f64 * server_us / 1e6);
            let pooled = pooled_throughput(&pool, callers, per, base).await;
            base += callers;
            let (w, _) = watch_throughput(&proxy.url(), prefix.as_str(), callers, per, base).await;
            base += callers;
            println!(
                "| {} ms | {callers} | {ideal:.0} | {s:.0} | {:.2} | {:.2} | {server_us:.1} | {bound:.0} | {:.2} | {pooled:.0} | {w:.0} | {:.2} |",
                delay_us as f64 / 1000.0,
                s / ideal,
                s / (callers as f64 * one),
                s / bound,
                s / w
            );
        }
    }
}

/// [`store_throughput`] with the callers spread over several handles (one
/// connection each), round robin.
async fn pooled_throughput(pool: &[Store<JobResponse>], callers: usize, per: usize, base: usize) -> f64 {
    let start = std::time::Instant::now();
    let mut tasks = Vec::new();
    for (i, store) in pool.iter().enumerate() {
        let mine = (i..callers).step_by(pool.len()).count();
        if mine == 0 {
            continue;
        }
        let store = store.clone();
        let from = base + (0..i).map(|j| (j..callers).step_by(pool.len()).count()).sum::<usize>();
        tasks.push(tokio::spawn(async move { store_throughput(&store, mine, per, from).await }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (callers * per) as f64 / start.elapsed().as_secs_f64()
}

/// Raw `PING`s through the proxy: what the proxy and one multiplexed
/// connection allow, with no store in the way.
pub(super) async fn pings(server: &ValkeyServer) {
    println!("\n| each way | callers | PING/s (1 multiplexed conn) | per caller | single-caller RTT ms |");
    println!("|---|---|---|---|---|");
    for delay_us in [500u64, 1000, 2000] {
        let proxy = FaultProxy::start_with_delay(server.host_port(), Duration::from_micros(delay_us)).await;
        let client = client(&proxy.url());
        let con = client.get_multiplexed_async_connection().await.unwrap();
        for callers in [1usize, 16, 64] {
            let per = 100;
            let start = std::time::Instant::now();
            let mut tasks = Vec::new();
            for _ in 0..callers {
                let mut con = con.clone();
                tasks.push(tokio::spawn(async move {
                    for _ in 0..per {
                        let _: String = microdcs_valkey::redis::cmd("PING").query_async(&mut con).await.unwrap();
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
            let rate = (callers * per) as f64 / start.elapsed().as_secs_f64();
            println!(
                "| {} ms | {callers} | {rate:.0} | {:.0} | {:.2} |",
                delay_us as f64 / 1000.0,
                rate / callers as f64,
                1000.0 * callers as f64 / rate
            );
        }
    }
}
