//! Dedupe claims of CloudEvents by (`source`, `id`): a trait with an
//! in-memory implementation (one process, tests) and the Valkey one that
//! replaces it when configured, so several instances share the claims.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::client::{Valkey, millis as ms};
use crate::error::{Error, Result};
use crate::family::FamilyKey;
use crate::limits::{check_lifetime, expiry};
use crate::observe::observed;
use crate::retry::LuaScript;

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
///
/// The claim lease and the retention must each be 1 ms to 30 days, like the
/// TTL of a fencing lease: outside that, `claim` and `mark_done` fail with
/// [`Error::InvalidArgument`] and store nothing (a longer time would
/// overflow the in-memory clock or be refused by the server).
/// A stored value that is neither `done` nor a claim with an expiry is
/// [`Error::Corrupt`], a key of another type [`Error::WrongType`]; neither
/// is overwritten.
pub trait DedupeStore: Send + Sync {
    /// Claims the event for `token` for the lease time.
    fn claim(&self, source: &str, id: &str, token: &str) -> impl Future<Output = Result<Claim>> + Send;
    /// Marks the event done; `done` is kept for the retention time.
    fn mark_done(&self, source: &str, id: &str) -> impl Future<Output = Result<()>> + Send;
    /// The time left on whatever the key holds (a claim or `done`), floored
    /// at zero (a missing or expired key has no time left).
    fn lease_remaining(&self, source: &str, id: &str) -> impl Future<Output = Result<Duration>> + Send;
}

/// The dedupe key value: the first 16 bytes of SHA-256 of `source:id`, as
/// hex, so the key has one short, safe shape whatever the source and id.
pub fn dedupe_hash(source: &str, id: &str) -> String {
    let d = Sha256::digest(format!("{source}:{id}").as_bytes());
    d.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

const PROCESSING: &str = "processing:";
const DONE: &str = "done";

/// What a held value means for `token`. `pttl_ms` is the key's time left
/// (negative: no expiry). A value of no known shape, or a claim that would
/// never expire (busy for ever), is corrupt: reported, never guessed.
fn decide(key: &str, held: &str, pttl_ms: i64, token: &str) -> Result<Claim> {
    Ok(match judge(key, held, pttl_ms)? {
        None => Claim::Done,
        Some(holder) if holder == token => Claim::Claimed,
        Some(_) => Claim::Busy,
    })
}

/// What a stored dedupe value says: `done` (`None`) or a claim by the
/// holder it names; anything else, or a claim without an expiry (busy
/// forever), is damage. The one rule for claim, mark_done and the time left.
fn judge<'h>(key: &str, held: &'h str, pttl_ms: i64) -> Result<Option<&'h str>> {
    let corrupt = |reason: &str| Err(Error::Corrupt { key: key.to_owned(), reason: reason.to_owned() });
    if held == DONE {
        return Ok(None);
    }
    match held.strip_prefix(PROCESSING) {
        Some("") | None => corrupt("the dedupe value is neither `done` nor `processing:<token>`"),
        Some(_) if pttl_ms < 0 => corrupt("a dedupe claim without an expiry would be busy forever"),
        Some(holder) => Ok(Some(holder)),
    }
}

/// Claim in one round trip: `SET NX PX`, else read what is held. The
/// Python version needed three tries of `SET NX` then `GET` because the key
/// could expire between the two; in a script it cannot.
const CLAIM: &str = include_str!("dedupe/claim.lua");
/// `SET done PX`, refusing a key of another type rather than replacing it.
const DONE_SCRIPT: &str = include_str!("dedupe/done.lua");
/// `PTTL`, refusing a key of another type.
const REMAINING: &str = include_str!("dedupe/remaining.lua");

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
    done: LuaScript,
    remaining: LuaScript,
}

impl ValkeyDedupe {
    /// Dedupe with `lease` (`MicroDcs:DedupeLease`) and `retention` (`MicroDcs:DedupeRetention`).
    pub fn new(valkey: Valkey, lease: Duration, retention: Duration) -> Self {
        let family = FamilyKey::builtin(microdcs_schema::builtin::DEDUPE);
        ValkeyDedupe {
            valkey,
            family,
            lease,
            retention,
            claim: LuaScript::new(CLAIM),
            done: LuaScript::new(DONE_SCRIPT),
            remaining: LuaScript::read_only(REMAINING),
        }
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
        observed("claim", "dedupe", async move {
            check_lifetime("dedupe lease", self.lease)?;
            // An empty token would be stored as a claim no one can recognise as
            // theirs: refused before anything is written.
            if token.is_empty() {
                return Err(Error::InvalidArgument("a dedupe claim needs a non-empty token".into()));
            }
            let key = self.key(source, id)?;
            let value = format!("{PROCESSING}{token}");
            let lease = ms(self.lease).to_string();
            let call = self.claim.call().key(&key).arg(value.as_bytes()).arg(lease.as_bytes());
            // Each run within ResponseTimeout (a claim run twice with the same
            // token answers the same).
            let run = async || -> Result<Option<(String, i64)>> {
                let reply = crate::retry::once(&self.valkey, async |mut con| call.run(&mut con).await)
                    .await
                    .map_err(|e| Error::from_redis(e, &key))?;
                crate::retry::reply(reply).map_err(|e| Error::from_redis(e, &key))
            };
            // Nothing held can only mean it expired this very moment: claim again once.
            let held = match run().await? {
                Some(h) => Some(h),
                None => run().await?,
            };
            match held {
                Some((h, pttl)) => decide(&key, &h, pttl, token),
                None => Ok(Claim::Busy),
            }
        })
        .await
    }

    async fn mark_done(&self, source: &str, id: &str) -> Result<()> {
        observed("mark_done", "dedupe", async move {
            check_lifetime("dedupe retention", self.retention)?;
            let key = self.key(source, id)?;
            let retention = ms(self.retention).to_string();
            let call = self.done.call().key(&key).arg(retention.as_bytes());
            let reply = crate::retry::once(&self.valkey, async |mut con| call.run(&mut con).await)
                .await
                .map_err(|e| Error::from_redis(e, &key))?;
            // Written, or what is held instead: damage, left as it was.
            match crate::retry::reply::<Option<(String, i64)>>(reply).map_err(|e| Error::from_redis(e, &key))? {
                None => Ok(()),
                Some((held, pttl)) => judge(&key, &held, pttl).and(Err(Error::Corrupt {
                    key: key.clone(),
                    reason: "the dedupe value cannot be marked done".into(),
                })),
            }
        })
        .await
    }

    async fn lease_remaining(&self, source: &str, id: &str) -> Result<Duration> {
        observed("lease_remaining", "dedupe", async move {
            let key = self.key(source, id)?;
            let call = self.remaining.call().key(&key);
            let reply = crate::retry::read(&self.valkey, async |mut con| call.run(&mut con).await)
                .await
                .map_err(|e| Error::from_redis(e, &key))?;
            let held: Option<(String, i64)> = crate::retry::reply(reply).map_err(|e| Error::from_redis(e, &key))?;
            let Some((held, pttl)) = held else { return Ok(Duration::ZERO) };
            judge(&key, &held, pttl)?;
            // `done` is kept with an expiry too: none is damage.
            match u64::try_from(pttl) {
                Ok(ms) => Ok(Duration::from_millis(ms)),
                Err(_) => Err(Error::Corrupt { key, reason: "a dedupe value without an expiry".into() }),
            }
        })
        .await
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
        check_lifetime("dedupe lease", self.lease)?;
        if token.is_empty() {
            return Err(Error::InvalidArgument("a dedupe claim needs a non-empty token".into()));
        }
        let key = dedupe_hash(source, id);
        self.with(|map, now| match map.get(&key) {
            Some(e) => {
                let left = i64::try_from(e.expires.saturating_duration_since(now).as_millis()).unwrap_or(i64::MAX);
                decide(&key, &e.value, left, token)
            }
            None => {
                let expires = expiry(now, "dedupe lease", self.lease)?;
                map.insert(key, Entry { value: format!("{PROCESSING}{token}"), expires });
                Ok(Claim::Claimed)
            }
        })
    }

    async fn mark_done(&self, source: &str, id: &str) -> Result<()> {
        check_lifetime("dedupe retention", self.retention)?;
        let key = dedupe_hash(source, id);
        self.with(|map, now| {
            if let Some(e) = map.get(&key) {
                judge(&key, &e.value, 0)?;
            }
            let expires = expiry(now, "dedupe retention", self.retention)?;
            map.insert(key, Entry { value: DONE.into(), expires });
            Ok(())
        })
    }

    async fn lease_remaining(&self, source: &str, id: &str) -> Result<Duration> {
        let key = dedupe_hash(source, id);
        self.with(|map, now| match map.get(&key) {
            None => Ok(Duration::ZERO),
            Some(e) => judge(&key, &e.value, 0).map(|_| e.expires.saturating_duration_since(now)),
        })
    }
}

impl crate::observe::Outcome for Claim {
    fn outcome(&self) -> &'static str {
        match self {
            Claim::Claimed => "claimed",
            Claim::Done => "done",
            Claim::Busy => "busy",
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
        assert_eq!(decide("k", "done", 5, "t").unwrap(), Claim::Done);
        assert_eq!(decide("k", "processing:t", 5, "t").unwrap(), Claim::Claimed);
        assert_eq!(decide("k", "processing:u", 5, "t").unwrap(), Claim::Busy);
        for (held, pttl) in [("garbage", 5), ("processing:", 5), ("processing:u", -1), ("processing:t", -1), ("", 5)] {
            assert!(matches!(decide("k", held, pttl, "t"), Err(Error::Corrupt { .. })), "{held:?} {pttl}");
        }
    }

    #[tokio::test]
    async fn the_memory_twin_refuses_lifetimes_that_overflow_the_clock() {
        for bad in [Duration::MAX, Duration::ZERO] {
            let d = MemoryDedupe::new(bad, bad);
            assert!(matches!(d.claim("s", "i", "t").await, Err(Error::InvalidArgument(_))));
            assert!(matches!(d.mark_done("s", "i").await, Err(Error::InvalidArgument(_))));
        }
    }
}
