//! A hash family (`publisher:cursors`): text fields to text values.

use super::Target;
use crate::error::{Error, Result};

/// One key of a hash family.
#[derive(Debug, Clone)]
pub struct HashKey {
    pub(super) t: Target,
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
        let raw: Option<Vec<u8>> = self.t.read(redis::cmd("HGET").arg(&self.t.key).arg(field).clone()).await?;
        raw.map(|b| {
            String::from_utf8(b).map_err(|_| Error::Corrupt {
                key: self.t.key.clone(),
                reason: format!("field `{field}` is not UTF-8"),
            })
        })
        .transpose()
    }

    /// Sets `field` to `value` (`HSET`); whether the field is new. Safe to repeat.
    ///
    /// # Errors
    /// Connection errors ([`Error::UnknownOutcome`] after every attempt), a
    /// key of another type.
    pub async fn set(&self, field: &str, value: &str) -> Result<bool> {
        let n: u64 =
            self.t.repeatable("hash set", redis::cmd("HSET").arg(&self.t.key).arg(field).arg(value).clone()).await?;
        Ok(n > 0)
    }

    /// Removes `field` (`HDEL`); whether it was there. Safe to repeat.
    ///
    /// # Errors
    /// As [`HashKey::set`].
    pub async fn delete(&self, field: &str) -> Result<bool> {
        let n: u64 = self.t.repeatable("hash delete", redis::cmd("HDEL").arg(&self.t.key).arg(field).clone()).await?;
        Ok(n > 0)
    }

    /// How many fields (`HLEN`).
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn count(&self) -> Result<u64> {
        self.t.read(redis::cmd("HLEN").arg(&self.t.key).clone()).await
    }

    /// A page of about `count` entries by `HSCAN`, from `cursor` (0 for the
    /// first page).
    ///
    /// # Errors
    /// Connection errors, a key of another type, entries that are not UTF-8.
    pub async fn entries(&self, cursor: u64, count: usize) -> Result<HashEntries> {
        let count = count.clamp(1, crate::Page::MAX);
        let (next, flat): (u64, Vec<String>) =
            self.t.read(redis::cmd("HSCAN").arg(&self.t.key).arg(cursor).arg("COUNT").arg(count).clone()).await?;
        let entries = flat.chunks_exact(2).map(|p| (p[0].clone(), p[1].clone())).collect();
        Ok(HashEntries { entries, next: (next != 0).then_some(next) })
    }
}
