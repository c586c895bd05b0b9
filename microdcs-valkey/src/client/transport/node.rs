//! The connection a cluster client opens to each node, and the TLS files
//! it opens it with.
//!
//! redis-rs's cluster client (1.x) hands its certificates to its node
//! connections only when rustls is compiled in; with native-tls alone it
//! would trust only the system store and present no client certificate.
//! So every cluster connection of the runtime opens its nodes through
//! [`Node`], which applies the handle's `TlsCaFile`, `TlsCertFile` and
//! `TlsKeyFile` itself with the backend in use.
//!
//! redis-rs opens a node through an associated function, with only the
//! node's address and connection settings: nothing of the handle that
//! asked. The files therefore come from one registration per process,
//! held by the cluster handles that use it ([`ClusterTls`]); a handle
//! with other files is refused while one with different files is open
//! (see [`ClusterTls::hold`]).
//! With rustls the cluster client takes the files itself and nothing is
//! registered.
//!
//! A connection with our own node type comes from
//! `ClusterClient::get_async_generic_connection`, hidden in redis-rs's
//! docs but public, and kept from its 0.2x releases through 2.0's release
//! candidates. redis 2.0's cluster builder takes certificates with
//! native-tls too: with it, the registration can go.

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::Connect;
use redis::{AsyncConnectionConfig, Cmd, IntoConnectionInfo, Pipeline, RedisFuture, Value};

use super::TlsFiles;

/// A cluster connection whose nodes are opened as [`Node`]s.
pub(crate) type ClusterConnection = redis::cluster_async::ClusterConnection<Node>;

/// One node's connection inside a cluster connection: redis-rs's
/// multiplexed connection, opened with the registered TLS files when the
/// backend is native-tls and the node speaks TLS.
#[derive(Clone)]
pub(crate) struct Node(MultiplexedConnection);

impl ConnectionLike for Node {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.0.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}

impl Connect for Node {
    fn connect_with_config<'a, T>(info: T, config: AsyncConnectionConfig) -> RedisFuture<'a, Self>
    where
        T: IntoConnectionInfo + Send + 'a,
    {
        Box::pin(async move {
            let info = info.into_connection_info()?;
            #[cfg(all(feature = "tls-native-tls", not(feature = "tls-rustls")))]
            let client = match registered() {
                Some(files) => files.client(info)?,
                None => redis::Client::open(info)?,
            };
            #[cfg(not(all(feature = "tls-native-tls", not(feature = "tls-rustls"))))]
            let client = redis::Client::open(info)?;
            Ok(Node(client.get_multiplexed_async_connection_with_config(&config).await?))
        })
    }
}

/// Keeps the TLS files of a cluster handle registered for its node
/// connections while the handle (any of its clients) lives. Empty with
/// rustls, without TLS, and for a cluster that does not speak TLS.
#[derive(Clone, Default)]
pub(crate) struct ClusterTls {
    #[cfg(all(feature = "tls-native-tls", not(feature = "tls-rustls")))]
    _held: Option<std::sync::Arc<TlsFiles>>,
}

impl ClusterTls {
    /// Registers `files` for the nodes of a TLS cluster, for as long as
    /// the returned hold lives. With native-tls the files are one set per
    /// process: while a cluster handle with other files (the backend's
    /// defaults included) is open, this one is refused, naming the ways
    /// out. Nothing to register with rustls, or for a cluster that does
    /// not speak TLS.
    pub(crate) fn hold(files: &TlsFiles, tls: bool) -> Result<ClusterTls, String> {
        #[cfg(all(feature = "tls-native-tls", not(feature = "tls-rustls")))]
        if tls {
            let mut slot = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
            let held = match slot.upgrade() {
                Some(current) if *current == *files => current,
                Some(_) => {
                    return Err("with the native-tls backend every TLS cluster handle of a process uses the same \
                                TlsCaFile, TlsCertFile and TlsKeyFile (redis-rs opens cluster nodes without knowing \
                                which handle asked), and a cluster handle with other files is still open: use the \
                                same files, close that handle first, or use the `tls-rustls` feature of \
                                microdcs-valkey, which has no such limit"
                        .to_owned());
                }
                None => {
                    let held = std::sync::Arc::new(files.clone());
                    *slot = std::sync::Arc::downgrade(&held);
                    held
                }
            };
            return Ok(ClusterTls { _held: Some(held) });
        }
        let _ = (files, tls);
        Ok(ClusterTls::default())
    }
}

/// The files every TLS cluster connection of this process opens its nodes
/// with: a weak reference, so the registration ends with the last handle
/// holding it and another set of files may be registered after.
#[cfg(all(feature = "tls-native-tls", not(feature = "tls-rustls")))]
static REGISTERED: std::sync::Mutex<std::sync::Weak<TlsFiles>> = std::sync::Mutex::new(std::sync::Weak::new());

#[cfg(all(feature = "tls-native-tls", not(feature = "tls-rustls")))]
fn registered() -> Option<std::sync::Arc<TlsFiles>> {
    // A poisoned lock still holds a whole `Weak`: a panic elsewhere cannot
    // leave it half written.
    REGISTERED.lock().unwrap_or_else(|e| e.into_inner()).upgrade()
}
