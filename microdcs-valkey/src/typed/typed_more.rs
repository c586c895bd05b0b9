//! `hash<K, V>` and `channel<T>` families: the text handles with typed
//! fields, values and messages, each stored as its text (`Display`) and
//! read back with `FromStr`; a text that does not parse is
//! [`Error::Corrupt`](crate::Error::Corrupt), never skipped or defaulted.

use std::fmt::Display;
use std::marker::PhantomData;
use std::str::FromStr;
use std::time::Duration;

use super::{ChannelKey, FromKey, HashKey, Subscription, Target, parse_text};
use crate::client::Valkey;
use crate::error::Result;

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
    fn from_key_ttl(valkey: Valkey, key: String, ttl_ms: Option<u64>) -> Self {
        TypedHash { inner: HashKey { t: Target { valkey, key, ttl_ms } }, _t: PhantomData }
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

/// One channel of a `channel<T>` family: messages of type `T`.
pub struct TypedChannel<T> {
    inner: ChannelKey,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for TypedChannel<T> {
    fn clone(&self) -> Self {
        TypedChannel { inner: self.inner.clone(), _t: PhantomData }
    }
}

impl<T> std::fmt::Debug for TypedChannel<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TypedChannel").field(&self.inner.channel()).finish()
    }
}

impl<T> FromKey for TypedChannel<T> {
    fn from_key_ttl(valkey: Valkey, key: String, ttl_ms: Option<u64>) -> Self {
        TypedChannel { inner: ChannelKey { t: Target { valkey, key, ttl_ms } }, _t: PhantomData }
    }
}

/// A subscription to a typed channel.
#[derive(Debug)]
pub struct TypedSubscription<T> {
    inner: Subscription,
    _t: PhantomData<fn() -> T>,
}

impl<T: FromStr> TypedSubscription<T> {
    /// The channel name.
    pub fn channel(&self) -> &str {
        self.inner.channel()
    }

    /// The next message, waiting at most `timeout`; `Ok(None)` when none
    /// came in that time.
    ///
    /// # Errors
    /// A message that is no `T` ([`Error::Corrupt`](crate::Error::Corrupt); the next call reads
    /// the message after it).
    pub async fn next(&mut self, timeout: Duration) -> Result<Option<T>> {
        match self.inner.next(timeout).await {
            None => Ok(None),
            Some(text) => parse_text(self.inner.channel(), "message ", &text).map(Some),
        }
    }
}

impl<T: FromStr + Display> TypedChannel<T> {
    /// The channel name.
    pub fn channel(&self) -> &str {
        self.inner.channel()
    }

    /// Publishes `message`; how many subscribers received it. One attempt,
    /// as [`ChannelKey::publish`].
    ///
    /// # Errors
    /// As [`ChannelKey::publish`].
    pub async fn publish(&self, message: &T) -> Result<u64> {
        self.inner.publish(&message.to_string()).await
    }

    /// Subscribes, as [`ChannelKey::subscribe`].
    ///
    /// # Errors
    /// As [`ChannelKey::subscribe`].
    pub async fn subscribe(&self) -> Result<TypedSubscription<T>> {
        Ok(TypedSubscription { inner: self.inner.subscribe().await?, _t: PhantomData })
    }
}
