//! `-- --network`: throughput over a simulated network at 0.5, 1 and 2 ms
//! each way, against the ideal of pipelining (callers / round trip) and
//! against WATCH/MULTI with a connection per writer.

use std::time::Duration;

use microdcs_tests::fixtures::{JobResponse, Plant};
use microdcs_valkey::testing::{FaultProxy, ValkeyServer, unique_prefix};
use microdcs_valkey::{Valkey, WriteOptions};

use super::{store_throughput, watch_throughput};

pub(super) async fn network(server: &ValkeyServer, quick: bool) {
    let per = if quick { 20 } else { 100 };
    println!("\n## Throughput over a simulated network, writers on distinct documents (operations per second)\n");
    println!(
        "| each way | callers | ideal (callers / RTT) | store (1 multiplexed conn) | store / ideal | WATCH/MULTI (1 conn per writer) | store / WATCH |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut base = 0;
    for delay_us in [500u64, 1000, 2000] {
        let delay = Duration::from_micros(delay_us);
        let proxy = FaultProxy::start_with_delay(server.host_port(), delay).await;
        let prefix = unique_prefix("net");
        let valkey = Valkey::connect_url(&proxy.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
        let store = Plant::open(valkey.clone()).store::<JobResponse>();
        for callers in [1usize, 16, 64] {
            let ideal = callers as f64 / (2.0 * delay.as_secs_f64());
            let s = store_throughput(&store, callers, per, base).await;
            base += callers;
            let (w, _) = watch_throughput(&proxy.url(), prefix.as_str(), callers, per, base).await;
            base += callers;
            println!(
                "| {} ms | {callers} | {ideal:.0} | {s:.0} | {:.2} | {w:.0} | {:.2} |",
                delay_us as f64 / 1000.0,
                s / ideal,
                s / w
            );
        }
    }
}

/// Raw `PING`s through the proxy: what the proxy and one multiplexed
/// connection allow, with no store in the way.
pub(super) async fn pings(server: &ValkeyServer) {
    println!("\n| each way | callers | PING/s (1 multiplexed conn) | per caller | single-caller RTT ms |");
    println!("|---|---|---|---|---|");
    for delay_us in [500u64, 1000, 2000] {
        let proxy = FaultProxy::start_with_delay(server.host_port(), Duration::from_micros(delay_us)).await;
        let client = microdcs_valkey::redis::Client::open(proxy.url()).unwrap();
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
