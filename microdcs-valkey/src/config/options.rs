//! The options a connection carries for writes and polling, with their
//! defaults: below the client, so the configuration builds them without
//! depending on the connection they configure.

use std::time::Duration;

use super::defaults;

/// How writes behave (settings `WriteAttempts`, `WriteRetryDelay`,
/// `ChangeStreamMaxLength`, `OpHistoryLength`, `TombstoneRetention`; defaults from
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
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            attempts: defaults::WRITE_ATTEMPTS,
            retry_delay: defaults::WRITE_RETRY_DELAY,
            change_stream_max_len: defaults::CHANGE_STREAM_MAX_LENGTH,
            op_history: defaults::OP_HISTORY_LENGTH,
            tombstone_retention: defaults::TOMBSTONE_RETENTION,
        }
    }
}

/// How the poller reads (settings `PollInterval`, `ScopeRefreshInterval`;
/// defaults from [`crate::config::defaults`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollOptions {
    /// Fallback read of all streams when no nudge arrives (default 1 s).
    pub poll_interval: Duration,
    /// Read of the scope registry (default 5 s).
    pub scope_refresh_interval: Duration,
}

impl Default for PollOptions {
    fn default() -> Self {
        PollOptions { poll_interval: defaults::POLL_INTERVAL, scope_refresh_interval: defaults::SCOPE_REFRESH_INTERVAL }
    }
}
