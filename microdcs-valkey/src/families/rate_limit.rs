//! A rate-limit family (`rl:{scope}:{who}`): a fixed window of attempts,
//! and after repeated failures a block that doubles each time. One script
//! per call, on the server's clock.

use std::sync::LazyLock;
use std::time::Duration;

use super::{KeyHandle, once_error, ttl_ms};
use crate::error::{Error, Result};
use crate::retry::{self, LuaScript};

/// One key of a rate-limit family (a hash: window start, count, failures,
/// blocked-until, when the failures are forgotten).
///
/// The key lives only as long as what it holds: the window, the block and
/// the memory of failures each give it their lifetime, and a call that
/// would leave nothing to keep leaves no key, so no key of this family is
/// ever without a lifetime.
#[derive(Debug, Clone)]
pub struct RateLimitKey {
    pub(super) t: KeyHandle,
}

/// What a [`RateLimitKey::attempt`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateDecision {
    /// Allowed; this many attempts are left in the window.
    Allowed {
        /// Attempts left.
        remaining: u64,
    },
    /// Refused: the window is used up or a failure block holds.
    Limited {
        /// When to try again.
        retry_after: Duration,
    },
}

impl RateLimitKey {
    /// The largest limit per window: the script counts in Lua numbers,
    /// exact only up to 2^53, and keeps every stored number to 15 digits.
    pub const MAX_LIMIT: u64 = 999_999_999_999_999;

    /// The key.
    pub fn key(&self) -> &str {
        &self.t.key
    }

    /// Counts one attempt against at most `limit` per `window`, unless a
    /// failure block holds. One attempt: a second would count twice, so a
    /// lost answer is [`Error::UnknownOutcome`].
    ///
    /// # Errors
    /// A `limit` of 0 or above [`RateLimitKey::MAX_LIMIT`], a window
    /// outside 1 ms to 100 years, a stored
    /// state that is not numbers ([`Error::Corrupt`], nothing changed), a
    /// key of another type, connection errors.
    pub async fn attempt(&self, limit: u64, window: Duration) -> Result<RateDecision> {
        self.t
            .observed("attempt", async {
                check_limit(limit)?;
                let window = ttl_ms(window)?;
                let (status, value) = self.run("attempt", limit, window).await?;
                Ok(if status == 1 {
                    RateDecision::Allowed { remaining: value }
                } else {
                    RateDecision::Limited { retry_after: Duration::from_millis(value) }
                })
            })
            .await
    }

    /// What an [`attempt`](RateLimitKey::attempt) with these arguments
    /// would decide now, without counting one: `Allowed { remaining }` is
    /// the attempts still open in the window (so an attempt now would leave
    /// one fewer), `Limited` the wait. Writes nothing; safe to repeat, so
    /// it is bounded like a read.
    ///
    /// # Errors
    /// As [`RateLimitKey::attempt`].
    pub async fn peek(&self, limit: u64, window: Duration) -> Result<RateDecision> {
        self.t
            .observed("peek", async {
                check_limit(limit)?;
                let window = ttl_ms(window)?;
                let (limit, window) = (limit.to_string(), window.to_string());
                let call =
                    RATE_SCRIPT.call().key(&self.t.key).arg(b"peek").arg(limit.as_bytes()).arg(window.as_bytes());
                let v = retry::read(&self.t.valkey, |mut con| {
                    let call = &call;
                    async move { call.run(&mut con).await }
                })
                .await
                .map_err(|e| Error::from_redis(e, &self.t.key))?;
                let (status, value) = self.decode(v)?;
                Ok(if status == 1 {
                    RateDecision::Allowed { remaining: value }
                } else {
                    RateDecision::Limited { retry_after: Duration::from_millis(value) }
                })
            })
            .await
    }

    /// Records a failure: blocks further attempts for `base` doubled for
    /// each failure since the last success (`base`, 2 x `base`, 4 x ...),
    /// at most `max`. Returns the block.
    ///
    /// The failures are remembered until a success, or until `max` has
    /// passed after the block ends with no new failure: a client that waits
    /// out every block and fails again still escalates to `max`, and one
    /// that stays away for `max` starts again at `base`. The key lives that
    /// long (block plus `max`), so the memory is bounded by the caller's own
    /// longest block.
    ///
    /// # Errors
    /// As [`RateLimitKey::attempt`]; a `base` or `max` outside 1 ms to 100 years.
    pub async fn fail(&self, base: Duration, max: Duration) -> Result<Duration> {
        self.t
            .observed("fail", async {
                let (base, max) = (ttl_ms(base)?, ttl_ms(max)?);
                let (_, block) = self.run("fail", base, max).await?;
                Ok(Duration::from_millis(block))
            })
            .await
    }

    /// Records a success: failures and any block are forgotten; the
    /// attempts counted in the window still count (see
    /// [`RateLimitKey::reset`] to forget those too). Writes nothing on a
    /// key with nothing to forget, so it never leaves a key without a
    /// lifetime; a key holding only failures is removed.
    ///
    /// # Errors
    /// As [`RateLimitKey::attempt`].
    pub async fn succeed(&self) -> Result<()> {
        self.t.observed("succeed", async { self.run("succeed", 0, 0).await.map(|_| ()) }).await
    }

    /// Forgets everything the key holds: the window's attempts, the
    /// failures and any block (the key is removed); the next attempt opens
    /// a new window. Safe to repeat: an unknown outcome is retried under
    /// `WriteAttempts`.
    ///
    /// # Errors
    /// A stored state that is not numbers ([`Error::Corrupt`], left as it
    /// is), a key of another type, connection errors
    /// ([`Error::UnknownOutcome`] after every attempt).
    pub async fn reset(&self) -> Result<()> {
        self.t
            .observed("reset", async {
                let call = RATE_SCRIPT.call().key(&self.t.key).arg(b"reset").arg(b"0").arg(b"0");
                let v = retry::invoke_call(&self.t.valkey, &call, "rate limit reset", &self.t.key)
                    .await
                    .map_err(|f| f.into_error(&self.t.key))?;
                self.decode(v.value).map(|_| ())
            })
            .await
    }

    async fn run(&self, mode: &str, a: u64, b: u64) -> Result<(i64, u64)> {
        let (a, b) = (a.to_string(), b.to_string());
        let call = RATE_SCRIPT.call().key(&self.t.key).arg(mode.as_bytes()).arg(a.as_bytes()).arg(b.as_bytes());
        let v = retry::once(&self.t.valkey, |mut con| {
            let call = &call;
            async move { call.run(&mut con).await }
        })
        .await
        .map_err(|e| once_error(e, &self.t.key))?;
        self.decode(v)
    }

    /// A reply `{status, value}`; a negative status is a corrupt state,
    /// and so is a negative value (no count or wait is).
    fn decode(&self, v: redis::Value) -> Result<(i64, u64)> {
        let (status, value): (i64, i64) = retry::reply(v).map_err(|e| Error::from_redis(e, &self.t.key))?;
        match u64::try_from(value) {
            Ok(value) if status >= 0 => Ok((status, value)),
            _ => Err(Error::Corrupt {
                key: self.t.key.clone(),
                reason: "the rate-limit state is not whole numbers of at most 15 digits".into(),
            }),
        }
    }
}

fn check_limit(limit: u64) -> Result<()> {
    if limit == 0 || limit > RateLimitKey::MAX_LIMIT {
        return Err(Error::InvalidArgument(format!(
            "a rate limit allows 1 to {} attempts per window, not {limit}",
            RateLimitKey::MAX_LIMIT
        )));
    }
    Ok(())
}

static RATE_SCRIPT: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new(RATE));

const RATE: &str = "\
-- KEYS[1] the rate-limit hash: w window start (ms), n attempts in it,
-- f failures since the last success, b blocked until (ms), fe when the
-- failures are forgotten (ms: `max` past the last block's end).
-- ARGV[1] `attempt` or `peek` (ARGV[2] limit, ARGV[3] window ms), `fail`
-- (ARGV[2] base block ms, ARGV[3] longest block ms), `succeed` or `reset`
-- (forget everything: the key is removed). `peek`
-- answers as `attempt` would, with the attempts still open, and writes
-- nothing.
-- Returns {1, remaining} allowed, {0, retry after ms} limited, {1, block
-- ms} after a failure, {-1, 0} corrupt state (a field that is not a whole
-- number of at most 15 digits; nothing written). Time is
-- the server's (TIME), so clients' clocks do not matter.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[1], 'w', 'n', 'f', 'b', 'fe')
-- Whole numbers of at most 15 digits: exact as Lua numbers, and far past
-- any time or count this state holds.
for i = 1, 5 do
  if s[i] and (#s[i] > 15 or not string.find(s[i], '^%d+$')) then return {-1, 0} end
end
local w, n, f, b = tonumber(s[1] or '0'), tonumber(s[2] or '0'), tonumber(s[3] or '0'), tonumber(s[4] or '0')
local fe = tonumber(s[5] or '0')
local mode = ARGV[1]
-- A success forgets the failures by removing their fields: a key that
-- never failed gets nothing (a hash written here would have no lifetime),
-- one that held only failures is removed, and the window keeps the
-- lifetime its attempts gave it.
if mode == 'succeed' then
  redis.call('HDEL', KEYS[1], 'f', 'b', 'fe')
  return {1, 0}
end
if mode == 'reset' then
  redis.call('DEL', KEYS[1])
  return {1, 0}
end
local a, c = tonumber(ARGV[2]), tonumber(ARGV[3])
if mode == 'peek' then
  if now < b then return {0, b - now} end
  if now >= w + c then return {1, a} end
  if n >= a then return {0, w + c - now} end
  return {1, a - n}
end
if mode == 'fail' then
  -- Failures older than their memory (`max` past the last block's end)
  -- are forgotten; a state written before the memory existed keeps them.
  if s[5] and now >= fe then f = 0 end
  f = f + 1
  local block = a
  for _ = 2, math.min(f, 62) do
    block = block * 2
    if block >= c then break end
  end
  if block > c then block = c end
  b = now + block
  redis.call('HSET', KEYS[1], 'f', f, 'b', b, 'fe', b + c)
  -- The failure count outlives the block by `max`, so waiting out a
  -- block does not reset the doubling.
  redis.call('PEXPIRE', KEYS[1], math.max(block + c, redis.call('PTTL', KEYS[1])))
  return {1, block}
end
if now < b then return {0, b - now} end
if now >= w + c then
  w = now
  n = 0
end
if n >= a then return {0, w + c - now} end
n = n + 1
redis.call('HSET', KEYS[1], 'w', w, 'n', n)
local keep = math.max(w + c - now, b - now, 1)
if redis.call('PTTL', KEYS[1]) < keep then redis.call('PEXPIRE', KEYS[1], keep) end
return {1, a - n}
";

impl crate::observe::Outcome for RateDecision {
    fn outcome(&self) -> &'static str {
        match self {
            RateDecision::Allowed { .. } => "allowed",
            RateDecision::Limited { .. } => "limited",
        }
    }
}
