//! A hash family (`publisher:cursors`): text fields to text values.
//!
//! `hash<K, V>`: the same hash with typed fields and values (`TypedHash`),
//! each stored as its text and read back with `FromStr`; a text that does
//! not parse is [`Error::Corrupt`](crate::Error::Corrupt), never skipped.

use std::fmt::Display;
use std::marker::PhantomData;
use std::str::FromStr;
use std::time::Duration;

use super::{FromKey, KeyHandle, parse_text};
use crate::client::Valkey;
use crate::error::{Error, Result};

/// One key of a hash family.
#[derive(Debug, Clone)]
pub struct HashKey {
    pub(super) t: KeyHandle,
}

/// A page of a hash's entries and the cursor of the next page (`None` at
/// the end). Like a set's pages: every entry present for the whole walk
/// comes, and exactly once unless the hash is resized during the walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashEntries {
    /// `(field, value)` pairs of this page.
    pub entries: Vec<(String, String)>,
    /// Pass to [`HashKey::entries`] for the next page.
    pub next: Option<u64>,
}

impl HashKey {
    /// The key.
    pub fn key(&self) -> &str {
        &self.t.key
    }

    /// The value of `field`, if set (`HGET`).
    ///
    /// # Errors
    /// Connection errors, a key of another type, a value that is not UTF-8.
    pub async fn get(&self, field: &str) -> Result<Option<String>> {
        self.t
            .observed("get", async {
                let raw: Option<Vec<u8>> = self.t.read(redis::cmd("HGET").arg(&self.t.key).arg(field).clone()).await?;
                raw.map(|b| {
                    String::from_utf8(b).map_err(|_| Error::Corrupt {
                        key: self.t.key.clone(),
                        reason: format!("field `{field}` is not UTF-8"),
                    })
                })
                .transpose()
            })
            .await
    }

    /// Sets `field` to `value` (`HSET`); whether the field is new. Safe to repeat.
    ///
    /// # Errors
    /// Connection errors ([`Error::UnknownOutcome`] after every attempt), a
    /// key of another type.
    pub async fn set(&self, field: &str, value: &str) -> Result<bool> {
        self.t
            .observed("set", async {
                let n: u64 = self
                    .t
                    .repeatable("hash set", redis::cmd("HSET").arg(&self.t.key).arg(field).arg(value).clone())
                    .await?;
                Ok(n > 0)
            })
            .await
    }

    /// Sets every `(field, value)` pair in one `HSET` (a field given twice
    /// takes its last value); how many fields are new. Nothing is sent for
    /// no pairs. A family declared with a lifetime gets it again in the
    /// same script. Safe to repeat.
    ///
    /// # Errors
    /// As [`HashKey::set`]; a key of another type is refused with nothing set.
    pub async fn set_many<F: AsRef<str>, V: AsRef<str>>(&self, pairs: &[(F, V)]) -> Result<u64> {
        self.t
            .observed("set_many", async {
                if pairs.is_empty() {
                    return Ok(0);
                }
                let mut cmd = redis::cmd("HSET");
                cmd.arg(&self.t.key);
                for (f, v) in pairs {
                    cmd.arg(f.as_ref()).arg(v.as_ref());
                }
                self.t.repeatable("hash set", cmd).await
            })
            .await
    }

    /// Adds `n` to the integer in `field` (`HINCRBY`; a missing field
    /// counts from 0) and returns the new value. One attempt: after a lost
    /// answer the outcome is unknown, since running it again would count
    /// twice.
    ///
    /// # Errors
    /// A field holding something that is not a 64-bit integer
    /// ([`Error::Corrupt`]), a sum that would overflow
    /// ([`Error::InvalidArgument`]; nothing changed either way), a key of
    /// another type, and after a lost answer [`Error::UnknownOutcome`].
    pub async fn increment(&self, field: &str, n: i64) -> Result<i64> {
        self.t.observed("increment", self.t.increment(Some(field), n)).await
    }

    /// Removes `field` (`HDEL`); whether it was there. Safe to repeat.
    ///
    /// # Errors
    /// As [`HashKey::set`].
    pub async fn delete(&self, field: &str) -> Result<bool> {
        self.t
            .observed("delete", async {
                let n: u64 =
                    self.t.repeatable("hash delete", redis::cmd("HDEL").arg(&self.t.key).arg(field).clone()).await?;
                Ok(n > 0)
            })
            .await
    }

    /// How many fields (`HLEN`).
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn count(&self) -> Result<u64> {
        self.t.observed("count", async { self.t.read(redis::cmd("HLEN").arg(&self.t.key).clone()).await }).await
    }

    /// A page of about `count` entries by `HSCAN`, from `cursor` (0 for the
    /// first page).
    ///
    /// # Errors
    /// Connection errors, a key of another type, entries that are not UTF-8.
    pub async fn entries(&self, cursor: u64, count: usize) -> Result<HashEntries> {
        self.t
            .observed("entries", async {
                let count = count.clamp(1, crate::page::Page::MAX);
                let (next, flat): (u64, Vec<String>) = self
                    .t
                    .read(redis::cmd("HSCAN").arg(&self.t.key).arg(cursor).arg("COUNT").arg(count).clone())
                    .await?;
                let entries = flat.chunks_exact(2).map(|p| (p[0].clone(), p[1].clone())).collect();
                Ok(HashEntries { entries, next: (next != 0).then_some(next) })
            })
            .await
    }
}

/// One key of a `hash<K, V>` family: fields of type `K`, values of type `V`.
pub struct TypedHash<K, V> {
    inner: HashKey,
    _t: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for TypedHash<K, V> {
    fn clone(&self) -> Self {
        TypedHash { inner: self.inner.clone(), _t: PhantomData }
    }
}

impl<K, V> std::fmt::Debug for TypedHash<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TypedHash").field(&self.inner.key()).finish()
    }
}

impl<K, V> FromKey for TypedHash<K, V> {
    fn from_family_key(valkey: Valkey, family: &'static str, key: String, ttl_ms: Option<u64>) -> Self {
        TypedHash { inner: HashKey { t: KeyHandle { valkey, key, ttl_ms, family } }, _t: PhantomData }
    }
}

/// A page of a typed hash's entries; see [`super::HashEntries`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedHashEntries<K, V> {
    /// `(field, value)` pairs of this page.
    pub entries: Vec<(K, V)>,
    /// Pass to [`TypedHash::entries`] for the next page.
    pub next: Option<u64>,
}

impl<K, V> TypedHash<K, V> {
    /// The time the hash has left (`None`: no lifetime, or no key); a
    /// family declared with `ttl = "..."` gets it again from every write.
    ///
    /// # Errors
    /// Connection errors.
    pub async fn ttl(&self) -> Result<Option<Duration>> {
        self.inner.ttl().await
    }
}

impl<K: FromStr + Display, V: FromStr + Display> TypedHash<K, V> {
    /// The key.
    pub fn key(&self) -> &str {
        self.inner.key()
    }

    /// The value of `field`, if set.
    ///
    /// # Errors
    /// Connection errors, a key of another type, a stored value that is no
    /// `V` ([`Error::Corrupt`](crate::Error::Corrupt)).
    pub async fn get(&self, field: &K) -> Result<Option<V>> {
        let got = self.inner.get(&field.to_string()).await?;
        got.map(|t| parse_text(self.key(), "value ", &t)).transpose()
    }

    /// Sets `field` to `value`; whether the field is new. Safe to repeat.
    ///
    /// # Errors
    /// As [`HashKey::set`].
    pub async fn set(&self, field: &K, value: &V) -> Result<bool> {
        self.inner.set(&field.to_string(), &value.to_string()).await
    }

    /// Sets every `(field, value)` pair in one write; how many fields are
    /// new. Safe to repeat.
    ///
    /// # Errors
    /// As [`HashKey::set_many`].
    pub async fn set_many(&self, pairs: &[(K, V)]) -> Result<u64> {
        let pairs: Vec<(String, String)> = pairs.iter().map(|(f, v)| (f.to_string(), v.to_string())).collect();
        self.inner.set_many(&pairs).await
    }

    /// Removes `field`; whether it was there. Safe to repeat.
    ///
    /// # Errors
    /// As [`HashKey::delete`].
    pub async fn delete(&self, field: &K) -> Result<bool> {
        self.inner.delete(&field.to_string()).await
    }

    /// How many fields.
    ///
    /// # Errors
    /// As [`HashKey::count`].
    pub async fn count(&self) -> Result<u64> {
        self.inner.count().await
    }

    /// A page of about `count` entries from `cursor` (0 for the first).
    ///
    /// # Errors
    /// As [`HashKey::entries`]; a field that is no `K` or a value that is
    /// no `V` ([`Error::Corrupt`](crate::Error::Corrupt)).
    pub async fn entries(&self, cursor: u64, count: usize) -> Result<TypedHashEntries<K, V>> {
        let page = self.inner.entries(cursor, count).await?;
        let entries = page
            .entries
            .iter()
            .map(|(f, v)| Ok((parse_text(self.key(), "field ", f)?, parse_text(self.key(), "value ", v)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(TypedHashEntries { entries, next: page.next })
    }
}

impl crate::observe::Outcome for HashEntries {
    fn outcome(&self) -> &'static str {
        "ok"
    }
}
