//! Bounds shared by the settings, the leases and the coordination
//! services: a leaf, so the configuration can check a value against a
//! bound without reaching into the module that enforces it.

use std::time::{Duration, Instant};

#[cfg(feature = "coordination")]
use crate::error::{Error, Result};

/// The longest lease accepted (a bound so `PEXPIRE` cannot fail after the
/// fencing counter moved): 30 days.
pub(crate) const MAX_LEASE_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// The shortest lifetime any store, family or setting accepts: the server
/// holds whole milliseconds, so a shorter one could only be rounded.
pub(crate) const MIN_LIFETIME: Duration = Duration::from_millis(1);

/// The longest claim lease, retention or start lease lifetime: the bound
/// of the fencing lease store, for the same reason.
#[cfg(feature = "coordination")]
const MAX_LIFETIME: Duration = MAX_LEASE_TTL;

/// Refuses a lifetime the stores cannot keep: zero, or so long that an
/// `Instant` would overflow or the server would refuse the `PX`.
#[cfg(feature = "coordination")]
pub(crate) fn check_lifetime(what: &str, d: Duration) -> Result<()> {
    if d < MIN_LIFETIME || d > MAX_LIFETIME {
        Err(Error::InvalidArgument(format!("{what} {d:?} must be between 1 ms and 30 days")))
    } else {
        Ok(())
    }
}

/// `now + d` for a checked lifetime; never overflows after [`check_lifetime`],
/// but stays checked rather than trusting that.
#[cfg(feature = "coordination")]
pub(crate) fn expiry(now: Instant, what: &str, d: Duration) -> Result<Instant> {
    check_lifetime(what, d)?;
    now.checked_add(d).ok_or_else(|| Error::InvalidArgument(format!("{what} {d:?} is too long")))
}

/// Keeps a walk (a backfill pass, a copy, a key removal) at most
/// `per_second` items a second, counted from its start: one rule for every
/// bound set by `BackfillRate`.
pub(crate) struct Pace {
    started: Instant,
    per_second: f64,
}

impl Pace {
    pub(crate) fn new(per_second: u32) -> Self {
        Pace { started: Instant::now(), per_second: f64::from(per_second.max(1)) }
    }

    /// Waits until `done` items have taken at least `done / per_second`
    /// seconds since the start.
    pub(crate) async fn after(&self, done: u64) {
        let due = Duration::from_secs_f64(done as f64 / self.per_second);
        if let Some(wait) = due.checked_sub(self.started.elapsed()) {
            tokio::time::sleep(wait).await;
        }
    }
}
