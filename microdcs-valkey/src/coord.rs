//! Dedupe claims of CloudEvents and the post-start lease, behind traits with
//! an in-memory implementation (one process, tests) and the Valkey one that
//! replaces it when configured, so several instances share them.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::retry::LuaScript;
use sha2::{Digest, Sha256};

use crate::client::{Valkey, millis as ms};
use crate::error::Result;
use crate::family::FamilyKey;
use microdcs_schema::KeyTemplate;

/// The outcome of a dedupe claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The event is ours to process (new, or already claimed with our token).
    Claimed,
    /// The event was processed already.
    Done,
    /// Another holder is processing it.
    Busy,
}

/// Dedupe of CloudEvents by (`source`, `id`).
pub trait DedupeStore: Send + Sync {
    /// Claims the event for `token` for the lease time.
    fn claim(&self, source: &str, id: &str, token: &str) -> impl Future<Output = Result<Claim>> + Send;
    /// Marks the event done; `done` is kept for the retention time.
    fn mark_done(&self, source: &str, id: &str) -> impl Future<Output = Result<()>> + Send;
    /// The time left on whatever the key holds (a claim or `done`), floored
    /// at zero (a missing or expired key has no time left).
    fn lease_remaining(&self, source: &str, id: &str) -> impl Future<Output = Result<Duration>> + Send;
}

/// The post-start lease: one instance runs post-start work per configuration.
pub trait StartLease: Send + Sync {
    /// Takes the lease for `lifetime` if nobody holds it; `true` when taken.
    fn acquire(&self, config_id: &str, lifetime: Duration) -> impl Future<Output = Result<bool>> + Send;
}

/// The dedupe key value: the first 16 bytes of SHA-256 of `source:id`, as
/// hex, so the key has one short, safe shape whatever the source and id.
pub fn dedupe_hash(source: &str, id: &str) -> String {
    let d = Sha256::digest(format!("{source}:{id}").as_bytes());
    d.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

const PROCESSING: &str = "processing:";
const DONE: &str = "done";

fn decide(held: &str, token: &str) -> Claim {
    if held == DONE {
        Claim::Done
    } else if held.strip_prefix(PROCESSING) == Some(token) {
        Claim::Claimed
    } else {
        Claim::Busy
    }
}

/// Claim in one round trip: `SET NX PX`, else read what is held. The
/// Python version needed three tries of `SET NX` then `GET` because the key
/// could expire between the two; in a script it cannot.
const CLAIM: &str = include_str!("coord/claim.lua");

/// [`DedupeStore`] on Valkey: key family `ce:dedupe:{hash}`
/// ([`builtin::DEDUPE`](microdcs_schema::builtin::DEDUPE)), or your own with
/// [`ValkeyDedupe::with_family`].
#[derive(Debug, Clone)]
pub struct ValkeyDedupe {
    valkey: Valkey,
    family: FamilyKey,
    lease: Duration,
    retention: Duration,
    claim: LuaScript,
}

impl ValkeyDedupe {
    /// Dedupe with `lease` (`MicroDcs:DedupeLease`) and `retention` (`MicroDcs:DedupeRetention`).
    pub fn new(valkey: Valkey, lease: Duration, retention: Duration) -> Self {
        let family = FamilyKey::builtin(microdcs_schema::builtin::DEDUPE);
        ValkeyDedupe { valkey, family, lease, retention, claim: LuaScript::new(CLAIM) }
    }

    /// Keeps claims in `family` instead: a string family whose only
    /// placeholder is `{hash}`.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] when the family has another shape.
    pub fn with_family(mut self, family: microdcs_schema::FamilySpec<'static>) -> Result<Self> {
        self.family = FamilyKey::checked("dedupe", family, microdcs_schema::KeyType::String, &["hash"])?;
        Ok(self)
    }

    /// The key of an event.
    ///
    /// # Errors
    /// Never for a family checked at construction (the hash is always a valid value).
    pub fn key(&self, source: &str, id: &str) -> Result<String> {
        self.family.render(self.valkey.prefix(), &[&dedupe_hash(source, id)])
    }
}

impl DedupeStore for ValkeyDedupe {
    async fn claim(&self, source: &str, id: &str, token: &str) -> Result<Claim> {
        let key = self.key(source, id)?;
        let mut con = self.valkey.connection();
        let value = format!("{PROCESSING}{token}");
        let lease = ms(self.lease).to_string();
        let call = self.claim.call().key(&key).arg(value.as_bytes()).arg(lease.as_bytes());
        let held: Option<String> = crate::retry::reply(call.run(&mut con).await?)?;
        // Nothing held can only mean it expired this very moment: claim again once.
        match held {
            Some(h) => Ok(decide(&h, token)),
            None => {
                let held: Option<String> = crate::retry::reply(call.run(&mut con).await?)?;
                Ok(held.map_or(Claim::Busy, |h| decide(&h, token)))
            }
        }
    }

    async fn mark_done(&self, source: &str, id: &str) -> Result<()> {
        let key = self.key(source, id)?;
        let mut con = self.valkey.connection();
        let _: () =
            redis::cmd("SET").arg(&key).arg(DONE).arg("PX").arg(ms(self.retention)).query_async(&mut con).await?;
        Ok(())
    }

    async fn lease_remaining(&self, source: &str, id: &str) -> Result<Duration> {
        let key = self.key(source, id)?;
        let mut con = self.valkey.connection();
        let pttl: i64 = redis::cmd("PTTL").arg(&key).query_async(&mut con).await?;
        Ok(Duration::from_millis(u64::try_from(pttl).unwrap_or(0)))
    }
}

/// [`StartLease`] on Valkey: `SET NX PX` on `lock:poststart:{config_id}`
/// ([`builtin::START_LOCK`](microdcs_schema::builtin::START_LOCK)), or your
/// own with [`ValkeyStartLease::with_family`].
#[derive(Debug, Clone)]
pub struct ValkeyStartLease {
    valkey: Valkey,
    family: FamilyKey,
}

impl ValkeyStartLease {
    /// The start lease on the built-in family.
    pub fn new(valkey: Valkey) -> Self {
        ValkeyStartLease { valkey, family: FamilyKey::builtin(microdcs_schema::builtin::START_LOCK) }
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
        let key = self.family.render(self.valkey.prefix(), &[config_id])?;
        let mut con = self.valkey.connection();
        let set: Option<String> =
            redis::cmd("SET").arg(&key).arg("1").arg("NX").arg("PX").arg(ms(lifetime)).query_async(&mut con).await?;
        Ok(set.is_some())
    }
}

/// An entry with an expiry, for the in-memory implementations.
#[derive(Debug, Clone)]
struct Entry {
    value: String,
    expires: Instant,
}

/// [`DedupeStore`] in memory, for a single process and tests.
#[derive(Debug)]
pub struct MemoryDedupe {
    entries: Mutex<HashMap<String, Entry>>,
    lease: Duration,
    retention: Duration,
}

impl MemoryDedupe {
    /// In-memory dedupe with these times.
    pub fn new(lease: Duration, retention: Duration) -> Self {
        MemoryDedupe { entries: Mutex::new(HashMap::new()), lease, retention }
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, Entry>, Instant) -> T) -> T {
        let mut map = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        map.retain(|_, e| e.expires > now);
        f(&mut map, now)
    }
}

impl DedupeStore for MemoryDedupe {
    async fn claim(&self, source: &str, id: &str, token: &str) -> Result<Claim> {
        let key = dedupe_hash(source, id);
        Ok(self.with(|map, now| match map.get(&key) {
            Some(e) => decide(&e.value, token),
            None => {
                map.insert(key, Entry { value: format!("{PROCESSING}{token}"), expires: now + self.lease });
                Claim::Claimed
            }
        }))
    }

    async fn mark_done(&self, source: &str, id: &str) -> Result<()> {
        let key = dedupe_hash(source, id);
        self.with(|map, now| map.insert(key, Entry { value: DONE.into(), expires: now + self.retention }));
        Ok(())
    }

    async fn lease_remaining(&self, source: &str, id: &str) -> Result<Duration> {
        let key = dedupe_hash(source, id);
        Ok(self.with(|map, now| map.get(&key).map_or(Duration::ZERO, |e| e.expires.saturating_duration_since(now))))
    }
}

/// [`StartLease`] in memory.
#[derive(Debug, Default)]
pub struct MemoryStartLease {
    held: Mutex<HashMap<String, Instant>>,
}

impl StartLease for MemoryStartLease {
    async fn acquire(&self, config_id: &str, lifetime: Duration) -> Result<bool> {
        let mut map = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        match map.get(config_id) {
            Some(until) if *until > now => Ok(false),
            _ => {
                map.insert(config_id.to_owned(), now + lifetime);
                Ok(true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_sha256_prefix() {
        // The key value is the first 16 bytes of SHA-256("source:id") in hex.
        let h = dedupe_hash("src", "1");
        assert_eq!(h.len(), 32);
        let full: String = Sha256::digest(b"src:1").iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(h, full[..32]);
    }

    #[test]
    fn decisions() {
        assert_eq!(decide("done", "t"), Claim::Done);
        assert_eq!(decide("processing:t", "t"), Claim::Claimed);
        assert_eq!(decide("processing:u", "t"), Claim::Busy);
    }
}
