//! Every setting's default (documented on the module in `config`).

use std::time::Duration;

/// `ConnectionString`.
pub const CONNECTION_STRING: &str = "localhost:6379";
/// `KeyPrefix`.
pub const KEY_PREFIX: &str = "microdcs";
/// `PollInterval`.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// `ScopeRefreshInterval`.
pub const SCOPE_REFRESH_INTERVAL: Duration = Duration::from_secs(5);
/// `WriteAttempts`.
pub const WRITE_ATTEMPTS: u32 = 4;
/// `WriteRetryDelay`.
pub const WRITE_RETRY_DELAY: Duration = Duration::from_millis(100);
/// `ChangeStreamMaxLength`.
pub const CHANGE_STREAM_MAX_LENGTH: u64 = 5000;
/// `ConsumerScopesAtOnce`: scopes of one consumer drained at once.
pub const CONSUMER_SCOPES_AT_ONCE: u32 = 8;
/// The largest `ConsumerScopesAtOnce` (not a default: the bound the
/// setting is checked against); every scope in flight is a drain and its
/// reads on the shared connections.
pub const MAX_CONSUMER_SCOPES_AT_ONCE: u32 = 1024;
/// `ConsumerLagLimit` when unset: half of `ChangeStreamMaxLength` (at
/// least 1), so a burst of that size again would trim unread entries.
#[must_use]
pub const fn consumer_lag_limit(change_stream_max_length: u64) -> u64 {
    let half = change_stream_max_length / 2;
    if half == 0 { 1 } else { half }
}
/// `OpHistoryLength`: operation ids kept per document.
pub const OP_HISTORY_LENGTH: u32 = 8;
/// The largest `OpHistoryLength` (not a default: the bound the setting
/// is checked against).
pub const MAX_OP_HISTORY_LENGTH: u32 = microdcs_schema::lua::MAX_OP_HISTORY_ENTRIES as u32;
/// `TombstoneRetention`: how long a deleted document's tombstone is kept.
pub const TOMBSTONE_RETENTION: Duration = Duration::from_secs(600);
/// The shortest `TombstoneRetention` (not a default: the bound the
/// setting is checked against); shorter would not outlast the default
/// retries of one call.
pub const MIN_TOMBSTONE_RETENTION: Duration = Duration::from_secs(1);
/// `WriterHeartbeat`: how often a store that writes renews its entry in
/// the registry of live writers of its kind.
pub const WRITER_HEARTBEAT: Duration = Duration::from_secs(5);
/// `WriterLifetime`: how long a writer's entry lasts after its last
/// heartbeat; a writer silent this long no longer counts as live.
pub const WRITER_LIFETIME: Duration = Duration::from_secs(30);
/// The shortest `WriterHeartbeat` (a bound, not a default).
pub const MIN_WRITER_HEARTBEAT: Duration = Duration::from_millis(100);
/// The longest `WriterHeartbeat` and `WriterLifetime` (a bound, not a
/// default): a backfill waits out a lifetime before it calls an index ready.
pub const MAX_WRITER_LIFETIME: Duration = Duration::from_secs(3600);
/// `BackfillRate`: the most documents an index backfill repairs a second.
pub const BACKFILL_RATE: u32 = 1000;
/// The largest `BackfillRate` (a bound, not a default).
pub const MAX_BACKFILL_RATE: u32 = 1_000_000;
/// `WriteReplicas`: replicas a write waits for (none).
pub const WRITE_REPLICAS: u32 = 0;
/// `WriteReplicaTimeout`: the longest wait for them.
pub const WRITE_REPLICA_TIMEOUT: Duration = Duration::from_secs(1);
/// `ConnectTimeout`: how long start may wait for the server.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// `ResponseTimeout`: a reply slower than this is an unknown outcome.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
/// `MicroDcs:DedupeLease`.
pub const DEDUPE_LEASE: Duration = Duration::from_secs(30);
/// `MicroDcs:DedupeRetention`.
pub const DEDUPE_RETENTION: Duration = Duration::from_secs(24 * 3600);
/// The longest duration any setting may hold: 100 years (36500 days).
/// Nothing here needs to wait longer, and the bound keeps every later
/// sum (`now + timeout`, milliseconds for the server) far from
/// overflowing.
pub const MAX_DURATION: Duration = microdcs_schema::duration::MAX_DURATION;
/// Reconnect attempts of the connection manager after a lost connection
/// (not a setting).
pub const RECONNECT_RETRIES: usize = 6;
/// Shortest pause between reconnect attempts (not a setting).
pub const RECONNECT_MIN_DELAY: Duration = Duration::from_millis(50);
/// Longest pause between reconnect attempts (not a setting).
pub const RECONNECT_MAX_DELAY: Duration = Duration::from_secs(5);
