//! The connection the runtime talks through: one server, the primary a
//! group of Sentinels names, or a Valkey Cluster.
//!
//! All are multiplexed and reconnect by themselves; a Sentinel connection
//! moves to the new primary after a failover, and a cluster connection
//! also follows the cluster's topology (it routes every keyed command to the
//! primary of the key's slot, and learns of moved slots and failovers from
//! `MOVED` replies). Everything the runtime sends goes through
//! [`Connection`], so no code path knows which one it has except the few
//! that must: commands without a key in first place that must reach the
//! island's node (`SCAN`, `PING`, `XGROUP CREATE`), the answer to an `ASK`
//! on the connection that never resends, script loads, and pub/sub.

use std::fmt;

use crate::client::transport::ClusterConnection;
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, ToRedisArgs, Value};

use super::direct::Direct;
use super::relearn::Relearn;
#[cfg(feature = "sentinel")]
use super::sentinel::Follower;

/// A multiplexed, reconnecting connection to one Valkey server or to a
/// Valkey Cluster. Cheap to clone; every clone shares the connection.
///
/// It is a [`redis::aio::ConnectionLike`], so any `redis` command runs on
/// it: `redis::cmd("GET").arg(key).query_async(&mut con)`. On a cluster a
/// command goes to the primary of its first key's slot, and a pipeline's
/// commands must all be in one slot (every key of a tagged prefix is).
#[derive(Clone)]
pub struct Connection {
    kind: Kind,
    /// Where to send commands after `ASKING` (see [`Connection::asking`]).
    ask: Option<(String, u16)>,
    /// On a cluster, the island's calls straight to its slot's primary.
    direct: Option<std::sync::Arc<Direct>>,
}

#[derive(Clone)]
enum Kind {
    Single(ConnectionManager),
    #[cfg(feature = "sentinel")]
    Sentinel(Follower),
    /// With what it needs to learn the topology after a time-out, if it
    /// does (the pub/sub connection follows its subscriptions instead).
    Cluster(ClusterConnection, Option<std::sync::Arc<Relearn>>),
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kind {
            Kind::Single(_) => "Connection(server)",
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(_) => "Connection(sentinel)",
            Kind::Cluster(..) => "Connection(cluster)",
        })
    }
}

impl From<ConnectionManager> for Connection {
    fn from(con: ConnectionManager) -> Self {
        Connection { kind: Kind::Single(con), ask: None, direct: None }
    }
}

#[cfg(feature = "sentinel")]
impl From<Follower> for Connection {
    fn from(con: Follower) -> Self {
        Connection { kind: Kind::Sentinel(con), ask: None, direct: None }
    }
}

impl From<ClusterConnection> for Connection {
    fn from(con: ClusterConnection) -> Self {
        Connection { kind: Kind::Cluster(con, None), ask: None, direct: None }
    }
}

impl Connection {
    /// A cluster connection that learns the topology from the other nodes
    /// after a call times out (see [`Connection::timed_out`]); it remembers
    /// the slot map it starts from.
    pub(crate) async fn cluster(con: ClusterConnection, relearn: std::sync::Arc<Relearn>) -> Self {
        relearn.remember(&con).await;
        Connection { kind: Kind::Cluster(con, Some(relearn)), ask: None, direct: None }
    }

    /// This cluster connection, sending the commands of `direct`'s slot
    /// straight to the slot's primary (see [`Direct`]); it finds that
    /// primary first. Elsewhere the same connection.
    pub(crate) async fn with_direct(mut self, direct: std::sync::Arc<Direct>) -> Self {
        if let Kind::Cluster(con, _) = &self.kind {
            direct.find(con).await;
            self.direct = Some(direct);
        }
        self
    }

    /// Calls answered over the direct connection to the island's primary
    /// (0 without one).
    #[cfg(feature = "testing")]
    pub(crate) fn direct_answers(&self) -> u64 {
        self.direct.as_ref().map_or(0, |d| d.answered())
    }

    /// Tells the connection that a call on it got no answer in time. On a
    /// cluster the node that did not answer may hang while the cluster has
    /// promoted its replica; the connection asks the other nodes for the
    /// slot map in the background and, when it changed, makes the client
    /// read it again, so the call's next attempt goes to the new primary.
    /// Elsewhere nothing.
    pub(crate) fn timed_out(&self) {
        if let Kind::Cluster(con, Some(relearn)) = &self.kind {
            relearn.start(con);
        }
        // The node that did not answer may be the island's primary: its
        // calls go through the cluster client until the primary is found
        // again.
        if let (Kind::Cluster(con, _), Some(direct)) = (&self.kind, &self.direct) {
            direct.drop_node(con);
        }
    }

    /// How often this connection learnt a changed slot map after a
    /// time-out (0 off a cluster): a call that timed out and sees it move
    /// knows its next attempt goes to another node.
    pub(crate) fn relearned(&self) -> u64 {
        match &self.kind {
            Kind::Cluster(_, Some(relearn)) => relearn.told(),
            _ => 0,
        }
    }

    /// Whether this is a cluster connection.
    pub fn is_cluster(&self) -> bool {
        matches!(self.kind, Kind::Cluster(..))
    }

    /// How many replicas the Sentinels know for the service (through
    /// Sentinel only; `None` otherwise).
    pub(crate) fn known_replicas(&self) -> Option<u32> {
        #[cfg(feature = "sentinel")]
        if let Kind::Sentinel(f) = &self.kind {
            return Some(f.known_replicas());
        }
        None
    }

    /// Asks `cmd` of three nodes of a cluster picked at random, at once,
    /// and takes the first answer (a server error made an error): one of
    /// them may hang. Each ask is bounded by `timeout`. Off a cluster it
    /// is refused (nothing is sent).
    pub(crate) async fn ask_any_node(&self, cmd: &Cmd, timeout: std::time::Duration) -> RedisResult<Value> {
        let Kind::Cluster(con, _) = &self.kind else {
            return Err(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "a question for a cluster node on a handle to one server",
            )));
        };
        let asks = (0..3).map(|_| {
            let (mut con, cmd) = (con.clone(), cmd.clone());
            Box::pin(async move {
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
                super::bounded(timeout, async move { con.route_command(cmd, route).await?.extract_error() }).await
            })
        });
        Ok(futures_util::future::select_ok(asks).await?.0)
    }

    /// Runs `cmd` on the primary that owns `slot` (on one server, on the
    /// server): for commands without a key that must reach the node holding
    /// an island's keys, such as `SCAN`.
    pub(crate) async fn query_on_slot<T: redis::FromRedisValue>(&mut self, cmd: &Cmd, slot: u16) -> RedisResult<T> {
        match &mut self.kind {
            Kind::Single(con) => cmd.query_async(con).await,
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(con) => cmd.query_async(con).await,
            Kind::Cluster(con, _) => {
                let route =
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master)));
                // A server error comes back as a value here: made an error
                // again, so callers match it by its code as on one server.
                let value = con.route_command(cmd.clone(), route).await?.extract_error()?;
                redis::from_redis_value(value).map_err(redis::RedisError::from)
            }
        }
    }

    /// Runs `cmd` on the primary of `slot` on a cluster when a slot is
    /// given, else as any command: the one way a keyless command (`PING`,
    /// `SCAN`) or one whose key is not its first argument (`XGROUP CREATE`)
    /// reaches the node of an island's keys.
    pub(crate) async fn query_near<T: redis::FromRedisValue>(
        &mut self,
        cmd: &Cmd,
        slot: Option<u16>,
    ) -> RedisResult<T> {
        match slot {
            Some(slot) if self.is_cluster() => self.query_on_slot(cmd, slot).await,
            _ => cmd.query_async(self).await,
        }
    }

    /// Runs `cmds` as one pipeline on the primary of `slot` (on one server,
    /// on the server): one connection, in order, nothing between them, as
    /// `WAIT` after a write needs. Each command's own answer, a server error
    /// included; a lost connection fails the whole.
    pub(crate) async fn pipeline_on_slot(&mut self, cmds: &[&Cmd], slot: u16) -> RedisResult<Vec<RedisResult<Value>>> {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for cmd in cmds {
            pipe.add_command((*cmd).clone());
        }
        let values: Vec<Value> = match &mut self.kind {
            Kind::Single(con) => pipe.query_async(con).await?,
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(con) => pipe.query_async(con).await?,
            Kind::Cluster(con, _) => {
                let route = SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master));
                con.route_pipeline(pipe, 0, cmds.len(), route).await?
            }
        };
        Ok(values.into_iter().map(Value::extract_error).collect())
    }

    /// Runs `pipe` as one pipeline where it can: on one server always, on a
    /// cluster when every command's key (its first argument) is in one
    /// slot. Otherwise one pipeline per slot (a cluster refuses a pipeline
    /// across slots, and the client refuses it before sending), sent
    /// concurrently, the answers put back in the commands' order. Then a
    /// command's server error is its answer when `keep_errors` (as for a
    /// pipeline with `ignore_errors`), else the error of the whole; commands
    /// marked `ignore` are answered too, so split pipelines with ignored
    /// commands are read as `()` only.
    pub(crate) async fn query_pipe<T: redis::FromRedisValue>(
        &mut self,
        pipe: &Pipeline,
        keep_errors: bool,
    ) -> RedisResult<T> {
        if !self.is_cluster() {
            return pipe.query_async(self).await;
        }
        let slots: Vec<Option<u16>> = pipe
            .cmd_iter()
            .map(|c| match c.args_iter().nth(1) {
                Some(redis::Arg::Simple(key)) => Some(microdcs_schema::slot::key_slot(key)),
                _ => None,
            })
            .collect();
        let first = slots.iter().copied().flatten().next();
        if slots.iter().all(|s| s.is_none() || *s == first) {
            return pipe.query_async(self).await;
        }
        let mut groups: std::collections::BTreeMap<Option<u16>, Vec<usize>> = std::collections::BTreeMap::new();
        for (i, slot) in slots.iter().enumerate() {
            groups.entry(*slot).or_default().push(i);
        }
        let cmds: Vec<&Cmd> = pipe.cmd_iter().collect();
        let runs = groups.values().map(|at| {
            let mut sub = redis::pipe();
            sub.ignore_errors();
            for &i in at {
                sub.add_command(cmds[i].clone());
            }
            let mut con = self.clone();
            async move { sub.query_async::<Vec<Value>>(&mut con).await }
        });
        let answers = futures_util::future::try_join_all(runs).await?;
        let mut out = vec![Value::Nil; slots.len()];
        for (at, values) in groups.values().zip(answers) {
            for (&i, v) in at.iter().zip(values) {
                out[i] = v;
            }
        }
        if !keep_errors
            && let Some(e) = out.iter().find_map(|v| if let Value::ServerError(e) = v { Some(e) } else { None })
        {
            return Err(e.clone().into());
        }
        redis::from_redis_value(Value::Array(out)).map_err(redis::RedisError::from)
    }

    /// This connection, for which every command goes to `host:port` after
    /// `ASKING`, in one pipeline: the answer to an `ASK` redirect during a
    /// slot migration, for the connection that does not follow redirects by
    /// itself. On one server it is the same connection.
    pub(crate) fn asking(mut self, host: String, port: u16) -> Self {
        if self.is_cluster() {
            self.ask = Some((host, port));
        }
        self
    }

    /// Subscribes to `channel` (`SUBSCRIBE`); messages reach the push
    /// sender the connection was made with.
    pub(crate) async fn subscribe(&mut self, channel: impl ToRedisArgs + Send) -> RedisResult<()> {
        match &mut self.kind {
            Kind::Single(con) => con.subscribe(channel).await,
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(con) => con.subscribe(channel).await,
            Kind::Cluster(con, _) => con.subscribe(channel).await,
        }
    }

    /// Subscribes to the shard channel `channel` (`SSUBSCRIBE`, one
    /// channel): on a cluster at the primary serving its slot, followed
    /// there after a failover or a slot move; on one server as any
    /// subscription. Messages reach the push sender as `smessage`.
    #[cfg(feature = "consumers")]
    pub(crate) async fn ssubscribe(&mut self, channel: &str) -> RedisResult<()> {
        match &mut self.kind {
            // The confirmation is the reply, and the connection remembers
            // the subscription for its reconnects.
            Kind::Single(con) => redis::cmd("SSUBSCRIBE").arg(channel).exec_async(con).await,
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(con) => con.ssubscribe(channel).await,
            Kind::Cluster(con, _) => con.ssubscribe(channel).await,
        }
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match (&mut self.kind, &self.ask) {
            (Kind::Single(con), _) => con.req_packed_command(cmd),
            #[cfg(feature = "sentinel")]
            (Kind::Sentinel(con), _) => con.req_packed_command(cmd),
            (Kind::Cluster(con, _), None) => match &self.direct {
                Some(direct) => direct.send(cmd, con),
                None => con.req_packed_command(cmd),
            },
            (Kind::Cluster(con, _), Some((host, port))) => {
                let route = SingleNodeRoutingInfo::ByAddress { host: host.clone(), port: *port };
                let mut pipe = redis::pipe();
                pipe.cmd("ASKING").ignore().add_command(cmd.clone());
                Box::pin(async move {
                    let mut replies = con.route_pipeline(pipe, 1, 1, route).await?;
                    replies.pop().ok_or_else(|| {
                        redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, "no reply after ASKING"))
                    })
                })
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.kind {
            Kind::Single(con) => con.req_packed_commands(pipeline, offset, count),
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(con) => con.req_packed_commands(pipeline, offset, count),
            Kind::Cluster(con, _) => con.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.kind {
            Kind::Single(con) => con.get_db(),
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(con) => con.get_db(),
            Kind::Cluster(con, _) => con.get_db(),
        }
    }
}
