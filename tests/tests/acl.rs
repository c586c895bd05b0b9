//! Probe: which commands do the flows send (temporary).
use microdcs_tests::{flows, server, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{Valkey, WriteOptions};

#[tokio::test]
async fn probe_commands() {
    let server = server();
    let mut admin = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut admin).await.unwrap();
    let valkey = Valkey::connect_url(server.url(), unique_prefix("probe"), WriteOptions::default()).await.unwrap();
    flows::app_flow(&valkey).await.unwrap();
    let calls = microdcs_tests::command_calls(&mut admin).await;
    println!("APP {:?}", calls.keys().collect::<Vec<_>>());
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut admin).await.unwrap();
    flows::maintenance_flow(&valkey).await.unwrap();
    let calls = microdcs_tests::command_calls(&mut admin).await;
    println!("MAINT {:?}", calls.keys().collect::<Vec<_>>());
}
