// Over 600 lines because of its module page: the settings table (one row per
// setting, checked against `MicroDcsConfig::SETTINGS` by a doctest) is the
// one home of the settings' documentation; the code itself is about 400 lines.
//! Settings of section `MicroDcs`: the connection, key prefix, timeouts,
//! retries, durability and poller bounds, with their defaults and checks.
//!
//! [`MicroDcsConfig`] holds the whole section: [`ValkeyConfig`] (section
//! `MicroDcs:Valkey`, what [`Valkey::connect`](crate::Valkey::connect)
//! takes) and the two dedupe lifetimes. Every field is public and has its
//! default in [`defaults`]; [`ValkeyConfig::validate`] checks them all and
//! returns every problem at once as a [`ConfigError`] ([`ConfigProblem`]s
//! named by setting, never holding a secret). From the settings come the
//! [`WriteOptions`] (with their [`Durability`]) and [`PollOptions`] a
//! connection carries. [`parse_connection_string`] reads the connection
//! string into an [`Endpoint`]; [`Secret`] keeps the connection string out
//! of `Debug`, `Display`, logs and error texts.
//!
//! With the `config` feature (on by default) the section is read from
//! environment variables (`MicroDcsConfig::from_env`), from any
//! `(name, value)` pairs (`from_vars`), one setting at a time (`set`), or
//! from any self-describing serde format (`Deserialize`, the `MicroDcs`
//! section of a file, fields named as in the table: `Valkey.KeyPrefix`).
//! All of them take the defaults for what is missing and run the same
//! parsing and checks; an unknown name is refused with the closest known
//! one (``did you mean `Valkey:PollInterval`?``).
//!
//! ```
//! # #[cfg(feature = "config")] {
//! use std::time::Duration;
//! use microdcs_valkey::MicroDcsConfig;
//!
//! let config = MicroDcsConfig::from_vars([
//!     ("APP_MicroDcs__Valkey__KeyPrefix", "{island-7}"),
//!     ("APP_MicroDcs__Valkey__ResponseTimeout", "250ms"),
//!     ("APP_MicroDcs__DedupeLease", "00:01:00"), // a .NET TimeSpan
//! ])?;
//! assert_eq!(config.valkey.response_timeout, Duration::from_millis(250));
//! assert_eq!(config.valkey.write_attempts, 4); // the default
//!
//! // Every problem at once, by setting name.
//! let err = MicroDcsConfig::from_vars([
//!     ("APP_MicroDcs__Valkey__PolInterval", "1s"),
//!     ("APP_MicroDcs__Valkey__WriteAttempts", "0"),
//! ])
//! .unwrap_err();
//! assert_eq!(err.problems[0].setting, "MicroDcs:Valkey:PolInterval");
//! assert_eq!(err.problems[1].setting, "MicroDcs:Valkey:WriteAttempts");
//! # // The settings table below has a row for every setting `set` takes.
//! # let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/config/mod.rs")).unwrap();
//! # for name in MicroDcsConfig::SETTINGS {
//! #     assert!(page.contains(&format!("//! | `{name}` |")), "no row for `{name}` in the settings table");
//! # }
//! # }
//! # Ok::<(), microdcs_valkey::config::ConfigError>(())
//! ```
//!
//! # Settings
//!
//! Names are below `MicroDcs` and compared without regard to case. In the
//! environment a name is `APP_MicroDcs__` followed by the name with `__` for
//! each `:` (`Valkey:ResponseTimeout` is
//! `APP_MicroDcs__Valkey__ResponseTimeout`); in a serde file it is the
//! nested field (`Valkey.ResponseTimeout`). An empty value clears an
//! optional setting.
//!
//! | Setting | Field | Default | Allowed | What it sets or bounds |
//! |---|---|---|---|---|
//! | `Valkey:ConnectionString` | [`connection_string`](ValkeyConfig::connection_string) | `localhost:6379` | `host:port`; a `redis://`, `rediss://`, `valkey://` or `valkeys://` URL; or `host:port,user=u,password=p,ssl=true` (see [`parse_connection_string`]) | where to connect: several `host:port` are one cluster's nodes; with `serviceName=` they are Sentinels (feature `sentinel`); TLS needs feature `tls-native-tls`; `connectTimeout=` and `syncTimeout=` (ms) override the two timeouts below |
//! | `Valkey:User` | [`user`](ValkeyConfig::user) | none | any | ACL user; overrides the connection string's |
//! | `Valkey:PasswordFile` | [`password_file`](ValkeyConfig::password_file) | none | an existing file; not with a password in the string | the password, read before every connect attempt (rotation without restart) |
//! | `Valkey:TlsCaFile` | [`tls_ca_file`](ValkeyConfig::tls_ca_file) | none | an existing PEM file | turns TLS on, trusting this CA besides the system store |
//! | `Valkey:TlsCertFile` | [`tls_cert_file`](ValkeyConfig::tls_cert_file) | none | an existing PEM file, set with `TlsKeyFile` | mutual TLS: turns TLS on and presents this client certificate (intermediates after it); on a cluster with native-tls, one set of TLS files per process (see the guide's TLS backends) |
//! | `Valkey:TlsKeyFile` | [`tls_key_file`](ValkeyConfig::tls_key_file) | none | an existing PEM file, set with `TlsCertFile`; native-tls reads PKCS#8 keys only, rustls also PKCS#1 and SEC1 | the client certificate's key; a secret: its content never reaches logs, `Debug` or errors |
//! | `Valkey:RequireTls` | [`require_tls`](ValkeyConfig::require_tls) | `false` | boolean | refuse to start without TLS |
//! | `Valkey:KeyPrefix` | [`key_prefix`](ValkeyConfig::key_prefix) | `microdcs` | a valid [`KeyPrefix`]: no `*?[]\`, whitespace or trailing `:`; braces only as one hash tag (`{island-7}`) | the prefix of every key; on a cluster with `Placement=island`, one hash tag |
//! | `Valkey:Placement` | [`placement`](ValkeyConfig::placement) | `island` | `island`, `sharded` ([`Placement`]) | how keyspaces lie on a cluster |
//! | `Valkey:ConnectTimeout` | [`connect_timeout`](ValkeyConfig::connect_timeout) | `5s` | above 0 | connecting at start (all of [`Valkey::connect`](crate::Valkey::connect)), and each later connection: a reconnect, the poller's subscription, a query of a Sentinel |
//! | `Valkey:ResponseTimeout` | [`response_timeout`](ValkeyConfig::response_timeout) | `5s` | above 0 | every reply; a write without a reply in time is an unknown outcome |
//! | `Valkey:WriteAttempts` | [`write_attempts`](ValkeyConfig::write_attempts) | `4` | at least 1 | attempts of a write whose outcome is unknown: a write ends within `WriteAttempts x (ResponseTimeout + WriteRetryDelay)` |
//! | `Valkey:WriteRetryDelay` | [`write_retry_delay`](ValkeyConfig::write_retry_delay) | `100ms` | a duration | the pause before such a write is checked and repeated; also the longest pause of a write sent back by contention, and a read's quick retry after a lost connection |
//! | `Valkey:OpHistoryLength` | [`op_history_length`](ValkeyConfig::op_history_length) | `8` | 1 to 64 | operation ids kept per document: a repeated write is recognised while fewer later writes reached the document |
//! | `Valkey:TombstoneRetention` | [`tombstone_retention`](ValkeyConfig::tombstone_retention) | `10m` | at least `1s` | how long a deleted document's tombstone (last version, operation ids) is kept for retries across the delete |
//! | `Valkey:WriterHeartbeat` | [`writer_heartbeat`](ValkeyConfig::writer_heartbeat) | `5s` | 100 ms to 1 h | how often a store that writes renews its entry in the registry of live writers of its kind ([Evolving a type](https://github.com/microdcs/microdcs/blob/main/docs/guide/14-evolving-a-type.md)) |
//! | `Valkey:WriterLifetime` | [`writer_lifetime`](ValkeyConfig::writer_lifetime) | `30s` | at least twice `WriterHeartbeat`, at most 1 h | how long a writer's entry lasts after its last heartbeat: a stopped release counts as live that long |
//! | `Valkey:BackfillRate` | [`backfill_rate`](ValkeyConfig::backfill_rate) | `1000` | 1 to 1 000 000 | the most documents an index backfill repairs a second (`Store::backfill`) |
//! | `Valkey:WriteReplicas` | [`write_replicas`](ValkeyConfig::write_replicas), [`write_every_replica`](ValkeyConfig::write_every_replica) | `0` | a whole number, or `all` (every replica the Sentinels know, or the cluster shard has; on one server not through Sentinel every write is refused) | replicas every single-document write waits for ([`Durability`]) |
//! | `Valkey:WriteReplicaTimeout` | [`write_replica_timeout`](ValkeyConfig::write_replica_timeout) | `1s` | `1ms` to `60s` | that wait, per attempt, on top of `ResponseTimeout`; fewer replicas in time is [`Error::NotReplicated`](crate::Error::NotReplicated) |
//! | `Valkey:WriteWaitAof` | [`write_wait_aof`](ValkeyConfig::write_wait_aof) | `false` | boolean | wait for the append-only files (`WAITAOF`) instead |
//! | `Valkey:ChangeStreamMaxLength` | [`change_stream_max_length`](ValkeyConfig::change_stream_max_length) | `5000` | 1 to 2^63-1 | `MAXLEN ~` of the change streams: with a poller running, the entries not yet read by every group |
//! | `Valkey:PollInterval` | [`poll_interval`](ValkeyConfig::poll_interval) | `1s` | above 0 | the poller's fallback read of every stream (how late an entry whose nudge was lost is read), its health samples, the longest pause after a failed batch |
//! | `Valkey:ScopeRefreshInterval` | [`scope_refresh_interval`](ValkeyConfig::scope_refresh_interval) | `5s` | above 0 | the poller's read of the scope registries (how late it finds a scope whose nudge it missed) |
//! | `Valkey:ConsumerScopesAtOnce` | [`consumer_scopes_at_once`](ValkeyConfig::consumer_scopes_at_once) | `8` | 1 to 1024 | scopes of one consumer the poller drains at once |
//! | `Valkey:ConsumerLagLimit` | [`consumer_lag_limit`](ValkeyConfig::consumer_lag_limit) | half `ChangeStreamMaxLength` | 1 to `ChangeStreamMaxLength` | undelivered entries of one consumer in one scope from which the poller's health is unhealthy |
//! | `Valkey:SentinelUser` | [`sentinel_user`](ValkeyConfig::sentinel_user) | none | only with `serviceName=` | ACL user for the Sentinels (the string's credentials are the data nodes' only) |
//! | `Valkey:SentinelPasswordFile` | [`sentinel_password_file`](ValkeyConfig::sentinel_password_file) | none | an existing file; only with `serviceName=` | the Sentinels' password, read at every connection to one |
//! | `Valkey:SentinelTls` | [`sentinel_tls`](ValkeyConfig::sentinel_tls) | as the data nodes | boolean; only with `serviceName=`; not `false` with `RequireTls` | whether the Sentinels speak TLS (`TlsCaFile` is trusted for both) |
//! | `Valkey:TraceScopes` | [`trace_scopes`](ValkeyConfig::trace_scopes) | `false` | boolean | whether operation spans carry the scope and their events the key or id (tenant names stay out of traces otherwise) |
//! | `DedupeLease` | [`MicroDcsConfig::dedupe_lease`] | `30s` | `1ms` to 30 days | how long a dedupe claim holds |
//! | `DedupeRetention` | [`MicroDcsConfig::dedupe_retention`] | `1d` | `1ms` to 30 days | how long an event's `done` is kept |
//!
//! Booleans are `true`/`false`, `1`/`0` or `yes`/`no`; serde input may
//! write numbers and booleans as strings, as .NET configuration stores
//! them. Durations are `100ms`, `1s`, `2m`, `1h`, `1m30s` or a .NET
//! `TimeSpan` (`00:00:01.5`), at most 100 years
//! ([`defaults::MAX_DURATION`]), read by [`parse_duration`]. A feature a
//! setting needs that the build lacks (`serviceName=` without `sentinel`,
//! TLS without `tls-native-tls`) is a [`ConfigError`] on that setting.
//!
//! How the write settings play out (unknown outcomes, durability,
//! tombstones) is told in the guide: [Configure and
//! connect](https://github.com/microdcs/microdcs/blob/main/docs/guide/03-configuration.md),
//! [Errors and bounded
//! waits](https://github.com/microdcs/microdcs/blob/main/docs/guide/06-errors-and-bounds.md)
//! and [Replicas, failover and what a write
//! guarantees](https://github.com/microdcs/microdcs/blob/main/docs/guide/05-failover-and-durability.md).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::KeyPrefix;

mod connection_string;
mod option_names;
mod options;
mod secret;
// Loading from the environment, `Key=Value` pairs and serde: the
// `config` feature. The structs and their checks are the core's.
#[cfg(feature = "config")]
mod load;
#[cfg(feature = "config")]
mod serde_input;

pub use connection_string::{Endpoint, parse_connection_string};
pub use microdcs_schema::duration::parse_duration;
pub use options::{Durability, PollOptions, WriteOptions};
pub use secret::{Secret, redact_connection_string};

/// The default of every setting, in one place: [`ValkeyConfig::default`],
/// [`MicroDcsConfig::default`], [`WriteOptions::default`],
/// [`PollOptions::default`] and both constructors of
/// [`crate::Valkey`] (timeouts and reconnect backoff alike) take their
/// values from here, so they cannot drift apart.
pub mod defaults;

/// Why a connection asking for TLS is refused by a build without a backend.
pub(crate) const NO_TLS_BACKEND: &str =
    "TLS needs a TLS backend: enable the `tls-native-tls` or the `tls-rustls` feature of microdcs-valkey";

/// Whether this build has a TLS backend.
pub(crate) const HAS_TLS_BACKEND: bool = cfg!(any(feature = "tls-native-tls", feature = "tls-rustls"));

/// The TLS backend of this build: `"rustls"`, `"native-tls"`, or `None`.
/// With both features enabled rustls is used, as redis-rs decides.
pub const fn tls_backend() -> Option<&'static str> {
    if cfg!(feature = "tls-rustls") {
        Some("rustls")
    } else if cfg!(feature = "tls-native-tls") {
        Some("native-tls")
    } else {
        None
    }
}

/// Section `MicroDcs:Valkey`.
///
/// Deserializing goes through the same parsing and validation as
/// `MicroDcsConfig::from_env` (feature `config`; see [`MicroDcsConfig`]).
#[derive(Clone, PartialEq)]
pub struct ValkeyConfig {
    /// `host:port`, a `redis://`/`rediss://`/`valkey://`/`valkeys://` URL,
    /// or a StackExchange.Redis string (`host:port,user=u,password=p,ssl=true`).
    /// Several `host:port` endpoints (named before any option) are nodes of
    /// one Valkey Cluster; one endpoint that is a cluster node is a cluster
    /// too, and then `KeyPrefix` must be one hash tag (`{island-7}`).
    /// May contain the password; never shown. Prefer `PasswordFile`.
    pub connection_string: Secret,
    /// ACL user; overrides the user of the connection string.
    pub user: Option<String>,
    /// File holding the password, read before every connect attempt (one
    /// trailing line break removed). Not together with a password in the
    /// connection string.
    pub password_file: Option<PathBuf>,
    /// PEM file of the CA of the server certificate: turns TLS on and trusts
    /// this CA besides the system store. Must exist.
    pub tls_ca_file: Option<PathBuf>,
    /// PEM file of the client certificate (mutual TLS, a server with
    /// `tls-auth-clients yes`), with any intermediates after it: turns TLS
    /// on. Only together with `TlsKeyFile`. Must exist. On a cluster with
    /// the native-tls backend, every cluster handle of a process open at
    /// the same time uses the same `TlsCaFile`, `TlsCertFile` and
    /// `TlsKeyFile` (another set is a `ConnectError::Tls` at start).
    pub tls_cert_file: Option<PathBuf>,
    /// PEM file of the client certificate's private key. A secret: its
    /// content never reaches logs, `Debug` or errors (its path may). The
    /// native-tls backend reads PKCS#8 keys only (`BEGIN PRIVATE KEY`);
    /// rustls also PKCS#1 and SEC1. Only together with `TlsCertFile`.
    pub tls_key_file: Option<PathBuf>,
    /// Fail at start when TLS is off.
    pub require_tls: bool,
    /// Prefix of every key.
    pub key_prefix: String,
    /// Fallback read of all streams when no nudge arrives.
    pub poll_interval: Duration,
    /// Read of the scope registry.
    pub scope_refresh_interval: Duration,
    /// Attempts of a write whose outcome is unknown after a connection error.
    pub write_attempts: u32,
    /// Pause before such a write is checked and repeated.
    pub write_retry_delay: Duration,
    /// Approximate length of the change streams: with a poller running,
    /// which trims the entries every group has read, the bound on entries
    /// not yet read.
    pub change_stream_max_length: u64,
    /// How many scopes of one consumer the poller drains at once (1 to
    /// 1024): a slow consumer then holds at most this many scopes' drains.
    pub consumer_scopes_at_once: u32,
    /// Undelivered entries of one consumer in one scope from which the
    /// poller's health is unhealthy (1 to `ChangeStreamMaxLength`); unset,
    /// half of `ChangeStreamMaxLength`.
    pub consumer_lag_limit: Option<u64>,
    /// Operation ids kept per document for exactly-once retries (1 to 64).
    pub op_history_length: u32,
    /// How long a deleted document's tombstone (its last version and
    /// operation ids) is kept, so retries across the delete are recognised.
    pub tombstone_retention: Duration,
    /// How often a store that writes renews its entry in the registry of
    /// live writers of its kind (100 ms to 1 h).
    pub writer_heartbeat: Duration,
    /// How long a writer's entry lasts after its last renewal (at least
    /// twice `WriterHeartbeat`, at most 1 h).
    pub writer_lifetime: Duration,
    /// The most documents an index backfill repairs a second (1 to 1 000 000).
    pub backfill_rate: u32,
    /// Replicas every single-document write of a store waits for (0: none).
    pub write_replicas: u32,
    /// `WriteReplicas=all`: every write waits for every replica the
    /// Sentinels know for the service, or on a cluster every replica of
    /// the shard ([`Durability::every_replica`]), the level that survives
    /// every kind of failover.
    pub write_every_replica: bool,
    /// The longest such wait (1 ms to 60 s).
    pub write_replica_timeout: Duration,
    /// Wait for the append-only files (`WAITAOF`) instead.
    pub write_wait_aof: bool,
    /// ACL user for the Sentinels (with `serviceName=` in the connection
    /// string). The user and password of the connection string are the data
    /// nodes' only: a Sentinel gets credentials only when these are set.
    pub sentinel_user: Option<String>,
    /// File holding the Sentinels' password, read before every connection
    /// to one (as `PasswordFile` is for the data nodes).
    pub sentinel_password_file: Option<PathBuf>,
    /// Whether the Sentinels speak TLS; unset, they do when the data nodes
    /// do. `TlsCaFile` is trusted and `TlsCertFile` presented to both.
    pub sentinel_tls: Option<bool>,
    /// How long connecting at start may take.
    pub connect_timeout: Duration,
    /// How long a reply may take before the command counts as failed.
    pub response_timeout: Duration,
    /// Whether operation spans carry the scope (`microdcs.scope`), and the
    /// events inside them the key or id they are about. Off by default: a
    /// scope is often a tenant's or a customer's name, and keys and ids hold it.
    pub trace_scopes: bool,
    /// How the keyspaces of this handle are placed on a cluster
    /// (`Placement`): one island per tagged prefix, or sharded by scope.
    pub placement: Placement,
}

/// How keyspaces are placed on a Valkey Cluster (setting `Placement`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// `island` (the default): every key of the island shares one slot,
    /// through a prefix that is one hash tag (`{island-7}`); any keyspace
    /// runs, and islands spread over the primaries.
    #[default]
    Island,
    /// `sharded`: the keyspaces are sharded by scope (`keyspace! { K {
    /// shard: scope, ... } }`), each scope's keys in its own slot; the
    /// prefix holds no tag, so one island spreads over every primary.
    Sharded,
}

impl std::str::FromStr for Placement {
    type Err = String;

    fn from_str(v: &str) -> Result<Self, String> {
        match v.trim().to_ascii_lowercase().as_str() {
            "island" => Ok(Placement::Island),
            "sharded" => Ok(Placement::Sharded),
            _ => Err(format!("`{v}` is no placement (expected `island` or `sharded`)")),
        }
    }
}

impl Default for ValkeyConfig {
    fn default() -> Self {
        ValkeyConfig {
            connection_string: Secret::new(defaults::CONNECTION_STRING),
            user: None,
            password_file: None,
            tls_ca_file: None,
            tls_cert_file: None,
            tls_key_file: None,
            require_tls: false,
            key_prefix: defaults::KEY_PREFIX.to_owned(),
            poll_interval: defaults::POLL_INTERVAL,
            scope_refresh_interval: defaults::SCOPE_REFRESH_INTERVAL,
            write_attempts: defaults::WRITE_ATTEMPTS,
            write_retry_delay: defaults::WRITE_RETRY_DELAY,
            change_stream_max_length: defaults::CHANGE_STREAM_MAX_LENGTH,
            consumer_scopes_at_once: defaults::CONSUMER_SCOPES_AT_ONCE,
            consumer_lag_limit: None,
            op_history_length: defaults::OP_HISTORY_LENGTH,
            tombstone_retention: defaults::TOMBSTONE_RETENTION,
            writer_heartbeat: defaults::WRITER_HEARTBEAT,
            writer_lifetime: defaults::WRITER_LIFETIME,
            backfill_rate: defaults::BACKFILL_RATE,
            write_replicas: defaults::WRITE_REPLICAS,
            write_every_replica: false,
            write_replica_timeout: defaults::WRITE_REPLICA_TIMEOUT,
            write_wait_aof: false,
            sentinel_user: None,
            sentinel_password_file: None,
            sentinel_tls: None,
            connect_timeout: defaults::CONNECT_TIMEOUT,
            response_timeout: defaults::RESPONSE_TIMEOUT,
            trace_scopes: false,
            placement: Placement::Island,
        }
    }
}

impl fmt::Debug for ValkeyConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValkeyConfig")
            .field("connection_string", &redact_connection_string(self.connection_string.expose()))
            .field("user", &self.user)
            .field("password_file", &self.password_file)
            .field("tls_ca_file", &self.tls_ca_file)
            .field("tls_cert_file", &self.tls_cert_file)
            .field("tls_key_file", &self.tls_key_file)
            .field("require_tls", &self.require_tls)
            .field("trace_scopes", &self.trace_scopes)
            .field("placement", &self.placement)
            .field("key_prefix", &self.key_prefix)
            .field("poll_interval", &self.poll_interval)
            .field("scope_refresh_interval", &self.scope_refresh_interval)
            .field("write_attempts", &self.write_attempts)
            .field("write_retry_delay", &self.write_retry_delay)
            .field("change_stream_max_length", &self.change_stream_max_length)
            .field("consumer_scopes_at_once", &self.consumer_scopes_at_once)
            .field("consumer_lag_limit", &self.consumer_lag_limit)
            .field("op_history_length", &self.op_history_length)
            .field("tombstone_retention", &self.tombstone_retention)
            .field("writer_heartbeat", &self.writer_heartbeat)
            .field("writer_lifetime", &self.writer_lifetime)
            .field("backfill_rate", &self.backfill_rate)
            .field("write_replicas", &self.write_replicas)
            .field("write_every_replica", &self.write_every_replica)
            .field("write_replica_timeout", &self.write_replica_timeout)
            .field("write_wait_aof", &self.write_wait_aof)
            .field("sentinel_user", &self.sentinel_user)
            .field("sentinel_password_file", &self.sentinel_password_file)
            .field("sentinel_tls", &self.sentinel_tls)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .finish()
    }
}

impl fmt::Display for ValkeyConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "valkey {} (prefix `{}`{}{}{})",
            redact_connection_string(self.connection_string.expose()),
            self.key_prefix,
            if self.password_file.is_some() { ", password file" } else { "" },
            if self.tls_ca_file.is_some() { ", TLS with CA file" } else { "" },
            if self.tls_cert_file.is_some() { ", client certificate" } else { "" },
        )
    }
}

/// Section `MicroDcs`: the Valkey section plus the dedupe settings.
///
/// Deserializing (any self-describing serde format, fields named as in the
/// table: `Valkey`, `DedupeLease`, `Valkey.KeyPrefix`, ...) runs the same
/// parsing and validation as `MicroDcsConfig::from_env`: missing settings
/// take their defaults, numbers and booleans may also be written as strings
/// (as .NET configuration stores them), an unknown field is an error, and
/// otherwise every invalid setting is reported by name in one error whose
/// text is that of a [`ConfigError`].
#[derive(Debug, Clone, PartialEq)]
pub struct MicroDcsConfig {
    /// `MicroDcs:Valkey`.
    pub valkey: ValkeyConfig,
    /// `MicroDcs:DedupeLease`: how long a dedupe claim holds.
    pub dedupe_lease: Duration,
    /// `MicroDcs:DedupeRetention`: how long `done` is kept.
    pub dedupe_retention: Duration,
}

impl Default for MicroDcsConfig {
    fn default() -> Self {
        MicroDcsConfig {
            valkey: ValkeyConfig::default(),
            dedupe_lease: defaults::DEDUPE_LEASE,
            dedupe_retention: defaults::DEDUPE_RETENTION,
        }
    }
}

/// One invalid setting: its full name and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// Setting, e.g. `MicroDcs:Valkey:KeyPrefix`.
    pub setting: String,
    /// What is wrong (never contains a secret).
    pub problem: String,
}

/// Every problem found in a configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The problems, in setting order.
    pub problems: Vec<ConfigProblem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid configuration:")?;
        for p in &self.problems {
            write!(f, "\n  {}: {}", p.setting, p.problem)?;
        }
        Ok(())
    }
}

impl ConfigError {
    fn one(setting: &str, problem: impl Into<String>) -> Self {
        ConfigError { problems: vec![ConfigProblem { setting: setting.to_owned(), problem: problem.into() }] }
    }

    /// A problem with `ConnectionString` found while building the client.
    pub(crate) fn connection_string(problem: impl Into<String>) -> Self {
        Self::one(&setting("ConnectionString"), problem)
    }

    /// A problem with `KeyPrefix` found while connecting (the server is a
    /// cluster node).
    pub(crate) fn key_prefix(problem: impl Into<String>) -> Self {
        Self::one(&setting("KeyPrefix"), problem)
    }
}

const SECTION: &str = "MicroDcs:Valkey";

/// The problem of a duration above [`defaults::MAX_DURATION`].
const TOO_LONG: &str = "is too long; the longest accepted duration is 100 years (36500 days)";

fn setting(name: &str) -> String {
    format!("{SECTION}:{name}")
}

impl MicroDcsConfig {
    /// Checks every setting; see [`ValkeyConfig::validate`].
    ///
    /// # Errors
    /// Every problem, by setting name.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = self.valkey.validate().err().map(|e| e.problems).unwrap_or_default();
        // The dedupe stores refuse these on every call; say so at start.
        for (name, d) in [("DedupeLease", self.dedupe_lease), ("DedupeRetention", self.dedupe_retention)] {
            let problem = if d < crate::limits::MIN_LIFETIME {
                "must be at least 1ms"
            } else if d > crate::limits::MAX_LEASE_TTL {
                "must be at most 30 days"
            } else {
                continue;
            };
            problems.push(ConfigProblem { setting: format!("MicroDcs:{name}"), problem: problem.into() });
        }
        if problems.is_empty() { Ok(()) } else { Err(ConfigError { problems }) }
    }
}

/// `true`/`false`, `1`/`0`, `yes`/`no`, any case.
fn parse_bool(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(format!("`{v}` is not true or false")),
    }
}

impl ValkeyConfig {
    /// Whether a TLS file is set (`TlsCaFile`, `TlsCertFile`), which turns
    /// TLS on whatever the connection string says.
    pub(crate) fn tls_files_set(&self) -> bool {
        self.tls_ca_file.is_some() || self.tls_cert_file.is_some()
    }

    /// Checks every setting: the connection string parses, `PasswordFile` is
    /// not combined with a password in the string, `TlsCaFile` exists,
    /// `TlsCertFile` and `TlsKeyFile` are set together and exist, a TLS
    /// backend is compiled in when TLS is asked for, `RequireTls` is met, the key prefix is valid, counts and intervals are
    /// above zero.
    ///
    /// # Errors
    /// Every problem, by setting name.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        let mut bad = |name: &str, problem: String| problems.push(ConfigProblem { setting: setting(name), problem });
        match parse_connection_string(self.connection_string.expose()) {
            Ok(ep) => {
                if ep.password.is_some() && self.password_file.is_some() {
                    bad("PasswordFile", "set together with a password in ConnectionString; use one of them".into());
                }
                if self.require_tls && !ep.tls && !self.tls_files_set() {
                    bad(
                        "RequireTls",
                        "TLS is off: set TlsCaFile, or use rediss:// or ssl=true in ConnectionString".into(),
                    );
                }
                if !HAS_TLS_BACKEND {
                    let asking = [
                        ("ConnectionString", ep.tls),
                        ("TlsCaFile", self.tls_ca_file.is_some()),
                        ("TlsCertFile", self.tls_cert_file.is_some()),
                        ("TlsKeyFile", self.tls_key_file.is_some()),
                    ];
                    if let Some((name, _)) = asking.iter().find(|(_, set)| *set) {
                        bad(name, NO_TLS_BACKEND.to_owned());
                    }
                }
                if cfg!(not(feature = "sentinel")) && ep.service_name.is_some() {
                    bad(
                        "ConnectionString",
                        "serviceName= names a Sentinel service: enable the `sentinel` feature of microdcs-valkey \
                         to follow its primary"
                            .into(),
                    );
                }
                if ep.service_name.is_some() {
                    if self.require_tls && self.sentinel_tls == Some(false) {
                        bad("SentinelTls", "false, but RequireTls is set".into());
                    }
                } else {
                    // Sentinel settings without a service would be ignored
                    // without a word: a mistake worth stopping on.
                    for (name, set) in [
                        ("SentinelUser", self.sentinel_user.is_some()),
                        ("SentinelPasswordFile", self.sentinel_password_file.is_some()),
                        ("SentinelTls", self.sentinel_tls.is_some()),
                    ] {
                        if set {
                            bad(name, "set, but ConnectionString names no serviceName (no Sentinel)".into());
                        }
                    }
                }
            }
            Err(e) => bad("ConnectionString", e),
        }
        for (name, file) in
            [("TlsCaFile", &self.tls_ca_file), ("TlsCertFile", &self.tls_cert_file), ("TlsKeyFile", &self.tls_key_file)]
        {
            if let Some(f) = file
                && !f.is_file()
            {
                bad(name, format!("`{}` does not exist or is not a file", f.display()));
            }
        }
        // A certificate without its key (or the reverse) would connect
        // without one, and the server's refusal would not say why.
        match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(_), None) => {
                bad("TlsKeyFile", "not set, but TlsCertFile is: a client certificate needs its key".into())
            }
            (None, Some(_)) => {
                bad("TlsCertFile", "not set, but TlsKeyFile is: a key needs its client certificate".into())
            }
            _ => {}
        }
        if let Some(f) = &self.password_file
            && !f.is_file()
        {
            bad("PasswordFile", format!("`{}` does not exist or is not a file", f.display()));
        }
        if let Some(f) = &self.sentinel_password_file
            && !f.is_file()
        {
            bad("SentinelPasswordFile", format!("`{}` does not exist or is not a file", f.display()));
        }
        if let Err(e) = KeyPrefix::new(self.key_prefix.clone()) {
            bad("KeyPrefix", e.to_string());
        }
        for (name, d) in [
            ("PollInterval", self.poll_interval),
            ("ScopeRefreshInterval", self.scope_refresh_interval),
            ("ConnectTimeout", self.connect_timeout),
            ("ResponseTimeout", self.response_timeout),
        ] {
            if d.is_zero() {
                bad(name, "must be longer than zero".into());
            }
        }
        for (name, d) in [
            ("PollInterval", self.poll_interval),
            ("ScopeRefreshInterval", self.scope_refresh_interval),
            ("WriteRetryDelay", self.write_retry_delay),
            ("TombstoneRetention", self.tombstone_retention),
            ("ConnectTimeout", self.connect_timeout),
            ("ResponseTimeout", self.response_timeout),
        ] {
            // The fields are public, so a value set in code can be longer
            // than any text would parse to.
            if d > defaults::MAX_DURATION {
                bad(name, TOO_LONG.into());
            }
        }
        if self.write_attempts == 0 {
            bad("WriteAttempts", "must be at least 1".into());
        }
        if self.change_stream_max_length == 0 {
            bad("ChangeStreamMaxLength", "must be at least 1".into());
        }
        // The server reads `MAXLEN` as a signed 64-bit number and refuses
        // anything larger, which would fail every write with a change.
        if self.change_stream_max_length > i64::MAX as u64 {
            bad("ChangeStreamMaxLength", format!("must be at most {}", i64::MAX));
        }
        // No scope at a time would drain nothing; the upper bound keeps one
        // consumer's drains from taking over the shared connections.
        if !(1..=defaults::MAX_CONSUMER_SCOPES_AT_ONCE).contains(&self.consumer_scopes_at_once) {
            bad("ConsumerScopesAtOnce", format!("must be between 1 and {}", defaults::MAX_CONSUMER_SCOPES_AT_ONCE));
        }
        // Zero would be unhealthy always; above `ChangeStreamMaxLength` never,
        // since unread entries past that bound are trimmed (a gap) first.
        if let Some(limit) = self.consumer_lag_limit
            && (limit == 0 || limit > self.change_stream_max_length.max(1))
        {
            bad(
                "ConsumerLagLimit",
                format!("must be between 1 and ChangeStreamMaxLength ({})", self.change_stream_max_length),
            );
        }
        // Fewer than one id would recognise no retry; more than the bound
        // would let the history outweigh the document.
        if !(1..=defaults::MAX_OP_HISTORY_LENGTH).contains(&self.op_history_length) {
            bad("OpHistoryLength", format!("must be between 1 and {}", defaults::MAX_OP_HISTORY_LENGTH));
        }
        // Shorter than the retries of one call would let a retried delete
        // miss its own tombstone.
        if self.tombstone_retention < defaults::MIN_TOMBSTONE_RETENTION {
            bad("TombstoneRetention", "must be at least 1s".into());
        }
        // Zero would make the server wait forever; longer than the bound
        // would hold a write for longer than a failover needs to notice.
        if self.write_replica_timeout < crate::limits::MIN_LIFETIME
            || self.write_replica_timeout > Durability::MAX_TIMEOUT
        {
            bad("WriteReplicaTimeout", "must be between 1ms and 60s".into());
        }
        // A heartbeat too fast loads the server; a lifetime shorter than two
        // heartbeats would let a live writer's entry lapse between them,
        // and one longer than the bound holds every backfill that long.
        if !(defaults::MIN_WRITER_HEARTBEAT..=defaults::MAX_WRITER_LIFETIME).contains(&self.writer_heartbeat) {
            bad("WriterHeartbeat", "must be between 100ms and 1h".into());
        }
        if self.writer_lifetime < self.writer_heartbeat.saturating_mul(2)
            || self.writer_lifetime > defaults::MAX_WRITER_LIFETIME
        {
            bad("WriterLifetime", "must be at least twice WriterHeartbeat and at most 1h".into());
        }
        if !(1..=defaults::MAX_BACKFILL_RATE).contains(&self.backfill_rate) {
            bad("BackfillRate", format!("must be between 1 and {}", defaults::MAX_BACKFILL_RATE));
        }
        if problems.is_empty() { Ok(()) } else { Err(ConfigError { problems }) }
    }

    /// The parsed connection string.
    ///
    /// # Errors
    /// See [`parse_connection_string`].
    pub fn endpoint(&self) -> Result<Endpoint, ConfigError> {
        parse_connection_string(self.connection_string.expose())
            .map_err(|e| ConfigError::one(&setting("ConnectionString"), e))
    }

    /// The write options these settings give.
    pub fn write_options(&self) -> WriteOptions {
        WriteOptions {
            attempts: self.write_attempts,
            retry_delay: self.write_retry_delay,
            change_stream_max_len: self.change_stream_max_length,
            op_history: self.op_history_length,
            tombstone_retention: self.tombstone_retention,
            writer_heartbeat: self.writer_heartbeat,
            writer_lifetime: self.writer_lifetime,
            backfill_rate: self.backfill_rate,
            durability: Durability {
                replicas: self.write_replicas,
                aof: self.write_wait_aof,
                timeout: self.write_replica_timeout,
                every_replica: self.write_every_replica,
            },
        }
    }

    /// The poll options these settings give.
    pub(crate) fn poll_options(&self) -> PollOptions {
        PollOptions {
            poll_interval: self.poll_interval,
            scope_refresh_interval: self.scope_refresh_interval,
            scopes_at_once: self.consumer_scopes_at_once,
            lag_limit: self
                .consumer_lag_limit
                .unwrap_or_else(|| defaults::consumer_lag_limit(self.change_stream_max_length)),
        }
    }

    /// The validated key prefix.
    ///
    /// # Errors
    /// An invalid prefix.
    pub fn prefix(&self) -> Result<KeyPrefix, ConfigError> {
        KeyPrefix::new(self.key_prefix.clone()).map_err(|e| ConfigError::one(&setting("KeyPrefix"), e.to_string()))
    }
}
