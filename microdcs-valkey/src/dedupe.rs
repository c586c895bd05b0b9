//! Dedupe claims of CloudEvents by (`source`, `id`): a trait with an
//! in-memory implementation (one process, tests) and the Valkey one that
//! replaces it when configured, so several instances share the claims.
//!
//! [`DedupeStore`] is the contract: [`claim`](DedupeStore::claim) an
//! event for your token, process it, then
//! [`mark_done`](DedupeStore::mark_done). A claim answers a [`Claim`]:
//! [`Claim::Claimed`] (the event is yours: new, or already claimed with
//! your token), [`Claim::Busy`] (another holder's claim has not expired) or
//! [`Claim::Done`] (processed already). A claim holds for the lease
//! (setting `MicroDcs:DedupeLease`), so the claim of an instance that
//! dies mid-event runs out; `done` is kept for the retention (`MicroDcs:DedupeRetention`),
//! the window in which a redelivered event is recognised.
//! [`ValkeyDedupe`] keeps one string key per event, named by
//! [`dedupe_hash`] (`ce:dedupe:{hash}`, or your own family with
//! [`ValkeyDedupe::with_family`]); [`MemoryDedupe`] keeps them in one
//! process, and one contract suite runs against both.
//!
//! ```no_run
//! use microdcs_valkey::dedupe::{Claim, DedupeStore, ValkeyDedupe};
//! use microdcs_valkey::{MicroDcsConfig, Valkey};
//!
//! # async fn apply(_: &str) -> Result<(), Box<dyn std::error::Error>> { Ok(()) }
//! # async fn demo(valkey: Valkey, config: MicroDcsConfig) -> Result<(), Box<dyn std::error::Error>> {
//! let dedupe = ValkeyDedupe::new(valkey, config.dedupe_lease, config.dedupe_retention);
//! let (source, id, token) = ("urn:plant:line-3", "evt-9", "instance-1:42");
//! match dedupe.claim(source, id, token).await? {
//!     Claim::Claimed => {
//!         apply(id).await?;
//!         dedupe.mark_done(source, id).await?;
//!     }
//!     Claim::Done => {}                        // a redelivery: acknowledge it
//!     Claim::Busy => return Err("retry later".into()), // someone else is on it
//! }
//! # Ok(()) }
//! ```
//!
//! # Guarantees and bounds
//!
//! Each call is a script on the server's clock, never repeated after a
//! lost reply, each run waiting at most `ResponseTimeout`; a lost reply is
//! a connection error ([`Error::is_connection`]). Calling `claim` again with the same token is
//! safe (it answers `Claimed` while the claim holds), and so is a repeated
//! `mark_done`. A claim is a lease, not a lock: work that outlasts
//! `DedupeLease` can be claimed by another instance, so keep the lease
//! above the longest processing time, and make the work itself safe to
//! repeat where a second run matters (a store write with an operation id,
//! or a step's [`Event`](crate::store::Event), applied once in the same
//! script as its document). Lease and retention are 1 ms to 30 days
//! ([`Error::InvalidArgument`] otherwise, nothing stored). A stored value
//! that is neither `done` nor a claim with an expiry is [`Error::Corrupt`]
//! and a key of another type [`Error::WrongType`]; neither is overwritten.
//! Keys of the format before length-prefixed digests are still read during
//! an upgrade (see [`ValkeyDedupe`]).
//!
//! Where dedupe fits beside the start lease and fencing leases: the
//! guide's [Dedupe, start lease, fencing
//! leases](https://github.com/microdcs/microdcs/blob/main/docs/guide/09-coordination.md);
//! a webhook applied once is in the
//! [cookbook](https://github.com/microdcs/microdcs/blob/main/docs/guide/cookbook.md).

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

/// The dedupe key value: the first 20 bytes of SHA-256 of the event's
/// source and id, length-prefixed (`{bytes in source}:{source}{id}`), as 40
/// hex digits, so the key has one short, safe shape whatever the source
/// and id.
///
/// The length prefix makes every pair its own input: CloudEvents sources
/// are URIs full of `:`, and the digest of `source:id` that keys had before
/// gave `("urn:plant:line", "3:evt-9")` and `("urn:plant:line:3", "evt-9")`
/// one key. Those old digests were 32 hex digits, so a key of this format
/// never equals one of the old; [`ValkeyDedupe`] still reads the old key
/// of an event during an upgrade (see [`ValkeyDedupe::legacy_keys`]).
pub fn dedupe_hash(source: &str, id: &str) -> String {
    let mut h = Sha256::new();
    h.update(source.len().to_string().as_bytes());
    h.update(b":");
    h.update(source.as_bytes());
    h.update(id.as_bytes());
    hex(&h.finalize()[..20])
}

/// The key value before length prefixes: the first 16 bytes of SHA-256 of
/// `source:id`, as hex. Read during an upgrade, never written.
fn legacy_dedupe_hash(source: &str, id: &str) -> String {
    hex(&Sha256::digest(format!("{source}:{id}").as_bytes())[..16])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
/// ([`builtin::DEDUPE`](microdcs_schema::builtin::DEDUPE)), `{hash}` being
/// [`dedupe_hash`], or your own family with [`ValkeyDedupe::with_family`].
///
/// # Upgrading from 32-digit keys
/// Keys written before [`dedupe_hash`] took length prefixes are read as
/// well, until you turn that off with [`ValkeyDedupe::legacy_keys`]: when
/// an event's old-format key holds a claim or `done`, `claim` answers by it
/// (`Done`, `Busy`, or `Claimed` for the token it names) and writes
/// nothing, and `lease_remaining` gives its time left. Old keys are never
/// written, so two events whose old keys collided are told apart from the
/// first claim on; only an event whose old key the previous version wrote
/// still answers by it, until that key expires (a claim's lease or the
/// retention, at most 30 days). Turn the read off one `DedupeRetention`
/// after the last instance of the previous version stopped.
///
/// On one server, and on a cluster with an island prefix (one hash tag),
/// the old key is read in the claim's own script. With
/// `Placement=sharded` the two keys lie in different slots, so the old key
/// is read first, on its own: no weaker, since only instances of the
/// previous version write it and they never read the new key (run them
/// beside this version and an event can be processed once by each).
#[derive(Debug, Clone)]
pub struct ValkeyDedupe {
    valkey: Valkey,
    family: FamilyKey,
    lease: Duration,
    retention: Duration,
    legacy: bool,
    claim: LuaScript,
    done: LuaScript,
    remaining: LuaScript,
}

impl ValkeyDedupe {
    /// Dedupe with `lease` (`MicroDcs:DedupeLease`) and `retention`
    /// (`MicroDcs:DedupeRetention`), reading old-format keys as well (see
    /// [`ValkeyDedupe::legacy_keys`]).
    pub fn new(valkey: Valkey, lease: Duration, retention: Duration) -> Self {
        let family = FamilyKey::builtin(microdcs_schema::builtin::DEDUPE);
        ValkeyDedupe {
            valkey,
            family,
            lease,
            retention,
            legacy: true,
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

    /// Whether `claim` and `lease_remaining` also read an event's key in
    /// the format before length-prefixed digests (on by default). Costs a
    /// `TYPE` and a `GET` in the claim's script (a second round trip with
    /// `Placement=sharded`). Turn it off once no key of that format can be
    /// left: one `DedupeRetention` after the last instance of the previous
    /// version stopped, or from the start on a new deployment.
    #[must_use]
    pub fn legacy_keys(mut self, on: bool) -> Self {
        self.legacy = on;
        self
    }

    /// The key of an event.
    ///
    /// # Errors
    /// Never for a family checked at construction (the hash is always a valid value).
    pub fn key(&self, source: &str, id: &str) -> Result<String> {
        self.family.render(self.valkey.prefix(), &[&dedupe_hash(source, id)])
    }

    /// The event's key in the old format, while those are read.
    fn legacy_key(&self, source: &str, id: &str) -> Result<Option<String>> {
        if !self.legacy {
            return Ok(None);
        }
        self.family.render(self.valkey.prefix(), &[&legacy_dedupe_hash(source, id)]).map(Some)
    }

    /// What `key` holds and its time left (`None`: nothing), by the
    /// read-only script; a key of another type is [`Error::WrongType`].
    async fn held(&self, key: &str) -> Result<Option<(String, i64)>> {
        let call = self.remaining.call().key(key);
        let reply = crate::retry::read(&self.valkey, async |mut con| call.run(&mut con).await)
            .await
            .map_err(|e| Error::from_redis(e, key))?;
        crate::retry::reply(reply).map_err(|e| Error::from_redis(e, key))
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
            let old = self.legacy_key(source, id)?;
            // The old key goes into the claim's script when both keys share
            // a slot; else (sharded placement) it is read first on its own.
            let slot = |k: &str| microdcs_schema::slot::key_slot(k.as_bytes());
            let together = old.as_deref().filter(|o| !self.valkey.is_cluster() || slot(o) == slot(&key));
            if let Some(o) = old.as_deref().filter(|_| together.is_none())
                && let Some((held, pttl)) = self.held(o).await?
            {
                return decide(o, &held, pttl, token);
            }
            let value = format!("{PROCESSING}{token}");
            let lease = ms(self.lease).to_string();
            let mut call = self.claim.call().key(&key);
            if let Some(o) = together {
                call = call.key(o);
            }
            let call = call.arg(value.as_bytes()).arg(lease.as_bytes());
            // Each run within ResponseTimeout (a claim run twice with the same
            // token answers the same).
            let run = async || -> Result<Option<(String, i64, u8)>> {
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
            match (held, together) {
                (Some((h, pttl, 1)), _) => decide(&key, &h, pttl, token),
                (Some((h, pttl, 2)), Some(o)) => decide(o, &h, pttl, token),
                (Some((kind, _, 3)), Some(o)) => Err(Error::WrongType {
                    key: o.to_owned(),
                    detail: format!("the old-format dedupe key holds a {kind}, not a string"),
                }),
                (Some(_), _) => Err(Error::Corrupt { key, reason: "unexpected reply from the dedupe claim".into() }),
                (None, _) => Ok(Claim::Busy),
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
            // The key `claim` answers by: the old-format one while it holds
            // the event, else the event's own.
            let old = match self.legacy_key(source, id)? {
                Some(old) => self.held(&old).await?.map(|h| (old, h)),
                None => None,
            };
            let (key, held) = match old {
                Some((old, h)) => (old, Some(h)),
                None => {
                    let key = self.key(source, id)?;
                    let h = self.held(&key).await?;
                    (key, h)
                }
            };
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
    fn digests_are_pinned() {
        // Persisted: the keys of every claim and `done` are these digests.
        // 20 bytes of SHA-256("{bytes in source}:{source}{id}"), hex.
        for ((source, id), digest) in [
            (("urn:plant:line", "3:evt-9"), "5fec11c6c79463fb3b7906581b839438cd01362d"),
            (("urn:plant:line:3", "evt-9"), "74dd72a9cc3f8664095774bd890d7e62cc2f1c6d"),
            (("urn:line-1", "e-1"), "bd8fac7fadad4fe97cae0a3053f53ad02f326d83"),
            (("", ""), "ba768b331fd86cec803be04e56ab2b3d4c0e98ef"),
            (("urn:\u{fc}", "\u{e9}"), "a2950fd2db08a69995d2c35f0420740d11c92ef5"),
        ] {
            assert_eq!(dedupe_hash(source, id), digest, "{source:?} {id:?}");
        }
        // The old format (read during an upgrade): 16 bytes of
        // SHA-256("source:id"), one digest for both colliding pairs.
        for ((source, id), digest) in [
            (("urn:plant:line", "3:evt-9"), "fedef8b49def6064a079ed938b8f3daa"),
            (("urn:plant:line:3", "evt-9"), "fedef8b49def6064a079ed938b8f3daa"),
            (("urn:line-1", "e-1"), "eb69fca6268e33555c1625bc64d970a0"),
        ] {
            assert_eq!(legacy_dedupe_hash(source, id), digest, "{source:?} {id:?}");
        }
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
