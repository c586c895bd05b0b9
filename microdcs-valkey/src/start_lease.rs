//! The post-start lease: one instance runs post-start work per
//! configuration. A trait with an in-memory implementation (one process,
//! tests) and the Valkey one that replaces it when configured.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use microdcs_schema::{KeyPrefix, KeyTemplate};

use crate::client::{Valkey, millis as ms};
use crate::error::{Error, Result};
use crate::family::FamilyKey;
use crate::limits::{check_lifetime, expiry};
use crate::retry::LuaScript;

/// The post-start lease: one instance runs post-start work per configuration.
pub trait StartLease: Send + Sync {
    /// Takes the lease for `lifetime` if nobody holds it; `true` when taken.
    ///
    /// A lifetime outside 1 ms..30 days is [`Error::InvalidArgument`], an
    /// empty or over-long `config_id` [`Error::Key`]; nothing is taken.
    fn acquire(&self, config_id: &str, lifetime: Duration) -> impl Future<Output = Result<bool>> + Send;
}

/// `SET NX PX`, telling a held lease from a wrong-type or never-expiring key.
const START: &str = include_str!("start_lease/start.lua");

/// [`StartLease`] on Valkey: `SET NX PX` on `lock:poststart:{config_id}`
/// ([`builtin::START_LOCK`](microdcs_schema::builtin::START_LOCK)), or your
/// own with [`ValkeyStartLease::with_family`].
#[derive(Debug, Clone)]
pub struct ValkeyStartLease {
    valkey: Valkey,
    family: FamilyKey,
    start: LuaScript,
}

impl ValkeyStartLease {
    /// The start lease on the built-in family.
    pub fn new(valkey: Valkey) -> Self {
        ValkeyStartLease {
            valkey,
            family: FamilyKey::builtin(microdcs_schema::builtin::START_LOCK),
            start: LuaScript::new(START),
        }
    }

    /// Keeps start leases in `family` instead: a string family whose only
    /// placeholder is the configuration id.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] when the family has another shape.
    pub fn with_family(mut self, family: microdcs_schema::FamilySpec<'static>) -> Result<Self> {
        let only = KeyTemplate::parse(family.key).ok().and_then(|t| t.placeholders().next().map(str::to_owned));
        let only = only.unwrap_or_default();
        self.family = FamilyKey::checked("start lease", family, microdcs_schema::KeyType::String, &[only.as_str()])?;
        Ok(self)
    }
}

impl StartLease for ValkeyStartLease {
    async fn acquire(&self, config_id: &str, lifetime: Duration) -> Result<bool> {
        check_lifetime("start lease lifetime", lifetime)?;
        let key = self.family.render(self.valkey.prefix(), &[config_id])?;
        let px = ms(lifetime).to_string();
        let call = self.start.call().key(&key).arg(px.as_bytes());
        let reply = crate::retry::once(&self.valkey, async |mut con| call.run(&mut con).await)
            .await
            .map_err(|e| Error::from_redis(e, &key))?;
        match crate::retry::reply::<i64>(reply).map_err(|e| Error::from_redis(e, &key))? {
            1 => Ok(true),
            0 => Ok(false),
            _ => {
                Err(Error::Corrupt { key, reason: "a start lease without an expiry would be held forever".to_owned() })
            }
        }
    }
}

/// [`StartLease`] in memory. Checks config ids as the built-in start lease
/// family does, so code tested against it fails the same way on Valkey.
#[derive(Debug, Default)]
pub struct MemoryStartLease {
    held: Mutex<HashMap<String, Instant>>,
}

impl StartLease for MemoryStartLease {
    async fn acquire(&self, config_id: &str, lifetime: Duration) -> Result<bool> {
        check_lifetime("start lease lifetime", lifetime)?;
        // Rendered only for its checks of the id (empty, over-long).
        FamilyKey::builtin(microdcs_schema::builtin::START_LOCK).render(&KeyPrefix::default(), &[config_id])?;
        let mut map = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        match map.get(config_id) {
            Some(until) if *until > now => Ok(false),
            _ => {
                map.insert(config_id.to_owned(), expiry(now, "start lease lifetime", lifetime)?);
                Ok(true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_memory_twin_refuses_lifetimes_that_overflow_the_clock() {
        for bad in [Duration::MAX, Duration::ZERO] {
            let s = MemoryStartLease::default();
            assert!(matches!(s.acquire("c", bad).await, Err(Error::InvalidArgument(_))));
        }
        let s = MemoryStartLease::default();
        assert!(matches!(s.acquire("", Duration::from_secs(1)).await, Err(Error::Key(_))));
    }
}
