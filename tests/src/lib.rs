//! Test support for microdcs: a real `valkey-server` per test, unique key
//! prefixes, and (later) fault-injection helpers.
//!
//! ```no_run
//! let server = microdcs_tests::ValkeyServer::start().unwrap();
//! let url = server.url();
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod server;

pub use server::{HarnessError, ValkeyServer, find_server_binary, unique_prefix};
