//! A channel family (`revoke:{scope}`): publish to everyone subscribed, and
//! subscribe.
//!
//! `channel<T>`: typed messages (`TypedChannel`), sent as their text and
//! parsed on receipt; a message that does not parse is an error, never skipped.

use std::fmt::Display;
use std::marker::PhantomData;
use std::str::FromStr;
use std::time::Duration;

use crate::client::Connection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc;

use super::{FromKey, KeyHandle, parse_text};
use crate::client::Valkey;
use crate::error::{Error, Result};
use crate::retry;

/// One channel of a channel family.
#[derive(Debug, Clone)]
pub struct ChannelKey {
    pub(super) t: KeyHandle,
}

/// A subscription to one channel: its messages in order, on a RESP3
/// connection of its own that subscribes again by itself after a reconnect
/// (messages published while it was down are lost: pub/sub keeps nothing).
/// Dropping it ends the subscription.
pub struct Subscription {
    channel: String,
    rx: mpsc::UnboundedReceiver<String>,
    // Held for its connection: dropping it closes the subscription.
    _con: Connection,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").field("channel", &self.channel).finish_non_exhaustive()
    }
}

impl Subscription {
    /// The channel name.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The next message, waiting at most `timeout`; `None` when none came
    /// in that time.
    pub async fn next(&mut self, timeout: Duration) -> Option<String> {
        tokio::time::timeout(timeout, self.rx.recv()).await.ok().flatten()
    }
}

impl ChannelKey {
    /// The channel name.
    pub fn channel(&self) -> &str {
        &self.t.key
    }

    /// Publishes `message` (`PUBLISH`); how many subscribers received it
    /// (on a cluster: subscribers on the node that took it; the message
    /// reaches every node). One attempt: after a lost answer it may or may
    /// not have been delivered, and a second attempt would deliver it twice.
    ///
    /// # Errors
    /// Connection errors ([`Error::UnknownOutcome`] after a lost answer).
    pub async fn publish(&self, message: &str) -> Result<u64> {
        self.t
            .observed("publish", async {
                self.t.once(redis::cmd("PUBLISH").arg(&self.t.key).arg(message).clone()).await
            })
            .await
    }

    /// Subscribes to the channel. Waits at most the connect timeout for the
    /// connection and the response timeout for the subscription.
    ///
    /// # Errors
    /// A handle made without a client (`Valkey::from_manager`: use
    /// `Valkey::connect` or `connect_url`), connection errors.
    pub async fn subscribe(&self) -> Result<Subscription> {
        self.t
            .observed("subscribe", async {
                let valkey = &self.t.valkey;
                let (tx, rx) = mpsc::unbounded_channel();
                let channel = self.t.key.clone();
                let ours = channel.clone();
                let sender = move |info: PushInfo| -> std::result::Result<(), ()> {
                    if info.kind == PushKind::Message {
                        let text = |v: Option<&Value>| match v {
                            Some(Value::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
                            Some(Value::SimpleString(s)) => Some(s.clone()),
                            _ => None,
                        };
                        if text(info.data.first()).as_deref() == Some(ours.as_str())
                            && let Some(message) = text(info.data.get(1))
                        {
                            let _ = tx.send(message);
                        }
                    }
                    Ok(())
                };
                let mut con = valkey.subscriber(sender).await.map_err(|e| match e {
                    Error::Redis(r) => Error::from_redis(r, &channel),
                    other => other,
                })?;
                retry::bounded(valkey.response_timeout(), con.subscribe(&channel))
                    .await
                    .map_err(|e| Error::from_redis(e, &channel))?;
                Ok(Subscription { channel, rx, _con: con })
            })
            .await
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
    fn from_family_key(valkey: Valkey, family: &'static str, key: String, ttl_ms: Option<u64>) -> Self {
        TypedChannel { inner: ChannelKey { t: KeyHandle { valkey, key, ttl_ms, family } }, _t: PhantomData }
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

impl crate::observe::Outcome for Subscription {
    fn outcome(&self) -> &'static str {
        "ok"
    }
}
