//! The connection handle everything else is made from.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;

use crate::KeyPrefix;
use crate::config::{PollOptions, WriteOptions, defaults};
use crate::error::Result;

// Connecting: the one place a `Valkey` is built from settings or a URL.
pub(crate) mod connect;
// Shared by connecting and by Sentinel following, below both.
pub(crate) mod transport;
// One server, Sentinel or a cluster, behind one connection type.
mod connection;
// An island's calls straight to its slot's primary on a cluster.
mod direct;
// A cluster's topology learnt from the nodes that answer, after a time-out.
mod relearn;
// How many replicas a cluster shard has, for `Durability::every_replica`.
mod shard_replicas;
// Following the primary a group of Sentinels names.
#[cfg(feature = "sentinel")]
mod sentinel;

#[cfg(feature = "sentinel")]
pub(crate) use sentinel::is_switch;
/// Whether `e` is the Sentinel follower's own "the primary changed" error:
/// never, without Sentinel.
#[cfg(not(feature = "sentinel"))]
pub(crate) fn is_switch(_: &redis::RedisError) -> bool {
    false
}

pub use crate::metrics::Metrics;
pub use connect::Health;
pub use connection::Connection;
pub use transport::{ConnectError, read_password_file};

struct Inner {
    con: Connection,
    /// For commands sent at most once: on a cluster a connection that
    /// never resends by itself (the cluster client would resend after a
    /// lost reply); on one server the same connection as `con`.
    once: Connection,
    prefix: KeyPrefix,
    write: WriteOptions,
    poll: PollOptions,
    tls: bool,
    metrics: Metrics,
    /// How to open a pub/sub connection (the poller's, a channel's).
    pubsub: Option<connect::PubSub>,
    /// The connection for writes that wait for replicas, opened at the
    /// first such write (see [`Valkey::waiting_connection`]).
    waiting: tokio::sync::OnceCell<Connection>,
    /// The replicas of the island's shard, on a cluster (see
    /// [`Valkey::durability_for`]).
    shard_replicas: Arc<shard_replicas::ShardReplicas>,
    /// `host:port`, for messages; unknown for [`Valkey::from_manager`].
    endpoint: Option<String>,
    /// The longest [`Valkey::ping`] and [`Valkey::health`] wait.
    response_timeout: Duration,
    /// Whether operation spans carry the scope (`TraceScopes`).
    scopes_in_spans: std::sync::atomic::AtomicBool,
    /// What is derived once per document type and connection (the store's
    /// plan: parsed templates, script hashes), by the type's name, checked
    /// against its generated script so two types never share an entry.
    derived: std::sync::Mutex<std::collections::HashMap<&'static str, Derived>>,
}

/// One entry of [`Inner::derived`]: the script it was derived for and the value.
type Derived = (&'static [&'static str], Arc<dyn std::any::Any + Send + Sync>);

/// A connection to one island, on one Valkey server or on a Valkey Cluster
/// (where every key of the island shares the prefix's slot): the multiplexed, reconnecting
/// connection, the key prefix, write options and counters. Cheap to clone.
#[derive(Clone)]
pub struct Valkey {
    inner: Arc<Inner>,
}

impl fmt::Debug for Valkey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Valkey")
            .field("endpoint", &self.inner.endpoint)
            .field("prefix", &self.inner.prefix)
            .field("write", &self.inner.write)
            .finish_non_exhaustive()
    }
}

impl Valkey {
    /// Wraps an existing connection manager. [`Valkey::ping`] and
    /// [`Valkey::health`] then wait at most the default `ResponseTimeout`,
    /// and their messages cannot name the endpoint. Such a handle has no
    /// client for the poller's pub/sub connection: `Poller::start`
    /// refuses it with [`crate::Error::InvalidArgument`]. Use
    /// [`Valkey::connect`] (every setting) or [`Valkey::connect_url`] for a
    /// handle that can do everything.
    pub fn from_manager(con: ConnectionManager, prefix: KeyPrefix, write: WriteOptions) -> Self {
        Self::from_connection(con.into(), prefix, write)
    }

    pub(crate) fn from_connection(con: Connection, prefix: KeyPrefix, write: WriteOptions) -> Self {
        let write = write.within_bounds();
        // Unset, the lag limit follows the stream bound these writes keep,
        // as `ConsumerLagLimit` does in a configuration.
        let poll = PollOptions {
            lag_limit: defaults::consumer_lag_limit(write.change_stream_max_len),
            ..PollOptions::default()
        };
        Valkey {
            inner: Arc::new(Inner {
                once: con.clone(),
                con,
                prefix,
                write,
                poll,
                tls: false,
                metrics: Metrics::default(),
                pubsub: None,
                waiting: tokio::sync::OnceCell::new(),
                shard_replicas: Arc::default(),
                endpoint: None,
                response_timeout: defaults::RESPONSE_TIMEOUT,
                scopes_in_spans: std::sync::atomic::AtomicBool::new(false),
                derived: std::sync::Mutex::default(),
            }),
        }
    }

    /// The value `make` derives for type `type_name`, whose identity is
    /// `texts` (its generated scripts and key templates), made once per
    /// connection handle and shared by every store of the type made from
    /// it, so `store()` may be called per request. A name seen with other
    /// texts (two types the compiler names alike) is derived again and
    /// replaces the entry: never shared between types.
    pub(crate) fn derived<T: std::any::Any + Send + Sync>(
        &self,
        type_name: &'static str,
        texts: &'static [&'static str],
        make: impl FnOnce() -> T,
    ) -> Arc<T> {
        let mut map = self.inner.derived.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((seen, value)) = map.get(type_name)
            && *seen == texts
            && let Ok(found) = Arc::clone(value).downcast::<T>()
        {
            return found;
        }
        let made = Arc::new(make());
        map.insert(type_name, (texts, made.clone()));
        made
    }

    fn inner_mut(&mut self) -> &mut Inner {
        Arc::get_mut(&mut self.inner).expect("configured before the handle is shared")
    }

    /// Whether the spans of operations through this handle (and every
    /// clone of it) carry the scope as `microdcs.scope`, and the events
    /// inside them the key or id they are about (setting `TraceScopes`, off
    /// by default: a scope is often a tenant's or a customer's name, keys
    /// and ids hold it, and spans travel to tracing backends with their
    /// events). Metrics never carry it either way.
    pub fn set_scopes_in_spans(&self, on: bool) {
        self.inner.scopes_in_spans.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Records `scope` on the current operation's span when
    /// [`Valkey::set_scopes_in_spans`] is on.
    pub(crate) fn span_scope(&self, scope: &str) {
        if self.scopes_shown() {
            crate::observe::record_scope(scope);
        }
    }

    /// Whether spans, and the events inside them, may show a scope
    /// ([`Valkey::set_scopes_in_spans`]).
    fn scopes_shown(&self) -> bool {
        self.inner.scopes_in_spans.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `text` (a key, an id: it holds or names a scope) for an event
    /// field, or nothing while [`Valkey::set_scopes_in_spans`] is off: an
    /// event inside an operation's span travels with the span.
    pub(crate) fn shown<'a>(&self, text: &'a str) -> Option<&'a str> {
        self.scopes_shown().then_some(text)
    }

    pub(crate) fn with_poll_options(mut self, poll: PollOptions) -> Self {
        self.inner_mut().poll = poll;
        self
    }

    pub(crate) fn with_pubsub(mut self, pubsub: connect::PubSub) -> Self {
        self.inner_mut().pubsub = Some(pubsub);
        self
    }

    pub(crate) fn with_once(mut self, once: Connection) -> Self {
        self.inner_mut().once = once;
        self
    }

    /// A RESP3 connection for pub/sub whose push messages go to `on_push`;
    /// it resubscribes by itself after a reconnect. The one way the runtime
    /// subscribes (the poller's nudges, channel families). Waits at most
    /// the connect timeout for the connection.
    ///
    /// # Errors
    /// A handle made without a client (`Valkey::from_manager`), connection
    /// errors.
    pub(crate) async fn subscriber<F>(&self, on_push: F) -> Result<Connection>
    where
        F: Fn(redis::PushInfo) -> std::result::Result<(), ()> + Send + Sync + 'static,
    {
        let pubsub = self.inner.pubsub.as_ref().ok_or_else(|| {
            crate::Error::InvalidArgument(
                "this handle has no client for a pub/sub connection: make it with Valkey::connect or Valkey::connect_url"
                    .into(),
            )
        })?;
        Ok(pubsub.open(on_push).await?)
    }

    pub(crate) fn with_tls(mut self, tls: bool) -> Self {
        self.inner_mut().tls = tls;
        self
    }

    pub(crate) fn with_endpoint(mut self, endpoint: String, response_timeout: Duration) -> Self {
        let inner = self.inner_mut();
        inner.endpoint = Some(endpoint);
        inner.response_timeout = response_timeout;
        self
    }

    /// `host:port` of the server, when this handle was connected by
    /// [`Valkey::connect`] or [`Valkey::connect_url`].
    pub(crate) fn endpoint(&self) -> Option<&str> {
        self.inner.endpoint.as_deref()
    }

    /// The reply bound (`ResponseTimeout`; the default for [`Valkey::from_manager`]).
    pub(crate) fn response_timeout(&self) -> Duration {
        self.inner.response_timeout
    }

    /// Poll options.
    pub fn poll_options(&self) -> &PollOptions {
        &self.inner.poll
    }

    /// Whether the connection uses TLS.
    pub fn is_tls(&self) -> bool {
        self.inner.tls
    }

    /// Connects to `url` (`redis://host:port/`) without a configuration
    /// (tests, tools): every other setting at its default, through the same
    /// steps as [`Valkey::connect`], so start-up is bounded by the default
    /// connect timeout and reconnects back off alike. Prefer
    /// [`Valkey::connect`]: for poll intervals, timeouts, TLS or a password
    /// file, put the URL in a [`crate::config::ValkeyConfig`]'s `connection_string`
    /// and set the rest there.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for a URL that does not parse;
    /// [`crate::Error::Redis`] naming the endpoint (never the password) for
    /// an unreachable server (a connection error) or refused credentials.
    pub async fn connect_url(url: &str, prefix: KeyPrefix, write: WriteOptions) -> Result<Self> {
        connect::ConnectPlan::from_url(url)?.open(prefix, write).await.map_err(ConnectError::into_error)
    }

    /// A handle on the connection (cheap clone of the multiplexed
    /// connection): to one server, or to a cluster.
    pub fn connection(&self) -> Connection {
        self.inner.con.clone()
    }

    /// The connection for writes that wait for replicas: a `WAIT` holds
    /// every later command of its connection until it returns, so it runs
    /// on a connection of its own, opened at the first such write, and
    /// never delays callers that do not wait. A handle made by
    /// [`Valkey::from_manager`] has no client to open one with and uses its
    /// one connection.
    pub(crate) async fn waiting_connection(&self) -> redis::RedisResult<Connection> {
        match &self.inner.pubsub {
            None => Ok(self.connection()),
            Some(pubsub) => self.inner.waiting.get_or_try_init(|| pubsub.open_durable()).await.cloned(),
        }
    }

    /// The connection for commands sent at most once (see [`Inner::once`]).
    pub(crate) fn once_connection(&self) -> Connection {
        self.inner.once.clone()
    }

    /// Whether this handle talks to a Valkey Cluster.
    pub fn is_cluster(&self) -> bool {
        self.inner.con.is_cluster()
    }

    /// The key prefix.
    pub fn prefix(&self) -> &KeyPrefix {
        &self.inner.prefix
    }

    /// `durability` as a write sends it: [`Durability::every_replica`]
    /// becomes a count, and never fewer than one, so that a deployment
    /// without a known replica confirms nothing. Through Sentinel: every
    /// replica the Sentinels know for the service (down ones included). On
    /// a cluster: every node of the shard serving the island's slot other
    /// than its primary (failed ones included; the most seen per shard
    /// since the handle started; every shard's most for a keyspace sharded
    /// by scope), learnt from `CLUSTER SHARDS` at the first such write
    /// (within `ResponseTimeout`) and asked again in the background when
    /// older than 5 s.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`], before anything is written, for
    /// every replica on a handle to one server not made through Sentinel:
    /// nothing there keeps a count of replicas that a promotion does not
    /// shrink. On a cluster, a connection error when no node told the
    /// count in time (nothing written).
    ///
    /// [`Durability::every_replica`]: crate::config::Durability::every_replica
    pub(crate) async fn durability_for(
        &self,
        durability: crate::config::Durability,
    ) -> Result<crate::config::Durability> {
        if !durability.every_replica {
            return Ok(durability);
        }
        let known = if let Some(known) = self.inner.con.known_replicas() {
            known
        } else if self.is_cluster() {
            let slot = self.inner.prefix.slot();
            self.inner.shard_replicas.count(&self.inner.con, slot, self.inner.response_timeout).await?
        } else {
            return Err(crate::Error::InvalidArgument(
                "Durability::every_replica needs a handle connected through Sentinel (serviceName=) or to a \
                 cluster, which know how many replicas there are; use Durability::replicas(n) here"
                    .into(),
            ));
        };
        Ok(crate::config::Durability { replicas: durability.replicas.max(known).max(1), ..durability })
    }

    /// Write options.
    pub fn write_options(&self) -> &WriteOptions {
        &self.inner.write
    }

    /// The counters.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }
}

/// A duration in whole milliseconds for `PX`/`PEXPIRE`, at least 1.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The error of an attempt that got no answer within `timeout`: a timeout,
/// so its outcome is unknown.
pub(crate) fn no_answer(timeout: Duration) -> redis::RedisError {
    std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no answer within {timeout:?}")).into()
}

/// Runs `f` and gives up after `timeout`: the connection manager's own
/// response timeout does not cover the wait for a reconnect, which backs off
/// for seconds when the server is gone.
pub(crate) async fn bounded<T>(
    timeout: Duration,
    f: impl Future<Output = redis::RedisResult<T>>,
) -> redis::RedisResult<T> {
    tokio::time::timeout(timeout, f).await.unwrap_or_else(|_| Err(no_answer(timeout)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ValkeyConfig;

    #[test]
    fn option_defaults_are_the_config_defaults() {
        let config = ValkeyConfig::default();
        assert_eq!(WriteOptions::default(), config.write_options());
        assert_eq!(PollOptions::default(), config.poll_options());
    }
}
