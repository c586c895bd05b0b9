//! Test support for the microdcs integration tests: the library's own test
//! helpers (`microdcs_valkey::testing`), the shared fixtures, and keyspace
//! inspection through raw commands (for assertions only).
//!
//! ```no_run
//! let server = microdcs_tests::ValkeyServer::start().unwrap();
//! let url = server.url();
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// The repository README's examples, compiled and run as doctests here
/// (the published crate's front page is its own, shorter README); below it
/// the guide's chapters (`docs/guide/`), each its own module the same way.
#[doc = include_str!("../../README.md")]
mod readme {}

#[doc = include_str!("../../docs/guide/README.md")]
mod guide_index {}

#[doc = include_str!("../../docs/guide/01-documents.md")]
mod guide_documents {}

#[doc = include_str!("../../docs/guide/02-reading-writing.md")]
mod guide_reading_writing {}

#[doc = include_str!("../../docs/guide/03-configuration.md")]
mod guide_configuration {}

#[doc = include_str!("../../docs/guide/04-cluster.md")]
mod guide_cluster {}

#[doc = include_str!("../../docs/guide/05-failover-and-durability.md")]
mod guide_failover {}

#[doc = include_str!("../../docs/guide/06-errors-and-bounds.md")]
mod guide_errors {}

#[doc = include_str!("../../docs/guide/07-streams-and-consumers.md")]
mod guide_streams {}

#[doc = include_str!("../../docs/guide/08-steps-and-effects.md")]
mod guide_steps {}

#[doc = include_str!("../../docs/guide/09-coordination.md")]
mod guide_coordination {}

#[doc = include_str!("../../docs/guide/10-maintenance.md")]
mod guide_maintenance {}

#[doc = include_str!("../../docs/guide/11-observability.md")]
mod guide_observability {}

#[doc = include_str!("../../docs/guide/12-testing.md")]
mod guide_testing {}

#[doc = include_str!("../../docs/guide/13-key-rules.md")]
mod guide_key_rules {}

#[doc = include_str!("../../docs/guide/14-evolving-a-type.md")]
mod guide_evolving {}

#[doc = include_str!("../../docs/guide/cookbook.md")]
mod guide_cookbook {}

pub mod fixtures;
pub mod flows;
mod inspect;
pub mod seeded;
pub mod tls;

pub use inspect::{command_calls, command_usec, snapshot, stream_entries, used_memory};
pub use microdcs_valkey::testing::{
    FaultProxy, HarnessError, ValkeyServer, find_redis_server, find_server_binary, unique_prefix,
};

use microdcs_valkey::{Document, PutOutcome, Store, store::Codec};

/// The server of one test: `MICRODCS_VALKEY_URL` (nextest's setup script
/// sets it: one server for the whole run), else one local server shared
/// by every test of this process (plain `cargo test` runs a binary's tests
/// in one process), started by the first test that asks. Each test has its
/// own key prefix. A missing binary or a failed start fails the test with
/// the reason and the server's log (never a skip).
///
/// The shared server outlives the tests that use it; a watchdog stops it
/// when this process exits.
///
/// # Panics
/// When no server can be provided.
pub fn server() -> ValkeyServer {
    if std::env::var_os("MICRODCS_VALKEY_URL").is_some() {
        return ValkeyServer::start().unwrap_or_else(|e| panic!("{e}"));
    }
    static SHARED: std::sync::OnceLock<Result<String, String>> = std::sync::OnceLock::new();
    let url = SHARED.get_or_init(|| {
        let server = ValkeyServer::start_local(&[]).map_err(|e| e.to_string())?;
        let url = server.url().to_owned();
        if let Some(pid) = server.pid() {
            // The process's statics are never dropped: a watchdog stops the
            // server once this process is gone, and removes its directory.
            let me = std::process::id();
            let dir = server.dir().map(|d| d.display().to_string()).unwrap_or_default();
            let _ = std::process::Command::new("bash")
                .arg("-c")
                .arg(format!(
                    "while kill -0 {me} 2>/dev/null; do sleep 1; done; kill {pid} 2>/dev/null; sleep 1; \
                     [ -n '{dir}' ] && rm -rf '{dir}'"
                ))
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn();
        }
        // Kept alive for the process (its drop would stop the server).
        std::mem::forget(server);
        Ok(url)
    });
    match url {
        Ok(url) => ValkeyServer::external(url.clone()),
        Err(e) => panic!("{e}"),
    }
}

/// A server of the test's own, always new and local, whatever
/// `MICRODCS_VALKEY_URL` says: for a test that stops, restarts or cuts its
/// server, kills its clients or counts its commands, which would disturb
/// (or be disturbed by) the other tests on a shared server.
///
/// # Panics
/// When no server can be started.
pub fn own_server() -> ValkeyServer {
    ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"))
}

/// Creates `doc` and asserts it was written; returns its version.
///
/// # Panics
/// On an error or any outcome other than `Written`.
pub async fn created<D: Document, C: Codec<D>>(store: &Store<D, C>, doc: &D) -> u64 {
    match store.create(doc).await {
        Ok(PutOutcome::Written { version }) => version,
        other => panic!("create of `{}` should write, got {other:?}", doc.id()),
    }
}

/// A change handler that forwards every change it is given, and the
/// receiving end: a test reads what a typed consumer delivered.
pub fn change_channel<D: Send + 'static>() -> (
    impl microdcs_valkey::changes::ChangeHandler<D>,
    tokio::sync::mpsc::UnboundedReceiver<microdcs_valkey::changes::Change<D>>,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let handler = move |_scope: String, changes: Vec<microdcs_valkey::changes::Change<D>>| {
        let tx = tx.clone();
        async move {
            for c in changes {
                tx.send(c).map_err(|_| "the test stopped listening")?;
            }
            Ok(())
        }
    };
    (handler, rx)
}
