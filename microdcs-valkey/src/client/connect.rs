//! Connecting at start, the password file, TLS, and health.
//!
//! A failure to connect at start is an error the application ends on: a
//! service that cannot reach its store has nothing useful to do, and
//! failing loudly beats running without one.

use std::path::PathBuf;
use std::pin::Pin;
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::auth::{BasicAuth, StreamingCredentialsProvider};
use redis::{ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo, RedisResult, Value};

use crate::KeyPrefix;
use crate::client::{Connection, PollOptions, Valkey, WriteOptions};
use crate::config::{ConfigError, HAS_TLS_BACKEND, NO_TLS_BACKEND, ValkeyConfig, defaults};
use crate::error::is_unknown_outcome;

// The start's one error type, and how it becomes the runtime's.
pub(crate) use super::transport::ConnectError;
// The CA, client certificate and key, and the backend that uses them.
pub(crate) use super::transport::{TlsFiles, is_auth, read_password_file, tcp_settings};

/// Credentials re-read from the password file whenever a connection is
/// made, so a rotated password reaches the next reconnect without a
/// restart.
#[derive(Clone)]
struct PasswordFileCredentials {
    user: String,
    path: PathBuf,
}

impl StreamingCredentialsProvider for PasswordFileCredentials {
    fn subscribe(&self) -> Pin<Box<dyn futures_util::Stream<Item = RedisResult<BasicAuth>> + Send + 'static>> {
        let item = read_password_file(&self.path).map(|p| BasicAuth::new(self.user.clone(), p)).map_err(|e| {
            tracing::error!(path = %self.path.display(), error = %e, "cannot read the password file");
            redis::RedisError::from((
                redis::ErrorKind::AuthenticationFailed,
                "cannot read the password file",
                self.path.display().to_string(),
            ))
        });
        Box::pin(futures_util::stream::iter([item]))
    }
}

/// How long the start-up probe waits before trying an unreachable server again.
const PROBE_PAUSE: Duration = Duration::from_millis(100);

/// `host:port` of an address (`[v6]:port` for IPv6), or the socket path.
/// This text goes into logs and errors, so a host that still holds
/// `user:password@` (which parsing refuses) shows only the part after the
/// last `@`.
fn endpoint_of(addr: &ConnectionAddr) -> String {
    match addr {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            let host = host.rsplit_once('@').map_or(host.as_str(), |(_, h)| h);
            if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
        }
        other => other.to_string(),
    }
}

/// What both constructors ([`Valkey::connect`] and [`Valkey::connect_url`])
/// need to open their connections: where, with which client settings, and
/// how long start-up and replies may take. Building the connections from
/// here is shared, so reconnect settings and bounds are defined once.
pub(crate) struct ConnectPlan {
    /// `host:port` for messages (never the password).
    endpoint: String,
    /// Address and handshake settings (user, password, database, protocol).
    info: redis::ConnectionInfo,
    /// Further nodes of a cluster (`ConnectionString` with several
    /// endpoints), with the same handshake settings.
    seeds: Vec<redis::ConnectionInfo>,
    tls: bool,
    /// The CA to trust and the client certificate to present
    /// (`TlsCaFile`, `TlsCertFile`, `TlsKeyFile`).
    tls_files: TlsFiles,
    /// The ACL user, for messages and the password file.
    user: Option<String>,
    password_file: Option<PathBuf>,
    connect_timeout: Duration,
    response_timeout: Duration,
    /// The poller's settings of a configuration; `None` for a URL: then
    /// the defaults, the lag limit from the write options' stream bound.
    poll: Option<PollOptions>,
    /// The Sentinels to ask for the primary (`serviceName=`); the
    /// endpoints are theirs then.
    #[cfg(feature = "sentinel")]
    sentinel: Option<sentinel::SentinelPlan>,
    /// Whether spans carry the scope (`TraceScopes`).
    trace_scopes: bool,
    /// One island per tagged prefix, or keyspaces sharded by scope.
    pub(super) placement: crate::config::Placement,
}

impl ConnectPlan {
    /// From a validated configuration. Reads the CA and password files, so a
    /// missing one fails here, by setting name, before any network traffic.
    fn from_config(config: &ValkeyConfig) -> Result<ConnectPlan, ConnectError> {
        config.validate()?;
        let ep = config.endpoint()?;
        let tls = ep.tls || config.tls_files_set();
        let user = config.user.clone().or(ep.user.clone());
        let mut redis_info = RedisConnectionInfo::default().set_db(ep.db);
        if let Some(u) = &user {
            redis_info = redis_info.set_username(u);
        }
        if let Some(p) = &ep.password {
            redis_info = redis_info.set_password(p.expose());
        }
        let node = |host: &str, port: u16| -> Result<redis::ConnectionInfo, ConnectError> {
            let addr = if tls {
                ConnectionAddr::TcpTls { host: host.to_owned(), port, insecure: false, tls_params: None }
            } else {
                ConnectionAddr::Tcp(host.to_owned(), port)
            };
            Ok(addr
                .into_connection_info()
                .map_err(|e| ConfigError::connection_string(e.to_string()))?
                .set_redis_settings(redis_info.clone()))
        };
        let info = node(&ep.host, ep.port)?;
        let seeds = ep.seeds.iter().map(|(h, p)| node(h, *p)).collect::<Result<Vec<_>, _>>()?;
        let tls_files = TlsFiles::from_config(config, tls)?;
        // Fail at start on an unreadable file, with the setting's name.
        for path in config.password_file.iter().chain(&config.sentinel_password_file) {
            read_password_file(path)
                .map_err(|e| ConnectError::PasswordFile { path: path.clone(), reason: e.to_string() })?;
        }
        #[cfg(feature = "sentinel")]
        let sentinel = sentinel::SentinelPlan::from_config(config, &ep, tls);
        Ok(ConnectPlan {
            #[cfg(feature = "sentinel")]
            endpoint: match &sentinel {
                Some(s) => s.describe(&endpoint_of(info.addr())),
                None => endpoint_of(info.addr()),
            },
            #[cfg(not(feature = "sentinel"))]
            endpoint: endpoint_of(info.addr()),
            #[cfg(feature = "sentinel")]
            sentinel,
            info,
            seeds,
            tls,
            tls_files,
            user,
            password_file: config.password_file.clone(),
            connect_timeout: ep.connect_timeout.unwrap_or(config.connect_timeout),
            response_timeout: ep.response_timeout.unwrap_or(config.response_timeout),
            poll: Some(config.poll_options()),
            trace_scopes: config.trace_scopes,
            placement: config.placement,
        })
    }

    /// From a `redis://` URL with every other setting at its default.
    ///
    /// # Errors
    /// The URL does not parse; the message never quotes the URL (it may hold
    /// a password).
    pub(crate) fn from_url(url: &str) -> crate::Result<ConnectPlan> {
        let lower = url.trim_start().to_ascii_lowercase();
        if !HAS_TLS_BACKEND && (lower.starts_with("rediss://") || lower.starts_with("valkeys://")) {
            return Err(crate::Error::InvalidArgument(NO_TLS_BACKEND.to_owned()));
        }
        let info = url.into_connection_info().map_err(|e| {
            let msg = e.to_string();
            crate::Error::InvalidArgument(if msg.contains(url) {
                "not a valid Valkey URL".to_owned()
            } else {
                format!("not a valid Valkey URL: {msg}")
            })
        })?;
        let tls = matches!(info.addr(), ConnectionAddr::TcpTls { .. });
        Ok(ConnectPlan {
            endpoint: endpoint_of(info.addr()),
            user: info.redis_settings().username().map(str::to_owned),
            info,
            seeds: Vec::new(),
            tls,
            tls_files: TlsFiles::for_url(tls),
            password_file: None,
            connect_timeout: defaults::CONNECT_TIMEOUT,
            response_timeout: defaults::RESPONSE_TIMEOUT,
            poll: None,
            #[cfg(feature = "sentinel")]
            sentinel: None,
            trace_scopes: false,
            placement: crate::config::Placement::Island,
        })
    }

    /// A client of the first endpoint speaking `protocol` (the address's
    /// own when `None`).
    fn client(&self, protocol: Option<redis::ProtocolVersion>) -> Result<redis::Client, ConnectError> {
        self.client_of(&self.info, protocol)
    }

    fn client_of(
        &self,
        info: &redis::ConnectionInfo,
        protocol: Option<redis::ProtocolVersion>,
    ) -> Result<redis::Client, ConnectError> {
        let mut info = info.clone().set_tcp_settings(tcp_settings());
        if let Some(p) = protocol {
            info = info.clone().set_redis_settings(info.redis_settings().clone().set_protocol(p));
        }
        self.tls_files.client(info).map_err(|e| {
            if self.tls {
                ConnectError::Tls(format!("{}: {e}", self.endpoint))
            } else {
                ConnectError::Config(ConfigError::connection_string(e.to_string()))
            }
        })
    }

    /// The settings of a one-off connection to a data node.
    fn probe_config(&self) -> redis::AsyncConnectionConfig {
        let probe = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.response_timeout));
        match self.credentials() {
            Some(c) => probe.set_credentials_provider(c),
            None => probe,
        }
    }

    fn credentials(&self) -> Option<PasswordFileCredentials> {
        let path = self.password_file.clone()?;
        Some(PasswordFileCredentials { user: self.user.clone().unwrap_or_else(|| "default".to_owned()), path })
    }

    /// The settings of the reconnecting connection (and of the poller's).
    fn manager_config(&self) -> ConnectionManagerConfig {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.response_timeout))
            .set_min_delay(defaults::RECONNECT_MIN_DELAY)
            .set_max_delay(defaults::RECONNECT_MAX_DELAY)
            .set_number_of_retries(defaults::RECONNECT_RETRIES);
        match self.credentials() {
            Some(c) => config.set_credentials_provider(c),
            None => config,
        }
    }

    fn auth_error(&self, e: &redis::RedisError) -> ConnectError {
        ConnectError::Auth {
            endpoint: self.endpoint.clone(),
            user: self.user.clone().unwrap_or_else(|| "default".into()),
            reason: e.to_string(),
        }
    }

    fn unreachable(&self, reason: String) -> ConnectError {
        ConnectError::Unreachable { endpoint: self.endpoint.clone(), timeout: self.connect_timeout, reason }
    }

    /// Connects and checks the server answers, all within the connect
    /// timeout: that one deadline covers the probe, its pauses, the
    /// connection manager's own retries and the first `PING`, so no retry
    /// or reconnect setting can stretch the start. A server that is a
    /// cluster node (or several endpoints) gives a cluster connection.
    pub(crate) async fn open(self, prefix: KeyPrefix, write: WriteOptions) -> Result<Valkey, ConnectError> {
        let mut last = None;
        let outcome = tokio::time::timeout(self.connect_timeout, self.establish(&prefix, &mut last)).await;
        let opened = match outcome {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(self.unreachable(last.unwrap_or_else(|| "no answer".to_owned()))),
        };
        tracing::info!(
            endpoint = %self.endpoint,
            cluster = opened.con.is_cluster(),
            tls = self.tls,
            rtt_us = opened.rtt.as_micros() as u64,
            prefix = %prefix,
            "connected to valkey"
        );
        let mut valkey = Valkey::from_connection(opened.con, prefix, write).with_once(opened.once);
        if let Some(poll) = self.poll {
            valkey = valkey.with_poll_options(poll);
        }
        let valkey =
            valkey.with_tls(self.tls).with_endpoint(self.endpoint, self.response_timeout).with_pubsub(opened.pubsub);
        valkey.set_scopes_in_spans(self.trace_scopes);
        Ok(valkey)
    }

    /// The steps of [`ConnectPlan::open`], without the deadline. `last` keeps the
    /// latest failure, so a timeout can say what went wrong.
    async fn establish(&self, prefix: &KeyPrefix, last: &mut Option<String>) -> Result<Opened, ConnectError> {
        #[cfg(feature = "sentinel")]
        if let Some(plan) = &self.sentinel {
            return self.establish_sentinel(plan, last).await;
        }
        let cluster = self.probe(last).await?;
        if !cluster {
            if !self.seeds.is_empty() {
                return Err(ConnectError::Config(ConfigError::connection_string(format!(
                    "names {} endpoints, but {} is no cluster node (cluster support is disabled): name one endpoint \
                     for a single server",
                    self.seeds.len() + 1,
                    self.endpoint
                ))));
            }
            return self.establish_single(last).await;
        }
        self.establish_cluster(prefix).await
    }

    /// Probes the endpoints in turn with one plain connection and a `PING`
    /// until one answers, and asks it whether it is a cluster node. Refused
    /// or missing credentials end the start at once (the connection manager
    /// would retry them with backoff); unreachable endpoints are tried again
    /// until the deadline.
    async fn probe(&self, last: &mut Option<String>) -> Result<bool, ConnectError> {
        let probe = self.probe_config();
        // Database 0 for the probe: a cluster has no other, and refusing a
        // configured one says more than the server's `SELECT` error.
        let clients = std::iter::once(&self.info)
            .chain(&self.seeds)
            .map(|i| self.client_of(&i.clone().set_redis_settings(i.redis_settings().clone().set_db(0)), None))
            .collect::<Result<Vec<_>, _>>()?;
        loop {
            for client in &clients {
                let attempt = async {
                    let mut con = client.get_multiplexed_async_connection_with_config(&probe).await?;
                    redis::cmd("PING").query_async::<String>(&mut con).await?;
                    if let Some(reason) = scripting_missing(&mut con).await? {
                        return Ok(Err(reason));
                    }
                    // `CLUSTER SLOTS` answers on a cluster node, even one not
                    // yet formed, and fails on a server without cluster
                    // support.
                    match redis::cmd("CLUSTER").arg("SLOTS").query_async::<Value>(&mut con).await {
                        Ok(_) => Ok(Ok(Some(true))),
                        // No answer: the probe failed, try again.
                        Err(e) if is_unknown_outcome(&e) => Err(e),
                        // Refused by the ACL: single server, unless the
                        // endpoints said cluster.
                        Err(e) if e.code() == Some("NOPERM") => Ok(Ok(None)),
                        // Cluster support disabled (or the command unknown).
                        Err(_) => Ok(Ok(Some(false))),
                    }
                };
                match attempt.await {
                    Ok(Err(reason)) => {
                        return Err(ConnectError::NoScripting {
                            endpoint: endpoint_of(client.get_connection_info().addr()),
                            reason,
                        });
                    }
                    Ok(Ok(Some(cluster))) => return Ok(cluster),
                    Ok(Ok(None)) if self.seeds.is_empty() => return Ok(false),
                    Ok(Ok(None)) => {
                        return Err(ConnectError::Auth {
                            endpoint: self.endpoint.clone(),
                            user: self.user.clone().unwrap_or_else(|| "default".into()),
                            reason: "the user may not run `CLUSTER SLOTS`, which a cluster client needs to learn \
                                     the topology: grant `+cluster|slots` (every AclRole has it)"
                                .into(),
                        });
                    }
                    Err(e) if is_auth(&e) => return Err(self.auth_error(&e)),
                    Err(e) => {
                        tracing::debug!(endpoint = %endpoint_of(client.get_connection_info().addr()), error = %e, "valkey not reachable yet");
                        *last = Some(e.to_string());
                    }
                }
            }
            tokio::time::sleep(PROBE_PAUSE).await;
        }
    }

    /// The reconnecting connection to one server, after the probe. A
    /// connection lost between the probe and the first `PING` (the server
    /// killed its clients, restarted, a proxy dropped it) is tried again
    /// after a pause, until the connect deadline; refused credentials or
    /// any other error answer end the start at once.
    async fn establish_single(&self, last: &mut Option<String>) -> Result<Opened, ConnectError> {
        let client = self.client(None)?;
        let resp3_client = self.client(Some(redis::ProtocolVersion::RESP3))?;
        let mconfig = self.manager_config();
        let (con, rtt) = loop {
            let attempt = async {
                let mut con = ConnectionManager::new_with_config(client.clone(), mconfig.clone()).await?;
                // A first PING on the connection we keep proves it answers
                // (and accepted AUTH).
                let start = Instant::now();
                let _: String = redis::cmd("PING").query_async(&mut con).await?;
                Ok::<_, redis::RedisError>((con, start.elapsed()))
            };
            match attempt.await {
                Ok(done) => break done,
                Err(e) if is_auth(&e) => return Err(self.auth_error(&e)),
                Err(e) if is_unknown_outcome(&e) => {
                    tracing::debug!(endpoint = %self.endpoint, error = %e, "valkey connection lost at the start; trying again");
                    *last = Some(e.to_string());
                }
                // An answer that is an error (not a lost connection) will
                // not change by asking again.
                Err(e) => return Err(self.unreachable(e.to_string())),
            }
            tokio::time::sleep(PROBE_PAUSE).await;
        };
        let con: Connection = con.into();
        Ok(Opened { once: con.clone(), con, pubsub: PubSub::Single { client: resp3_client, config: mconfig }, rtt })
    }
}

/// Why the server cannot run a script, when it has no scripting engine:
/// `None` when a one-line script runs (or the user may not run scripts at
/// all, which the first write reports with its role).
///
/// A server without its engine answers `ERR Could not find scripting
/// engine 'lua'`; `ERR` is the generic code, so the text is what tells it
/// from other refusals.
pub(crate) async fn scripting_missing(con: &mut impl redis::aio::ConnectionLike) -> RedisResult<Option<String>> {
    match redis::cmd("EVAL").arg("return 1").arg(0).query_async::<Value>(con).await {
        Ok(_) => Ok(None),
        Err(e) if is_unknown_outcome(&e) => Err(e),
        Err(e) if e.code() == Some("ERR") && e.detail().is_some_and(|d| d.contains("scripting engine")) => {
            Ok(Some(e.detail().unwrap_or_default().to_owned()))
        }
        Err(_) => Ok(None),
    }
}

/// What [`ConnectPlan::establish`] made.
struct Opened {
    con: Connection,
    once: Connection,
    pubsub: PubSub,
    rtt: Duration,
}

impl Valkey {
    /// Connects as configured and checks the server answers, within the
    /// connect timeout whatever happens. Afterwards the connection
    /// reconnects by itself with backoff, re-reading the password file
    /// before every attempt.
    ///
    /// # Errors
    /// [`ConnectError`]: invalid configuration (every problem named), an
    /// unreadable password or CA file, an unreachable server, refused or
    /// missing credentials; each names the endpoint, none the password. An
    /// application ends on it rather than run without its store.
    pub async fn connect(config: &ValkeyConfig) -> Result<Valkey, ConnectError> {
        let target = ConnectPlan::from_config(config)?;
        let prefix = config.prefix()?;
        target.open(prefix, config.write_options()).await
    }
}

// The cluster side: the cluster client, its connections, pub/sub.
mod cluster;
pub(crate) use cluster::PubSub;
// Through Sentinel: asking for the primary at start.
#[cfg(feature = "sentinel")]
mod sentinel;
// `ping` and `health`.
mod health;
pub use health::Health;

#[cfg(test)]
mod tests;
