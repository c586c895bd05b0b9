//! `value<T>` families: one typed value per key, stored as its text.

use std::fmt::Display;
use std::marker::PhantomData;
use std::str::FromStr;
use std::time::Duration;

use super::{FromKey, Target, ValueKey};
use crate::client::Valkey;
use crate::error::Result;

/// One key of a `value<T>` family: a `T` stored as its text (`Display`)
/// and read back with `FromStr`, so a number is its decimal digits, as any
/// other client would write it. A stored text that does not parse as a `T`
/// is [`Error::Corrupt`](crate::Error::Corrupt), never a default.
pub struct TypedValue<T> {
    inner: ValueKey,
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
    fn from_key_ttl(valkey: Valkey, key: String, ttl_ms: Option<u64>) -> Self {
        TypedValue { inner: ValueKey { t: Target { valkey, key, ttl_ms } }, _t: PhantomData }
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
    /// [`ValueKey::set`].
    ///
    /// # Errors
    /// As [`ValueKey::set`].
    pub async fn set(&self, value: &T, ttl: Option<Duration>) -> Result<()> {
        self.inner.set(&value.to_string(), ttl).await
    }

    /// Sets the value only if none is set; whether it did. See
    /// [`ValueKey::set_if_absent`].
    ///
    /// # Errors
    /// As [`ValueKey::set_if_absent`].
    pub async fn set_if_absent(&self, value: &T, ttl: Option<Duration>) -> Result<bool> {
        self.inner.set_if_absent(&value.to_string(), ttl).await
    }

    /// Deletes the value; whether one was there.
    ///
    /// # Errors
    /// As [`ValueKey::delete`].
    pub async fn delete(&self) -> Result<bool> {
        self.inner.delete().await
    }

    /// The time the value has left (`None`: no lifetime, or no value).
    ///
    /// # Errors
    /// As [`ValueKey::ttl`].
    pub async fn ttl(&self) -> Result<Option<Duration>> {
        self.inner.ttl().await
    }
}
