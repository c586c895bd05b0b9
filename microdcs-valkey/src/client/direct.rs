//! An island's calls straight to the primary of its slot.
//!
//! Every key of an island (a tagged prefix) lives in one slot, so the
//! cluster client's routing adds nothing to where a call goes, only how: it
//! hands each call to its own routing task, which hands it to the node's
//! connection, and the reply comes back the same two ways. On one caller
//! over loopback those two task hops were the whole difference between a
//! cluster call and a standalone one (about 5 us a call, BENCHMARKS.md). So
//! a cluster handle with an island keeps one multiplexed connection of its
//! own to the node that serves the island's slot, and sends a command whose
//! slot is the island's there, as a standalone handle does.
//!
//! The cluster client stays the authority on the topology. The node is the
//! one the cluster client itself sends the slot's commands to (its
//! `CLUSTER SLOTS` answer names it). An answer that proves the command did
//! not run (`MOVED`, `ASK`, `TRYAGAIN`, `CLUSTERDOWN`, `READONLY`, ...)
//! drops the direct connection and sends the command through the cluster
//! client, which follows the redirect as before. A lost connection or a
//! time-out drops it too and is the call's answer, as on one server: the
//! retry rule above decides (a script by its op id, a read once more), and
//! its next attempt goes through the cluster client. The direct connection
//! is found again in the background, at most once per [`REOPEN_PAUSE`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::client::transport::ClusterConnection;
use futures_util::future::BoxFuture;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, RedisResult, Value};

use crate::error::{did_not_run, is_unknown_outcome};

/// How a direct connection to `host:port` is opened, with the handle's
/// settings (credentials, TLS, time-outs, no Nagle).
/// `None` for the host is the endpoint's.
pub(crate) type Opener =
    Box<dyn Fn(Option<String>, u16) -> BoxFuture<'static, RedisResult<MultiplexedConnection>> + Send + Sync>;

/// The shortest time between two attempts to find the direct connection
/// again: while a failover or a slot move settles, calls go through the
/// cluster client instead of racing it.
const REOPEN_PAUSE: Duration = Duration::from_secs(1);

/// The direct route of one cluster connection.
pub(crate) struct Direct {
    /// The island's slot.
    slot: u16,
    /// The connection to the slot's primary, while it is trusted.
    node: std::sync::RwLock<Option<MultiplexedConnection>>,
    /// A search for the node is under way.
    busy: AtomicBool,
    /// When the last search started.
    last: std::sync::Mutex<Option<Instant>>,
    open: Opener,
    /// The bound of the search's request.
    timeout: Duration,
    /// Calls answered over the direct connection.
    answered: AtomicU64,
}

impl Direct {
    pub(crate) fn new(slot: u16, timeout: Duration, open: Opener) -> Arc<Self> {
        Arc::new(Direct {
            slot,
            node: std::sync::RwLock::new(None),
            busy: AtomicBool::new(false),
            last: std::sync::Mutex::new(None),
            open,
            timeout,
            answered: AtomicU64::new(0),
        })
    }

    /// Calls answered over the direct connection so far.
    #[cfg(feature = "testing")]
    pub(crate) fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// Finds the slot's primary and opens the connection to it, waiting
    /// for the outcome (at connect, so the first calls go direct).
    pub(crate) async fn find(self: &Arc<Self>, con: &ClusterConnection) {
        if self.busy.swap(true, Ordering::AcqRel) {
            return;
        }
        *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
        if let Err(e) = self.find_once(con.clone()).await {
            tracing::debug!(error = %e, "no direct connection to the island's primary yet; calls go through the cluster client");
        }
        self.busy.store(false, Ordering::Release);
    }

    async fn find_once(&self, con: ClusterConnection) -> RedisResult<()> {
        // Asked of the node the client sends the slot's commands to: its
        // answer names the primary it takes itself for.
        let route =
            RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(self.slot, SlotAddr::Master)));
        let map = tokio::time::timeout(self.timeout, super::relearn::slot_map(con, route))
            .await
            .unwrap_or_else(|_| Err(super::no_answer(self.timeout)))?;
        let Some((_, _, host, port)) = map.into_iter().find(|r| r.0 <= self.slot && self.slot <= r.1) else {
            return Ok(());
        };
        // A node that does not know its own address (one that never met
        // another) names none: the client then uses the address it asked,
        // which for such a cluster is the endpoint we were given.
        let host = if host.is_empty() || host == "?" { None } else { Some(host) };
        let node = tokio::time::timeout(self.timeout, (self.open)(host, port))
            .await
            .unwrap_or_else(|_| Err(super::no_answer(self.timeout)))?;
        *self.node.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(node);
        Ok(())
    }

    /// Starts a search in the background unless one is under way or one
    /// started less than [`REOPEN_PAUSE`] ago.
    fn search(self: &Arc<Self>, con: &ClusterConnection) {
        {
            let last = self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if last.is_some_and(|t| t.elapsed() < REOPEN_PAUSE) || self.busy.load(Ordering::Acquire) {
                return;
            }
        }
        let (this, con) = (self.clone(), con.clone());
        tokio::spawn(async move { this.find(&con).await });
    }

    /// Stops trusting the direct connection (the topology may have
    /// changed, or the node hangs) and looks for it again later.
    pub(crate) fn drop_node(self: &Arc<Self>, con: &ClusterConnection) {
        *self.node.write().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        self.search(con);
    }

    /// The direct connection for `cmd`, when its slot is the island's and
    /// the connection is there (else a search starts, and `None`).
    fn for_cmd(self: &Arc<Self>, cmd: &Cmd, con: &ClusterConnection) -> Option<MultiplexedConnection> {
        if first_key(cmd).map(microdcs_schema::slot::key_slot) != Some(self.slot) {
            return None;
        }
        let node = self.node.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        if node.is_none() {
            self.search(con);
        }
        node
    }

    /// Sends `cmd` over the direct connection when it can, else through
    /// the cluster client `con` (see the module's rule).
    pub(crate) fn send<'a>(
        self: &Arc<Self>,
        cmd: &'a Cmd,
        con: &'a mut ClusterConnection,
    ) -> BoxFuture<'a, RedisResult<Value>> {
        let Some(mut node) = self.for_cmd(cmd, con) else {
            return con.req_packed_command(cmd);
        };
        let this = self.clone();
        Box::pin(async move {
            // A server's refusal is a value here, made an error by the
            // caller's conversion: a redirect is told by its code either way.
            let answer = node.req_packed_command(cmd).await.and_then(|v| match v {
                Value::ServerError(e) if did_not_run(&e.clone().into()) => Err(e.into()),
                v => Ok(v),
            });
            match answer {
                Ok(value) => {
                    this.answered.fetch_add(1, Ordering::Relaxed);
                    Ok(value)
                }
                // It did not run: the cluster client follows the redirect.
                Err(e) if did_not_run(&e) => {
                    tracing::debug!(error = %e, "the island's primary moved; sending through the cluster client");
                    this.drop_node(con);
                    con.req_packed_command(cmd).await
                }
                Err(e) => {
                    if is_unknown_outcome(&e) {
                        this.drop_node(con);
                    }
                    Err(e)
                }
            }
        })
    }
}

/// The first key of `cmd`, for the commands whose key position we know:
/// the scripts (after the key count) and the data commands the runtime
/// sends whose first argument is a key. Any other command (keyless ones,
/// subcommands, ones the cluster client sends to every primary such as
/// `SCRIPT LOAD`) has none here and goes through the cluster client.
fn first_key(cmd: &Cmd) -> Option<&[u8]> {
    let mut args = cmd.args_iter().map(|a| match a {
        redis::Arg::Simple(bytes) => Some(bytes),
        _ => None,
    });
    let name = args.next()??;
    let upper = |n: &[u8]| n.to_ascii_uppercase();
    let name = upper(name);
    if matches!(name.as_slice(), b"EVALSHA" | b"EVAL" | b"EVALSHA_RO" | b"EVAL_RO" | b"FCALL" | b"FCALL_RO") {
        let _script = args.next()??;
        let keys: usize = std::str::from_utf8(args.next()??).ok()?.parse().ok()?;
        return if keys > 0 { args.next()? } else { None };
    }
    KEY_FIRST.contains(&name.as_slice()).then(|| args.next()?)?
}

/// Commands whose first argument is a key (reads and writes of one key
/// or several keys of one slot, as the runtime sends them).
const KEY_FIRST: &[&[u8]] = &[
    b"GET",
    b"SET",
    b"MGET",
    b"DEL",
    b"UNLINK",
    b"EXISTS",
    b"TYPE",
    b"TTL",
    b"PTTL",
    b"EXPIRE",
    b"PEXPIRE",
    b"PERSIST",
    b"INCR",
    b"INCRBY",
    b"DECR",
    b"DECRBY",
    b"HGET",
    b"HGETALL",
    b"HMGET",
    b"HSET",
    b"HDEL",
    b"HLEN",
    b"HEXISTS",
    b"HKEYS",
    b"HINCRBY",
    b"HSCAN",
    b"SADD",
    b"SREM",
    b"SCARD",
    b"SMEMBERS",
    b"SISMEMBER",
    b"SMISMEMBER",
    b"SSCAN",
    b"ZADD",
    b"ZREM",
    b"ZCARD",
    b"ZCOUNT",
    b"ZRANGE",
    b"ZRANGEBYSCORE",
    b"ZREVRANGEBYSCORE",
    b"ZSCORE",
    b"ZMSCORE",
    b"ZSCAN",
    b"LRANGE",
    b"LLEN",
    b"LPUSH",
    b"RPUSH",
    b"XADD",
    b"XLEN",
    b"XRANGE",
    b"XREVRANGE",
    b"XPENDING",
    b"XACK",
    b"XCLAIM",
    b"XAUTOCLAIM",
    b"XTRIM",
    b"XDEL",
];

#[cfg(test)]
mod tests {
    use super::first_key;

    fn cmd(args: &[&str]) -> redis::Cmd {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c
    }

    /// Only commands whose key we can name go straight to the island's
    /// primary; a load that must reach every primary, a keyless command or a
    /// script without keys keeps the cluster client's routing.
    #[test]
    fn only_keyed_commands_have_a_first_key() {
        assert_eq!(first_key(&cmd(&["HGETALL", "{i}:d"])), Some(&b"{i}:d"[..]));
        assert_eq!(first_key(&cmd(&["evalsha", "abc", "2", "{i}:a", "{i}:b", "x"])), Some(&b"{i}:a"[..]));
        assert_eq!(first_key(&cmd(&["EVALSHA", "abc", "0", "x"])), None);
        assert_eq!(first_key(&cmd(&["SCRIPT", "LOAD", "return 1"])), None);
        assert_eq!(first_key(&cmd(&["PUBLISH", "{i}:nudge", "s"])), None);
        assert_eq!(first_key(&cmd(&["XINFO", "STREAM", "{i}:s"])), None);
        assert_eq!(first_key(&cmd(&["PING"])), None);
    }
}
