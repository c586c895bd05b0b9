//! The options a connection carries for writes and polling, with their
//! defaults: below the client, so the configuration builds them without
//! depending on the connection they configure.

use std::time::Duration;

use super::defaults;

/// How writes behave (settings `WriteAttempts`, `WriteRetryDelay`,
/// `ChangeStreamMaxLength`, `OpHistoryLength`, `TombstoneRetention`,
/// `WriteReplicas`, `WriteReplicaTimeout`, `WriteWaitAof`, `WriterHeartbeat`,
/// `WriterLifetime`, `BackfillRate`; defaults from
/// [`crate::config::defaults`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOptions {
    /// Attempts of a write whose outcome is unknown after a connection error (default 4).
    pub attempts: u32,
    /// Pause before the write is checked and repeated (default 100 ms).
    pub retry_delay: Duration,
    /// Approximate length of the change streams (default 5000).
    pub change_stream_max_len: u64,
    /// How many operation ids a document keeps for exactly-once retries
    /// (default 8, 1 to 64): a write is recognised while fewer than this
    /// many later writes reached its document. The configuration refuses
    /// other values; one set here is taken to the nearest bound.
    pub op_history: u32,
    /// How long a deleted document's tombstone is kept (default 10 min,
    /// at least 1 s): within it, a retried delete and a retried write of
    /// the deleted document are recognised. The configuration refuses
    /// shorter values; one set here is raised to 1 s.
    pub tombstone_retention: Duration,
    /// What every single-document write of a store waits for after it is
    /// applied (default: nothing); a call's `.durability(..)` overrides it.
    pub durability: Durability,
    /// How often a store that writes renews its entry in the registry of
    /// live writers of its kind (default 5 s, 100 ms to 30 min; a value
    /// out of bounds is taken to the nearest bound).
    pub writer_heartbeat: Duration,
    /// How long such an entry lasts after its last renewal (default 30 s,
    /// at least twice `writer_heartbeat`, at most 1 h; a value out of
    /// bounds is taken to the nearest bound, so a live writer's entry
    /// never lapses between two renewals).
    pub writer_lifetime: Duration,
    /// The most documents an index backfill repairs a second (default
    /// 1000, 1 to 1 000 000; taken to the nearest bound).
    pub backfill_rate: u32,
}

impl WriteOptions {
    /// These options with every value taken to its nearest bound, as the
    /// fields' docs say (the configuration refuses values out of bounds;
    /// options built in code are not checked there): `op_history` 1 to
    /// 64, `tombstone_retention` at least 1 s, `writer_heartbeat` 100 ms
    /// to half of 1 h, `writer_lifetime` twice the heartbeat to 1 h,
    /// `backfill_rate` 1 to 1 000 000, `change_stream_max_len` and
    /// `attempts` at least 1. A writer lifetime below twice the heartbeat
    /// would let a live writer's entry lapse between two renewals, and the
    /// guards that wait for older writers would not see it.
    pub(crate) fn within_bounds(mut self) -> Self {
        self.op_history = self.op_history.clamp(1, defaults::MAX_OP_HISTORY_LENGTH);
        self.tombstone_retention = self.tombstone_retention.max(Duration::from_secs(1));
        self.writer_heartbeat =
            self.writer_heartbeat.clamp(defaults::MIN_WRITER_HEARTBEAT, defaults::MAX_WRITER_LIFETIME / 2);
        self.writer_lifetime =
            self.writer_lifetime.clamp(self.writer_heartbeat.saturating_mul(2), defaults::MAX_WRITER_LIFETIME);
        self.backfill_rate = self.backfill_rate.clamp(1, defaults::MAX_BACKFILL_RATE);
        self.change_stream_max_len = self.change_stream_max_len.max(1);
        self.attempts = self.attempts.max(1);
        self
    }
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            attempts: defaults::WRITE_ATTEMPTS,
            retry_delay: defaults::WRITE_RETRY_DELAY,
            change_stream_max_len: defaults::CHANGE_STREAM_MAX_LENGTH,
            op_history: defaults::OP_HISTORY_LENGTH,
            tombstone_retention: defaults::TOMBSTONE_RETENTION,
            durability: Durability::NONE,
            writer_heartbeat: defaults::WRITER_HEARTBEAT,
            writer_lifetime: defaults::WRITER_LIFETIME,
            backfill_rate: defaults::BACKFILL_RATE,
        }
    }
}

/// What a write waits for once the server applied it: copies on replicas
/// (`WAIT`), or with [`Durability::aof`] the write in the append-only file
/// of the primary and of replicas (`WAITAOF`).
///
/// A primary acknowledges a write before any replica has it; a failover
/// in between promotes a replica without it, and the write is gone. A
/// write that waited for `n` replicas survives the failure of the primary
/// as long as the promoted replica is one of them. With fewer than every
/// replica nothing assures that, and a deposed primary's other replicas
/// may answer the wait (see [`Durability::every_replica`], the level that
/// survives every Sentinel and cluster failover). Fewer acknowledgements within
/// the timeout is [`crate::Error::NotReplicated`]: the write *was*
/// applied, at the version the error carries, but a failover may lose it.
///
/// ```
/// use std::time::Duration;
/// use microdcs_valkey::config::Durability;
/// let d = Durability::replicas(1).with_timeout(Duration::from_millis(500));
/// assert_eq!(d.replicas, 1);
/// assert!(!Durability::NONE.waits());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Durability {
    /// Replicas that must acknowledge the write (0: none).
    pub replicas: u32,
    /// Wait for the append-only file (`WAITAOF`) instead of the replicas'
    /// memory: the primary's own file (its `appendonly` must be `yes`,
    /// else the wait is refused and reported as
    /// [`crate::Error::NotReplicated`]) and `replicas` replicas' files.
    pub aof: bool,
    /// The longest wait (default 1 s; between 1 ms and
    /// [`Durability::MAX_TIMEOUT`]). The call as a whole then waits at most
    /// `ResponseTimeout` plus this per attempt.
    pub timeout: Duration,
    /// Wait for every replica the Sentinels know for the service, or on a
    /// cluster every replica of the shard, down ones included (and at
    /// least `replicas`): see [`Durability::every_replica`].
    pub every_replica: bool,
}

impl Durability {
    /// No wait: the write returns when the primary applied it.
    pub const NONE: Durability =
        Durability { replicas: 0, aof: false, timeout: defaults::WRITE_REPLICA_TIMEOUT, every_replica: false };

    /// The longest [`Durability::timeout`]: a write should not wait on
    /// replicas for longer than a failover takes to notice they are gone.
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(60);

    /// Wait for `n` replicas, at most the default timeout (1 s).
    pub fn replicas(n: u32) -> Self {
        Durability { replicas: n, ..Durability::NONE }
    }

    /// Wait for every replica, at most the default timeout (1 s): the
    /// level an acknowledged write survives every kind of failover with.
    /// Through Sentinel as many as the Sentinels know for the service; on
    /// a Valkey Cluster as many as the shard serving the write's slot has
    /// (every node of it but the primary, `CLUSTER SHARDS`, learnt at the
    /// first such write within `ResponseTimeout` and asked again in the
    /// background when older than 5 s); failed ones included either way,
    /// and the most seen since the handle started. On a handle to one
    /// server (with or without replicas, not through Sentinel) the write is
    /// refused with [`crate::Error::InvalidArgument`] before anything is
    /// written: nothing there counts replicas a promotion does not shrink.
    ///
    /// Why every replica and not some: after a requested failover
    /// (`SENTINEL FAILOVER`) the old primary keeps taking writes until the
    /// Sentinels turn it into a replica, and it keeps its other replicas
    /// for a moment after the promoted one left; a `WAIT` for fewer than
    /// all of them is answered by those, and the writes are dropped when
    /// they all resync from the new primary. Once one replica was promoted
    /// away the old primary can never gather all of them again, so it can
    /// confirm nothing. The cost: while any replica is down (or not yet
    /// forgotten by the Sentinels, or by the cluster with `CLUSTER
    /// FORGET`, after it was removed), every write that
    /// waits this way is applied and answered with
    /// [`crate::Error::NotReplicated`] after the timeout.
    pub fn every_replica() -> Self {
        Durability { every_replica: true, ..Durability::NONE }
    }

    /// The same with another timeout.
    #[must_use]
    pub fn with_timeout(self, timeout: Duration) -> Self {
        Durability { timeout, ..self }
    }

    /// The same, waiting for the append-only files (`WAITAOF`).
    #[must_use]
    pub fn with_aof(self) -> Self {
        Durability { aof: true, ..self }
    }

    /// Whether a write waits at all.
    pub fn waits(&self) -> bool {
        self.replicas > 0 || self.aof || self.every_replica
    }

    /// The wait's timeout as the server takes it: whole milliseconds,
    /// at least 1 (0 would wait forever), at most [`Durability::MAX_TIMEOUT`].
    pub(crate) fn timeout_ms(&self) -> u64 {
        let t = self.timeout.min(Self::MAX_TIMEOUT);
        u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1)
    }

    /// The wait's bound as a duration (see [`Durability::timeout_ms`]).
    pub(crate) fn bound(&self) -> Duration {
        Duration::from_millis(self.timeout_ms())
    }
}

impl Default for Durability {
    fn default() -> Self {
        Durability::NONE
    }
}

/// How the poller reads (settings `PollInterval`, `ScopeRefreshInterval`,
/// `ConsumerScopesAtOnce`, `ConsumerLagLimit`; defaults from
/// [`crate::config::defaults`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollOptions {
    /// Fallback read of all streams when no nudge arrives (default 1 s).
    pub poll_interval: Duration,
    /// Read of the scope registry (default 5 s).
    pub scope_refresh_interval: Duration,
    /// How many scopes of one consumer are drained at once (default 8):
    /// each scope has its own worker, and this bounds the calls into one
    /// consumer when many scopes have entries at the same time.
    pub scopes_at_once: u32,
    /// Undelivered entries of one consumer in one scope from which the
    /// poller's health is unhealthy (default half of the default
    /// `ChangeStreamMaxLength`).
    pub lag_limit: u64,
}

impl Default for PollOptions {
    fn default() -> Self {
        PollOptions {
            poll_interval: defaults::POLL_INTERVAL,
            scope_refresh_interval: defaults::SCOPE_REFRESH_INTERVAL,
            scopes_at_once: defaults::CONSUMER_SCOPES_AT_ONCE,
            lag_limit: defaults::consumer_lag_limit(defaults::CHANGE_STREAM_MAX_LENGTH),
        }
    }
}
