//! A set family (`ref:{kind}:{scope}`): members are texts.

use super::KeyHandle;
use crate::error::Result;
use crate::page::{IdPage, Page, sscan_page};

/// One key of a set family: members added and removed one round trip each,
/// read by membership, count or page.
#[derive(Debug, Clone)]
pub struct SetKey {
    pub(super) t: KeyHandle,
}

impl SetKey {
    /// The key.
    pub fn key(&self) -> &str {
        &self.t.key
    }

    /// Adds members (`SADD`); how many were not there. Safe to repeat.
    ///
    /// # Errors
    /// Connection errors ([`Error::UnknownOutcome`](crate::Error::UnknownOutcome)
    /// after every attempt), a key of another type.
    pub async fn add<M: AsRef<str>>(&self, members: &[M]) -> Result<u64> {
        self.t
            .observed("add", async {
                if members.is_empty() {
                    return Ok(0);
                }
                let mut cmd = redis::cmd("SADD");
                cmd.arg(&self.t.key);
                for m in members {
                    cmd.arg(m.as_ref());
                }
                self.t.repeatable("set add", cmd).await
            })
            .await
    }

    /// Removes members (`SREM`); how many were there. Safe to repeat.
    ///
    /// # Errors
    /// As [`SetKey::add`].
    pub async fn remove<M: AsRef<str>>(&self, members: &[M]) -> Result<u64> {
        self.t
            .observed("remove", async {
                if members.is_empty() {
                    return Ok(0);
                }
                let mut cmd = redis::cmd("SREM");
                cmd.arg(&self.t.key);
                for m in members {
                    cmd.arg(m.as_ref());
                }
                self.t.repeatable("set remove", cmd).await
            })
            .await
    }

    /// Whether `member` is in the set (`SISMEMBER`).
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn contains(&self, member: &str) -> Result<bool> {
        self.t
            .observed("contains", async {
                self.t.read(redis::cmd("SISMEMBER").arg(&self.t.key).arg(member).clone()).await
            })
            .await
    }

    /// How many members (`SCARD`).
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn count(&self) -> Result<u64> {
        self.t.observed("count", async { self.t.read(redis::cmd("SCARD").arg(&self.t.key).clone()).await }).await
    }

    /// A page of members by `SSCAN` (see [`Page`] for what a walk returns).
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn members(&self, page: Page) -> Result<IdPage> {
        self.t
            .observed("members", async {
                let (valkey, key) = (&self.t.valkey, self.t.key.as_str());
                crate::retry::read_bounded(valkey, || sscan_page(valkey, key, page.clone())).await
            })
            .await
    }
}
