//! Bounds shared by the settings, the leases and the coordination
//! services: a leaf, so the configuration can check a value against a
//! bound without reaching into the module that enforces it.

use std::time::Duration;

/// The longest lease accepted (a bound so `PEXPIRE` cannot fail after the
/// fencing counter moved): 30 days.
pub(crate) const MAX_LEASE_TTL: Duration = Duration::from_secs(30 * 24 * 3600);
