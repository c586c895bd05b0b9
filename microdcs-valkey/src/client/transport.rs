//! What every connection the runtime opens shares, below both connecting
//! and following a primary through Sentinel: the connect error, the TLS
//! files and backend, the socket settings, and how a refused login is
//! recognised. A leaf of `client`, so `connect` and `sentinel` use it
//! without importing each other.

mod error;
mod node;
pub(crate) mod tls;

pub use error::ConnectError;
pub(crate) use node::{ClusterConnection, ClusterTls, Node};
pub(crate) use tls::TlsFiles;

use std::path::Path;

/// Reads the password file: the whole file, one trailing line break removed.
///
/// # Errors
/// The file cannot be read or is not UTF-8.
pub fn read_password_file(path: &Path) -> std::io::Result<String> {
    let mut s = std::fs::read_to_string(path)?;
    if s.ends_with('\n') {
        s.pop();
        if s.ends_with('\r') {
            s.pop();
        }
    }
    Ok(s)
}

/// Whether the server refused to let us in: wrong or missing credentials
/// (`WRONGPASS`, `NOAUTH`, or a failed `AUTH`/`HELLO`), or a user whose ACL
/// does not even allow `PING` (`NOPERM`; fixed in the same place as the
/// password). Judged by the error's kind and code, which are stable, never by
/// its text, which is not.
pub(crate) fn is_auth(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::AuthenticationFailed || matches!(e.code(), Some("NOAUTH" | "WRONGPASS" | "NOPERM"))
}

/// The socket settings of every connection the runtime opens (data nodes,
/// cluster nodes, Sentinels): no Nagle. With Nagle a multiplexed
/// connection's second request waits until the first one's reply carries
/// the acknowledgment back, so concurrent callers went in two waves and
/// the round trip per caller doubled at 16 callers over a real network.
pub(crate) fn tcp_settings() -> redis::io::tcp::TcpSettings {
    redis::io::tcp::TcpSettings::default().set_nodelay(true)
}
