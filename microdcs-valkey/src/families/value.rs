//! String families: a text value (`StringKey`) or a counter (`CounterKey`).
//!
//! `value<T>`: one typed value per key (`TypedValue`), stored as its text.

use std::fmt::Display;
use std::marker::PhantomData;
use std::str::FromStr;
use std::sync::LazyLock;
use std::time::Duration;

use super::{FromKey, KeyHandle, ttl_ms};
use crate::client::Valkey;
use crate::error::{Error, Result};
use crate::retry::{self, LuaScript};

/// One key of a string family holding a text (a limit, a heartbeat, a
/// marker), optionally with a lifetime.
#[derive(Debug, Clone)]
pub struct StringKey {
    pub(super) t: KeyHandle,
}

impl StringKey {
    /// The key.
    pub fn key(&self) -> &str {
        &self.t.key
    }

    /// The value, if set (`GET`).
    ///
    /// # Errors
    /// Connection errors, a key of another type, a value that is not UTF-8
    /// ([`Error::Corrupt`]).
    pub async fn get(&self) -> Result<Option<String>> {
        self.t.observed("get", self.text()).await
    }

    /// `GET` as UTF-8 text (what `get` and `age` read).
    async fn text(&self) -> Result<Option<String>> {
        let raw: Option<Vec<u8>> = self.t.read(redis::cmd("GET").arg(&self.t.key).clone()).await?;
        raw.map(|b| {
            String::from_utf8(b)
                .map_err(|_| Error::Corrupt { key: self.t.key.clone(), reason: "the value is not UTF-8".into() })
        })
        .transpose()
    }

    /// Sets the value, with a lifetime or none (a set without one removes
    /// an earlier lifetime, unless the family declares a `ttl`, which it
    /// then gets). Safe to repeat.
    ///
    /// # Errors
    /// A lifetime under 1 ms or over 100 years, connection errors
    /// ([`Error::UnknownOutcome`] after every attempt), a key of another
    /// type ([`Error::WrongType`]: unlike a bare `SET`, nothing of another
    /// type is replaced).
    pub async fn set(&self, value: &str, ttl: Option<Duration>) -> Result<()> {
        self.t
            .observed("set", async {
                let px = self.t.px(ttl.map(ttl_ms).transpose()?);
                let call = VALUE_SCRIPT.call().key(&self.t.key).arg(b"set").arg(value.as_bytes()).arg(px.as_bytes());
                retry::invoke_call(&self.t.valkey, &call, "value set", &self.t.key)
                    .await
                    .map_err(|f| f.into_error(&self.t.key))?;
                Ok(())
            })
            .await
    }

    /// Sets the value only if the key holds none; whether it did. One
    /// attempt: after a lost answer the outcome is unknown (a second attempt
    /// could not tell its own write from another's).
    ///
    /// # Errors
    /// As [`StringKey::set`]; a lost answer is an error whose
    /// `is_unknown_outcome()` holds.
    pub async fn set_if_absent(&self, value: &str, ttl: Option<Duration>) -> Result<bool> {
        self.t
            .observed("set_if_absent", async {
                let px = self.t.px(ttl.map(ttl_ms).transpose()?);
                let call = VALUE_SCRIPT.call().key(&self.t.key).arg(b"nx").arg(value.as_bytes()).arg(px.as_bytes());
                let v = retry::once(&self.t.valkey, |mut con| {
                    let call = &call;
                    async move { call.run(&mut con).await }
                })
                .await
                .map_err(|e| super::once_error(e, &self.t.key))?;
                Ok(matches!(v, redis::Value::Int(1)))
            })
            .await
    }

    /// Removes the value; whether it was there. Safe to repeat.
    ///
    /// # Errors
    /// Connection errors, a key of another type (left alone).
    pub async fn delete(&self) -> Result<bool> {
        self.t
            .observed("delete", async {
                let call = VALUE_SCRIPT.call().key(&self.t.key).arg(b"del").arg(b"").arg(b"");
                let v = retry::invoke_call(&self.t.valkey, &call, "value delete", &self.t.key)
                    .await
                    .map_err(|f| f.into_error(&self.t.key))?;
                Ok(matches!(v.value, redis::Value::Int(1)))
            })
            .await
    }

    /// Sets the value to the server's clock, in Unix milliseconds (`TIME`,
    /// in the same script as the `SET`): a heartbeat that no client's clock
    /// can skew. Returns the time written. Safe to repeat (a repeat writes
    /// a later time).
    ///
    /// # Errors
    /// As [`StringKey::set`].
    pub async fn set_now(&self, ttl: Option<Duration>) -> Result<u64> {
        self.t
            .observed("set_now", async {
                let px = self.t.px(ttl.map(ttl_ms).transpose()?);
                let call = VALUE_SCRIPT.call().key(&self.t.key).arg(b"now").arg(b"").arg(px.as_bytes());
                let v = retry::invoke_call(&self.t.valkey, &call, "value set", &self.t.key)
                    .await
                    .map_err(|f| f.into_error(&self.t.key))?;
                retry::reply(v.value).map_err(|e| Error::from_redis(e, &self.t.key))
            })
            .await
    }

    /// How long ago, by the server's clock, the value's Unix-millisecond
    /// time was (what [`StringKey::set_now`] wrote): the time since the last
    /// heartbeat. `None` when there is no value.
    ///
    /// # Errors
    /// A value that is not a time in milliseconds ([`Error::Corrupt`]), a
    /// key of another type, connection errors.
    pub async fn age(&self) -> Result<Option<Duration>> {
        self.t
            .observed("age", async {
                let Some(text) = self.text().await? else { return Ok(None) };
                let at: u64 = text.parse().map_err(|_| Error::Corrupt {
                    key: self.t.key.clone(),
                    reason: format!("`{}` is not a time in milliseconds", text.chars().take(40).collect::<String>()),
                })?;
                let now = retry::server_time_ms(&self.t.valkey).await?;
                Ok(Some(Duration::from_millis(now.saturating_sub(at))))
            })
            .await
    }

    /// The remaining lifetime: `None` when the key has no value or no lifetime.
    ///
    /// # Errors
    /// Connection errors.
    pub async fn ttl(&self) -> Result<Option<Duration>> {
        self.t.pttl().await
    }
}

/// `SET` and `DEL` act on a key of any type; a string family's handle must
/// not replace or remove a set someone stored there, so the type is checked
/// in the same script as the write.
static VALUE_SCRIPT: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new(VALUE));

const VALUE: &str = "\
-- KEYS[1] the value's key. ARGV[1] `set`, `nx`, `now` or `del`; ARGV[2]
-- the value (`now`: the server's clock in Unix ms instead); ARGV[3]
-- lifetime in milliseconds, or '' for none.
-- Returns 1 when written (or removed), 0 when not (NX found a value; DEL
-- found none), the time written for `now`; a key of another type is a
-- WRONGTYPE error, nothing written.
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'string' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if ARGV[1] == 'del' then return redis.call('DEL', KEYS[1]) end
local value = ARGV[2]
if ARGV[1] == 'now' then
  local t = redis.call('TIME')
  value = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local args = {KEYS[1], value}
if ARGV[1] == 'nx' then args[#args + 1] = 'NX' end
if ARGV[3] ~= '' then
  args[#args + 1] = 'PX'
  args[#args + 1] = ARGV[3]
end
local written = redis.call('SET', unpack(args))
if ARGV[1] == 'now' then return value end
if written then return 1 end
return 0
";

/// One key of a string family holding a signed 64-bit count (a publish
/// sequence, an acceptance counter).
#[derive(Debug, Clone)]
pub struct CounterKey {
    pub(super) t: KeyHandle,
}

impl CounterKey {
    /// The key.
    pub fn key(&self) -> &str {
        &self.t.key
    }

    /// Adds `n` (`INCRBY`; a missing key counts from 0) and returns the new
    /// count. One attempt: after a lost answer the outcome is unknown, since
    /// running it again would count twice.
    ///
    /// # Errors
    /// A stored value that is not a 64-bit integer ([`Error::Corrupt`]), a
    /// count that would overflow ([`Error::InvalidArgument`]; nothing
    /// changed either way), a key of another type, and after a lost answer
    /// [`Error::UnknownOutcome`].
    pub async fn increment(&self, n: i64) -> Result<i64> {
        self.t.observed("increment", self.t.increment(None, n)).await
    }

    /// Sets the count to `n` (`SET`; safe to repeat).
    ///
    /// # Errors
    /// Connection errors ([`Error::UnknownOutcome`] after every attempt), a
    /// key of another type (refused, nothing written).
    pub async fn set(&self, n: i64) -> Result<()> {
        self.t
            .observed("set", async {
                let _: i64 = self.increment_to(n).await?;
                Ok(())
            })
            .await
    }

    /// Sets the count back to 0 (safe to repeat).
    ///
    /// # Errors
    /// As [`CounterKey::set`].
    pub async fn reset(&self) -> Result<()> {
        self.t
            .observed("reset", async {
                let _: i64 = self.increment_to(0).await?;
                Ok(())
            })
            .await
    }

    /// Sets the count to `n`, refusing a key of another type (a plain
    /// `SET` would replace it), in one script; returns `n`.
    async fn increment_to(&self, n: i64) -> Result<i64> {
        let n_text = n.to_string();
        let px = self.t.px(None);
        let call = COUNTER_SET.call().key(&self.t.key).arg(n_text.as_bytes()).arg(px.as_bytes());
        let v = retry::invoke_call(&self.t.valkey, &call, "counter set", &self.t.key)
            .await
            .map_err(|f| f.into_error(&self.t.key))?;
        retry::reply(v.value).map_err(|e| Error::from_redis(e, &self.t.key))
    }

    /// The count (0 when never counted).
    ///
    /// # Errors
    /// A stored value that is not a 64-bit integer ([`Error::Corrupt`]), a
    /// key of another type, connection errors.
    pub async fn get(&self) -> Result<i64> {
        self.t.observed("get", self.count()).await
    }

    /// The stored count (what `get` and a refused `increment` read).
    async fn count(&self) -> Result<i64> {
        let raw: Option<String> = self.t.read(redis::cmd("GET").arg(&self.t.key).clone()).await?;
        match raw {
            None => Ok(0),
            // The server's own grammar for a count: decimal, an optional
            // minus, no plus sign, no leading zero, within 64 bits; what it
            // would refuse to increment is refused here too.
            Some(s) if canonical_count(&s) => s.parse().map_err(|_| self.not_a_count(&s)),
            Some(s) => Err(self.not_a_count(&s)),
        }
    }

    fn not_a_count(&self, s: &str) -> Error {
        Error::Corrupt {
            key: self.t.key.clone(),
            reason: format!("`{}` is not a count", s.chars().take(40).collect::<String>()),
        }
    }
}

/// `0`, or an optional `-` and digits without a leading zero.
fn canonical_count(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" && !s.starts_with('-') || !digits.starts_with('0'))
}

/// One key of a `value<T>` family: a `T` stored as its text (`Display`)
/// and read back with `FromStr`, so a number is its decimal digits, as any
/// other client would write it. A stored text that does not parse as a `T`
/// is [`Error::Corrupt`](crate::Error::Corrupt), never a default.
pub struct TypedValue<T> {
    inner: StringKey,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for TypedValue<T> {
    fn clone(&self) -> Self {
        TypedValue { inner: self.inner.clone(), _t: PhantomData }
    }
}

impl<T> std::fmt::Debug for TypedValue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TypedValue").field(&self.inner.key()).finish()
    }
}

impl<T> FromKey for TypedValue<T> {
    fn from_family_key(valkey: Valkey, family: &'static str, key: String, ttl_ms: Option<u64>) -> Self {
        TypedValue { inner: StringKey { t: KeyHandle { valkey, key, ttl_ms, family } }, _t: PhantomData }
    }
}

impl<T: FromStr + Display> TypedValue<T> {
    /// The key.
    pub fn key(&self) -> &str {
        self.inner.key()
    }

    /// The value, if set.
    ///
    /// # Errors
    /// Connection errors, a key of another type, a stored text that is no
    /// `T` ([`Error::Corrupt`](crate::Error::Corrupt)).
    pub async fn get(&self) -> Result<Option<T>> {
        let Some(text) = self.inner.get().await? else { return Ok(None) };
        super::parse_text(self.key(), "", &text).map(Some)
    }

    /// Sets the value, with a lifetime or none; safe to repeat. See
    /// [`StringKey::set`].
    ///
    /// # Errors
    /// As [`StringKey::set`].
    pub async fn set(&self, value: &T, ttl: Option<Duration>) -> Result<()> {
        self.inner.set(&value.to_string(), ttl).await
    }

    /// Sets the value only if none is set; whether it did. See
    /// [`StringKey::set_if_absent`].
    ///
    /// # Errors
    /// As [`StringKey::set_if_absent`].
    pub async fn set_if_absent(&self, value: &T, ttl: Option<Duration>) -> Result<bool> {
        self.inner.set_if_absent(&value.to_string(), ttl).await
    }

    /// Deletes the value; whether one was there.
    ///
    /// # Errors
    /// As [`StringKey::delete`].
    pub async fn delete(&self) -> Result<bool> {
        self.inner.delete().await
    }

    /// The time the value has left (`None`: no lifetime, or no value).
    ///
    /// # Errors
    /// As [`StringKey::ttl`].
    pub async fn ttl(&self) -> Result<Option<Duration>> {
        self.inner.ttl().await
    }
}

/// A counter's `SET` that refuses a key of another type instead of
/// replacing it, with the family's lifetime when it has one.
static COUNTER_SET: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "\
-- KEYS[1] the counter; ARGV[1] the count; ARGV[2] lifetime ms or ''.
-- Returns the count; a key of another type is a WRONGTYPE error.
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'none' and t ~= 'string' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if ARGV[2] == '' then
  redis.call('SET', KEYS[1], ARGV[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return tonumber(ARGV[1])
",
    )
});

#[cfg(test)]
mod tests {
    #[test]
    fn counts_in_the_servers_grammar_only() {
        for ok in ["0", "7", "-7", "9223372036854775807", "-9223372036854775808"] {
            assert!(super::canonical_count(ok), "{ok}");
        }
        for bad in ["", "-", "+5", "007", "-0", "1e3", " 5", "5 ", "0x10"] {
            assert!(!super::canonical_count(bad), "{bad}");
        }
    }
}
