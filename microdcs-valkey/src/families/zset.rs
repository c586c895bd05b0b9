//! A sorted-set family: members with scores, read by score or rank in
//! either direction, optionally bounded to the highest-ranked `max`.

use std::sync::LazyLock;

use super::KeyHandle;
use crate::error::{Error, Result};
use crate::retry::{self, LuaScript};

/// One key of a sorted-set family.
#[derive(Debug, Clone)]
pub struct SortedSetKey {
    pub(super) t: KeyHandle,
}

pub use crate::page::Scored;

fn finite(score: f64, what: &str) -> Result<()> {
    if score.is_finite() {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!("{what} must be a finite number, not {score}")))
    }
}

impl SortedSetKey {
    /// The key.
    pub fn key(&self) -> &str {
        &self.t.key
    }

    /// Adds `member` with `score` or moves it there (`ZADD`); whether it is
    /// new. Safe to repeat.
    ///
    /// # Errors
    /// A score that is not finite (nothing sent), connection errors
    /// ([`Error::UnknownOutcome`] after every attempt), a key of another type.
    pub async fn add(&self, member: &str, score: f64) -> Result<bool> {
        self.t
            .observed("add", async {
                finite(score, "a score")?;
                let n: u64 = self
                    .t
                    .repeatable("sorted set add", redis::cmd("ZADD").arg(&self.t.key).arg(score).arg(member).clone())
                    .await?;
                Ok(n > 0)
            })
            .await
    }

    /// Adds `member` with `score` and keeps only the `max` members of the
    /// highest scores, in one script (`ZADD` + `ZREMRANGEBYRANK`); how many
    /// were evicted. Safe to repeat.
    ///
    /// # Errors
    /// As [`SortedSetKey::add`]; a `max` of 0.
    pub async fn add_bounded(&self, member: &str, score: f64, max: u64) -> Result<u64> {
        self.t
            .observed("add_bounded", async {
                finite(score, "a score")?;
                if max == 0 {
                    return Err(Error::InvalidArgument("a bounded sorted set keeps at least one member".into()));
                }
                let (score, max) = (score.to_string(), max.to_string());
                let px = self.t.px(None);
                let call = BOUNDED_SCRIPT
                    .call()
                    .key(&self.t.key)
                    .arg(member.as_bytes())
                    .arg(score.as_bytes())
                    .arg(max.as_bytes())
                    .arg(px.as_bytes());
                let v = retry::invoke_call(&self.t.valkey, &call, "sorted set add", &self.t.key)
                    .await
                    .map_err(|f| f.into_error(&self.t.key))?;
                retry::reply(v.value).map_err(|e| Error::from_redis(e, &self.t.key))
            })
            .await
    }

    /// Removes `member` (`ZREM`); whether it was there. Safe to repeat.
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn remove(&self, member: &str) -> Result<bool> {
        self.t
            .observed("remove", async {
                let n: u64 = self
                    .t
                    .repeatable("sorted set remove", redis::cmd("ZREM").arg(&self.t.key).arg(member).clone())
                    .await?;
                Ok(n > 0)
            })
            .await
    }

    /// Removes the members with `min <= score <= max`
    /// (`ZREMRANGEBYSCORE`; infinite bounds allowed); how many. Safe to
    /// repeat.
    ///
    /// # Errors
    /// A NaN bound ([`Error::InvalidArgument`], nothing sent), connection
    /// errors, a key of another type.
    pub async fn remove_by_score(&self, min: f64, max: f64) -> Result<u64> {
        self.t
            .observed("remove_by_score", async {
                if min.is_nan() || max.is_nan() {
                    return Err(Error::InvalidArgument("a score bound must not be NaN".into()));
                }
                let (min, max) = (crate::page::score_bound(min), crate::page::score_bound(max));
                self.t
                    .repeatable(
                        "sorted set remove by score",
                        redis::cmd("ZREMRANGEBYSCORE").arg(&self.t.key).arg(min).arg(max).clone(),
                    )
                    .await
            })
            .await
    }

    /// Removes the members of ranks `start..=stop`, lowest score first
    /// (`ZREMRANGEBYRANK`; negative ranks count from the highest); how many.
    /// Not safe to repeat blindly (the ranks move), so one attempt.
    ///
    /// # Errors
    /// Connection errors ([`Error::UnknownOutcome`] after a lost answer), a
    /// key of another type.
    pub async fn remove_by_rank(&self, start: i64, stop: i64) -> Result<u64> {
        self.t
            .observed("remove_by_rank", async {
                self.t.once(redis::cmd("ZREMRANGEBYRANK").arg(&self.t.key).arg(start).arg(stop).clone()).await
            })
            .await
    }

    /// The score of `member`, if present (`ZSCORE`).
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn score(&self, member: &str) -> Result<Option<f64>> {
        self.t
            .observed("score", async { self.t.read(redis::cmd("ZSCORE").arg(&self.t.key).arg(member).clone()).await })
            .await
    }

    /// How many members (`ZCARD`).
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn count(&self) -> Result<u64> {
        self.t.observed("count", async { self.t.read(redis::cmd("ZCARD").arg(&self.t.key).clone()).await }).await
    }

    /// Members with `min <= score <= max`, lowest first (highest first when
    /// `reverse`), at most `limit` (`ZRANGE ... BYSCORE LIMIT`).
    ///
    /// # Errors
    /// A bound that is NaN, connection errors, a key of another type.
    pub async fn range_by_score(&self, min: f64, max: f64, reverse: bool, limit: usize) -> Result<Vec<Scored>> {
        self.t
            .observed("range_by_score", async {
                if min.is_nan() || max.is_nan() {
                    return Err(Error::InvalidArgument("a score bound must not be NaN".into()));
                }
                let bound = crate::page::score_bound;
                let (from, to) = if reverse { (bound(max), bound(min)) } else { (bound(min), bound(max)) };
                let mut cmd = redis::cmd("ZRANGE");
                cmd.arg(&self.t.key).arg(from).arg(to).arg("BYSCORE");
                if reverse {
                    cmd.arg("REV");
                }
                cmd.arg("LIMIT").arg(0).arg(limit.clamp(1, crate::page::Page::MAX)).arg("WITHSCORES");
                self.t.read(cmd).await.map(Scored::pairs)
            })
            .await
    }

    /// Members of ranks `start..=stop` (0 is the lowest score; the highest
    /// when `reverse`; negative ranks count from the other end), with
    /// scores; at most [`Page::MAX`](crate::page::Page::MAX) of them (a wider
    /// window keeps its first `Page::MAX` from `start`; the window is made
    /// whole against the set's size in the server).
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn range_by_rank(&self, start: i64, stop: i64, reverse: bool) -> Result<Vec<Scored>> {
        self.t
            .observed("range_by_rank", async { self.t.ranks(false, start, stop, reverse).await.map(Scored::pairs) })
            .await
    }
}

static BOUNDED_SCRIPT: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new(BOUNDED));

const BOUNDED: &str = "\
-- KEYS[1] the sorted set. ARGV[1] member; ARGV[2] score; ARGV[3] how many
-- members to keep (those of the highest scores); ARGV[4] the family's
-- lifetime in milliseconds, or '' for none.
-- Returns how many members were evicted.
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
if ARGV[4] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[3])
if over <= 0 then return 0 end
return redis.call('ZREMRANGEBYRANK', KEYS[1], 0, over - 1)
";
