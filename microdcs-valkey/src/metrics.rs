//! Counters of the runtime, under stable names (`microdcs.valkey.*`) that
//! dashboards can rely on. Each is also recorded through the `metrics`
//! facade under the same name (with the operation metrics of
//! [`crate::observe`]); [`Metrics::snapshot`] reads one handle's own.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters shared by everything made from one [`crate::Valkey`].
#[derive(Debug, Default)]
pub struct Metrics {
    write_retries: AtomicU64,
    write_already_applied: AtomicU64,
    stream_entries_lost: AtomicU64,
    stream_entries_corrupt: AtomicU64,
    sweep_damaged: AtomicU64,
    stream_gaps: AtomicU64,
}

impl Metrics {
    /// `microdcs.valkey.write.retries`: writes re-sent after an unknown outcome.
    pub const WRITE_RETRIES: &'static str = "microdcs.valkey.write.retries";
    /// `microdcs.valkey.write.already_applied`: writes found already applied.
    pub const WRITE_ALREADY_APPLIED: &'static str = "microdcs.valkey.write.already_applied";
    /// `microdcs.valkey.stream.entries_lost`: stream entries removed before
    /// their consumer group handled them: deleted while pending, or trimmed
    /// before the group read them (a gap).
    pub const STREAM_ENTRIES_LOST: &'static str = "microdcs.valkey.stream.entries_lost";
    /// `microdcs.valkey.stream.entries_corrupt`: change entries that could
    /// not be read as a change (or whose document could not be read when
    /// fetching or resyncing), passed over.
    pub const STREAM_ENTRIES_CORRUPT: &'static str = "microdcs.valkey.stream.entries_corrupt";
    /// `microdcs.valkey.sweep.damaged`: what a due or expiry sweep stepped
    /// over as damage (a document it could not judge or delete, a scope it
    /// could not sweep), each also logged as a warning.
    pub const SWEEP_DAMAGED: &'static str = "microdcs.valkey.sweep.damaged";
    /// `microdcs.valkey.stream.gaps`: gaps a consumer was told of (entries
    /// its group had not read were trimmed; see `crate::poller::StreamConsumer::gap`).
    pub const STREAM_GAPS: &'static str = "microdcs.valkey.stream.gaps";

    /// Current value of `microdcs.valkey.write.retries`.
    pub fn write_retries(&self) -> u64 {
        self.write_retries.load(Ordering::Relaxed)
    }

    /// Current value of `microdcs.valkey.write.already_applied`.
    pub fn write_already_applied(&self) -> u64 {
        self.write_already_applied.load(Ordering::Relaxed)
    }

    /// Current value of `microdcs.valkey.stream.entries_lost`.
    pub fn stream_entries_lost(&self) -> u64 {
        self.stream_entries_lost.load(Ordering::Relaxed)
    }

    /// Current value of `microdcs.valkey.stream.entries_corrupt`.
    pub fn stream_entries_corrupt(&self) -> u64 {
        self.stream_entries_corrupt.load(Ordering::Relaxed)
    }

    /// Current value of `microdcs.valkey.sweep.damaged`.
    pub fn sweep_damaged(&self) -> u64 {
        self.sweep_damaged.load(Ordering::Relaxed)
    }

    /// Current value of `microdcs.valkey.stream.gaps`.
    pub fn stream_gaps(&self) -> u64 {
        self.stream_gaps.load(Ordering::Relaxed)
    }

    /// Every counter with its name.
    pub fn snapshot(&self) -> [(&'static str, u64); 6] {
        [
            (Self::WRITE_RETRIES, self.write_retries()),
            (Self::WRITE_ALREADY_APPLIED, self.write_already_applied()),
            (Self::STREAM_ENTRIES_LOST, self.stream_entries_lost()),
            (Self::STREAM_ENTRIES_CORRUPT, self.stream_entries_corrupt()),
            (Self::SWEEP_DAMAGED, self.sweep_damaged()),
            (Self::STREAM_GAPS, self.stream_gaps()),
        ]
    }

    // Each event is counted here once: in the handle's own counter (read
    // by `snapshot`) and through the `metrics` facade, under the same name.

    pub(crate) fn add_write_retry(&self) {
        self.write_retries.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(Self::WRITE_RETRIES).increment(1);
    }

    pub(crate) fn add_already_applied(&self) {
        self.write_already_applied.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(Self::WRITE_ALREADY_APPLIED).increment(1);
    }

    #[cfg_attr(
        not(feature = "consumers"),
        allow(dead_code, reason = "counted by the consumers; the counter stays in every snapshot")
    )]
    pub(crate) fn add_entries_corrupt(&self, n: u64) {
        self.stream_entries_corrupt.fetch_add(n, Ordering::Relaxed);
        metrics::counter!(Self::STREAM_ENTRIES_CORRUPT).increment(n);
    }

    #[cfg_attr(
        not(feature = "consumers"),
        allow(dead_code, reason = "counted by the consumers; the counter stays in every snapshot")
    )]
    pub(crate) fn add_entries_lost(&self, n: u64) {
        self.stream_entries_lost.fetch_add(n, Ordering::Relaxed);
        metrics::counter!(Self::STREAM_ENTRIES_LOST).increment(n);
    }

    #[cfg_attr(
        not(feature = "consumers"),
        allow(dead_code, reason = "counted by the consumers; the counter stays in every snapshot")
    )]
    pub(crate) fn add_sweep_damaged(&self) {
        self.sweep_damaged.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(Self::SWEEP_DAMAGED).increment(1);
    }

    #[cfg_attr(
        not(feature = "consumers"),
        allow(dead_code, reason = "counted by the consumers; the counter stays in every snapshot")
    )]
    pub(crate) fn add_gap(&self) {
        self.stream_gaps.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(Self::STREAM_GAPS).increment(1);
    }
}
