//! The cluster side of connecting: the cluster client built from the same
//! settings, the connections a cluster handle holds, and its pub/sub.

use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::{IntoConnectionInfo, RedisResult};

use super::{ConnectPlan, Opened, is_auth};
use crate::KeyPrefix;
use crate::client::direct::{Direct, Opener};
use crate::client::relearn::Relearn;
#[cfg(feature = "sentinel")]
use crate::client::sentinel::{Follower, OnSwitch, Sentinels};
use crate::client::transport::{ClusterConnection, ClusterTls, Node};
use crate::client::{Connection, bounded, millis};
use crate::config::{ConfigError, defaults};

use super::ConnectError;

/// What every cluster client of a handle is built from: the seed nodes and
/// the settings of [`ConnectPlan`], kept for the clients built after
/// start-up (a pub/sub connection with its own push sender, the
/// connection whose writes wait for replicas), and the hold on the TLS
/// files its nodes are opened with.
pub(crate) struct ClusterRecipe {
    nodes: Vec<redis::ConnectionInfo>,
    endpoint: String,
    connect_timeout: Duration,
    response_timeout: Duration,
    credentials: Option<super::PasswordFileCredentials>,
    tls_files: super::TlsFiles,
    tls: bool,
    /// Keeps the files registered while any client of the handle lives.
    _tls_hold: ClusterTls,
}

impl ClusterRecipe {
    /// A builder of a client of the cluster. `retries` bounds the cluster
    /// client's own resends (redirects, a node reconnecting); every call
    /// also ends within the response timeout, resends included. Waits
    /// between resends start at the reconnect delay instead of the
    /// client's default 1.28 s, which would double the time a failover
    /// takes to heal. `attempt` bounds one attempt, `overall` a call with
    /// its resends: longer than the response timeout for a connection
    /// whose calls wait for replicas.
    fn builder(
        &self,
        protocol: redis::ProtocolVersion,
        retries: u32,
        attempt: Duration,
        overall: Duration,
    ) -> ClusterClientBuilder {
        let nodes: Vec<redis::ConnectionInfo> = self
            .nodes
            .iter()
            .map(|i| i.clone().set_redis_settings(i.redis_settings().clone().set_protocol(protocol)))
            .collect();
        let mut builder = ClusterClientBuilder::new(nodes)
            .tcp_settings(super::tcp_settings())
            .connection_timeout(self.connect_timeout)
            .response_timeout(attempt)
            .overall_response_timeout(Some(overall))
            .retries(retries)
            .min_retry_wait(millis(defaults::RECONNECT_MIN_DELAY))
            .max_retry_wait(millis(CLUSTER_MAX_RETRY_WAIT))
            // A node that stays unreachable is dropped after a few tries, so
            // the client learns the topology again (a replica promoted in
            // its place) instead of reconnecting to the dead node forever,
            // which no `MOVED` would ever correct.
            .max_connection_attempts(CLUSTER_CONNECTION_ATTEMPTS)
            .use_protocol(protocol);
        if let Some(c) = self.credentials.clone() {
            builder = builder.set_credentials_provider(c);
        }
        self.tls_files.cluster(builder, self.tls)
    }

    /// The client `builder` describes.
    fn build(&self, builder: ClusterClientBuilder) -> Result<ClusterClient, ConnectError> {
        builder.build().map_err(|e| {
            if self.tls {
                ConnectError::Tls(format!("{}: {e}", self.endpoint))
            } else {
                ConnectError::Config(ConfigError::connection_string(e.to_string()))
            }
        })
    }

    /// A client whose calls end within the response timeout.
    fn client(&self, protocol: redis::ProtocolVersion, retries: u32) -> Result<ClusterClient, ConnectError> {
        self.build(self.builder(protocol, retries, self.response_timeout, self.response_timeout))
    }
}

/// A connection of `client`, its nodes opened as [`crate::client::transport`]'s
/// nodes (with the handle's TLS files whichever the backend).
async fn open(client: &ClusterClient) -> RedisResult<ClusterConnection> {
    client.get_async_generic_connection::<Node>().await
}

impl ConnectPlan {
    /// The recipe of this plan's cluster clients. Registers the TLS files
    /// for the cluster's nodes (refused with native-tls while a cluster
    /// handle with other files is open).
    fn cluster_recipe(&self) -> Result<ClusterRecipe, ConnectError> {
        let nodes =
            std::iter::once(&self.info).chain(&self.seeds).map(|i| i.clone().set_tcp_settings(super::tcp_settings()));
        Ok(ClusterRecipe {
            nodes: nodes.collect(),
            endpoint: self.endpoint.clone(),
            connect_timeout: self.connect_timeout,
            response_timeout: self.response_timeout,
            credentials: self.credentials(),
            tls_files: self.tls_files.clone(),
            tls: self.tls,
            _tls_hold: ClusterTls::hold(&self.tls_files, self.tls).map_err(ConnectError::Tls)?,
        })
    }

    /// How the direct connection to an island's primary is opened: a
    /// multiplexed connection with the settings of a one-off connection
    /// to a data node (credentials re-read, TLS as the endpoints' with the
    /// handle's TLS files, time-outs, no Nagle), speaking RESP2 as the
    /// cluster client does.
    fn direct_opener(&self) -> Opener {
        let settings = self.info.redis_settings().clone().set_protocol(redis::ProtocolVersion::RESP2);
        let addr = self.info.addr().clone();
        let config = self.probe_config();
        let files = self.tls_files.clone();
        Box::new(move |host: Option<String>, port: u16| {
            let host = host.unwrap_or_else(|| match &addr {
                redis::ConnectionAddr::Tcp(h, _) | redis::ConnectionAddr::TcpTls { host: h, .. } => h.clone(),
                _ => String::new(),
            });
            let addr = match &addr {
                redis::ConnectionAddr::TcpTls { insecure, tls_params, .. } => {
                    redis::ConnectionAddr::TcpTls { host, port, insecure: *insecure, tls_params: tls_params.clone() }
                }
                _ => redis::ConnectionAddr::Tcp(host, port),
            };
            let (settings, config, files) = (settings.clone(), config.clone(), files.clone());
            Box::pin(async move {
                let info =
                    addr.into_connection_info()?.set_redis_settings(settings).set_tcp_settings(super::tcp_settings());
                files.client(info)?.get_multiplexed_async_connection_with_config(&config).await
            })
        })
    }

    /// The steps of [`ConnectPlan::open`] after the probe found a cluster
    /// node: the checks a cluster needs, then its connections.
    pub(super) async fn establish_cluster(&self, prefix: &KeyPrefix) -> Result<Opened, ConnectError> {
        if self.info.redis_settings().db() != 0 {
            return Err(ConnectError::Config(ConfigError::connection_string(
                "a cluster has only database 0: remove defaultDatabase (or the URL's /db)",
            )));
        }
        if self.placement == crate::config::Placement::Sharded {
            if prefix.hash_tag().is_some() {
                return Err(ConnectError::Config(ConfigError::key_prefix(format!(
                    "`{prefix}` is one hash tag, but `Placement` is `sharded`: a sharded keyspace puts each scope \
                     in its own slot, and a tag in the prefix would put every key in one. Remove the braces (or \
                     set `Placement` to `island`)"
                ))));
            }
        } else if prefix.slot().is_none() {
            return Err(ConnectError::Config(ConfigError::key_prefix(format!(
                "`{prefix}` has no hash tag, but {} is a cluster node: a generated script touches several keys, \
                 which a cluster runs only when they share a slot. For keyspaces sharded by scope (`shard: \
                 scope`), set `Placement` to `sharded` and keep the prefix as it is; a tag in the prefix would put \
                 every scope in one slot. For other keyspaces (islands), write the prefix as one tag, \
                 `{{{prefix}}}`, so every key of the island lives in one slot (different islands spread over the \
                 cluster)",
                self.endpoint
            ))));
        }
        let fail =
            |e: redis::RedisError| if is_auth(&e) { self.auth_error(&e) } else { self.unreachable(e.to_string()) };
        let timeout = self.response_timeout;
        let recipe = self.cluster_recipe()?;
        let client = recipe.client(redis::ProtocolVersion::RESP2, CLUSTER_RETRIES)?;
        let once = recipe.client(redis::ProtocolVersion::RESP2, 0)?;
        // The schema's template directly: the family layer sits above the client.
        let probe = microdcs_schema::KeyTemplate::parse(microdcs_schema::builtin::CLUSTER_PROBE.key)
            .map_err(|e| format!("{e:?}"))
            .and_then(|t| t.render(prefix, &[]).map_err(|e| e.to_string()))
            .map_err(|e| ConnectError::Config(ConfigError::key_prefix(e)))?;
        let con = open(&client).await.map_err(fail)?;
        let mut con = Connection::cluster(con, Relearn::new(probe.clone(), timeout)).await;
        // An island lives in one slot: its calls go straight to the slot's
        // primary (see `client::direct`); a sharded keyspace's slots vary.
        if let Some(slot) = prefix.slot().filter(|_| self.placement == crate::config::Placement::Island) {
            con = con.with_direct(Direct::new(slot, timeout, self.direct_opener())).await;
        }
        let start = Instant::now();
        let _: String = con.query_near(&redis::cmd("PING"), prefix.slot()).await.map_err(fail)?;
        let rtt = start.elapsed();
        let once = open(&once).await.map_err(fail)?;
        let once = Connection::cluster(once, Relearn::new(probe.clone(), timeout)).await;
        Ok(Opened { con, once, pubsub: PubSub::Cluster { recipe: std::sync::Arc::new(recipe), probe }, rtt })
    }
}

/// The longest pause of the cluster client between two resends.
const CLUSTER_MAX_RETRY_WAIT: Duration = Duration::from_millis(500);

/// How often the cluster client tries to reach a node before it drops the
/// node and asks the cluster for its topology again.
const CLUSTER_CONNECTION_ATTEMPTS: std::num::NonZeroUsize = std::num::NonZeroUsize::new(3).expect("not zero");

/// How often the cluster client resends a call on its own (redirects, a
/// reconnecting node), within the response timeout. Safe for the store's
/// scripts, which recognise their operation id; commands that must go at
/// most once use a connection that never resends.
const CLUSTER_RETRIES: u32 = 16;

/// How a handle opens a RESP3 pub/sub connection: messages go to a push
/// sender, and the connection subscribes again by itself after a reconnect
/// (on a cluster also after the channel's slot moved).
// One per handle, kept for its life: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum PubSub {
    /// One server: a reconnecting connection manager.
    Single { client: redis::Client, config: ConnectionManagerConfig },
    /// The primary Sentinel names: a follower, moved by a switch.
    #[cfg(feature = "sentinel")]
    Sentinel { sentinels: std::sync::Arc<Sentinels>, config: ConnectionManagerConfig },
    /// A cluster: the clients are built when a connection is opened;
    /// `probe` is the key the connections that wait for replicas read to
    /// learn the topology after a time-out.
    Cluster { recipe: std::sync::Arc<ClusterRecipe>, probe: String },
}

impl PubSub {
    /// A pub/sub connection whose push messages go to `on_push`. Waits at
    /// most the connect timeout.
    pub(crate) async fn open<F>(&self, on_push: F) -> RedisResult<Connection>
    where
        F: Fn(redis::PushInfo) -> Result<(), ()> + Send + Sync + 'static,
    {
        match self {
            PubSub::Single { client, config } => {
                let config = config.clone().set_push_sender(on_push).set_automatic_resubscription();
                // The manager's first connection retries with backoff on its
                // own, for far longer than the connect timeout that bounds
                // start-up.
                let timeout = config.connection_timeout().unwrap_or(defaults::CONNECT_TIMEOUT);
                Ok(bounded(timeout, ConnectionManager::new_with_config(client.clone(), config)).await?.into())
            }
            #[cfg(feature = "sentinel")]
            PubSub::Sentinel { sentinels, config } => {
                let on_push = std::sync::Arc::new(on_push);
                let config = config.clone().set_push_sender(on_push.clone()).set_automatic_resubscription();
                // Messages published while we moved to the new primary
                // are lost: told as a lost connection, so the subscriber
                // makes up for them as it does after a reconnect.
                let on_switch: OnSwitch = Box::new(move || {
                    let _ = on_push(redis::PushInfo { kind: redis::PushKind::Disconnection, data: Vec::new() });
                });
                let timeout = config.connection_timeout().unwrap_or(defaults::CONNECT_TIMEOUT);
                let protocol = redis::ProtocolVersion::RESP3;
                Ok(bounded(timeout, Follower::open(sentinels.clone(), config, protocol, Some(on_switch))).await?.into())
            }
            PubSub::Cluster { recipe, .. } => {
                let timeout = recipe.response_timeout;
                let builder = recipe.builder(redis::ProtocolVersion::RESP3, CLUSTER_RETRIES, timeout, timeout);
                let client = recipe.build(builder.push_sender(on_push)).map_err(unbuilt)?;
                Ok(bounded(recipe.connect_timeout, open(&client)).await?.into())
            }
        }
    }

    /// A connection of its own for writes that wait for replicas: a
    /// `WAIT` holds every later command of its connection until it
    /// returns, so on the shared connection it would hold unrelated
    /// callers too. Its replies may take the response timeout plus the
    /// longest wait; each call bounds its own wait below that.
    pub(crate) async fn open_durable(&self) -> RedisResult<Connection> {
        let longest = crate::config::Durability::MAX_TIMEOUT;
        match self {
            PubSub::Single { client, config } => {
                let wait = config.response_timeout().unwrap_or(defaults::RESPONSE_TIMEOUT).saturating_add(longest);
                let config = config.clone().set_response_timeout(Some(wait));
                let timeout = config.connection_timeout().unwrap_or(defaults::CONNECT_TIMEOUT);
                Ok(bounded(timeout, ConnectionManager::new_with_config(client.clone(), config)).await?.into())
            }
            #[cfg(feature = "sentinel")]
            PubSub::Sentinel { sentinels, config } => {
                let wait = config.response_timeout().unwrap_or(defaults::RESPONSE_TIMEOUT).saturating_add(longest);
                let config = config.clone().set_response_timeout(Some(wait));
                let timeout = config.connection_timeout().unwrap_or(defaults::CONNECT_TIMEOUT);
                let protocol = redis::ProtocolVersion::RESP2;
                Ok(bounded(timeout, Follower::open(sentinels.clone(), config, protocol, None)).await?.into())
            }
            PubSub::Cluster { recipe, probe } => {
                // A `WAIT` may take the longest durability timeout: a client
                // whose every attempt, and whole call, may last that much
                // longer, or the wait would be cut and resent behind itself.
                let wait = recipe.response_timeout.saturating_add(longest);
                let builder = recipe.builder(redis::ProtocolVersion::RESP3, CLUSTER_RETRIES, wait, wait);
                let client = recipe.build(builder).map_err(unbuilt)?;
                let con = bounded(recipe.connect_timeout, open(&client)).await?;
                Ok(Connection::cluster(con, Relearn::new(probe.clone(), recipe.response_timeout)).await)
            }
        }
    }
}

/// A client that could be built at start-up but not later: the same
/// settings, so only a changed file could do it. Told as the client's
/// configuration error.
fn unbuilt(e: ConnectError) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::InvalidClientConfig, "cannot build a cluster client", e.to_string()))
}
