// Just over 600 lines: the stream handle and its consumer-group calls share
// one retry rule and one reply decoding. The seam if it grows: the group
// calls (claim, ack, pending) into streams/group.rs.
//! The streams helper: groups, append, non-blocking group reads,
//! acknowledge, acknowledged-only trim and autoclaim that counts entries
//! deleted while pending.
//!
//! [`Streams`] wraps the stream commands of a [`Valkey`] handle; the
//! [`poller`](crate::poller) uses it for every consumer, and you use it
//! directly for streams you append to yourself (a work or audit stream) or
//! to read a stream outside the poller. Entries come back as
//! [`StreamEntry`] (id and fields in order; [`StreamEntry::field`] reads
//! one as text). [`Streams::read_or_gap`] reads like [`Streams::read`] but
//! first checks, in the same script, whether a length bound trimmed
//! entries the group had not read: then it returns
//! [`NewEntries::Gap`] with a [`Gap`] (the last entry the group had, the
//! first it gets, how many were lost) and reads nothing until it is told
//! the gap was seen.
//!
//! ```no_run
//! use microdcs_valkey::{Valkey, streams::Streams};
//!
//! # #[derive(Debug, serde::Serialize, serde::Deserialize, microdcs_valkey::Document)]
//! # struct Job { id: String, scope: String }
//! microdcs_valkey::keyspace! {
//!     Plant { documents: [Job], audit: stream("audit:{scope}") }
//! }
//!
//! # async fn demo(valkey: Valkey) -> Result<(), Box<dyn std::error::Error>> {
//! let stream = &Plant::audit_key(valkey.prefix(), "s1")?; // a declared family's key
//! let streams = Streams::new(valkey);
//! streams.create_group(stream, "auditor").await?; // safe to repeat
//! streams.append(stream, &[("who", b"alice".as_slice()), ("did", b"login".as_slice())]).await?;
//! let entries = streams.read(stream, "auditor", "instance-1", 100).await?; // returns at once
//! for e in &entries {
//!     println!("{} {:?}", e.id, e.field("who"));
//! }
//! let ids: Vec<String> = entries.iter().map(|e| e.id.clone()).collect();
//! streams.ack(stream, "auditor", &ids).await?;
//! streams.trim_acknowledged(stream).await?; // only what every group acknowledged
//! # Ok(()) }
//! ```
//!
//! # Guarantees and bounds
//!
//! No blocking command is used anywhere: a blocked read would hold a
//! connection of the shared multiplexed client and stall every other call
//! behind it, so reads return at once and the poller decides when to read
//! again. A call handles at most [`Streams::MAX_COUNT`] entries.
//!
//! - Reads (`read`, `read_from`, `read_or_gap`, `autoclaim`) wait at most
//!   `ResponseTimeout`, plus one `WriteRetryDelay` and a quick second try
//!   after a lost connection. Entries a read delivered whose reply was lost
//!   stay pending for the consumer and come with a read from `0`.
//! - Calls safe to repeat (`create_group`, `ack`, `trim_acknowledged`) run
//!   under the write rule: at most `WriteAttempts x (ResponseTimeout +
//!   WriteRetryDelay)`, then [`Error::UnknownOutcome`].
//! - An append is sent once (a repeat would add a second entry): within
//!   `ResponseTimeout`, and no reply in time is [`Error::UnknownOutcome`]:
//!   the entry may or may not be there.
//! - `trim_acknowledged` never removes an entry a group has pending or has
//!   not been delivered, and leaves a stream without groups alone;
//!   `autoclaim` never hands out an entry deleted while pending: it is
//!   logged and counted (`microdcs.valkey.stream.entries_lost`).
//! - A missing group is the server's `NOGROUP` error, matched by code; a
//!   key of another type is [`Error::WrongType`].
//!
//! Retention, gaps and how the poller uses these calls are in the guide:
//! [Streams, consumers and
//! retention](https://github.com/microdcs/microdcs/blob/main/docs/guide/07-streams-and-consumers.md).

use std::time::Duration;

use crate::client::Connection;
use redis::Value;

use crate::client::Valkey;
use crate::error::{Error, Result};
use crate::retry::{self, LuaScript};

/// One stream entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEntry {
    /// Entry id (`ms-seq`).
    pub id: String,
    /// Fields in order.
    pub fields: Vec<(String, Vec<u8>)>,
}

impl StreamEntry {
    /// The value of a field as text, if present and UTF-8.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.iter().find(|(f, _)| f == name).and_then(|(_, v)| std::str::from_utf8(v).ok())
    }
}

/// Trim to what every group has acknowledged, atomically (a group created
/// between reading the groups and trimming cannot lose entries).
const TRIM_ACKNOWLEDGED: &str = concat!(include_str!("streams/ids.lua"), include_str!("streams/trim_acknowledged.lua"));

static TRIM_SCRIPT: std::sync::LazyLock<LuaScript> = std::sync::LazyLock::new(|| LuaScript::new(TRIM_ACKNOWLEDGED));

/// Creates a consumer group reading from the start, with its read counter
/// at the entries already removed from the stream, so the counter is exact
/// from the first read on and a later trim of entries it never read shows
/// (see [`READ_OR_GAP`]).
const CREATE_GROUP: &str = include_str!("streams/create_group.lua");

static CREATE_GROUP_SCRIPT: std::sync::LazyLock<LuaScript> = std::sync::LazyLock::new(|| LuaScript::new(CREATE_GROUP));

/// Reads new entries for a group, unless entries the group has not read
/// were removed from the stream (a trim by `MAXLEN`): then it reads nothing
/// and reports the gap, in the same atomic step, so no later trim can slip
/// between the check and the read.
const READ_OR_GAP: &str = concat!(include_str!("streams/ids.lua"), include_str!("streams/read_or_gap.lua"));

static READ_OR_GAP_SCRIPT: std::sync::LazyLock<LuaScript> = std::sync::LazyLock::new(|| LuaScript::new(READ_OR_GAP));

/// Entries a consumer group had not read that were removed from its stream
/// (trimmed by the change stream's length bound): what the group lost.
///
/// The group had everything up to and including `last_had`; the next entry
/// it gets is `first_gets`; every entry written between the two is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Gap {
    /// The stream.
    pub stream: String,
    /// The last entry id the group had been handed (`0-0`: none yet, or
    /// unknown for a group made again after it went missing).
    pub last_had: String,
    /// The first entry id it gets after the gap; `None` when the stream
    /// holds no entry now.
    pub first_gets: Option<String>,
    /// How many entries were lost; `None` when the server cannot tell
    /// (entries were deleted from the middle of the stream by `XDEL`, or
    /// the group went missing and was made again after entries had been
    /// trimmed).
    pub lost: Option<u64>,
    /// The entries removed from the stream when the gap was seen, for the
    /// read that moves past it.
    removed: Option<u64>,
}

impl Gap {
    /// The gap of a group made again after it went missing (a server that
    /// lost it, a replica promoted before it learnt it) on a stream that
    /// had removed entries: what the lost group had read is unknown, so
    /// `last_had` is `0-0`, and `lost` and `first_gets` are `None`.
    pub(crate) fn group_lost(stream: &str) -> Gap {
        Gap { stream: stream.to_owned(), last_had: "0-0".into(), first_gets: None, lost: None, removed: None }
    }
}

/// What [`Streams::read_or_gap`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NewEntries {
    /// New entries (possibly none).
    Entries(Vec<StreamEntry>),
    /// Entries the group had not read were removed; nothing was read.
    /// Read again with the gap as `told` to move past it.
    Gap(Gap),
}

/// The streams helper.
#[derive(Debug, Clone)]
pub struct Streams {
    valkey: Valkey,
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

/// One consumer group of a stream, as `XINFO GROUPS` reports it (one
/// reading of that reply, for the poller's samples and the inspector).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupInfo {
    pub(crate) name: String,
    pub(crate) consumers: u64,
    /// Entries delivered and not acknowledged.
    pub(crate) pending: u64,
    /// Entries not yet delivered to the group; `None` when the server
    /// cannot tell (after entries were deleted from the middle).
    pub(crate) lag: Option<u64>,
    /// The id of the last entry delivered to the group (`0-0`: none).
    pub(crate) last_delivered: String,
}

impl GroupInfo {
    /// One group of the reply: a flat list of name/value pairs (a map in RESP3).
    pub(crate) fn from_reply(v: Value) -> GroupInfo {
        let fields: std::collections::HashMap<String, Value> = match v {
            Value::Array(items) => items.chunks_exact(2).filter_map(|p| Some((text(&p[0])?, p[1].clone()))).collect(),
            Value::Map(items) => items.into_iter().filter_map(|(k, v)| Some((text(&k)?, v))).collect(),
            _ => std::collections::HashMap::new(),
        };
        let num = |k: &str| match fields.get(k) {
            Some(Value::Int(i)) => u64::try_from(*i).ok(),
            _ => None,
        };
        GroupInfo {
            name: fields.get("name").and_then(text).unwrap_or_default(),
            consumers: num("consumers").unwrap_or(0),
            pending: num("pending").unwrap_or(0),
            lag: num("lag"),
            last_delivered: fields.get("last-delivered-id").and_then(text).unwrap_or_else(|| "0-0".to_owned()),
        }
    }
}

fn entries(v: &Value) -> Vec<StreamEntry> {
    let Value::Array(items) = v else { return Vec::new() };
    items
        .iter()
        .filter_map(|e| {
            let Value::Array(parts) = e else { return None };
            let id = text(parts.first()?)?;
            let fields = match parts.get(1) {
                Some(Value::Array(kv)) => kv
                    .chunks(2)
                    .filter_map(|c| {
                        let k = text(c.first()?)?;
                        let v = match c.get(1)? {
                            Value::BulkString(b) => b.clone(),
                            other => text(other)?.into_bytes(),
                        };
                        Some((k, v))
                    })
                    .collect(),
                Some(Value::Map(kv)) => {
                    kv.iter().filter_map(|(k, v)| Some((text(k)?, text(v).unwrap_or_default().into_bytes()))).collect()
                }
                _ => Vec::new(),
            };
            Some(StreamEntry { id, fields })
        })
        .collect()
}

impl Streams {
    /// The most entries one call reads, claims or asks for: a larger count
    /// is taken as this many. The server refuses counts near the integer
    /// limits, and one reply of that size would hold the shared connection
    /// for every other caller.
    pub const MAX_COUNT: usize = 10_000;

    /// The helper on this connection.
    pub fn new(valkey: Valkey) -> Self {
        Streams { valkey }
    }

    /// A count as sent: at least 1, at most [`Streams::MAX_COUNT`].
    fn count(count: usize) -> usize {
        count.clamp(1, Self::MAX_COUNT)
    }

    /// Creates `group` on `stream` (and the stream) reading from the start;
    /// an existing group is fine. Its read counter starts at the entries
    /// already removed from the stream (`ENTRIESREAD`), so a later trim of
    /// entries it has not read is seen by [`Streams::read_or_gap`].
    ///
    /// Safe to repeat, so it runs under the write rule: ends within
    /// `WriteAttempts x (ResponseTimeout + WriteRetryDelay)`, with
    /// [`Error::UnknownOutcome`] when no attempt got an answer.
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn create_group(&self, stream: &str, group: &str) -> Result<()> {
        self.make_group(stream, group).await.map(|_| ())
    }

    /// [`Streams::create_group`], telling how many entries the stream had
    /// removed before the group was made (0 when it existed already): a
    /// group made again after it went missing may have lost those.
    pub(crate) async fn make_group(&self, stream: &str, group: &str) -> Result<u64> {
        // The stream is not the command's first argument: on a cluster it
        // goes to the stream's primary by its slot, not to a random node.
        let call = CREATE_GROUP_SCRIPT.call().key(stream).arg(group.as_bytes());
        let call = &call;
        let attempts = std::sync::atomic::AtomicU32::new(0);
        let attempts = &attempts;
        let run = |mut con: Connection| async move {
            attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            call.run(&mut con).await
        };
        let reply =
            retry::repeatable(&self.valkey, "group create", stream, run).await.map_err(|f| f.into_error(stream))?;
        let corrupt =
            || Error::Corrupt { key: stream.to_owned(), reason: "the group script's reply has another shape".into() };
        let Value::Array(parts) = reply else { return Err(corrupt()) };
        let (made, removed) = match parts.as_slice() {
            [Value::Int(made), Value::Int(removed)] => (*made == 1, u64::try_from(*removed).unwrap_or(0)),
            _ => return Err(corrupt()),
        };
        // A group found existing on an attempt after one whose reply was
        // lost may be the one that attempt made.
        let ours = made || attempts.load(std::sync::atomic::Ordering::Relaxed) > 1;
        Ok(if ours { removed } else { 0 })
    }

    /// Appends an entry with no length limit (work and outbox streams).
    ///
    /// Sent once (a second `XADD` would add a second entry): ends within
    /// `ResponseTimeout`; no answer in time is [`Error::UnknownOutcome`]
    /// (also [`Error::is_connection`]): the entry may or may not be there. On
    /// a cluster, an answer proving it did not run (a slot moved, a
    /// failover in progress) sends it again, for at most `WriteAttempts x
    /// (ResponseTimeout + WriteRetryDelay)`.
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn append(&self, stream: &str, fields: &[(&str, &[u8])]) -> Result<String> {
        let mut cmd = redis::cmd("XADD");
        cmd.arg(stream).arg("*");
        for (k, v) in fields {
            cmd.arg(*k).arg(*v);
        }
        self.append_once(stream, &cmd).await
    }

    /// Appends with `MAXLEN ~ max_len` (change streams).
    ///
    /// Sent once, bounded like [`Streams::append`].
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn append_capped(&self, stream: &str, max_len: u64, fields: &[(&str, &[u8])]) -> Result<String> {
        let mut cmd = redis::cmd("XADD");
        // The server takes a signed 64-bit length.
        cmd.arg(stream).arg("MAXLEN").arg("~").arg(max_len.min(i64::MAX as u64)).arg("*");
        for (k, v) in fields {
            cmd.arg(*k).arg(*v);
        }
        self.append_once(stream, &cmd).await
    }

    async fn append_once(&self, stream: &str, cmd: &redis::Cmd) -> Result<String> {
        retry::once(&self.valkey, |mut con| async move { cmd.query_async(&mut con).await })
            .await
            .map_err(|e| crate::error::once_error(e, stream))
    }

    /// Reads up to `count` (at most [`Streams::MAX_COUNT`]) new entries for
    /// `consumer` of `group`, without blocking: returns at once, possibly
    /// nothing. Bounded like [`Streams::read_from`].
    ///
    /// # Errors
    /// Connection errors, a missing group (`NOGROUP`).
    pub async fn read(&self, stream: &str, group: &str, consumer: &str, count: usize) -> Result<Vec<StreamEntry>> {
        self.read_from(stream, group, consumer, count, ">").await
    }

    /// Reads up to `count` new entries like [`Streams::read`], unless
    /// entries the group has not read were removed from the stream since its
    /// last read (trimmed by a length bound): then nothing is read and the
    /// [`Gap`] is returned, checked and read in one atomic step. Call again
    /// with that gap as `told` once the consumer knows, to read past it
    /// (a further trim meanwhile is a new gap). Bounded like a read.
    ///
    /// # Errors
    /// Connection errors, a missing group (`NOGROUP`), a key of another type,
    /// a reply of another shape ([`Error::Corrupt`]).
    pub async fn read_or_gap(
        &self,
        stream: &str,
        group: &str,
        consumer: &str,
        count: usize,
        told: Option<&Gap>,
    ) -> Result<NewEntries> {
        let count = Self::count(count).to_string();
        let (last, removed) = match told {
            Some(g) => (g.last_had.clone(), g.removed.map(|n| n.to_string()).unwrap_or_default()),
            None => (String::new(), String::new()),
        };
        let call = READ_OR_GAP_SCRIPT
            .call()
            .key(stream)
            .arg(group.as_bytes())
            .arg(consumer.as_bytes())
            .arg(count.as_bytes())
            .arg(last.as_bytes())
            .arg(removed.as_bytes());
        let call = &call;
        let v: Value = retry::read(&self.valkey, |mut con| async move { call.run(&mut con).await })
            .await
            .map_err(|e| Error::from_redis(e, stream))?;
        let corrupt =
            || Error::Corrupt { key: stream.to_owned(), reason: "the read script's reply has another shape".into() };
        let Value::Array(mut parts) = v else { return Err(corrupt()) };
        if parts.len() != 2 {
            return Err(corrupt());
        }
        let read = parts.pop().unwrap_or(Value::Nil);
        let gap = match parts.pop() {
            Some(Value::Array(g)) => g,
            _ => return Err(corrupt()),
        };
        if gap.is_empty() {
            return Ok(NewEntries::Entries(match &read {
                Value::Array(streams) => streams
                    .iter()
                    .flat_map(|s| match s {
                        Value::Array(pair) if pair.len() == 2 => entries(&pair[1]),
                        _ => Vec::new(),
                    })
                    .collect(),
                Value::Map(m) => m.iter().flat_map(|(_, e)| entries(e)).collect(),
                _ => Vec::new(),
            }));
        }
        let field = |i: usize| gap.get(i).and_then(text).ok_or_else(corrupt);
        let number = |i: usize| -> Result<Option<u64>> {
            let t = field(i)?;
            if t.is_empty() { Ok(None) } else { t.parse().map(Some).map_err(|_| corrupt()) }
        };
        let first = field(1)?;
        Ok(NewEntries::Gap(Gap {
            stream: stream.to_owned(),
            last_had: field(0)?,
            first_gets: (!first.is_empty()).then_some(first),
            lost: number(2)?,
            removed: number(3)?,
        }))
    }

    /// Like [`Streams::read`] from `id`: `>` for new entries, `0` for this
    /// consumer's own pending entries (delivered, not yet acknowledged).
    ///
    /// Bounded like every read: within `ResponseTimeout`, plus one
    /// `WriteRetryDelay` and a quick second read after a dropped connection.
    /// Entries delivered by a read whose answer was lost stay pending for
    /// `consumer` and come with a read from `0`.
    ///
    /// # Errors
    /// Connection errors, a missing group (`NOGROUP`).
    pub async fn read_from(
        &self,
        stream: &str,
        group: &str,
        consumer: &str,
        count: usize,
        id: &str,
    ) -> Result<Vec<StreamEntry>> {
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(group)
            .arg(consumer)
            .arg("COUNT")
            .arg(Self::count(count))
            .arg("STREAMS")
            .arg(stream)
            .arg(id);
        let cmd = &cmd;
        let v: Value = retry::read(&self.valkey, |mut con| async move { cmd.query_async(&mut con).await })
            .await
            .map_err(|e| Error::from_redis(e, stream))?;
        // RESP2: [[stream, entries]]; RESP3: {stream: entries}; nil when nothing.
        Ok(match &v {
            Value::Array(streams) => streams
                .iter()
                .flat_map(|s| match s {
                    Value::Array(pair) if pair.len() == 2 => entries(&pair[1]),
                    _ => Vec::new(),
                })
                .collect(),
            Value::Map(m) => m.iter().flat_map(|(_, e)| entries(e)).collect(),
            _ => Vec::new(),
        })
    }

    /// Acknowledges entries.
    ///
    /// Safe to repeat, so it runs under the write rule: ends within
    /// `WriteAttempts x (ResponseTimeout + WriteRetryDelay)`, with
    /// [`Error::UnknownOutcome`] when no attempt got an answer.
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn ack(&self, stream: &str, group: &str, ids: &[String]) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let mut cmd = redis::cmd("XACK");
        cmd.arg(stream).arg(group).arg(ids);
        let cmd = &cmd;
        retry::repeatable(&self.valkey, "acknowledge", stream, |mut con| async move { cmd.query_async(&mut con).await })
            .await
            .map_err(|f| f.into_error(stream))
    }

    /// Removes the entries every group has acknowledged: below the lowest
    /// pending id of each group and never past what a group has been
    /// delivered (its last-delivered id). Works without `XACKDEL`. A stream
    /// without groups is left alone. Returns the number of entries removed.
    ///
    /// Safe to repeat, so it runs under the write rule: ends within
    /// `WriteAttempts x (ResponseTimeout + WriteRetryDelay)`, with
    /// [`Error::UnknownOutcome`] when no attempt got an answer.
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn trim_acknowledged(&self, stream: &str) -> Result<u64> {
        let call = TRIM_SCRIPT.call().key(stream);
        let call = &call;
        let v =
            retry::repeatable(
                &self.valkey,
                "acknowledged trim",
                stream,
                |mut con| async move { call.run(&mut con).await },
            )
            .await
            .map_err(|f| f.into_error(stream))?;
        retry::reply(v).map_err(|e| Error::from_redis(e, stream))
    }

    /// The consumer groups of `stream` with their pending entries and lag,
    /// bounded like a read.
    ///
    /// # Errors
    /// Connection errors, a stream that does not exist, a key of another type.
    pub(crate) async fn groups(&self, stream: &str) -> Result<Vec<GroupInfo>> {
        let cmd = redis::cmd("XINFO").arg("GROUPS").arg(stream).clone();
        let cmd = &cmd;
        let groups: Vec<Value> = retry::read(&self.valkey, |mut con| async move { cmd.query_async(&mut con).await })
            .await
            .map_err(|e| Error::from_redis(e, stream))?;
        Ok(groups.into_iter().map(GroupInfo::from_reply).collect())
    }

    /// When the oldest entry `group` has not handled yet was written (the
    /// milliseconds of its id): its oldest pending entry, else the first
    /// entry after `group`'s last delivered one; `None` when nothing waits.
    /// One or two reads, bounded like a read.
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub(crate) async fn oldest_waiting(&self, stream: &str, g: &GroupInfo) -> Result<Option<u64>> {
        let ms = |id: &str| id.split_once('-').and_then(|(ms, _)| ms.parse::<u64>().ok());
        if g.pending > 0 {
            let cmd = redis::cmd("XPENDING").arg(stream).arg(&g.name).clone();
            let cmd = &cmd;
            let v: Value = retry::read(&self.valkey, |mut con| async move { cmd.query_async(&mut con).await })
                .await
                .map_err(|e| Error::from_redis(e, stream))?;
            if let Value::Array(parts) = v
                && let Some(oldest) = parts.get(1).and_then(text)
            {
                return Ok(ms(&oldest));
            }
        }
        if g.lag == Some(0) {
            return Ok(None);
        }
        let cmd =
            redis::cmd("XRANGE").arg(stream).arg(format!("({}", g.last_delivered)).arg("+").arg("COUNT").arg(1).clone();
        let cmd = &cmd;
        let v: Value = retry::read(&self.valkey, |mut con| async move { cmd.query_async(&mut con).await })
            .await
            .map_err(|e| Error::from_redis(e, stream))?;
        Ok(entries(&v).first().and_then(|e| ms(&e.id)))
    }

    /// Claims up to `count` (at most [`Streams::MAX_COUNT`]) entries pending
    /// longer than `min_idle` for `consumer`. Entries deleted while pending
    /// are never returned: they are logged and counted
    /// (`microdcs.valkey.stream.entries_lost`).
    ///
    /// Bounded like a read: the first claim within `ResponseTimeout`, plus
    /// one `WriteRetryDelay` and a quick second try after a dropped
    /// connection; further claims (a long pending list is walked in steps)
    /// only while the first `ResponseTimeout` lasts. Entries claimed by a
    /// step whose answer was lost are pending for `consumer`: a read from
    /// `0` brings them.
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn autoclaim(
        &self,
        stream: &str,
        group: &str,
        consumer: &str,
        min_idle: Duration,
        count: usize,
    ) -> Result<Vec<StreamEntry>> {
        let count = Self::count(count);
        // The server takes a signed 64-bit number of milliseconds.
        let idle = u64::try_from(min_idle.as_millis()).unwrap_or(u64::MAX).min(i64::MAX as u64);
        let timeout = self.valkey.response_timeout();
        let deadline = tokio::time::Instant::now() + timeout;
        let mut start = "0-0".to_owned();
        let mut claimed = Vec::new();
        loop {
            let mut cmd = redis::cmd("XAUTOCLAIM");
            // Never more than what is still wanted: the claimed entries
            // become ours, and the caller asked for `count`.
            cmd.arg(stream).arg(group).arg(consumer).arg(idle).arg(&start).arg("COUNT").arg(count - claimed.len());
            let cmd = &cmd;
            let step = |mut con: Connection| async move { cmd.query_async::<Value>(&mut con).await };
            let v = if claimed.is_empty() && start == "0-0" {
                retry::read(&self.valkey, step).await.map_err(|e| Error::from_redis(e, stream))?
            } else {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                match retry::bounded(left, step(self.valkey.connection())).await {
                    Ok(v) => v,
                    // What was claimed so far is ours either way; the rest
                    // waits for the next call.
                    Err(e) if crate::error::is_unknown_outcome(&e) => {
                        tracing::debug!(stream, error = %e, "autoclaim step got no answer; returning what was claimed");
                        break;
                    }
                    Err(e) => return Err(Error::from_redis(e, stream)),
                }
            };
            let Value::Array(parts) = v else { break };
            let next = parts.first().and_then(text).unwrap_or_else(|| "0-0".to_owned());
            claimed.extend(entries(parts.get(1).unwrap_or(&Value::Nil)).into_iter().filter(|e| !e.fields.is_empty()));
            if let Some(Value::Array(deleted)) = parts.get(2)
                && !deleted.is_empty()
            {
                let ids: Vec<String> = deleted.iter().filter_map(text).collect();
                tracing::warn!(stream, group, lost = ids.len(), ids = ?ids, "stream entries were deleted while pending");
                self.valkey.metrics().add_entries_lost(ids.len() as u64);
            }
            if next == "0-0" || claimed.len() >= count {
                break;
            }
            start = next;
        }
        claimed.truncate(count);
        Ok(claimed)
    }
}

/// Whether a stream call failed because its consumer group does not exist
/// (the server's `NOGROUP`, matched by code).
pub(crate) fn is_no_group(e: &Error) -> bool {
    matches!(e, Error::Redis(r) if r.code() == Some("NOGROUP"))
}
