//! Test support for microdcs: a real `valkey-server` per test, unique key
//! prefixes, a fault-injecting proxy, and keyspace inspection.
//!
//! ```no_run
//! let server = microdcs_tests::ValkeyServer::start().unwrap();
//! let url = server.url();
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod fixtures;
mod inspect;
mod proxy;
mod server;

pub use inspect::{command_calls, command_usec, snapshot, stream_entries};
pub use proxy::FaultProxy;
pub use server::{HarnessError, ValkeyServer, find_redis_server, find_server_binary, unique_prefix};
