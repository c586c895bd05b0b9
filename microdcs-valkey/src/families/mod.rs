//! Typed operations on the non-document families of a keyspace: what
//! `keyspace!` hands out for each declared family (`Plant::reference(&plant,
//! kind, scope)`), so a family with a template is used through the same
//! bounded, typed calls as documents, never through raw commands.
//!
//! Each handle is one key, rendered from its family's template when the
//! handle is made (values encoded like document placeholders); making it
//! fails with a key error when a value cannot be encoded. The family's
//! declaration picks the handle:
//!
//! | declared as | handle |
//! |---|---|
//! | `string(..)`, `value<T>(..)`, `counter(..)` | [`StringKey`] (also a heartbeat on the server's clock), [`TypedValue<T>`](TypedValue), [`CounterKey`] |
//! | `hash(..)`, `hash<K, V>(..)` | [`HashKey`], [`TypedHash<K, V>`](TypedHash) (pages of [`HashEntries`], [`TypedHashEntries`]) |
//! | `set(..)`, `zset(..)`, `list(..)` | [`SetKey`], [`SortedSetKey`] (ranges of [`Scored`]), [`ListKey`] |
//! | `channel(..)`, `channel<T>(..)` | [`ChannelKey`], [`TypedChannel<T>`](TypedChannel): publish, and a [`Subscription`] on its own connection |
//! | `content(..)` | [`ContentFamily`]: texts stored under their SHA-256 digest ([`content_digest`]) |
//! | `rate_limit(..)` | [`RateLimitKey`]: a fixed window and a failure block, decided as a [`RateDecision`] |
//!
//! Counters, hashes and sets are also the targets of a step's family
//! effects ([`Effects`](crate::store::Effects)), written in the same
//! script as a document.
//!
//! ```no_run
//! use std::time::Duration;
//! use microdcs_valkey::families::RateDecision;
//!
//! # #[derive(Debug, serde::Serialize, serde::Deserialize, microdcs_valkey::Document)]
//! # struct Job { id: String, scope: String }
//! microdcs_valkey::keyspace! {
//!     Plant {
//!         documents: [Job],
//!         reference: set("ref:{kind}:{scope}"),
//!         pubseq: counter("pubseq:{scope}"),
//!         login: rate_limit("rl:login:{who}"),
//!     }
//! }
//!
//! # async fn demo(plant: microdcs_valkey::KeyspaceHandle<Plant>) -> Result<(), microdcs_valkey::Error> {
//! let refs = Plant::reference(&plant, "jobresponse", "s1")?; // SetKey
//! refs.add(&["r-1", "r-2"]).await?;
//! let next = Plant::pubseq(&plant, "s1")?.increment(1).await?; // one attempt
//! match Plant::login(&plant, "alice")?.attempt(5, Duration::from_secs(60)).await? {
//!     RateDecision::Allowed { remaining } => println!("{remaining} left"),
//!     RateDecision::Limited { retry_after } => println!("retry in {retry_after:?}"),
//! }
//! # let _ = next; Ok(()) }
//! ```
//!
//! # Guarantees and bounds
//!
//! Every call is one round trip (a script where it reads and writes), waits
//! at most `ResponseTimeout` (writes that are safe to repeat retry an
//! unknown outcome under `WriteAttempts`), and reports a key of another
//! type as [`Error::WrongType`] and a value it cannot read as
//! [`Error::Corrupt`], with nothing written. A family declared with a
//! lifetime (`ttl = "60s"`) gets it again from every write, in the same
//! script; `ttl()` tells what is left. Nothing blocks: a
//! [`Subscription`] waits at most the timeout given to `next`.
//!
//! A write retried after a lost answer reports what its last attempt saw:
//! `SetKey::add` may then count 0 added, `HashKey::set` say the field was
//! not new, `StringKey::delete` say nothing was there, though the first
//! attempt did it. The state is the same either way; only the count or flag
//! in the answer can be off. Writes that must not run twice (a count, a
//! set-if-absent, a publish) run once, and a lost answer is
//! [`Error::UnknownOutcome`].
//!
//! Each handle's operations, and the declaration of families, are in the
//! guide: [Add a document
//! type](https://github.com/microdcs/microdcs/blob/main/docs/guide/01-documents.md)
//! (step 5); the key rules in [Key
//! rules](https://github.com/microdcs/microdcs/blob/main/docs/guide/13-key-rules.md).

use std::future::Future;
use std::time::Duration;

use redis::{Cmd, FromRedisValue};

use crate::client::Valkey;
use crate::error::once_error;
use crate::error::{Error, Result};
use crate::retry;

mod channel;
mod content;
mod hash;
mod list;
mod rate_limit;
mod set;
mod value;
mod zset;

pub use channel::{ChannelKey, Subscription};
pub use channel::{TypedChannel, TypedSubscription};
pub use content::{ContentFamily, content_digest};
pub use hash::{HashEntries, HashKey};
pub use hash::{TypedHash, TypedHashEntries};
pub use list::ListKey;
pub use rate_limit::{RateDecision, RateLimitKey};
pub use set::SetKey;
pub use value::TypedValue;
pub use value::{CounterKey, StringKey};
pub use zset::{Scored, SortedSetKey};

/// One key of a declared family on a connection.
#[derive(Clone)]
struct KeyHandle {
    valkey: Valkey,
    key: String,
    /// The family's declared lifetime in milliseconds (`ttl = "..."`):
    /// every write gives the key this lifetime again, in the same script.
    ttl_ms: Option<u64>,
    /// The family's declared name, the `microdcs.target` of its operations.
    family: &'static str,
}

impl std::fmt::Debug for KeyHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.key)
    }
}

/// Where a step's family effect acts: the key, its family's lifetime, and
/// the prefix of the handle it came from.
pub(crate) struct EffectTarget {
    pub(crate) key: String,
    pub(crate) ttl_ms: Option<u64>,
    pub(crate) prefix: microdcs_schema::KeyPrefix,
}

impl KeyHandle {
    fn effect_target(&self) -> EffectTarget {
        EffectTarget { key: self.key.clone(), ttl_ms: self.ttl_ms, prefix: self.valkey.prefix().clone() }
    }
}

impl CounterKey {
    pub(crate) fn effect_target(&self) -> EffectTarget {
        self.t.effect_target()
    }
}

impl HashKey {
    pub(crate) fn effect_target(&self) -> EffectTarget {
        self.t.effect_target()
    }
}

impl SetKey {
    pub(crate) fn effect_target(&self) -> EffectTarget {
        self.t.effect_target()
    }
}

impl SortedSetKey {
    pub(crate) fn effect_target(&self) -> EffectTarget {
        self.t.effect_target()
    }
}

impl KeyHandle {
    /// Runs a public operation of the family inside its span, counted and
    /// timed like every other operation.
    async fn observed<T: crate::observe::Outcome>(
        &self,
        op: &'static str,
        fut: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        crate::observe::observed(op, self.family, fut).await
    }

    /// A read: within the response timeout, once more after a dropped connection.
    async fn read<T: FromRedisValue>(&self, cmd: Cmd) -> Result<T> {
        retry::read_cmd(&self.valkey, &cmd, &self.key).await
    }

    /// The lifetime argument of a script: the one given, else the
    /// family's, else `''` (none).
    fn px(&self, given: Option<u64>) -> String {
        given.or(self.ttl_ms).map_or_else(String::new, |ms| ms.to_string())
    }

    /// The time the key has left (`None`: no lifetime, or no key).
    async fn pttl(&self) -> Result<Option<Duration>> {
        let ms: i64 = self.read(redis::cmd("PTTL").arg(&self.key).clone()).await?;
        Ok(u64::try_from(ms).ok().map(Duration::from_millis))
    }

    /// Ranks `start..=stop` of the key, a list (`list`) or a sorted set
    /// (negative ranks count from the other end; `from_end` counts them
    /// from the tail of a list or the highest score of a set): made whole
    /// against the length in the server, then cut to the first
    /// [`Page::MAX`](crate::page::Page::MAX) from `start`. A list from its
    /// tail comes back in head order (newest first) for the caller to turn.
    async fn ranks<T: FromRedisValue>(&self, list: bool, start: i64, stop: i64, from_end: bool) -> Result<T> {
        let (start, stop, max) = (start.to_string(), stop.to_string(), crate::page::Page::MAX.to_string());
        let call = RANKS_SCRIPT
            .call()
            .key(&self.key)
            .arg(if list { &b"list"[..] } else { b"zset" })
            .arg(start.as_bytes())
            .arg(stop.as_bytes())
            .arg(if from_end { &b"end"[..] } else { b"" })
            .arg(max.as_bytes());
        let v = retry::read(&self.valkey, |mut con| {
            let call = &call;
            async move { call.run(&mut con).await }
        })
        .await
        .map_err(|e| Error::from_redis(e, &self.key))?;
        retry::reply(v).map_err(|e| Error::from_redis(e, &self.key))
    }

    /// Adds `n` to the integer of a string key (`field` `None`) or of a
    /// hash field, in one script that tells a stored value the server
    /// cannot count from ([`Error::Corrupt`]) from a sum that would
    /// overflow ([`Error::InvalidArgument`]), by which call refused, never
    /// by its message; nothing changes in either case. One attempt, as
    /// [`KeyHandle::once`].
    async fn increment(&self, field: Option<&str>, n: i64) -> Result<i64> {
        let (n_arg, px) = (n.to_string(), self.px(None));
        let call = INCR_SCRIPT
            .call()
            .key(&self.key)
            .arg(if field.is_some() { &b"hash"[..] } else { b"string" })
            .arg(field.unwrap_or("").as_bytes())
            .arg(n_arg.as_bytes())
            .arg(px.as_bytes());
        let v = retry::once(&self.valkey, |mut con| {
            let call = &call;
            async move { call.run(&mut con).await }
        })
        .await
        .map_err(|e| once_error(e, &self.key))?;
        let (status, value): (u8, String) = retry::reply(v).map_err(|e| Error::from_redis(e, &self.key))?;
        let what = field.map_or_else(String::new, |f| format!("field `{}` ", crate::error::short(&f)));
        match status {
            2 => parse_text(&self.key, &what, &value),
            0 => Err(Error::Corrupt {
                key: self.key.clone(),
                reason: format!("{what}`{}` is not a 64-bit integer", crate::error::short(&value)),
            }),
            _ => Err(Error::InvalidArgument(format!(
                "adding {n} to {what}`{}` of `{}` would overflow a 64-bit integer",
                crate::error::short(&value),
                self.key
            ))),
        }
    }

    /// A write whose effect does not change when it runs twice: an unknown
    /// outcome is retried under `WriteAttempts`.
    async fn repeatable<T: FromRedisValue>(&self, what: &'static str, cmd: Cmd) -> Result<T> {
        if let Some(ms) = self.ttl_ms {
            let (ms, args) = (ms.to_string(), ttl_args(&cmd));
            let call = ttl_call(&self.key, &ms, &args);
            let v =
                retry::invoke_call(&self.valkey, &call, what, &self.key).await.map_err(|f| f.into_error(&self.key))?;
            return retry::reply(v.value).map_err(|e| Error::from_redis(e, &self.key));
        }
        retry::repeatable(&self.valkey, what, &self.key, |mut con| {
            let cmd = &cmd;
            async move { cmd.query_async(&mut con).await }
        })
        .await
        .map_err(|f| f.into_error(&self.key))
    }

    /// A write that must not run twice (a count, a set-if-absent): one
    /// attempt; a lost answer is an error whose `is_unknown_outcome()` holds.
    async fn once<T: FromRedisValue>(&self, cmd: Cmd) -> Result<T> {
        if let Some(ms) = self.ttl_ms {
            let (ms, args) = (ms.to_string(), ttl_args(&cmd));
            let call = ttl_call(&self.key, &ms, &args);
            let v = retry::once(&self.valkey, |mut con| {
                let call = &call;
                async move { call.run(&mut con).await }
            })
            .await
            .map_err(|e| once_error(e, &self.key))?;
            return retry::reply(v).map_err(|e| Error::from_redis(e, &self.key));
        }
        retry::once(&self.valkey, |mut con| {
            let cmd = &cmd;
            async move { cmd.query_async(&mut con).await }
        })
        .await
        .map_err(|e| once_error(e, &self.key))
    }
}

/// An increment that says why it was refused: the server answers a stored
/// value that is not an integer and an overflow with the same code, so the
/// script first counts by 0 (which fails only on the former; a missing
/// value is not probed, so nothing is created) and then by `n` (which can
/// then fail only on the latter).
static INCR_SCRIPT: std::sync::LazyLock<retry::LuaScript> = std::sync::LazyLock::new(|| retry::LuaScript::new(INCR));

const INCR: &str = "\
-- KEYS[1] a string key or a hash. ARGV[1] 'string' or 'hash'; ARGV[2] the
-- hash field; ARGV[3] what to add; ARGV[4] the family's lifetime in
-- milliseconds, or ''. Returns {2, sum as stored}; {0, stored}: the stored value is
-- not an integer; {1, stored}: the sum would overflow. Nothing changes in
-- either refusal; a key of another type fails the first read.
local hash = ARGV[1] == 'hash'
local function add(by)
  if hash then return redis.pcall('HINCRBY', KEYS[1], ARGV[2], by) end
  return redis.pcall('INCRBY', KEYS[1], by)
end
local cur
if hash then cur = redis.call('HGET', KEYS[1], ARGV[2]) else cur = redis.call('GET', KEYS[1]) end
if cur then
  local probe = add(0)
  if type(probe) == 'table' and probe.err then return {0, cur} end
end
local sum = add(ARGV[3])
if type(sum) == 'table' and sum.err then return {1, cur or '0'} end
if ARGV[4] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
-- The sum as stored: a Lua number is exact only up to 2^53.
if hash then return {2, redis.call('HGET', KEYS[1], ARGV[2])} end
return {2, redis.call('GET', KEYS[1])}
";

/// A rank window read whole in the server: with the length known, "all
/// but the last" stays that on a list shorter than a page, and a window of
/// mixed signs is cut to a page like any other.
static RANKS_SCRIPT: std::sync::LazyLock<retry::LuaScript> = std::sync::LazyLock::new(|| retry::LuaScript::new(RANKS));

const RANKS: &str = "\
-- KEYS[1] a list or a sorted set. ARGV[1] 'list' or 'zset'; ARGV[2], ARGV[3]
-- the first and last rank (negative: from the other end); ARGV[4] 'end' to
-- count from the tail of a list or the highest score of a set, else '';
-- ARGV[5] the most to return. Returns the list's values (head order) or
-- the set's members and scores; a key of another type fails the first call.
local n
if ARGV[1] == 'list' then n = redis.call('LLEN', KEYS[1]) else n = redis.call('ZCARD', KEYS[1]) end
local s, e, most = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[5])
if s < 0 then s = n + s end
if e < 0 then e = n + e end
if s < 0 then s = 0 end
if e > n - 1 then e = n - 1 end
if e - s + 1 > most then e = s + most - 1 end
if s > e then return {} end
if ARGV[1] == 'list' then
  if ARGV[4] == 'end' then s, e = n - 1 - e, n - 1 - s end
  return redis.call('LRANGE', KEYS[1], s, e)
end
if ARGV[4] == 'end' then return redis.call('ZRANGE', KEYS[1], s, e, 'REV', 'WITHSCORES') end
return redis.call('ZRANGE', KEYS[1], s, e, 'WITHSCORES')
";

/// A write and the family's lifetime in one script: the command (a name
/// and its arguments after the key) on `KEYS[1]`, then `PEXPIRE`. A
/// command that fails (a key of another type) ends the script before the
/// expiry, so nothing is written.
static TTL_SCRIPT: std::sync::LazyLock<retry::LuaScript> = std::sync::LazyLock::new(|| {
    retry::LuaScript::new(
        "\
-- KEYS[1] the key. ARGV[1] lifetime in milliseconds; ARGV[2] the command;
-- ARGV[3..] its arguments after the key. Returns the command's reply.
local reply = redis.call(ARGV[2], KEYS[1], unpack(ARGV, 3))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return reply
",
    )
});

/// The command name and the arguments after the key of `cmd`.
fn ttl_args(cmd: &Cmd) -> Vec<Vec<u8>> {
    cmd.args_iter()
        .enumerate()
        .filter(|(i, _)| *i != 1)
        .filter_map(|(_, a)| match a {
            redis::Arg::Simple(b) => Some(b.to_vec()),
            // Our writes carry no cursor.
            _ => None,
        })
        .collect()
}

fn ttl_call<'a>(key: &'a str, ms: &'a str, args: &'a [Vec<u8>]) -> retry::ScriptCall<'a> {
    let mut call = TTL_SCRIPT.call().key(key).arg(ms.as_bytes());
    for a in args {
        call = call.arg(a);
    }
    call
}

/// A stored text as a `T` (`FromStr`); one that does not parse is
/// [`Error::Corrupt`], named by `what` (`"value "`, `"field "`, or `""`).
fn parse_text<T: std::str::FromStr>(key: &str, what: &str, text: &str) -> Result<T> {
    text.parse::<T>().map_err(|_| Error::Corrupt {
        key: key.to_owned(),
        reason: format!("{what}`{}` is not a {}", crate::error::short(&text), std::any::type_name::<T>()),
    })
}

/// Milliseconds of a lifetime for the server: at least 1, at most the
/// longest duration a setting may hold.
fn ttl_ms(ttl: Duration) -> Result<u64> {
    if ttl < crate::limits::MIN_LIFETIME || ttl > crate::config::defaults::MAX_DURATION {
        return Err(Error::InvalidArgument(format!("a lifetime must be between 1ms and 100 years, not {ttl:?}")));
    }
    Ok(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1))
}

/// Made by the code `keyspace!` generates: the handle of one key.
#[doc(hidden)]
pub trait FromKey: Sized {
    /// The handle of `key` of family `family` on `valkey`, with the
    /// family's declared lifetime, if any.
    fn from_family_key(valkey: Valkey, family: &'static str, key: String, ttl_ms: Option<u64>) -> Self;
}

macro_rules! from_key {
    ($($t:ty),*) => {$(
        impl FromKey for $t {
            fn from_family_key(valkey: Valkey, family: &'static str, key: String, ttl_ms: Option<u64>) -> Self {
                Self { t: KeyHandle { valkey, key, ttl_ms, family } }
            }
        }
    )*};
}
from_key!(SetKey, StringKey, CounterKey, HashKey, SortedSetKey, ChannelKey, ListKey, RateLimitKey);

/// `ttl()` of the handles of families that may declare a lifetime.
macro_rules! ttl_fn {
    ($($t:ty),*) => {$(
        impl $t {
            /// The time the key has left: a family declared with
            /// `ttl = "..."` gets it again from every write. `None`: no
            /// lifetime, or no key.
            ///
            /// # Errors
            /// Connection errors.
            pub async fn ttl(&self) -> Result<Option<Duration>> {
                self.t.pttl().await
            }
        }
    )*};
}
ttl_fn!(SetKey, HashKey, SortedSetKey, ListKey, CounterKey);
