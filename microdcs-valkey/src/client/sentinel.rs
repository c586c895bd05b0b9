//! Following the primary a group of Sentinels names for a service.
//!
//! A handle made with `serviceName=` keeps one [`Sentinels`]: where the
//! Sentinels are, the service, and the primary they named last, with a
//! generation that grows at every change. Each connection of the handle is
//! a [`Follower`]: a reconnecting connection to the primary it was made
//! for, replaced by one to the new primary before its next command once the
//! generation has moved. The generation moves when a Sentinel announces a
//! switch (`+switch-master`, which a background task listens for), or when
//! a failure makes us ask the Sentinels: a `READONLY` reply (we reached the
//! old primary, now a replica) or a lost connection (the old primary is
//! gone). A new primary is adopted only after it says it is one (`ROLE`),
//! so a Sentinel with a stale view cannot send writes to a replica, and
//! only when the Sentinels' configuration epoch that named it is newer
//! than the one the handle follows (see [`moves_to`]): an answer to a
//! question asked before a switch, or a Sentinel that has not heard of
//! it, names a deposed primary that may still say it is one (stopped
//! through the failover and continued since), and a handle that has seen
//! its successor never goes back to it.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{Cmd, ConnectionAddr, IntoConnectionInfo, Pipeline, RedisFuture, RedisResult, Value};
use tokio::sync::watch;

use crate::client::bounded;
use crate::client::transport::is_auth;
use crate::error::is_unknown_outcome;

/// The channel on which a Sentinel announces a new primary:
/// `<service> <old host> <old port> <new host> <new port>`.
const SWITCH_CHANNEL: &str = "+switch-master";

/// The shortest time between two questions to the Sentinels: many callers
/// failing at once during a failover ask once.
const ASK_GAP: Duration = Duration::from_millis(100);

/// The longest pause before the switch listener tries the next Sentinel:
/// short, because a switch announced while nobody listens is learnt only
/// at the next failure (a write may meanwhile reach the old primary while
/// it still accepts writes), and trying a Sentinel that is down costs a
/// refused connection.
const LISTEN_MAX_PAUSE: Duration = Duration::from_secs(1);

/// The primary the Sentinels named last.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Primary {
    pub(crate) host: String,
    pub(crate) port: u16,
    /// The Sentinels' configuration epoch of the switch that named it.
    epoch: u64,
    /// Grows by one at every change of primary.
    generation: u64,
}

/// What one Sentinel named: the primary's address, the configuration
/// epoch of the switch that made it primary (`config-epoch` of `SENTINEL
/// MASTER`), and how many replicas the Sentinel knows for the service,
/// down ones included (`num-slaves`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Named {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) epoch: u64,
    pub(crate) replicas: u32,
}

/// Whether a handle following `current` moves to the primary `named`.
///
/// Sentinels number each switch with a configuration epoch greater than
/// any before it, so a greater epoch is a later switch: the one order on
/// which every Sentinel agrees. A named node of the same or a smaller
/// epoch is the current primary or an older one (an answer to a question
/// asked before the switch, or a Sentinel that has not heard of it yet),
/// never followed, unless the current primary refused a write as a
/// replica (`deposed`): then it is certainly no primary, and any node
/// that says it is one (checked before) is better than none; this is how
/// a handle follows Sentinels whose epochs started again (the service
/// removed and monitored anew).
pub(crate) fn moves_to(current: &Primary, named: &Named, deposed: bool) -> bool {
    let same = current.host == named.host && current.port == named.port;
    !same && (named.epoch > current.epoch || deposed)
}

impl Primary {
    pub(crate) fn endpoint(&self) -> String {
        show(&self.host, self.port)
    }
}

fn show(host: &str, port: u16) -> String {
    if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

/// How to reach the Sentinels and the nodes they name.
pub(crate) struct SentinelSetup {
    /// The service (`serviceName=`).
    pub(crate) service: String,
    /// The Sentinels, in the order written.
    pub(crate) sentinels: Vec<(String, u16)>,
    /// The Sentinels' ACL user and password file (`SentinelUser`,
    /// `SentinelPasswordFile`); the file is read at every connection.
    pub(crate) user: Option<String>,
    pub(crate) password_file: Option<PathBuf>,
    pub(crate) tls: bool,
    /// The data nodes' handshake (user, password, database).
    pub(crate) data: redis::RedisConnectionInfo,
    pub(crate) data_tls: bool,
    /// The CA to trust and the client certificate to present
    /// (`TlsCaFile`, `TlsCertFile`, `TlsKeyFile`), for both.
    pub(crate) tls_files: super::transport::TlsFiles,
    /// The data nodes' connection settings for one-off checks (`ROLE`),
    /// with their credentials.
    pub(crate) probe: redis::AsyncConnectionConfig,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
}

/// Why asking the Sentinels named no primary.
#[derive(Debug)]
pub(crate) enum AskFailure {
    /// A Sentinel or the named primary refused our credentials.
    Auth { endpoint: String, user: String, reason: String },
    /// Every Sentinel answered, and none monitors the service.
    UnknownService { reasons: String },
    /// No usable answer (unreachable Sentinels, a named node that is no
    /// primary yet or does not answer).
    NoAnswer { reasons: String },
}

impl std::fmt::Display for AskFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AskFailure::Auth { endpoint, reason, .. } => write!(f, "{endpoint}: {reason}"),
            AskFailure::UnknownService { reasons } | AskFailure::NoAnswer { reasons } => f.write_str(reasons),
        }
    }
}

/// The Sentinels of one handle and the primary they named last.
pub(crate) struct Sentinels {
    setup: SentinelSetup,
    current: watch::Sender<Primary>,
    /// The most replicas any Sentinel named for the service (see
    /// [`Sentinels::known_replicas`]).
    replicas: AtomicU32,
    /// When we last asked (see [`ASK_GAP`]).
    asked: tokio::sync::Mutex<Option<Instant>>,
    /// Whether a question asked in the background is pending.
    asking: std::sync::atomic::AtomicBool,
    /// Which Sentinel the next question goes to first.
    order: AskOrder,
    /// The switch listener and the periodic check, stopped with the last
    /// user of this.
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
}

impl Drop for Sentinels {
    fn drop(&mut self) {
        for h in self.tasks.lock().unwrap_or_else(PoisonError::into_inner).drain(..) {
            h.abort();
        }
    }
}

impl Sentinels {
    /// Asks the Sentinels for the primary until one is named, within the
    /// connect timeout, and starts listening for switches. `last` keeps
    /// the latest reason none was, for a caller whose deadline ends first.
    pub(crate) async fn start(setup: SentinelSetup, last: &mut Option<String>) -> Result<Arc<Sentinels>, AskFailure> {
        let deadline = Instant::now() + setup.connect_timeout;
        let order = AskOrder::default();
        let named = loop {
            match ask(&setup, &order).await {
                Ok(found) => break found,
                Err(e @ (AskFailure::Auth { .. } | AskFailure::UnknownService { .. })) => return Err(e),
                Err(e) if Instant::now() + ASK_GAP >= deadline => return Err(e),
                Err(e) => {
                    tracing::debug!(service = %setup.service, reason = %e, "no primary named yet");
                    *last = Some(e.to_string());
                    tokio::time::sleep(ASK_GAP).await;
                }
            }
        };
        let first = Primary { host: named.host, port: named.port, epoch: named.epoch, generation: 0 };
        let (current, _) = watch::channel(first);
        let sentinels = Arc::new(Sentinels {
            setup,
            current,
            replicas: AtomicU32::new(named.replicas),
            asked: tokio::sync::Mutex::new(Some(Instant::now())),
            asking: std::sync::atomic::AtomicBool::new(false),
            order,
            tasks: Mutex::new(Vec::new()),
        });
        let listener = tokio::spawn(listen(Arc::downgrade(&sentinels)));
        let check = tokio::spawn(check_every(Arc::downgrade(&sentinels)));
        sentinels
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend([listener.abort_handle(), check.abort_handle()]);
        Ok(sentinels)
    }

    pub(crate) fn primary(&self) -> Primary {
        self.current.borrow().clone()
    }

    pub(crate) fn service(&self) -> &str {
        &self.setup.service
    }

    /// How many replicas the Sentinels know for the service, down ones
    /// included: the most any Sentinel named since the handle started (a
    /// Sentinel that has not yet found them all names fewer, never more;
    /// a replica removed for good counts until the Sentinels forget it
    /// with `SENTINEL RESET` and the handle is made again).
    pub(crate) fn known_replicas(&self) -> u32 {
        self.replicas.load(Ordering::Relaxed)
    }

    /// [`Sentinels::refresh`] in a task of its own, unless one is already
    /// pending: a burst of failed calls (every write refused for want of
    /// replicas, under load) asks once, not once per call.
    pub(crate) fn refresh_in_background(self: &Arc<Self>) {
        if self.asking.swap(true, Ordering::AcqRel) {
            return;
        }
        // Cleared however the task ends (a panic, an abort at runtime shutdown).
        struct Pending(Arc<Sentinels>);
        impl Drop for Pending {
            fn drop(&mut self) {
                self.0.asking.store(false, Ordering::Release);
            }
        }
        let pending = Pending(self.clone());
        tokio::spawn(async move {
            pending.0.refresh(false).await;
            drop(pending);
        });
    }

    /// Asks the Sentinels again (at most once per [`ASK_GAP`], bounded by
    /// the connect timeout) and adopts the primary they name if it is
    /// newer (see [`moves_to`]; `deposed`: the current one refused a write
    /// as a replica).
    pub(crate) async fn refresh(&self, deposed: bool) {
        let mut asked = self.asked.lock().await;
        if asked.is_some_and(|t| t.elapsed() < ASK_GAP) {
            return;
        }
        *asked = Some(Instant::now());
        match tokio::time::timeout(self.setup.connect_timeout, ask(&self.setup, &self.order)).await {
            Ok(Ok(named)) => self.adopt(&named, deposed, "named by a sentinel"),
            Ok(Err(e)) => tracing::warn!(service = %self.setup.service, reason = %e, "no sentinel named a primary"),
            Err(_) => tracing::warn!(service = %self.setup.service, "no sentinel answered in time"),
        }
    }

    fn adopt(&self, named: &Named, deposed: bool, why: &'static str) {
        self.replicas.fetch_max(named.replicas, Ordering::Relaxed);
        let mut older = None;
        let changed = self.current.send_if_modified(|p| {
            if !moves_to(p, named, deposed) {
                if p.host == named.host && p.port == named.port {
                    // The same node, named by a later switch (a failover
                    // and back while the handle heard of neither).
                    p.epoch = p.epoch.max(named.epoch);
                } else {
                    older = Some(p.epoch);
                }
                return false;
            }
            p.host.clone_from(&named.host);
            p.port = named.port;
            p.epoch = named.epoch;
            p.generation += 1;
            true
        });
        let primary = show(&named.host, named.port);
        if changed {
            metrics::counter!(crate::observe::SENTINEL_SWITCHES).increment(1);
            tracing::warn!(service = %self.setup.service, %primary, epoch = named.epoch, why, "following a new primary");
        } else if let Some(following) = older {
            tracing::info!(
                service = %self.setup.service, %primary, epoch = named.epoch, following, why,
                "not going back to a primary of an older switch"
            );
        }
    }

    /// A reconnecting connection to `primary`, within the connect timeout.
    async fn manager_for(
        &self,
        primary: &Primary,
        protocol: redis::ProtocolVersion,
        config: &ConnectionManagerConfig,
    ) -> RedisResult<ConnectionManager> {
        let s = &self.setup;
        let settings = s.data.clone().set_protocol(protocol);
        let client = client(&primary.host, primary.port, s.data_tls, settings, &s.tls_files)?;
        bounded(s.connect_timeout, ConnectionManager::new_with_config(client, config.clone())).await
    }
}

/// A client of `host:port` with `settings`, over TLS (with the TLS files)
/// or not.
fn client(
    host: &str,
    port: u16,
    tls: bool,
    settings: redis::RedisConnectionInfo,
    tls_files: &super::transport::TlsFiles,
) -> RedisResult<redis::Client> {
    let addr = if tls {
        ConnectionAddr::TcpTls { host: host.to_owned(), port, insecure: false, tls_params: None }
    } else {
        ConnectionAddr::Tcp(host.to_owned(), port)
    };
    let info =
        addr.into_connection_info()?.set_tcp_settings(super::transport::tcp_settings()).set_redis_settings(settings);
    tls_files.client(info)
}

/// A client of Sentinel `i`, with its credentials read now.
fn sentinel_client(s: &SentinelSetup, i: usize) -> RedisResult<redis::Client> {
    let (host, port) = &s.sentinels[i];
    let mut settings = redis::RedisConnectionInfo::default();
    if let Some(u) = &s.user {
        settings = settings.set_username(u);
    }
    if let Some(path) = &s.password_file {
        let password = super::read_password_file(path).map_err(|e| {
            tracing::error!(path = %path.display(), error = %e, "cannot read the sentinel password file");
            redis::RedisError::from((
                redis::ErrorKind::AuthenticationFailed,
                "cannot read SentinelPasswordFile",
                path.display().to_string(),
            ))
        })?;
        settings = settings.set_password(password);
    }
    client(host, *port, s.tls, settings, &s.tls_files)
}

/// The order in which the Sentinels are asked: one at a time, in a stable
/// order, beginning at the Sentinel that answered last. A Sentinel that
/// stops answering (a host gone silent) holds its question for its whole
/// share of the connect timeout (see [`share`]); so the next
/// question begins past it, whether its question failed or was cut off,
/// and a silent Sentinel costs one bounded wait, not every question after.
#[derive(Default)]
struct AskOrder {
    first: AtomicUsize,
}

impl AskOrder {
    /// All `n` Sentinels, from the one to ask first.
    fn round(&self, n: usize) -> impl Iterator<Item = usize> + use<> {
        let first = self.first.load(Ordering::Relaxed) % n.max(1);
        (0..n).map(move |k| (first + k) % n)
    }

    /// Sentinel `i` of `n` is being asked: if the question ends without
    /// its answer, the next round begins after it.
    fn asking(&self, i: usize, n: usize) {
        self.first.store((i + 1) % n.max(1), Ordering::Relaxed);
    }

    /// Sentinel `i` named the primary: the next round begins with it.
    fn answered(&self, i: usize) {
        self.first.store(i, Ordering::Relaxed);
    }
}

/// The least time one Sentinel is given to answer, however many there are.
const LEAST_SHARE: Duration = Duration::from_millis(250);

/// How long one of `n` Sentinels may take to answer within `total`: an
/// equal share, so that a Sentinel that accepts the connection and then
/// never answers leaves the others time to answer within the same bound,
/// but never less than [`LEAST_SHARE`] (nor more than `total`).
fn share(total: Duration, n: usize) -> Duration {
    let equal = total / u32::try_from(n.max(1)).unwrap_or(u32::MAX);
    equal.max(total.min(LEAST_SHARE))
}

/// Asks the Sentinels in `order` which node is the service's primary, and
/// takes the first answer whose node says it is a primary.
async fn ask(s: &SentinelSetup, order: &AskOrder) -> Result<Named, AskFailure> {
    let mut reasons = Vec::new();
    let mut unknown = 0;
    let n = s.sentinels.len();
    for i in order.round(n) {
        order.asking(i, n);
        match ask_one(s, i).await {
            Ok(named) => {
                order.answered(i);
                return Ok(named);
            }
            Err(One::Unknown(reason)) => {
                unknown += 1;
                reasons.push(reason);
            }
            Err(One::Reason(reason)) => reasons.push(reason),
            Err(One::Fatal(e)) => return Err(e),
        }
    }
    let reasons = reasons.join("; ");
    if unknown == s.sentinels.len() {
        Err(AskFailure::UnknownService { reasons })
    } else {
        Err(AskFailure::NoAnswer { reasons })
    }
}

/// Why one Sentinel named no usable primary.
enum One {
    /// It monitors no such service.
    Unknown(String),
    /// Unreachable, or it named a node that is no primary (yet).
    Reason(String),
    /// Refused credentials: the question ends.
    Fatal(AskFailure),
}

/// Asks Sentinel `i` (within its share of the connect timeout) which node
/// is the service's primary, by which switch, and how many replicas it
/// knows; then asks the node whether it is a primary.
async fn ask_one(s: &SentinelSetup, i: usize) -> Result<Named, One> {
    let n = s.sentinels.len();
    let each = share(s.connect_timeout, n);
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(each))
        .set_response_timeout(Some(s.response_timeout.min(each)));
    let endpoint = show(&s.sentinels[i].0, s.sentinels[i].1);
    // In one pipeline, so that one Sentinel answers both from the same
    // view; the epoch first: a switch between the two answers pairs the
    // new address with the old epoch, which is never followed over the
    // old address (see `moves_to`), never the reverse.
    let named = async {
        let mut con = sentinel_client(s, i)?.get_multiplexed_async_connection_with_config(&config).await?;
        let mut pipe = redis::pipe();
        pipe.cmd("SENTINEL").arg("MASTER").arg(&s.service);
        pipe.cmd("SENTINEL").arg("GET-MASTER-ADDR-BY-NAME").arg(&s.service);
        con.req_packed_commands(&pipe, 0, 2).await
    };
    // A refusal of our credentials comes as an error reply in the pipeline.
    let refused = |r: Vec<Value>| {
        let refusal = r.iter().find_map(|v| match v {
            Value::ServerError(e) => Some(redis::RedisError::from(e.clone())).filter(is_auth),
            _ => None,
        });
        refusal.map_or(Ok(r), Err)
    };
    let replies = match bounded(each, named).await.and_then(refused) {
        Ok(r) => r,
        Err(e) if is_auth(&e) => {
            let user = s.user.clone().unwrap_or_else(|| "default".to_owned());
            let reason = format!(
                "{e} (a Sentinel's credentials are SentinelUser and SentinelPasswordFile, not the data nodes')"
            );
            return Err(One::Fatal(AskFailure::Auth { endpoint, user, reason }));
        }
        Err(e) => return Err(One::Reason(format!("{endpoint}: {e}"))),
    };
    let (host, port, epoch, replicas) = match parse_named(&replies) {
        Parsed::Named { host, port, epoch, replicas } => (host, port, epoch, replicas),
        Parsed::Unknown => return Err(One::Unknown(format!("{endpoint} monitors no service `{}`", s.service))),
        Parsed::Bad(what) => return Err(One::Reason(format!("{endpoint} answered {what}"))),
    };
    match role(s, &host, port, each).await {
        Ok(role) if role == "master" => Ok(Named { host, port, epoch, replicas }),
        Ok(role) => Err(One::Reason(format!(
            "{endpoint} names {} for `{}`, which is a {role}, not a primary (yet)",
            show(&host, port),
            s.service
        ))),
        Err(e) if is_auth(&e) => {
            let user = s.data.username().unwrap_or("default").to_owned();
            Err(One::Fatal(AskFailure::Auth { endpoint: show(&host, port), user, reason: e.to_string() }))
        }
        Err(e) => Err(One::Reason(format!("{endpoint} names {}, which does not answer: {e}", show(&host, port)))),
    }
}

/// What the node at `host:port` says it is (`master`, `slave`), within
/// `bound`: the asking Sentinel's share of the question, so a named node
/// that hangs (stopped, or cut off) costs that share, not the whole
/// question, and the other Sentinels are still asked.
async fn role(s: &SentinelSetup, host: &str, port: u16, bound: Duration) -> RedisResult<String> {
    let check = async {
        let settings = s.data.clone().set_db(0);
        let mut con = client(host, port, s.data_tls, settings, &s.tls_files)?
            .get_multiplexed_async_connection_with_config(&s.probe)
            .await?;
        let reply: Vec<Value> = redis::cmd("ROLE").query_async(&mut con).await?;
        match reply.first() {
            Some(v) => redis::from_redis_value::<String>(v.clone()).map_err(redis::RedisError::from),
            None => Err(redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, "an empty ROLE reply"))),
        }
    };
    bounded(bound.min(s.connect_timeout), check).await
}

/// Listens for switches announced by a Sentinel, moving to the next one
/// when its connection is lost; ends with the [`Sentinels`] it serves.
async fn listen(sentinels: Weak<Sentinels>) {
    let mut next = 0;
    let mut pause = ASK_GAP;
    loop {
        let Some(s) = sentinels.upgrade() else { return };
        let i = next % s.setup.sentinels.len();
        next += 1;
        let subscribed = async {
            let mut pubsub = bounded(s.setup.connect_timeout, sentinel_client(&s.setup, i)?.get_async_pubsub()).await?;
            bounded(s.setup.response_timeout, pubsub.subscribe(SWITCH_CHANNEL)).await?;
            RedisResult::Ok(pubsub)
        };
        let pubsub = match subscribed.await {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!(sentinel = i, error = %e, "cannot listen to a sentinel; trying the next");
                drop(s);
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(LISTEN_MAX_PAUSE);
                continue;
            }
        };
        pause = ASK_GAP;
        // A switch announced while nobody listened is learnt by asking.
        s.refresh(false).await;
        drop(s);
        let mut messages = pubsub.into_on_message();
        while let Some(msg) = messages.next().await {
            let Some(s) = sentinels.upgrade() else { return };
            let text = String::from_utf8_lossy(msg.get_payload_bytes()).into_owned();
            let parts: Vec<&str> = text.split(' ').collect();
            // The announcement carries no epoch: the Sentinel that made it
            // is asked for the primary with its epoch, so an announcement
            // that comes late never moves the handle back.
            if let [service, ..] = parts[..]
                && service == s.setup.service
            {
                match tokio::time::timeout(s.setup.connect_timeout, ask_one(&s.setup, i)).await {
                    Ok(Ok(named)) => s.adopt(&named, false, "announced by a sentinel"),
                    Ok(Err(One::Unknown(e) | One::Reason(e))) => {
                        tracing::warn!(service = %s.setup.service, reason = %e, "a switch announced, no primary named");
                    }
                    Ok(Err(One::Fatal(e))) => {
                        tracing::warn!(service = %s.setup.service, reason = %e, "a switch announced, no primary named");
                    }
                    Err(_) => tracing::warn!(service = %s.setup.service, "a switch announced, no answer in time"),
                }
            }
        }
    }
}

mod check;
mod follower;
mod named;
use check::check_every;
pub(crate) use follower::{Follower, OnSwitch, is_switch};
use named::{Parsed, parse_named};

#[cfg(test)]
mod tests;
