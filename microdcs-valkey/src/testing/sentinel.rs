//! A throw-away Sentinel deployment on loopback: a primary, one replica
//! (or more, [`Sentinel::start_with_replicas`]) and three Sentinels
//! watching them, each a [`ValkeyServer`] in its own
//! directory (the same `valkey-server` binary runs the Sentinels with
//! `--sentinel`), killed on drop.

use std::time::{Duration, Instant};

use super::server::{HarnessError, ValkeyServer};
#[cfg(any(feature = "tls-native-tls", feature = "tls-rustls"))]
use std::path::Path;

/// How long the primary may be unreachable before the Sentinels fail it
/// over (`down-after-milliseconds`). Short, so a failover after a kill
/// takes about 2.5 s on loopback, and above the Sentinels' one-second
/// ping period: a Sentinel sends its first ping to a new primary a full
/// period after the switch and counts the silence from the switch, so at
/// 1000 ms every switch raced a spurious down vote, and a second, needless
/// failover could promote a node that had just come back without its data.
pub const DOWN_AFTER_MS: u64 = 1500;

/// The name of the service the Sentinels watch.
pub const SERVICE_NAME: &str = "microdcs";

/// A running deployment: data node 0 (the first primary) and its replicas
/// 1, 2, ..., and three Sentinels with a quorum of two.
pub struct Sentinel {
    data: Vec<ValkeyServer>,
    sentinels: Vec<ValkeyServer>,
    password: Option<String>,
    /// The CA every node's certificate is signed by (TLS only).
    ca: Option<Vec<u8>>,
}

impl std::fmt::Debug for Sentinel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sentinel").field("sentinels", &self.connection_string()).finish_non_exhaustive()
    }
}

/// Starts one process: a Sentinel's configuration file text (none for a
/// data node) and extra arguments.
type Starter<'a> = dyn Fn(Option<&str>, &[&str]) -> Result<ValkeyServer, HarnessError> + 'a;

fn start_err(reason: impl Into<String>) -> HarnessError {
    HarnessError::start_failed(reason.into(), String::new())
}

impl Sentinel {
    /// Starts the deployment and waits until every Sentinel knows the
    /// replica and the other Sentinels, so a failover can happen at once.
    ///
    /// # Errors
    /// No binary, a process that did not start, or Sentinels that did not
    /// find each other within 30 s.
    pub fn start() -> Result<Self, HarnessError> {
        Self::start_inner(None, 1)
    }

    /// As [`Sentinel::start`], with `replicas` replicas of the primary
    /// (data nodes 1 to `replicas`), each linked before the Sentinels
    /// start, so every Sentinel knows all of them from its first look.
    ///
    /// # Errors
    /// As for [`Sentinel::start`].
    pub fn start_with_replicas(replicas: usize) -> Result<Self, HarnessError> {
        Self::start_inner(None, replicas.max(1))
    }

    /// As [`Sentinel::start`], with Sentinels that require `password`
    /// (`requirepass`; the data nodes require none).
    ///
    /// # Errors
    /// As for [`Sentinel::start`].
    pub fn start_with_sentinel_password(password: &str) -> Result<Self, HarnessError> {
        Self::start_inner(Some(password.to_owned()), 1)
    }

    /// As [`Sentinel::start`], every process TLS only (Debian's
    /// `redis-server`, which has TLS; see
    /// [`ValkeyServer::start_redis_tls`]), replicating and watching over
    /// TLS, with the given PEM files.
    ///
    /// # Errors
    /// As for [`Sentinel::start`], or an unreadable CA file.
    #[cfg(any(feature = "tls-native-tls", feature = "tls-rustls"))]
    pub fn start_tls(cert: &Path, key: &Path, ca: &Path) -> Result<Self, HarnessError> {
        let pem = std::fs::read(ca)?;
        let start = |config: Option<&str>, extra: &[&str]| {
            let mut args = vec!["--tls-replication", "yes", "--repl-diskless-sync-delay", "0"];
            args.extend(extra);
            ValkeyServer::start_redis_tls_with(cert, key, ca, config, &args)
        };
        Self::start_with(None, Some(pem), &start, 1)
    }

    /// As [`Sentinel::start_tls`], every process also asking every client
    /// for a certificate signed by `ca` (`tls-auth-clients yes`): mutual
    /// TLS. The processes present `cert`/`key` to each other, and so does
    /// the harness.
    ///
    /// # Errors
    /// As for [`Sentinel::start_tls`].
    #[cfg(any(feature = "tls-native-tls", feature = "tls-rustls"))]
    pub fn start_mutual_tls(cert: &Path, key: &Path, ca: &Path) -> Result<Self, HarnessError> {
        let files =
            super::server::HarnessTls { ca: std::fs::read(ca)?, cert: std::fs::read(cert)?, key: std::fs::read(key)? };
        let start = |config: Option<&str>, extra: &[&str]| {
            let mut args =
                vec!["--tls-replication", "yes", "--repl-diskless-sync-delay", "0", "--tls-auth-clients", "yes"];
            args.extend(extra);
            let mut node = ValkeyServer::start_redis_tls_with(cert, key, ca, config, &args)?;
            node.set_harness_tls(files.clone());
            Ok(node)
        };
        Self::start_with(None, Some(files.ca.clone()), &start, 1)
    }

    fn start_inner(password: Option<String>, replicas: usize) -> Result<Self, HarnessError> {
        let start = |config: Option<&str>, extra: &[&str]| {
            let mut args = vec!["--repl-diskless-sync-delay", "0"];
            args.extend(extra);
            match config {
                Some(text) => ValkeyServer::start_with_config(text, &args),
                None => ValkeyServer::start_local(&args),
            }
        };
        Self::start_with(password, None, &start, replicas)
    }

    /// Starts the processes with `start` (a configuration file's text for a
    /// Sentinel, and extra arguments).
    fn start_with(
        password: Option<String>,
        ca: Option<Vec<u8>>,
        start: &Starter<'_>,
        replicas: usize,
    ) -> Result<Self, HarnessError> {
        let primary = start(None, &[])?;
        let replica_of = format!("127.0.0.1 {}", primary.port());
        let mut data = vec![primary];
        for _ in 0..replicas {
            data.push(start(None, &["--replicaof", &replica_of])?);
        }
        // Linked before the Sentinels look: a Sentinel learns replicas from
        // the primary's `INFO`, which it reads again only every 10 s.
        let linked = Sentinel { data, sentinels: Vec::new(), password: None, ca: ca.clone() };
        linked.wait_linked(Duration::from_secs(30))?;
        let data = linked.data;
        let mut config = format!(
            "sentinel monitor {SERVICE_NAME} 127.0.0.1 {} 2\nsentinel down-after-milliseconds {SERVICE_NAME} \
             {DOWN_AFTER_MS}\nsentinel failover-timeout {SERVICE_NAME} 4000\nsentinel parallel-syncs {SERVICE_NAME} 1\n",
            data[0].port()
        );
        if let Some(p) = &password {
            // Sentinels talk to each other with the same password.
            config.push_str(&format!("requirepass \"{p}\"\nsentinel sentinel-pass \"{p}\"\n"));
        }
        let mut sentinels = Vec::new();
        for _ in 0..3 {
            sentinels.push(start(Some(&config), &["--sentinel"])?);
        }
        let deployment = Sentinel { data, sentinels, password, ca };
        deployment.wait_known(Duration::from_secs(30))?;
        Ok(deployment)
    }

    /// `host:port,...,serviceName=microdcs`: the Sentinels for
    /// `ConnectionString`.
    pub fn connection_string(&self) -> String {
        let mut parts: Vec<String> = self.sentinels.iter().map(ValkeyServer::host_port).collect();
        parts.push(format!("serviceName={SERVICE_NAME}"));
        parts.join(",")
    }

    /// The data nodes: 0 was the first primary, the others its replicas.
    pub fn data_nodes(&self) -> &[ValkeyServer] {
        &self.data
    }

    /// Data node `i`, to kill, stop or restart.
    pub fn data_node_mut(&mut self, i: usize) -> &mut ValkeyServer {
        &mut self.data[i]
    }

    /// The Sentinels.
    pub fn sentinels(&self) -> &[ValkeyServer] {
        &self.sentinels
    }

    /// Sentinel `i`, to kill or restart.
    pub fn sentinel_mut(&mut self, i: usize) -> &mut ValkeyServer {
        &mut self.sentinels[i]
    }

    /// One command on `node` (a Sentinel, with its password, when `sentinel`).
    fn run(&self, node: &ValkeyServer, sentinel: bool, args: &[&str]) -> Result<redis::Value, HarnessError> {
        let run = || -> redis::RedisResult<redis::Value> {
            let client = match &self.ca {
                _ if node.has_harness_tls() => node.client()?,
                #[cfg(any(feature = "tls-native-tls", feature = "tls-rustls"))]
                Some(pem) => {
                    crate::client::transport::tls::ensure_crypto_provider();
                    redis::Client::build_with_tls(
                        node.url(),
                        redis::TlsCertificates { client_tls: None, root_cert: Some(pem.clone()) },
                    )?
                }
                _ => redis::Client::open(node.url())?,
            };
            let mut con = client.get_connection_with_timeout(Duration::from_secs(2))?;
            con.set_read_timeout(Some(Duration::from_secs(5)))?;
            if let Some(p) = self.password.as_ref().filter(|_| sentinel) {
                redis::cmd("AUTH").arg(p).query::<()>(&mut con)?;
            }
            let mut cmd = redis::cmd(args[0]);
            for a in &args[1..] {
                cmd.arg(*a);
            }
            cmd.query(&mut con)
        };
        run().map_err(|e| start_err(format!("{} on {}: {e}", args.join(" "), node.host_port())))
    }

    fn ask(&self, sentinel: &ValkeyServer, args: &[&str]) -> Result<redis::Value, HarnessError> {
        self.run(sentinel, true, args)
    }

    /// A data node's `INFO replication`.
    fn replication(&self, node: &ValkeyServer) -> String {
        match self.run(node, false, &["INFO", "replication"]) {
            Ok(v) => redis::from_redis_value::<String>(v).unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// The data node every running Sentinel names as the primary, if they
    /// agree and it says it is one.
    pub fn primary(&self) -> Option<usize> {
        let mut named = None;
        for s in self.sentinels.iter().filter(|s| s.is_running()) {
            let v = self.ask(s, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE_NAME]).ok()?;
            let (_, port): (String, u16) = redis::from_redis_value(v).ok()?;
            let i = self.data.iter().position(|d| d.port() == port)?;
            if named.is_some_and(|n| n != i) {
                return None;
            }
            named = Some(i);
        }
        let i = named?;
        self.replication(&self.data[i]).contains("role:master").then_some(i)
    }

    /// Waits until the Sentinels name a primary other than `old` that says
    /// it is one; its index.
    ///
    /// # Errors
    /// None within `timeout`.
    pub fn wait_primary_other_than(&self, old: usize, timeout: Duration) -> Result<usize, HarnessError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(i) = self.primary().filter(|i| *i != old) {
                return Ok(i);
            }
            if Instant::now() > deadline {
                return Err(start_err(format!("no new primary within {timeout:?}")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A failover on request (`SENTINEL FAILOVER`): the replica is
    /// promoted, the old primary turns replica. Waits until it is done.
    ///
    /// # Errors
    /// The Sentinel refused, or no new primary within 30 s.
    pub fn failover(&self) -> Result<usize, HarnessError> {
        let old = self.primary().ok_or_else(|| start_err("no agreed primary before the failover"))?;
        let first = self.sentinels.iter().find(|s| s.is_running()).ok_or_else(|| start_err("no sentinel runs"))?;
        self.ask(first, &["SENTINEL", "FAILOVER", SERVICE_NAME])?;
        self.wait_primary_other_than(old, Duration::from_secs(30))
    }

    /// Waits until the Sentinels agree on a primary, every other running
    /// data node replicates from it with its link up, and every Sentinel
    /// knows a replica: the deployment can fail over again.
    ///
    /// # Errors
    /// Not so within `timeout`.
    pub fn wait_replicated(&self, timeout: Duration) -> Result<(), HarnessError> {
        let deadline = Instant::now() + timeout;
        loop {
            let synced = self.primary().is_some_and(|p| {
                let port = format!("master_port:{}", self.data[p].port());
                self.data.iter().enumerate().filter(|(i, d)| *i != p && d.is_running()).all(|(_, d)| {
                    let info = self.replication(d);
                    info.contains("role:slave") && info.contains(&port) && info.contains("master_link_status:up")
                })
            });
            if synced {
                return self.wait_known(deadline.saturating_duration_since(Instant::now()));
            }
            if Instant::now() > deadline {
                return Err(start_err(format!("no primary with replicas in sync within {timeout:?}")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until every replica of data node 0 has its link up.
    fn wait_linked(&self, timeout: Duration) -> Result<(), HarnessError> {
        let deadline = Instant::now() + timeout;
        while !self.data[1..].iter().all(|d| self.replication(d).contains("master_link_status:up")) {
            if Instant::now() > deadline {
                return Err(start_err(format!("the replicas did not link within {timeout:?}")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Waits until every running Sentinel knows every replica and the
    /// other Sentinels: before that, a failover would find no replica to
    /// promote or no quorum to elect a leader.
    ///
    /// # Errors
    /// Not so within `timeout`.
    pub fn wait_known(&self, timeout: Duration) -> Result<(), HarnessError> {
        let deadline = Instant::now() + timeout;
        let others = self.sentinels.len() - 1;
        let wanted = self.data.len() - 1;
        loop {
            let known = self.sentinels.iter().filter(|s| s.is_running()).all(|s| {
                let replicas = self.ask(s, &["SENTINEL", "REPLICAS", SERVICE_NAME]);
                let peers = self.ask(s, &["SENTINEL", "SENTINELS", SERVICE_NAME]);
                matches!((replicas, peers), (Ok(redis::Value::Array(r)), Ok(redis::Value::Array(p)))
                    if r.len() >= wanted && p.len() == others)
            });
            if known {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(start_err(format!(
                    "the sentinels did not find the replica and each other within {timeout:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
