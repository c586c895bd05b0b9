//! Learning a cluster's topology from the nodes that answer, after a call
//! timed out.
//!
//! The cluster client learns of a failover from a `MOVED`, or by dropping a
//! node it cannot reach. A primary that hangs (stopped, swapped out, stuck
//! in a long command) gives neither: the kernel still accepts its
//! connections, and it sends its `MOVED` only once it runs again. Until
//! then every call to its shard would time out, long after the cluster
//! promoted its replica (about `cluster-node-timeout` plus an election).
//! So a time-out on a cluster connection makes us ask the other nodes: the
//! slot map they answer (`CLUSTER SLOTS`, asked of several nodes at once,
//! the first answer taken), compared with the one we last saw. When it
//! changed, we send a read of a key of ours to a primary that does not
//! serve the key's slot in the new map; its `MOVED` makes the client read
//! the slot map again, and the calls after it go to the new primary.
//!
//! It runs in the background, one at a time per connection, each request
//! bounded by the response timeout: a call never waits for it, and its
//! retry (after the retry delay) finds the new map in place, or waits for
//! the client's refresh in progress.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::client::transport::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{RedisResult, Value};

/// One primary's slot range, as a node answered it: first slot, last slot,
/// the primary's host and port.
type Range = (u16, u16, String, u16);

/// What one cluster connection needs to learn its topology again.
pub(crate) struct Relearn {
    /// A relearn is under way.
    busy: AtomicBool,
    /// The slot map seen last: the one the client was told about.
    last: std::sync::Mutex<Option<Vec<Range>>>,
    /// A key the handle's user may read (`GET`), in its prefix.
    probe: String,
    /// The bound of each request.
    timeout: Duration,
    /// How often the client was told of a changed slot map.
    told: AtomicU64,
}

impl Relearn {
    pub(crate) fn new(probe: String, timeout: Duration) -> Arc<Self> {
        Arc::new(Relearn {
            busy: AtomicBool::new(false),
            last: std::sync::Mutex::new(None),
            probe,
            timeout,
            told: AtomicU64::new(0),
        })
    }

    /// Remembers the slot map `con` answers now, the one the client
    /// started from. Best effort: without it the first relearn tells the
    /// client once more what it knows.
    pub(crate) async fn remember(&self, con: &ClusterConnection) {
        if let Ok(Ok(view)) = tokio::time::timeout(self.timeout, slot_map(con.clone(), random())).await {
            *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(view);
        }
    }

    /// Starts a relearn for `con` in the background, unless one is under
    /// way. Returns at once.
    pub(crate) fn start(self: &Arc<Self>, con: &ClusterConnection) {
        if self.busy.swap(true, Ordering::AcqRel) {
            return;
        }
        let (this, con) = (self.clone(), con.clone());
        tokio::spawn(async move {
            if let Err(e) = this.once(con).await {
                tracing::debug!(error = %e, "could not learn the cluster's topology after a time-out");
            }
            this.busy.store(false, Ordering::Release);
        });
    }

    async fn once(&self, con: ClusterConnection) -> RedisResult<()> {
        let probe_slot = microdcs_schema::slot::key_slot(self.probe.as_bytes());
        // Several nodes at once, the first answer taken: one of them may be
        // the node that hangs. The replica of the probe's slot is one: the
        // node promoted when its primary is the one that hangs.
        let replica = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
            probe_slot,
            SlotAddr::ReplicaRequired,
        )));
        let asks = [random(), random(), replica].map(|route| {
            let con = con.clone();
            Box::pin(async move {
                tokio::time::timeout(self.timeout, slot_map(con, route))
                    .await
                    .unwrap_or_else(|_| Err(crate::client::no_answer(self.timeout)))
            })
        });
        let (view, _) = futures_util::future::select_ok(asks).await?;
        {
            let last = self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if last.as_ref() == Some(&view) {
                return Ok(());
            }
        }
        let Some(owner) = view.iter().find(|r| r.0 <= probe_slot && probe_slot <= r.1).map(|r| (&r.2, r.3)) else {
            return Ok(());
        };
        // One slot of every other primary: the client routes the read there
        // by the map it has, and a primary that does not serve the probe's
        // slot answers `MOVED`, which makes the client read the map again.
        // Several, since the map it has may send one of them to the node
        // that hangs.
        let mut targets: Vec<(u16, (&String, u16))> = Vec::new();
        for r in &view {
            let primary = (&r.2, r.3);
            if primary != owner && !targets.iter().any(|t| t.1 == primary) {
                targets.push((r.0, primary));
            }
        }
        let mut get = redis::cmd("GET");
        get.arg(&self.probe);
        let reads = targets.iter().map(|&(slot, _)| {
            let (mut con, get) = (con.clone(), get.clone());
            let route =
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master)));
            async move { tokio::time::timeout(self.timeout, con.route_command(get, route)).await }
        });
        let answers = futures_util::future::join_all(reads).await;
        let told = answers.iter().any(|a| matches!(a, Ok(Ok(_)) | Ok(Err(_))));
        tracing::debug!(targets = targets.len(), told, "the cluster's slot map changed; told the client");
        if told {
            *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(view);
            self.told.fetch_add(1, Ordering::AcqRel);
            metrics::counter!(crate::observe::TOPOLOGY_RELEARNED).increment(1);
        }
        Ok(())
    }

    /// How often the client was told of a changed slot map: a call that
    /// timed out and sees this move while it waits its retry delay knows
    /// its next attempt goes elsewhere.
    pub(crate) fn told(&self) -> u64 {
        self.told.load(Ordering::Acquire)
    }
}

fn random() -> RoutingInfo {
    RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random)
}

/// The primaries' slot ranges (`CLUSTER SLOTS`) as the node `route` picks
/// answers them, sorted.
pub(super) async fn slot_map(mut con: ClusterConnection, route: RoutingInfo) -> RedisResult<Vec<Range>> {
    let value = con.route_command(redis::cmd("CLUSTER").arg("SLOTS").clone(), route).await?.extract_error()?;
    let Value::Array(ranges) = value else { return Err(unexpected("CLUSTER SLOTS is no array")) };
    let mut out = Vec::with_capacity(ranges.len());
    for range in ranges {
        let Value::Array(parts) = range else { return Err(unexpected("a CLUSTER SLOTS range is no array")) };
        let mut parts = parts.into_iter();
        let (Some(first), Some(last), Some(Value::Array(primary))) = (parts.next(), parts.next(), parts.next()) else {
            return Err(unexpected("a CLUSTER SLOTS range is short"));
        };
        let mut primary = primary.into_iter();
        let (Some(host), Some(port)) = (primary.next(), primary.next()) else {
            return Err(unexpected("a CLUSTER SLOTS primary is short"));
        };
        out.push((
            redis::from_redis_value(first)?,
            redis::from_redis_value(last)?,
            redis::from_redis_value(host)?,
            redis::from_redis_value(port)?,
        ));
    }
    out.sort();
    Ok(out)
}

fn unexpected(what: &'static str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, what))
}
