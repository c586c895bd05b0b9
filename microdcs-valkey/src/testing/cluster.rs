//! A throw-away Valkey Cluster on loopback: primaries and replicas, each a
//! [`ValkeyServer`] in its own directory, formed with raw `CLUSTER`
//! commands (no `redis-cli`), killed on drop.

use std::env;
use std::time::{Duration, Instant};

use super::server::{HarnessError, ValkeyServer, free_port};

/// How long a node may be unreachable before the cluster fails it over.
/// Short, so fault tests heal in about 1.5 s.
pub const NODE_TIMEOUT_MS: u64 = 1000;

/// A running cluster: local nodes (killed on drop) or an external one
/// (`MICRODCS_VALKEY_CLUSTER=host:port,host:port,...`).
pub struct ValkeyCluster {
    nodes: Vec<ValkeyServer>,
    /// Each node's cluster bus port (given, not the default port + 10000,
    /// which may be taken or out of range).
    bus_ports: Vec<u16>,
    external: Option<String>,
    formed_in: Duration,
}

impl std::fmt::Debug for ValkeyCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // An external cluster's string may hold a password: never shown.
        let seeds =
            if self.external.is_some() { "(MICRODCS_VALKEY_CLUSTER)".to_owned() } else { self.connection_string() };
        f.debug_struct("ValkeyCluster").field("seeds", &seeds).finish_non_exhaustive()
    }
}

fn start_err(reason: impl Into<String>) -> HarnessError {
    HarnessError::start_failed(reason.into(), String::new())
}

impl ValkeyCluster {
    /// The cluster of a test: `MICRODCS_VALKEY_CLUSTER` when set, else a
    /// new local one of `primaries` primaries with `replicas` replicas
    /// each, the slots split evenly.
    ///
    /// # Errors
    /// No binary, a node that did not start, or a cluster that did not
    /// form within 30 s (the error says which step).
    pub fn start(primaries: usize, replicas: usize) -> Result<Self, HarnessError> {
        if let Ok(seeds) = env::var("MICRODCS_VALKEY_CLUSTER") {
            return Ok(ValkeyCluster {
                nodes: Vec::new(),
                bus_ports: Vec::new(),
                external: Some(seeds),
                formed_in: Duration::ZERO,
            });
        }
        Self::start_local(primaries, replicas)
    }

    /// A new local cluster (see [`ValkeyCluster::start`]).
    ///
    /// # Errors
    /// As for [`ValkeyCluster::start`].
    pub fn start_local(primaries: usize, replicas: usize) -> Result<Self, HarnessError> {
        Self::start_nodes(primaries, replicas, &|args| ValkeyServer::start_local(args))
    }

    /// A new local cluster of Debian's `redis-server` (built with TLS; see
    /// [`ValkeyServer::start_redis_tls`]) speaking TLS only, the nodes to
    /// each other too (`tls-cluster`, `tls-replication`), and asking every
    /// client for a certificate signed by `ca` (`tls-auth-clients yes`).
    /// The nodes present `cert`/`key` to each other, and so does the
    /// harness.
    ///
    /// # Errors
    /// As for [`ValkeyCluster::start`], or an unreadable PEM file.
    #[cfg(any(feature = "tls-native-tls", feature = "tls-rustls"))]
    pub fn start_redis_tls(
        primaries: usize,
        replicas: usize,
        cert: &std::path::Path,
        key: &std::path::Path,
        ca: &std::path::Path,
    ) -> Result<Self, HarnessError> {
        let files =
            super::server::HarnessTls { ca: std::fs::read(ca)?, cert: std::fs::read(cert)?, key: std::fs::read(key)? };
        Self::start_nodes(primaries, replicas, &|args| {
            let mut args = args.to_vec();
            args.extend(["--tls-cluster", "yes", "--tls-replication", "yes", "--tls-auth-clients", "yes"]);
            let mut node = ValkeyServer::start_redis_tls_with(cert, key, ca, None, &args)?;
            node.set_harness_tls(files.clone());
            Ok(node)
        })
    }

    /// Starts the nodes with `start` (given the cluster arguments) and forms the cluster.
    fn start_nodes(
        primaries: usize,
        replicas: usize,
        start: &dyn Fn(&[&str]) -> Result<ValkeyServer, HarnessError>,
    ) -> Result<Self, HarnessError> {
        if primaries == 0 {
            return Err(start_err("a cluster needs at least one primary"));
        }
        let started = Instant::now();
        let timeout = NODE_TIMEOUT_MS.to_string();
        let mut nodes = Vec::new();
        let mut bus_ports = Vec::new();
        for _ in 0..primaries * (1 + replicas) {
            let port = free_port()?;
            bus_ports.push(port);
            let bus = port.to_string();
            let args = [
                "--cluster-enabled",
                "yes",
                "--cluster-node-timeout",
                timeout.as_str(),
                "--cluster-port",
                bus.as_str(),
                "--repl-diskless-sync-delay",
                "0",
            ];
            nodes.push(start(&args)?);
        }
        let cluster = ValkeyCluster { nodes, bus_ports, external: None, formed_in: Duration::ZERO };
        cluster.form(primaries, replicas)?;
        Ok(ValkeyCluster { formed_in: started.elapsed(), ..cluster })
    }

    fn form(&self, primaries: usize, replicas: usize) -> Result<(), HarnessError> {
        for (i, node) in self.nodes.iter().enumerate() {
            command(node, &["CLUSTER", "SET-CONFIG-EPOCH", &(i + 1).to_string()])?;
        }
        let per = 16384 / primaries;
        for (i, node) in self.nodes.iter().take(primaries).enumerate() {
            let lo = i * per;
            let hi = if i + 1 == primaries { 16383 } else { (i + 1) * per - 1 };
            command(node, &["CLUSTER", "ADDSLOTSRANGE", &lo.to_string(), &hi.to_string()])?;
        }
        let first = &self.nodes[0];
        for (node, bus) in self.nodes.iter().zip(&self.bus_ports).skip(1) {
            command(first, &["CLUSTER", "MEET", "127.0.0.1", &node.port().to_string(), &bus.to_string()])?;
        }
        let n = self.nodes.len().to_string();
        self.wait("the nodes to meet", |c| {
            c.nodes
                .iter()
                .all(|node| info_field(node, &["CLUSTER", "INFO"], "cluster_known_nodes").as_deref() == Some(&n))
        })?;
        for r in 0..primaries * replicas {
            let primary = &self.nodes[r % primaries];
            let id = command(primary, &["CLUSTER", "MYID"])?;
            command(&self.nodes[primaries + r], &["CLUSTER", "REPLICATE", &id])?;
        }
        self.wait_healthy(Duration::from_secs(30))
    }

    /// Waits until every running node reports `cluster_state:ok` and every
    /// replica's link to its primary is up.
    ///
    /// # Errors
    /// Not healthy within `timeout`.
    pub fn wait_healthy(&self, timeout: Duration) -> Result<(), HarnessError> {
        let deadline = Instant::now() + timeout;
        self.wait_until("cluster_state:ok and replicas linked", deadline, |c| {
            c.nodes.iter().filter(|n| n.is_running()).all(|node| {
                info_field(node, &["CLUSTER", "INFO"], "cluster_state").as_deref() == Some("ok")
                    && match info_field(node, &["INFO", "replication"], "role").as_deref() {
                        Some("slave") => {
                            info_field(node, &["INFO", "replication"], "master_link_status").as_deref() == Some("up")
                        }
                        Some(_) => true,
                        None => false,
                    }
            })
        })
    }

    fn wait(&self, what: &str, ok: impl Fn(&Self) -> bool) -> Result<(), HarnessError> {
        self.wait_until(what, Instant::now() + Duration::from_secs(30), ok)
    }

    fn wait_until(&self, what: &str, deadline: Instant, ok: impl Fn(&Self) -> bool) -> Result<(), HarnessError> {
        loop {
            if ok(self) {
                return Ok(());
            }
            if Instant::now() > deadline {
                let log = self.nodes.first().map(ValkeyServer::log).unwrap_or_default();
                return Err(HarnessError::start_failed(format!("cluster: waited in vain for {what}"), log));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// `ConnectionString` naming every node: `127.0.0.1:p1,127.0.0.1:p2,...`
    /// (or `MICRODCS_VALKEY_CLUSTER`).
    pub fn connection_string(&self) -> String {
        match &self.external {
            Some(seeds) => seeds.clone(),
            None => self.nodes.iter().map(ValkeyServer::host_port).collect::<Vec<_>>().join(","),
        }
    }

    /// The local nodes, primaries first as formed (roles change with
    /// failovers; see [`ValkeyCluster::primary_of`]). Empty for an external
    /// cluster.
    pub fn nodes(&self) -> &[ValkeyServer] {
        &self.nodes
    }

    /// Node `i`, to kill or restart it.
    ///
    /// # Panics
    /// When there is no node `i`.
    pub fn node_mut(&mut self, i: usize) -> &mut ValkeyServer {
        &mut self.nodes[i]
    }

    /// How long starting and forming took.
    pub fn formed_in(&self) -> Duration {
        self.formed_in
    }

    /// The index of the node serving `slot` as a primary, as the running
    /// nodes see it now.
    pub fn primary_of(&self, slot: u16) -> Option<usize> {
        self.nodes.iter().position(|node| {
            node.is_running()
                && info_field(node, &["INFO", "replication"], "role").as_deref() == Some("master")
                && owns(node, slot)
        })
    }

    /// Whether node `i` runs and is a primary now.
    pub fn is_primary(&self, i: usize) -> bool {
        let node = &self.nodes[i];
        node.is_running() && info_field(node, &["INFO", "replication"], "role").as_deref() == Some("master")
    }

    /// The index of a running replica of node `primary`.
    pub fn replica_of(&self, primary: usize) -> Option<usize> {
        let id = command(&self.nodes[primary], &["CLUSTER", "MYID"]).ok()?;
        self.nodes.iter().position(|node| {
            node.is_running()
                && info_field(node, &["INFO", "replication"], "role").as_deref() == Some("slave")
                && command(node, &["CLUSTER", "NODES"]).is_ok_and(|nodes| {
                    nodes.lines().any(|l| l.contains("myself") && l.split(' ').nth(3) == Some(id.as_str()))
                })
        })
    }
}

impl ValkeyCluster {
    /// The cluster node id of node `i`.
    ///
    /// # Errors
    /// The node does not answer.
    pub fn node_id(&self, i: usize) -> Result<String, HarnessError> {
        command(&self.nodes[i], &["CLUSTER", "MYID"])
    }

    /// A manual failover: replica `i` takes over from its primary
    /// (`CLUSTER FAILOVER`), and this waits until it is a primary.
    ///
    /// # Errors
    /// Refused, or not a primary within 10 s.
    pub fn failover(&self, i: usize) -> Result<(), HarnessError> {
        command(&self.nodes[i], &["CLUSTER", "FAILOVER"])?;
        self.wait_until("the manual failover", Instant::now() + Duration::from_secs(10), |c| {
            info_field(&c.nodes[i], &["INFO", "replication"], "role").as_deref() == Some("master")
        })
    }

    /// Moves `slot` to primary `to` with Valkey 9's atomic slot migration
    /// (`CLUSTER MIGRATESLOTS`), waiting until `to` serves it.
    ///
    /// # Errors
    /// Refused, or not moved within 20 s.
    pub fn migrate_slot(&self, slot: u16, to: usize) -> Result<(), HarnessError> {
        let from = self.primary_of(slot).ok_or_else(|| start_err(format!("no primary serves slot {slot}")))?;
        let target = self.node_id(to)?;
        let s = slot.to_string();
        command(&self.nodes[from], &["CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", &s, &s, "NODE", &target])?;
        self.wait_until("the slot migration", Instant::now() + Duration::from_secs(20), |c| {
            owns(&c.nodes[to], slot) && !owns(&c.nodes[from], slot)
        })
    }

    /// Moves `slot` to primary `to` the way clusters before Valkey 9 do:
    /// `SETSLOT IMPORTING/MIGRATING`, then `MIGRATE` of its keys in batches
    /// of `batch` with `pause` between them (clients meanwhile get `ASK`
    /// and `TRYAGAIN`), then `SETSLOT NODE` on every primary.
    ///
    /// # Errors
    /// A refused step.
    pub fn migrate_slot_legacy(&self, slot: u16, to: usize, batch: usize, pause: Duration) -> Result<(), HarnessError> {
        let from = self.primary_of(slot).ok_or_else(|| start_err(format!("no primary serves slot {slot}")))?;
        let (src, dst) = (&self.nodes[from], &self.nodes[to]);
        let (src_id, dst_id) = (self.node_id(from)?, self.node_id(to)?);
        let s = slot.to_string();
        command(dst, &["CLUSTER", "SETSLOT", &s, "IMPORTING", &src_id])?;
        command(src, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &dst_id])?;
        let port = dst.port().to_string();
        loop {
            let keys = keys_in_slot(src, slot, batch)?;
            if keys.is_empty() {
                break;
            }
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            args.extend(keys.iter().map(String::as_str));
            command(src, &args)?;
            std::thread::sleep(pause);
        }
        // The target first, then the source, then the other primaries: a
        // client then never bounces between the two.
        let rest = (0..self.nodes.len()).filter(|&i| i != to && i != from);
        for i in [to, from].into_iter().chain(rest) {
            if self.is_primary(i) {
                command(&self.nodes[i], &["CLUSTER", "SETSLOT", &s, "NODE", &dst_id])
                    .map_err(|e| start_err(format!("SETSLOT NODE on node {i}: {e}")))?;
            }
        }
        Ok(())
    }
}

/// Up to `count` keys of `slot` on `node`.
fn keys_in_slot(node: &ValkeyServer, slot: u16, count: usize) -> Result<Vec<String>, HarnessError> {
    let client = node.client().map_err(|e| start_err(e.to_string()))?;
    let mut con = client.get_connection_with_timeout(Duration::from_secs(2)).map_err(|e| start_err(e.to_string()))?;
    redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(count)
        .query(&mut con)
        .map_err(|e| start_err(format!("CLUSTER GETKEYSINSLOT: {e}")))
}

/// Whether `node` itself serves `slot` (its `myself` line lists the slot).
fn owns(node: &ValkeyServer, slot: u16) -> bool {
    let Ok(nodes) = command(node, &["CLUSTER", "NODES"]) else { return false };
    let Some(mine) = nodes.lines().find(|l| l.contains("myself")) else { return false };
    mine.split(' ').skip(8).any(|range| {
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if lo <= slot && slot <= hi)
    })
}

/// One command on one node over a fresh connection; its reply as text.
///
/// # Errors
/// The node is unreachable or refused the command.
pub fn command(node: &ValkeyServer, args: &[&str]) -> Result<String, HarnessError> {
    let run = || -> redis::RedisResult<String> {
        let client = node.client()?;
        let mut con = client.get_connection_with_timeout(Duration::from_secs(2))?;
        con.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        let v: redis::Value = cmd.query(&mut con)?;
        Ok(match v {
            redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
            redis::Value::SimpleString(s) => s,
            redis::Value::Okay => "OK".into(),
            redis::Value::Int(i) => i.to_string(),
            redis::Value::VerbatimString { text, .. } => text,
            other => format!("{other:?}"),
        })
    };
    run().map_err(|e| start_err(format!("{} on {}: {e}", args.join(" "), node.host_port())))
}

/// `field:value` of an `INFO`-style reply.
fn info_field(node: &ValkeyServer, args: &[&str], field: &str) -> Option<String> {
    let text = command(node, args).ok()?;
    text.lines().find_map(|l| l.trim_end().strip_prefix(field)?.strip_prefix(':').map(str::to_owned))
}
