//! A list family (`cdc:overflow:{scope}`): values pushed at the head, kept
//! to a bound, and popped from either end.
//!
//! Values are bytes: a push takes text or bytes (`&str`, `&[u8]`,
//! `&Vec<u8>`), and what comes back is read as text (`range`, which
//! reports a value that is not UTF-8 as [`Error::Corrupt`]) or as bytes
//! (`range_raw`, the pops).

use std::sync::LazyLock;

use super::KeyHandle;
use crate::error::once_error;
use crate::error::{Error, Result};
use crate::retry::{self, LuaScript};

/// One key of a list family.
#[derive(Debug, Clone)]
pub struct ListKey {
    pub(super) t: KeyHandle,
}

impl ListKey {
    /// The key.
    pub fn key(&self) -> &str {
        &self.t.key
    }

    /// Pushes `value` at the head and keeps the `max` newest values (`LPUSH`
    /// and `LTRIM` in one script); the length after. One attempt: a second
    /// would push twice, so a lost answer is [`Error::UnknownOutcome`].
    ///
    /// # Errors
    /// A `max` of 0, a key of another type, connection errors.
    pub async fn push_bounded<V: AsRef<[u8]> + ?Sized>(&self, value: &V, max: u64) -> Result<u64> {
        self.t
            .observed("push_bounded", async {
                if max == 0 {
                    return Err(Error::InvalidArgument("a bounded list keeps at least one value".into()));
                }
                let max = max.min(i64::MAX as u64).to_string();
                let px = self.t.px(None);
                let call =
                    PUSH_SCRIPT.call().key(&self.t.key).arg(value.as_ref()).arg(max.as_bytes()).arg(px.as_bytes());
                let v = retry::once(&self.t.valkey, |mut con| {
                    let call = &call;
                    async move { call.run(&mut con).await }
                })
                .await
                .map_err(|e| once_error(e, &self.t.key))?;
                retry::reply(v).map_err(|e| Error::from_redis(e, &self.t.key))
            })
            .await
    }

    /// Pushes `value` at the head and keeps the newest values whose sizes
    /// add up to at most `max_bytes` (a byte budget: a CDC overflow
    /// buffer), in one script; how many old values it evicted. The script
    /// walks the list from the head, 100 values a step, until the budget is
    /// used: its cost grows with the bytes kept, not with what was evicted.
    /// One attempt, as [`ListKey::push_bounded`].
    ///
    /// # Errors
    /// A value larger than the whole budget (nothing written), a budget of
    /// 0, a key of another type, connection errors.
    pub async fn push_bounded_bytes<V: AsRef<[u8]> + ?Sized>(&self, value: &V, max_bytes: u64) -> Result<u64> {
        self.t
            .observed("push_bounded_bytes", async {
                let value = value.as_ref();
                if max_bytes == 0 {
                    return Err(Error::InvalidArgument("a byte budget of 0 keeps nothing".into()));
                }
                if value.len() as u64 > max_bytes {
                    return Err(Error::InvalidArgument(format!(
                        "a value of {} bytes does not fit a budget of {max_bytes} bytes",
                        value.len()
                    )));
                }
                let max = max_bytes.min(i64::MAX as u64).to_string();
                let px = self.t.px(None);
                let call = PUSH_BYTES_SCRIPT.call().key(&self.t.key).arg(value).arg(max.as_bytes()).arg(px.as_bytes());
                let v = retry::once(&self.t.valkey, |mut con| {
                    let call = &call;
                    async move { call.run(&mut con).await }
                })
                .await
                .map_err(|e| once_error(e, &self.t.key))?;
                retry::reply(v).map_err(|e| Error::from_redis(e, &self.t.key))
            })
            .await
    }

    /// Values `start..=stop` from the head (0 is the newest; negative
    /// counts from the oldest, -1 the oldest), at most
    /// [`Page::MAX`](crate::page::Page::MAX): a wider window keeps its first
    /// `Page::MAX` from `start`. The window is made whole against the
    /// length in the server, so `range(0, -2)` is every value but the
    /// oldest on any length.
    ///
    /// # Errors
    /// A key of another type, values that are not UTF-8, connection errors.
    pub async fn range(&self, start: i64, stop: i64) -> Result<Vec<String>> {
        self.t.observed("range", self.t.ranks(true, start, stop, false)).await
    }

    /// Values `start..=stop` from the tail, oldest first (0 is the oldest;
    /// negative counts from the newest), at most [`Page::MAX`](crate::page::Page::MAX)
    /// as [`ListKey::range`]: [`ListKey::range`] in reverse order,
    /// `range_from_oldest(0, 9)` the ten oldest values still kept.
    ///
    /// # Errors
    /// A key of another type, values that are not UTF-8, connection errors.
    pub async fn range_from_oldest(&self, start: i64, stop: i64) -> Result<Vec<String>> {
        self.t
            .observed("range_from_oldest", async {
                let mut values: Vec<String> = self.t.ranks(true, start, stop, true).await?;
                values.reverse();
                Ok(values)
            })
            .await
    }

    /// Values `start..=stop` from the head as [`ListKey::range`], as bytes
    /// (values pushed as bytes need not be UTF-8).
    ///
    /// # Errors
    /// A key of another type, connection errors.
    pub async fn range_raw(&self, start: i64, stop: i64) -> Result<Vec<Vec<u8>>> {
        self.t.observed("range_raw", self.t.ranks(true, start, stop, false)).await
    }

    /// Values `start..=stop` from the tail, oldest first, as
    /// [`ListKey::range_from_oldest`], as bytes.
    ///
    /// # Errors
    /// A key of another type, connection errors.
    pub async fn range_from_oldest_raw(&self, start: i64, stop: i64) -> Result<Vec<Vec<u8>>> {
        self.t
            .observed("range_from_oldest_raw", async {
                let mut values: Vec<Vec<u8>> = self.t.ranks(true, start, stop, true).await?;
                values.reverse();
                Ok(values)
            })
            .await
    }

    /// Removes and returns the oldest value (`RPOP`: the tail, so pushes
    /// and this pop make a first-in, first-out queue); `None` when the
    /// list is empty. Bytes, because a value taken off the list that could
    /// not be handed back as text would be lost. A family declared with a
    /// lifetime gets it again, as from every write. One attempt: a second
    /// would take another value, so a lost answer is
    /// [`Error::UnknownOutcome`] (the value may have been taken).
    ///
    /// # Errors
    /// A key of another type (nothing taken), connection errors.
    pub async fn pop_oldest(&self) -> Result<Option<Vec<u8>>> {
        self.t.observed("pop_oldest", self.t.once(redis::cmd("RPOP").arg(&self.t.key).clone())).await
    }

    /// Removes and returns the newest value (`LPOP`: the head, the value
    /// pushed last); otherwise as [`ListKey::pop_oldest`].
    ///
    /// # Errors
    /// As [`ListKey::pop_oldest`].
    pub async fn pop_newest(&self) -> Result<Option<Vec<u8>>> {
        self.t.observed("pop_newest", self.t.once(redis::cmd("LPOP").arg(&self.t.key).clone())).await
    }

    /// How many values (`LLEN`).
    ///
    /// # Errors
    /// A key of another type, connection errors.
    pub async fn len(&self) -> Result<u64> {
        self.t.observed("len", async { self.t.read(redis::cmd("LLEN").arg(&self.t.key).clone()).await }).await
    }
}

static PUSH_SCRIPT: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new(PUSH));

static PUSH_BYTES_SCRIPT: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new(PUSH_BYTES));

const PUSH_BYTES: &str = "\
-- KEYS[1] the list. ARGV[1] the value; ARGV[2] the byte budget; ARGV[3] the
-- family's lifetime in milliseconds, or '' for none.
-- Returns how many values were evicted. The list was within the budget
-- before the push, so the walk reads at most the budget and one step more.
redis.call('LPUSH', KEYS[1], ARGV[1])
local budget = tonumber(ARGV[2])
local total, kept, at = 0, 0, 0
while true do
  local chunk = redis.call('LRANGE', KEYS[1], at, at + 99)
  if #chunk == 0 then break end
  local over = false
  for _, v in ipairs(chunk) do
    if total + #v > budget then
      over = true
      break
    end
    total = total + #v
    kept = kept + 1
  end
  if over or #chunk < 100 then break end
  at = at + 100
end
local len = redis.call('LLEN', KEYS[1])
if kept < len then redis.call('LTRIM', KEYS[1], 0, kept - 1) end
if ARGV[3] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return len - kept
";

const PUSH: &str = "\
-- KEYS[1] the list. ARGV[1] the value; ARGV[2] how many values to keep;
-- ARGV[3] the family's lifetime in milliseconds, or '' for none.
-- Returns the length after. A key of another type fails LPUSH before
-- anything is written.
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
if ARGV[3] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return redis.call('LLEN', KEYS[1])
";
