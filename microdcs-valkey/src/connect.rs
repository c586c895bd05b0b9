//! Connecting at start, the password file, TLS, and health.
//!
//! A failure to connect at start is an error the application ends on: a
//! service that cannot reach its store has nothing useful to do, and
//! failing loudly beats running without one.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::auth::{BasicAuth, StreamingCredentialsProvider};
use redis::{ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo, RedisResult};

use crate::client::Valkey;
use crate::config::{ConfigError, ValkeyConfig, defaults};

/// Why [`Valkey::connect`] failed. Never contains a password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The password file cannot be read.
    #[error("MicroDcs:Valkey:PasswordFile: cannot read `{}`: {reason}", path.display())]
    PasswordFile {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The TLS set-up failed (CA file unreadable or not PEM).
    #[error("TLS: {0}")]
    Tls(String),
    /// The server was not reachable, or did not answer, within the connect timeout.
    #[error("cannot connect to {endpoint} within {timeout:?}: {reason}")]
    Unreachable {
        /// `host:port`.
        endpoint: String,
        /// The connect timeout.
        timeout: Duration,
        /// What happened.
        reason: String,
    },
    /// The server refused the credentials.
    #[error("{endpoint} refused the credentials of user `{user}`: {reason}")]
    Auth {
        /// `host:port`.
        endpoint: String,
        /// The ACL user (`default` when none is set).
        user: String,
        /// The server's reason (no secrets).
        reason: String,
    },
}

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

/// Credentials re-read from the password file whenever a connection is
/// made, so a rotated password reaches the next reconnect without a
/// restart.
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

/// Paths where Linux distributions keep the system CA bundle.
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
];

/// The PEM roots to trust with `TlsCaFile`: the system bundle and the CA.
/// redis-rs replaces the platform store when given roots, so both go in.
fn trust_bundle(ca_file: &Path) -> Result<Vec<u8>, ConnectError> {
    let ca = std::fs::read(ca_file)
        .map_err(|e| ConnectError::Tls(format!("cannot read TlsCaFile `{}`: {e}", ca_file.display())))?;
    if !String::from_utf8_lossy(&ca).contains("-----BEGIN CERTIFICATE-----") {
        return Err(ConnectError::Tls(format!("TlsCaFile `{}` holds no PEM certificate", ca_file.display())));
    }
    let system = std::env::var_os("SSL_CERT_FILE")
        .map(PathBuf::from)
        .into_iter()
        .chain(SYSTEM_BUNDLES.iter().map(PathBuf::from))
        .find_map(|p| std::fs::read(p).ok());
    let mut bundle = match system {
        Some(s) => s,
        None => {
            tracing::warn!("no system CA bundle found; trusting only TlsCaFile");
            Vec::new()
        }
    };
    if !bundle.ends_with(b"\n") && !bundle.is_empty() {
        bundle.push(b'\n');
    }
    bundle.extend_from_slice(&ca);
    Ok(bundle)
}

impl Valkey {
    /// Connects as configured and checks the server answers, within the
    /// connect timeout. Afterwards the connection reconnects by itself with
    /// backoff, re-reading the password file before every attempt.
    ///
    /// # Errors
    /// [`ConnectError`]: invalid configuration (every problem named), an
    /// unreadable password or CA file, an unreachable server, refused
    /// credentials. An application ends on it rather than run without its
    /// store.
    pub async fn connect(config: &ValkeyConfig) -> Result<Valkey, ConnectError> {
        config.validate()?;
        let ep = config.endpoint()?;
        let prefix = config.prefix()?;
        let endpoint = format!("{}:{}", ep.host, ep.port);
        let tls = ep.tls || config.tls_ca_file.is_some();
        let addr = if tls {
            ConnectionAddr::TcpTls { host: ep.host.clone(), port: ep.port, insecure: false, tls_params: None }
        } else {
            ConnectionAddr::Tcp(ep.host.clone(), ep.port)
        };
        let user = config.user.clone().or(ep.user.clone());
        let mut redis_info = RedisConnectionInfo::default().set_db(ep.db);
        if let Some(u) = &user {
            redis_info = redis_info.set_username(u);
        }
        if let Some(p) = &ep.password {
            redis_info = redis_info.set_password(p.expose());
        }
        let info = addr
            .into_connection_info()
            .map_err(|e| ConnectError::Tls(e.to_string()))?
            .set_redis_settings(redis_info.clone());
        let resp3_info = info.clone().set_redis_settings(redis_info.set_protocol(redis::ProtocolVersion::RESP3));
        let bundle = match &config.tls_ca_file {
            Some(ca) => Some(trust_bundle(ca)?),
            None => None,
        };
        let build = |info: redis::ConnectionInfo| match &bundle {
            Some(b) => redis::Client::build_with_tls(
                info,
                redis::TlsCertificates { client_tls: None, root_cert: Some(b.clone()) },
            )
            .map_err(|e| ConnectError::Tls(e.to_string())),
            None => redis::Client::open(info).map_err(|e| ConnectError::Tls(e.to_string())),
        };
        let client = build(info)?;
        let resp3_client = build(resp3_info)?;
        let connect_timeout = ep.connect_timeout.unwrap_or(config.connect_timeout);
        let response_timeout = ep.response_timeout.unwrap_or(config.response_timeout);
        let mut mconfig = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(Some(response_timeout))
            .set_min_delay(defaults::RECONNECT_MIN_DELAY)
            .set_max_delay(defaults::RECONNECT_MAX_DELAY)
            .set_number_of_retries(defaults::RECONNECT_RETRIES);
        if let Some(path) = &config.password_file {
            // Fail at start on an unreadable file, with the setting's name.
            read_password_file(path)
                .map_err(|e| ConnectError::PasswordFile { path: path.clone(), reason: e.to_string() })?;
            let user = user.clone().unwrap_or_else(|| "default".to_owned());
            mconfig = mconfig.set_credentials_provider(PasswordFileCredentials { user, path: path.clone() });
        }
        let unreachable =
            |reason: String| ConnectError::Unreachable { endpoint: endpoint.clone(), timeout: connect_timeout, reason };
        let is_auth = |e: &redis::RedisError| {
            e.kind() == redis::ErrorKind::AuthenticationFailed
                || e.code().is_some_and(|c| c == "WRONGPASS" || c == "NOAUTH" || c == "NOPERM")
        };
        // Probe with one plain connection first: refused credentials end the
        // start at once; an unreachable server is retried until the timeout.
        let deadline = Instant::now() + connect_timeout;
        let mut probe = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(Some(response_timeout));
        if let Some(path) = &config.password_file {
            let user = user.clone().unwrap_or_else(|| "default".to_owned());
            probe = probe.set_credentials_provider(PasswordFileCredentials { user, path: path.clone() });
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, client.get_multiplexed_async_connection_with_config(&probe)).await {
                Ok(Ok(_)) => break,
                Ok(Err(e)) if is_auth(&e) => {
                    return Err(ConnectError::Auth {
                        endpoint: endpoint.clone(),
                        user: user.unwrap_or_else(|| "default".into()),
                        reason: e.to_string(),
                    });
                }
                Ok(Err(e)) if Instant::now() + Duration::from_millis(100) < deadline => {
                    tracing::debug!(endpoint, error = %e, "valkey not reachable yet");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(Err(e)) => return Err(unreachable(e.to_string())),
                Err(_) => return Err(unreachable("timed out".into())),
            }
        }
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(100));
        let con = match tokio::time::timeout(left, ConnectionManager::new_with_config(client, mconfig.clone())).await {
            Err(_) => return Err(unreachable("timed out".into())),
            Ok(Err(e)) => return Err(unreachable(e.to_string())),
            Ok(Ok(con)) => con,
        };
        let valkey = Valkey::from_manager(con, prefix, config.write_options())
            .with_poll_options(config.poll_options())
            .with_tls(tls)
            .with_resp3(resp3_client, mconfig);
        // A first PING proves the server answers (and accepted AUTH).
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(100));
        match tokio::time::timeout(left, valkey.ping()).await {
            Ok(Ok(rtt)) => {
                tracing::info!(endpoint, tls, rtt_us = rtt.as_micros() as u64, prefix = %valkey.prefix(), "connected to valkey");
                Ok(valkey)
            }
            Ok(Err(e)) => Err(unreachable(e.to_string())),
            Err(_) => Err(unreachable("no answer to PING".into())),
        }
    }

    /// One `PING`; the round-trip time.
    ///
    /// # Errors
    /// The server did not answer.
    pub async fn ping(&self) -> crate::Result<Duration> {
        let mut con = self.connection();
        let start = Instant::now();
        let _: String = redis::cmd("PING").query_async(&mut con).await?;
        Ok(start.elapsed())
    }

    /// A health check for any health framework: pings and reports the
    /// round-trip time, or why the server is unhealthy.
    pub async fn health(&self) -> Health {
        // A dropped connection is re-established by the first command that
        // fails on it; a second ping then tells the truth.
        let mut last = String::new();
        for _ in 0..2 {
            match self.ping().await {
                Ok(rtt) => return Health::Healthy { rtt },
                Err(e) => last = e.to_string(),
            }
        }
        Health::Unhealthy { reason: last }
    }
}

/// The result of [`Valkey::health`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// The server answered.
    Healthy {
        /// Round-trip time of a `PING`.
        rtt: Duration,
    },
    /// The server did not answer.
    Unhealthy {
        /// Why (no secrets).
        reason: String,
    },
}

impl Health {
    /// Whether the server answered.
    pub fn is_healthy(&self) -> bool {
        matches!(self, Health::Healthy { .. })
    }
}
