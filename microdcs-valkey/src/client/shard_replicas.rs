//! How many replicas a cluster shard is configured with, for
//! [`Durability::every_replica`](crate::config::Durability::every_replica)
//! on a Valkey Cluster.
//!
//! A `WAIT n` for fewer than every replica of the shard can be answered by
//! a replica that is not the one promoted next; that replica then resyncs
//! from the promoted one and drops the write. Waiting for every replica
//! closes this: once one replica was promoted away, a deposed primary can
//! never gather all of them again. So the count must not shrink when a
//! replica fails or is promoted: it is the number of nodes of the shard
//! (`CLUSTER SHARDS`) other than the one serving its slots, failed ones
//! included (a failed node stays listed in its shard until it is
//! forgotten), and the most seen for that shard since the handle started
//! (a node forgotten with `CLUSTER FORGET` still counts until a new
//! handle). When the island's slot moves to another shard (a slot
//! migration), that shard's count applies.
//!
//! The count is learnt at the first write that waits this way (the write
//! waits for the answer, bounded by the response timeout; without an
//! answer it fails with a connection error before anything is written)
//! and asked again in the background when it is older than
//! [`REFRESH_AFTER`], so a replica added later is waited for too.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::{RedisResult, Value};

use super::Connection;

/// How old a count may get before a write asks for it again (in the
/// background: the write uses the count it has).
pub(crate) const REFRESH_AFTER: Duration = Duration::from_secs(5);

/// One shard as `CLUSTER SHARDS` answers it: its id, its slot ranges and
/// its number of nodes.
#[derive(Debug, PartialEq, Eq)]
struct Shard {
    id: String,
    slots: Vec<(u16, u16)>,
    nodes: u32,
}

/// The counts a handle learnt, per shard id: the most replicas seen.
#[derive(Default)]
pub(crate) struct ShardReplicas {
    learnt: Mutex<Learnt>,
    /// A background refresh is under way.
    busy: AtomicBool,
}

#[derive(Default)]
struct Learnt {
    /// The most replicas seen per shard id.
    most: HashMap<String, u32>,
    /// The count for the handle's slot (or the most of every shard, for a
    /// keyspace spread over slots) as last answered, and when.
    current: Option<(u32, Instant)>,
}

impl ShardReplicas {
    /// The replicas a write to `slot` waits for (every shard's most when
    /// `slot` is `None`: a keyspace sharded by scope writes to any). Asks
    /// the cluster when nothing was learnt yet (bounded by `timeout`), and
    /// in the background when the count is older than [`REFRESH_AFTER`].
    ///
    /// # Errors
    /// Nothing learnt yet and no node answered within `timeout`, or an
    /// answer that names no shard for `slot`.
    pub(crate) async fn count(
        self: &std::sync::Arc<Self>,
        con: &Connection,
        slot: Option<u16>,
        timeout: Duration,
    ) -> RedisResult<u32> {
        let current = self.learnt.lock().unwrap_or_else(std::sync::PoisonError::into_inner).current;
        match current {
            Some((n, at)) => {
                if at.elapsed() > REFRESH_AFTER && !self.busy.swap(true, Ordering::AcqRel) {
                    let (this, con) = (self.clone(), con.clone());
                    tokio::spawn(async move {
                        if let Err(e) = this.learn(&con, slot, timeout).await {
                            tracing::debug!(error = %e, "could not refresh the shard's replica count");
                        }
                        this.busy.store(false, Ordering::Release);
                    });
                }
                Ok(n)
            }
            None => self.learn(con, slot, timeout).await,
        }
    }

    async fn learn(&self, con: &Connection, slot: Option<u16>, timeout: Duration) -> RedisResult<u32> {
        let shards = con.ask_any_node(&redis::cmd("CLUSTER").arg("SHARDS").clone(), timeout).await?;
        let shards = parse_shards(shards)?;
        let mut learnt = self.learnt.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut counted = 0;
        let mut found = false;
        for shard in &shards {
            // The nodes other than the one serving the slots. A shard that
            // serves no slot (a spare, or a primary left empty) has no
            // writes to wait for.
            if shard.slots.is_empty() {
                continue;
            }
            let replicas = shard.nodes.saturating_sub(1);
            let most = learnt.most.entry(shard.id.clone()).or_default();
            *most = (*most).max(replicas);
            let mine = slot.is_none_or(|s| shard.slots.iter().any(|&(lo, hi)| lo <= s && s <= hi));
            if mine {
                found = true;
                counted = counted.max(*most);
            }
        }
        if !found {
            return Err(unexpected("CLUSTER SHARDS names no shard serving the island's slot"));
        }
        learnt.current = Some((counted, Instant::now()));
        Ok(counted)
    }
}

/// The shards of a `CLUSTER SHARDS` answer (RESP2 arrays of name, value
/// or RESP3 maps alike).
fn parse_shards(value: Value) -> RedisResult<Vec<Shard>> {
    let Value::Array(shards) = value else { return Err(unexpected("CLUSTER SHARDS is no array")) };
    let mut out = Vec::with_capacity(shards.len());
    for shard in shards {
        let mut id = None;
        let mut slots = Vec::new();
        let mut nodes = None;
        for (name, value) in fields(shard)? {
            match name.as_str() {
                "id" => id = Some(redis::from_redis_value::<String>(value)?),
                "slots" => {
                    let bounds: Vec<u16> = redis::from_redis_value(value)?;
                    if !bounds.len().is_multiple_of(2) {
                        return Err(unexpected("a CLUSTER SHARDS slot range is short"));
                    }
                    slots = bounds.chunks(2).map(|b| (b[0], b[1])).collect();
                }
                "nodes" => {
                    let Value::Array(list) = value else { return Err(unexpected("CLUSTER SHARDS nodes is no array")) };
                    nodes = Some(u32::try_from(list.len()).unwrap_or(u32::MAX));
                }
                _ => {}
            }
        }
        let (Some(id), Some(nodes)) = (id, nodes) else {
            return Err(unexpected("a CLUSTER SHARDS shard has no id or no nodes"));
        };
        out.push(Shard { id, slots, nodes });
    }
    Ok(out)
}

/// The name, value pairs of a map (RESP3) or of a flat array (RESP2).
fn fields(value: Value) -> RedisResult<Vec<(String, Value)>> {
    let pairs: Vec<(Value, Value)> = match value {
        Value::Map(pairs) => pairs,
        Value::Array(flat) if flat.len().is_multiple_of(2) => {
            let mut it = flat.into_iter();
            let mut pairs = Vec::new();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k, v));
            }
            pairs
        }
        _ => return Err(unexpected("a CLUSTER SHARDS shard is no map")),
    };
    pairs.into_iter().map(|(k, v)| Ok((redis::from_redis_value::<String>(k)?, v))).collect()
}

fn unexpected(what: &'static str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, what))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn node(role: &str, health: &str) -> Value {
        Value::Array(vec![bulk("id"), bulk("n"), bulk("role"), bulk(role), bulk("health"), bulk(health)])
    }

    #[test]
    fn a_shard_counts_every_node_but_its_primary_failed_ones_included() {
        // As Valkey 9 answered after a SIGKILL of a primary with two
        // replicas: the dead primary stays in its shard, marked failed.
        let shard = Value::Array(vec![
            bulk("slots"),
            Value::Array(vec![Value::Int(0), Value::Int(5460)]),
            bulk("nodes"),
            Value::Array(vec![node("master", "fail"), node("replica", "online"), node("master", "online")]),
            bulk("id"),
            bulk("b6c6"),
        ]);
        let spare = Value::Map(vec![
            (bulk("slots"), Value::Array(vec![])),
            (bulk("nodes"), Value::Array(vec![node("master", "online")])),
            (bulk("id"), bulk("e1")),
        ]);
        let parsed = parse_shards(Value::Array(vec![shard, spare])).unwrap();
        assert_eq!(
            parsed,
            vec![
                Shard { id: "b6c6".into(), slots: vec![(0, 5460)], nodes: 3 },
                Shard { id: "e1".into(), slots: vec![], nodes: 1 }
            ]
        );
        assert!(parse_shards(Value::Array(vec![Value::Int(3)])).is_err(), "a shard that is no map");
        assert!(parse_shards(Value::Int(3)).is_err(), "an answer that is no array");
    }
}
