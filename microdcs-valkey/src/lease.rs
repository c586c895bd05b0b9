// Just over 600 lines: the lease's public API, its request-id retry rule and
// the script calls belong together; the scripts are in lease/*.lua and the
// in-memory lease in lease/memory.rs. The seam if it grows: renew/release.
//! A lease store with fencing tokens: atomic acquire, renew and
//! compare-and-delete release scripts, a monotonic fencing counter, a
//! request-id result cache so a retried call never acts twice, and a
//! fenced write that refuses stale tokens.
//!
//! [`LeaseBackend`] is the contract; [`LeaseStore`] implements it on Valkey
//! and [`MemoryLeases`] in one process (tests, a single instance), and one
//! contract suite runs against both. [`LeaseBackend::acquire`] answers an
//! [`Acquire`]: [`Acquire::Acquired`] with a [`Lease`] (name, grant id,
//! owner, fencing token, the lifetime granted) or [`Acquire::Held`] by
//! another owner. Renew and release take that lease;
//! [`LeaseBackend::fenced_write`] writes the data the lease protects only
//! while no newer token was issued ([`Error::Fenced`] otherwise).
//! Acquire, renew and release take a request id of yours: repeated with
//! the same id (after a lost reply), a call answers as the first one did
//! and acts once; the same id with other arguments is
//! [`Error::RequestConflict`].
//!
//! ```no_run
//! use std::time::Duration;
//! use microdcs_valkey::Valkey;
//! use microdcs_valkey::lease::{Acquire, LeaseBackend, LeaseStore};
//!
//! # async fn demo(valkey: Valkey) -> Result<(), microdcs_valkey::Error> {
//! let leases = LeaseStore::new(valkey);
//! let ttl = Duration::from_secs(10);
//! match leases.acquire("press-7", "node-a", ttl, "req-1").await? {
//!     Acquire::Acquired(lease) => {
//!         leases.fenced_write("press-7", lease.token, b"setpoint=42").await?;
//!         let left = leases.renew(&lease, ttl, "req-2").await?; // Error::LeaseLost once expired
//!         leases.release(&lease, "req-3").await?;
//!         # let _ = left;
//!     }
//!     Acquire::Held { remaining, .. } => println!("busy for {remaining:?}"),
//! }
//! # Ok(()) }
//! ```
//!
//! Lifetimes are 1 ms to 30 days; outside that a call is
//! [`Error::InvalidArgument`] with nothing stored. Acquire, renew, release
//! and the fenced write are one script each and run under the write rule
//! (at most `WriteAttempts x (ResponseTimeout + WriteRetryDelay)`, then
//! [`Error::UnknownOutcome`]); the request id makes those repeats safe,
//! and [`LeaseBackend::fenced_write`] says what a repeated write may
//! answer. [`LeaseBackend::fence`] and [`LeaseBackend::read_protected`]
//! are reads (`ResponseTimeout`, one quick retry). A future dropped midway may have acted: call again
//! with the same request id to learn the outcome. The guide shows leases
//! beside dedupe and the start lease: [Dedupe, start lease, fencing
//! leases](https://github.com/microdcs/microdcs/blob/main/docs/guide/09-coordination.md).
//!
//! # Keys
//!
//! All keys of one lease share the hash tag `{name}`, so a lease also works on
//! a cluster: `lease:{#name}` (hash: `id`, `owner`, `token`; its TTL is the
//! lease), `lease:{#name}:fence` (the counter: never expires, never deleted),
//! `lease:{#name}:req:{request}` (cached results, 10 minutes),
//! `lease:{#name}:data` (the value the fenced write protects): the families
//! `builtin::LEASE*` of the schema crate. [`LeaseStore::with_families`] puts
//! them elsewhere ([`LeaseFamilies`], checked when the store is built).
//!
//! # Assumptions (failover and replication)
//!
//! Time is the server's: expiry is a key TTL, never a client clock. Through
//! Sentinel or on a cluster, the store follows a failover like every other
//! call of the handle (see the guide's [failover
//! chapter](https://github.com/microdcs/microdcs/blob/main/docs/guide/05-failover-and-durability.md)),
//! and a call whose reply was lost is repeated with its request id, so it
//! never takes a second token: it answers with the grant it made, as it is
//! now.
//!
//! Valkey replication is asynchronous: an acquire acknowledged by the old
//! primary but not yet on the promoted replica is lost with the failover.
//! Then the lease is free on the new primary, a second owner gets it while
//! the first still believes it holds it, and, because the counter lost the
//! same increment, *with the same fencing token*: a fenced write cannot
//! tell the two apart. The fencing counter keeps the protected data safe
//! only if the promoted replica has seen the counter's last value. Rule the
//! loss out on the server: `min-replicas-to-write 1` with
//! `min-replicas-max-lag` makes the primary refuse an acquire it cannot
//! replicate ([`Error::NoReplicas`], nothing taken), which narrows the window
//! to the lag; otherwise accept that a failover can reissue a token. A
//! fenced write whose own data was lost with the failover is lost with it.
//! Fencing is enforced where the data is written: use
//! [`LeaseStore::fenced_write`] (or check the token the same way in your own
//! script) for every write the lease protects. A lease alone is advisory.
//!
//! Corrupt state (a record without TTL, a malformed record or counter) fails
//! closed: acquire, renew, [`LeaseBackend::fence`] and the fenced write return
//! [`Error::LeaseCorrupt`] and change nothing; release still deletes a corrupt
//! record (also one of the wrong type) so the lease can be taken again, and
//! logs a warning saying what it removed. A counter or token is valid only as
//! canonical decimal text (digits, no leading zero, at most 2^53-1, the
//! largest integer a Lua number holds exactly); the scripts and the Rust
//! reader share that grammar. A key of the wrong Valkey type is
//! [`Error::WrongType`] in every operation.
//!
//! # Metadata
//!
//! Owners, lease ids and request ids are lease metadata: `Debug` of
//! [`Lease`], [`Acquire`] and [`MemoryLeases`] shows them as `***`, and the
//! errors and log lines of this module never carry them.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::Value;

use crate::client::{Valkey, millis as ms};
use crate::error::{Error, Result};
use crate::family::FamilyKey;
use crate::observe::observed;
use crate::op_id::new_op_id;
use crate::retry::{self, LuaScript, ScriptCall};

/// A held lease. Its `Debug` hides the grant id and the owner.
#[derive(Clone, PartialEq, Eq)]
pub struct Lease {
    /// Lease name.
    pub name: String,
    /// This grant's id.
    pub id: String,
    /// Owner.
    pub owner: String,
    /// Fencing token: strictly larger for every grant of this name.
    pub token: u64,
    /// Lifetime granted: what the backend holds (whole milliseconds), not
    /// necessarily what was asked for.
    pub ttl: Duration,
}

/// Stands for lease metadata (owners, lease ids, request ids) in `Debug`
/// output, errors and logs.
const REDACTED: &str = "***";

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("name", &self.name)
            .field("id", &REDACTED)
            .field("owner", &REDACTED)
            .field("token", &self.token)
            .field("ttl", &self.ttl)
            .finish()
    }
}

/// The outcome of an acquire. Its `Debug` hides owners.
#[derive(Clone, PartialEq, Eq)]
pub enum Acquire {
    /// Ours.
    Acquired(Lease),
    /// Someone else holds it.
    Held {
        /// The holder.
        owner: String,
        /// Its remaining lifetime (server time).
        remaining: Duration,
    },
}

impl fmt::Debug for Acquire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Acquire::Acquired(l) => f.debug_tuple("Acquired").field(l).finish(),
            Acquire::Held { remaining, .. } => {
                f.debug_struct("Held").field("owner", &REDACTED).field("remaining", remaining).finish()
            }
        }
    }
}

/// A lease backend: Valkey ([`LeaseStore`]) or in memory ([`MemoryLeases`]).
/// `request_id` makes a call idempotent: repeated with the same id and
/// arguments it does nothing again and answers with the lease as it is
/// now, never a lifetime that is over. A repeated acquire returns the same
/// grant (id, token) with the time it has left, zero once it ended, or
/// [`Acquire::Held`] when another owner holds the lease since; a repeated
/// renew returns the time left, or [`Error::LeaseLost`] once the lease
/// ended; a repeated release succeeds again. With other arguments a
/// repeated id fails with [`Error::RequestConflict`]. A write whose outcome stays unknown
/// after the configured attempts ends with [`Error::UnknownOutcome`]; a key
/// of the wrong type is [`Error::WrongType`].
pub trait LeaseBackend: Send + Sync {
    /// Takes the lease if it is free or expired, with a new fencing token.
    fn acquire(
        &self,
        name: &str,
        owner: &str,
        ttl: Duration,
        request_id: &str,
    ) -> impl Future<Output = Result<Acquire>> + Send;
    /// Extends a lease still held (same id, owner and token); an expired one
    /// cannot be revived ([`Error::LeaseLost`]). Returns the lifetime the
    /// backend now holds.
    fn renew(&self, lease: &Lease, ttl: Duration, request_id: &str) -> impl Future<Output = Result<Duration>> + Send;
    /// Deletes the lease if it is still this grant ([`Error::LeaseNotHeld`]
    /// otherwise). A corrupt record is deleted whoever asks (logged as a
    /// warning), so it cannot block the lease for good.
    fn release(&self, lease: &Lease, request_id: &str) -> impl Future<Output = Result<()>> + Send;
    /// Writes `value` as the protected data of `name` unless a newer token
    /// was issued ([`Error::Fenced`]). A token this lease never issued (0,
    /// above its latest, above 2^53-1: another lease's, or made up) is
    /// refused with [`Error::InvalidArgument`], nothing written. After an attempt with an unknown outcome
    /// the write runs again, so a `Fenced` answer then may follow a write
    /// that did land before the newer token.
    fn fenced_write(&self, name: &str, token: u64, value: &[u8]) -> impl Future<Output = Result<()>> + Send;
    /// The protected data of `name`.
    fn read_protected(&self, name: &str) -> impl Future<Output = Result<Option<Vec<u8>>>> + Send;
    /// The highest token issued for `name` (0 if none); a counter that is
    /// not a canonical number is [`Error::LeaseCorrupt`], never 0.
    fn fence(&self, name: &str) -> impl Future<Output = Result<u64>> + Send;
}

// The scripts. Each starts with a header describing its KEYS, ARGV and
// replies. Acquire, renew and release first answer a repeated request id
// from its cache (or refuse it when the arguments differ), so running one
// again after a lost reply is safe; then they check the record, failing
// closed on corrupt state (release deletes it instead, so the lease can be
// taken again), act, and cache the result. `common.lua` goes in front of
// each, so the counter grammar and the type check exist once.
const ACQUIRE: &str = concat!(include_str!("lease/common.lua"), include_str!("lease/acquire.lua"));
const RENEW: &str = concat!(include_str!("lease/common.lua"), include_str!("lease/renew.lua"));
const RELEASE: &str = concat!(include_str!("lease/common.lua"), include_str!("lease/release.lua"));
const FENCED_WRITE: &str = concat!(include_str!("lease/common.lua"), include_str!("lease/fenced_write.lua"));

/// The largest counter or token: the largest integer a Lua number (a
/// double) holds exactly. The scripts use the same bound (`common.lua`).
const MAX_COUNTER: u64 = (1 << 53) - 1;

/// A counter or token text in the one grammar of the scripts: digits only,
/// no leading zero (except "0"), at most [`MAX_COUNTER`].
pub(crate) fn parse_counter(s: &str) -> Option<u64> {
    let canonical = s == "0" || (s.bytes().all(|b| b.is_ascii_digit()) && !s.is_empty() && !s.starts_with('0'));
    // 17 digits or more is too big whatever the value; never parse it.
    if !canonical || s.len() > 16 {
        return None;
    }
    s.parse().ok().filter(|n| *n <= MAX_COUNTER)
}

const REQUEST_CACHE_TTL: Duration = Duration::from_secs(600);

/// Where a [`LeaseStore`] keeps its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseFamilies {
    /// The lease record (hash: id, owner, token; its TTL is the lease).
    pub record: microdcs_schema::FamilySpec<'static>,
    /// The fence counter (string; never expires).
    pub fence: microdcs_schema::FamilySpec<'static>,
    /// Cached results per request id (hash).
    pub request: microdcs_schema::FamilySpec<'static>,
    /// The protected value (string).
    pub data: microdcs_schema::FamilySpec<'static>,
}

/// The lease store on Valkey.
#[derive(Debug, Clone)]
pub struct LeaseStore {
    valkey: Valkey,
    record: FamilyKey,
    fence_t: FamilyKey,
    request: FamilyKey,
    data: FamilyKey,
    acquire: LuaScript,
    renew: LuaScript,
    release: LuaScript,
    fenced: LuaScript,
}

fn texts(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items
            .iter()
            .map(|i| match i {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                Value::SimpleString(s) => s.clone(),
                Value::Int(n) => n.to_string(),
                _ => String::new(),
            })
            .collect(),
        _ => Vec::new(),
    }
}

impl LeaseStore {
    /// The lease store on the built-in lease families.
    pub fn new(valkey: Valkey) -> Self {
        use microdcs_schema::builtin;
        LeaseStore {
            record: FamilyKey::builtin(builtin::LEASE),
            fence_t: FamilyKey::builtin(builtin::LEASE_FENCE),
            request: FamilyKey::builtin(builtin::LEASE_REQUEST),
            data: FamilyKey::builtin(builtin::LEASE_DATA),
            acquire: LuaScript::new(ACQUIRE),
            renew: LuaScript::new(RENEW),
            release: LuaScript::new(RELEASE),
            fenced: LuaScript::new(FENCED_WRITE),
            valkey,
        }
    }

    /// Keeps leases in `families` instead (for example families declared in
    /// your keyspace, so its overlap check covers them).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when a family has the wrong type or
    /// placeholders: every family needs the hash tag `{#name}` (all keys of
    /// one lease in one slot), the request family also `{request}`; and
    /// when two of them are the same key.
    pub fn with_families(mut self, families: LeaseFamilies) -> Result<Self> {
        use microdcs_schema::KeyType;
        self.record = FamilyKey::checked("lease record", families.record, KeyType::Hash, &["name"])?;
        self.fence_t = FamilyKey::checked("lease fence", families.fence, KeyType::String, &["name"])?;
        self.request = FamilyKey::checked("lease request", families.request, KeyType::Hash, &["name", "request"])?;
        self.data = FamilyKey::checked("lease data", families.data, KeyType::String, &["name"])?;
        let all = [&self.record, &self.fence_t, &self.request, &self.data];
        // One key for two roles would let a protected write overwrite the
        // fence counter (or a record hold the data): each role its own.
        for (i, f) in all.iter().enumerate() {
            if let Some(g) = all[i + 1..].iter().find(|g| g.spec().key == f.spec().key) {
                return Err(Error::InvalidArgument(format!(
                    "families `{}` and `{}` share the key `{}`: each lease key needs a family of its own",
                    f.spec().name,
                    g.spec().name,
                    f.spec().key
                )));
            }
        }
        for f in all {
            if !f.spec().key.contains("{#name}") {
                return Err(Error::InvalidArgument(format!(
                    "family `{}` (`{}`): a lease key needs the hash tag `{{#name}}`",
                    f.spec().name,
                    f.spec().key
                )));
            }
        }
        Ok(self)
    }

    fn key(&self, f: &FamilyKey, values: &[&str]) -> Result<String> {
        f.render(self.valkey.prefix(), values)
    }

    /// Runs a script under the shared retry rule: after a lost reply it
    /// runs again with the same request id, and the request cache makes it
    /// answer for the first run (with the time left now) instead of acting
    /// again.
    async fn run(&self, script: &LuaScript, keys: &[String], args: &[String]) -> Result<Vec<String>> {
        let mut call = script.call();
        for k in keys {
            call = call.key(k);
        }
        for a in args {
            call = call.arg(a.as_bytes());
        }
        self.invoke(&call, keys.first().map_or("", String::as_str)).await
    }

    /// `key` names the call in the log and in errors: the first key, which
    /// never holds a request id.
    async fn invoke(&self, call: &ScriptCall<'_>, key: &str) -> Result<Vec<String>> {
        match retry::invoke_call(&self.valkey, call, "lease call", key).await {
            Ok(reply) => Ok(texts(&reply.value)),
            Err(failure) => Err(failure.into_error(key)),
        }
    }

    /// The request cache key of `name` with the request id hidden, for errors.
    fn request_shown(&self, name: &str) -> String {
        self.key(&self.request, &[name, REDACTED]).unwrap_or_else(|_| format!("request cache of lease `{name}`"))
    }
}

/// 1 ms to 30 days: the one lifetime rule of the crate (a shorter one
/// could only be rounded up to the server's whole milliseconds).
fn check_ttl(ttl: Duration) -> Result<()> {
    crate::limits::check_lifetime("lease ttl", ttl)
}

/// A request fingerprint with every field length-prefixed (unambiguous).
fn fingerprint(op: &str, fields: &[&str]) -> String {
    let mut s = op.to_owned();
    for f in fields {
        s.push_str(&format!("|{}:{f}", f.len()));
    }
    s
}

fn check_request(request_id: &str) -> Result<()> {
    if microdcs_schema::lua::valid_op_id(request_id) { Ok(()) } else { Err(Error::InvalidOpId(REDACTED.to_owned())) }
}

fn conflict() -> Error {
    Error::RequestConflict { request_id: REDACTED.to_owned() }
}

fn check_token(token: u64) -> Result<()> {
    if token > MAX_COUNTER {
        Err(Error::InvalidArgument(format!("token {token}: no token above 2^53-1 is ever issued")))
    } else {
        Ok(())
    }
}

/// Field `i` of a script reply ("" when missing).
fn field(r: &[String], i: usize) -> &str {
    r.get(i).map_or("", String::as_str)
}

/// An unexpected reply, by its status only: the other fields can hold an owner.
fn protocol(script: &'static str, r: &[String]) -> Error {
    Error::Protocol { script, reply: crate::error::short(&field(r, 0)) }
}

/// The replies every script can give: `keys` maps the key roles a script
/// names to the keys shown in errors.
fn common(name: &str, r: &[String], keys: &[(&str, &str)]) -> Result<()> {
    match field(r, 0) {
        "conflict" => Err(conflict()),
        "corrupt" => Err(Error::LeaseCorrupt { name: name.to_owned(), reason: field(r, 1).to_owned() }),
        "wrongtype" => {
            let role = field(r, 1);
            let key =
                keys.iter().find(|(k, _)| *k == role).map_or_else(|| role.to_owned(), |(_, key)| (*key).to_owned());
            Err(Error::WrongType { key, detail: format!("the lease {role} key holds another Valkey type") })
        }
        _ => Ok(()),
    }
}

/// A fencing token the lease `name` never issued.
pub(crate) fn unissued(name: &str, token: u64) -> Error {
    Error::InvalidArgument(format!(
        "fencing token {token} was never issued for this lease (`{}`): a write needs the token of its latest grant",
        crate::error::short(&name)
    ))
}

fn millis_field(script: &'static str, r: &[String], i: usize) -> Result<Duration> {
    field(r, i).parse().map(Duration::from_millis).map_err(|_| protocol(script, r))
}

impl LeaseBackend for LeaseStore {
    async fn acquire(&self, name: &str, owner: &str, ttl: Duration, request_id: &str) -> Result<Acquire> {
        observed("acquire", "lease", async move {
            check_request(request_id)?;
            let keys = vec![
                self.key(&self.record, &[name])?,
                self.key(&self.fence_t, &[name])?,
                self.key(&self.request, &[name, request_id])?,
            ];
            check_ttl(ttl)?;
            let fp = fingerprint("acquire", &[owner, &ms(ttl).to_string()]);
            let args = vec![owner.to_owned(), ms(ttl).to_string(), fp, new_op_id(), ms(REQUEST_CACHE_TTL).to_string()];
            let r = self.run(&self.acquire, &keys, &args).await?;
            let request = self.request_shown(name);
            common(name, &r, &[("record", &keys[0]), ("fence", &keys[1]), ("request", &request)])?;
            match field(&r, 0) {
                "acquired" => Ok(Acquire::Acquired(Lease {
                    name: name.to_owned(),
                    id: field(&r, 1).to_owned(),
                    owner: owner.to_owned(),
                    token: parse_counter(field(&r, 2)).ok_or_else(|| protocol("lease acquire", &r))?,
                    ttl: millis_field("lease acquire", &r, 3)?,
                })),
                "held" => Ok(Acquire::Held {
                    owner: field(&r, 1).to_owned(),
                    remaining: millis_field("lease acquire", &r, 2)?,
                }),
                _ => Err(protocol("lease acquire", &r)),
            }
        })
        .await
    }

    async fn renew(&self, lease: &Lease, ttl: Duration, request_id: &str) -> Result<Duration> {
        observed("renew", "lease", async move {
            check_request(request_id)?;
            let keys =
                vec![self.key(&self.record, &[&lease.name])?, self.key(&self.request, &[&lease.name, request_id])?];
            check_ttl(ttl)?;
            let fp = fingerprint("renew", &[&lease.id, &lease.owner, &lease.token.to_string(), &ms(ttl).to_string()]);
            let args = vec![
                lease.id.clone(),
                lease.owner.clone(),
                lease.token.to_string(),
                ms(ttl).to_string(),
                fp,
                ms(REQUEST_CACHE_TTL).to_string(),
            ];
            let r = self.run(&self.renew, &keys, &args).await?;
            let request = self.request_shown(&lease.name);
            common(&lease.name, &r, &[("record", &keys[0]), ("request", &request)])?;
            match field(&r, 0) {
                "renewed" => millis_field("lease renew", &r, 1),
                "lost" => Err(Error::LeaseLost { name: lease.name.clone(), token: lease.token }),
                _ => Err(protocol("lease renew", &r)),
            }
        })
        .await
    }

    async fn release(&self, lease: &Lease, request_id: &str) -> Result<()> {
        observed("release", "lease", async move {
            check_request(request_id)?;
            let keys =
                vec![self.key(&self.record, &[&lease.name])?, self.key(&self.request, &[&lease.name, request_id])?];
            let fp = fingerprint("release", &[&lease.id, &lease.owner, &lease.token.to_string()]);
            let args = vec![
                lease.id.clone(),
                lease.owner.clone(),
                lease.token.to_string(),
                fp,
                ms(REQUEST_CACHE_TTL).to_string(),
            ];
            let r = self.run(&self.release, &keys, &args).await?;
            let request = self.request_shown(&lease.name);
            common(&lease.name, &r, &[("record", &keys[0]), ("request", &request)])?;
            match field(&r, 0) {
                "released" => {
                    let cleaned = field(&r, 1);
                    if !cleaned.is_empty() {
                        tracing::warn!(lease = %lease.name, reason = cleaned, "release deleted a corrupt lease record");
                    }
                    Ok(())
                }
                "notheld" => Err(Error::LeaseNotHeld { name: lease.name.clone(), token: lease.token }),
                _ => Err(protocol("lease release", &r)),
            }
        })
        .await
    }

    async fn fenced_write(&self, name: &str, token: u64, value: &[u8]) -> Result<()> {
        observed("fenced_write", "lease", async move {
            check_token(token)?;
            let fence = self.key(&self.fence_t, &[name])?;
            let data = self.key(&self.data, &[name])?;
            let token_text = token.to_string();
            let call = self.fenced.call().key(&fence).key(&data).arg(token_text.as_bytes()).arg(value);
            let r = self.invoke(&call, &fence).await?;
            match field(&r, 0) {
                "written" => Ok(()),
                "fenced" => Err(Error::Fenced {
                    name: name.to_owned(),
                    token,
                    highest: parse_counter(field(&r, 1)).ok_or_else(|| protocol("fenced write", &r))?,
                }),
                "corrupt" => Err(counter_corrupt(name)),
                "unissued" => Err(unissued(name, token)),
                _ => {
                    common(name, &r, &[("fence", &fence), ("data", &data)])?;
                    Err(protocol("fenced write", &r))
                }
            }
        })
        .await
    }

    /// A read: within `ResponseTimeout`, plus one `WriteRetryDelay` and a
    /// quick second read after a dropped connection.
    async fn read_protected(&self, name: &str) -> Result<Option<Vec<u8>>> {
        observed("read_protected", "lease", async move {
            let data = self.key(&self.data, &[name])?;
            let cmd = redis::cmd("GET").arg(&data).clone();
            let cmd = &cmd;
            retry::read(&self.valkey, |mut con| async move { cmd.query_async(&mut con).await })
                .await
                .map_err(|e| Error::from_redis(e, &data))
        })
        .await
    }

    /// A read, bounded like [`LeaseStore::read_protected`].
    async fn fence(&self, name: &str) -> Result<u64> {
        observed("fence", "lease", async move {
            let fence = self.key(&self.fence_t, &[name])?;
            let cmd = redis::cmd("GET").arg(&fence).clone();
            let cmd = &cmd;
            let v: Option<Vec<u8>> =
                retry::read(&self.valkey, |mut con| async move { cmd.query_async(&mut con).await })
                    .await
                    .map_err(|e| Error::from_redis(e, &fence))?;
            match v {
                None => Ok(0),
                Some(b) => std::str::from_utf8(&b).ok().and_then(parse_counter).ok_or_else(|| counter_corrupt(name)),
            }
        })
        .await
    }
}

fn counter_corrupt(name: &str) -> Error {
    Error::LeaseCorrupt {
        name: name.to_owned(),
        reason: "the fence counter is not a whole number from 0 to 2^53-1".into(),
    }
}

mod memory;
pub use memory::MemoryLeases;

impl crate::observe::Outcome for Acquire {
    fn outcome(&self) -> &'static str {
        match self {
            Acquire::Acquired(_) => "acquired",
            Acquire::Held { .. } => "held",
        }
    }
}

#[cfg(test)]
mod tests;
