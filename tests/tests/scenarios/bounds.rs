//! Bounded waits: start-up ends within the connect timeout, `health()` and
//! a read answer within the response timeout, and a write within its
//! attempts, whatever the server does (gone, stopped with SIGSTOP, killed)
//! and whatever the reconnect backoff would do. Each test has its own server; a stopped one is always continued.
//! Run with `--nocapture` to see the measured times.

use microdcs_tests::fixtures::Plant;
use std::process::Command;
use std::time::{Duration, Instant};

use microdcs_tests::fixtures::JobResponse;
use microdcs_tests::{ValkeyServer, created, unique_prefix};
use microdcs_valkey::config::defaults;
use microdcs_valkey::redis;
use microdcs_valkey::{
    Error, Expect, Valkey, client::ConnectError, client::Health, config::ValkeyConfig, store::DeleteExpect,
};

/// Slack over every bound: the machine is shared and noisy, and a bound
/// that holds only on a quiet machine is no bound.
const MARGIN: Duration = Duration::from_millis(1500);

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn config(cs: &str, connect_timeout: Duration, response_timeout: Duration) -> ValkeyConfig {
    ValkeyConfig {
        connection_string: microdcs_valkey::config::Secret::new(cs),
        key_prefix: unique_prefix("bounds").as_str().to_owned(),
        connect_timeout,
        response_timeout,
        ..ValkeyConfig::default()
    }
}

fn local_server() -> ValkeyServer {
    ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"))
}

/// The server's process id, from `INFO server` (the harness does not expose it).
async fn server_pid(s: &ValkeyServer) -> u32 {
    let mut con = redis::Client::open(s.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let info: String = redis::cmd("INFO").arg("server").query_async(&mut con).await.unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no process_id in INFO server:\n{info}"))
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status().expect("the kill command");
    assert!(status.success(), "kill -{sig} {pid}: {status}");
}

/// A server stopped with SIGSTOP for as long as this lives; SIGCONT on drop,
/// also when the test fails.
struct Stopped(u32);

impl Stopped {
    fn new(pid: u32) -> Self {
        signal(pid, "STOP");
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal(self.0, "CONT");
    }
}

/// Runs `health()` and asserts it is unhealthy within `bound` + margin.
async fn unhealthy_within(valkey: &Valkey, bound: Duration, what: &str) -> Duration {
    let start = Instant::now();
    let h = valkey.health().await;
    let took = start.elapsed();
    println!("{what}: health() -> {h:?} in {took:?} (bound {bound:?} + {MARGIN:?})");
    assert!(matches!(h, Health::Unhealthy { .. }), "{what}: {h:?}");
    assert!(took < bound + MARGIN, "{what}: health() took {took:?}, bound {bound:?}");
    took
}

#[tokio::test]
async fn connect_to_a_closed_port_ends_within_the_connect_timeout() {
    let endpoint = format!("127.0.0.1:{}", closed_port());
    let connect_timeout = Duration::from_secs(1);
    // A long response timeout changes nothing: start-up has one deadline.
    let c = config(&endpoint, connect_timeout, Duration::from_secs(30));
    let start = Instant::now();
    let err = Valkey::connect(&c).await.unwrap_err();
    let took = start.elapsed();
    println!("connect, closed port: {err} in {took:?} (bound {connect_timeout:?} + {MARGIN:?})");
    assert!(matches!(err, ConnectError::Unreachable { .. }), "{err:?}");
    assert!(took < connect_timeout + MARGIN, "took {took:?}");
    assert!(err.to_string().contains(&endpoint) && format!("{err:?}").contains(&endpoint), "{err:?}");
}

#[tokio::test]
async fn connect_url_to_a_closed_port_ends_within_the_default_connect_timeout() {
    let endpoint = format!("127.0.0.1:{}", closed_port());
    let start = Instant::now();
    let err = Valkey::connect_url(&format!("redis://{endpoint}/"), unique_prefix("bounds"), Default::default())
        .await
        .unwrap_err();
    let took = start.elapsed();
    let bound = defaults::CONNECT_TIMEOUT;
    println!("connect_url, closed port: {err} in {took:?} (bound {bound:?} + {MARGIN:?})");
    assert!(err.is_connection(), "{err:?}");
    assert!(took < bound + MARGIN, "took {took:?}");
    assert!(err.to_string().contains(&endpoint) && format!("{err:?}").contains(&endpoint), "{err:?}");
}

#[tokio::test]
async fn connect_to_a_stopped_server_ends_within_the_connect_timeout() {
    let s = local_server();
    let pid = server_pid(&s).await;
    let connect_timeout = Duration::from_secs(1);
    // The server accepts the TCP connection (the kernel does) but never
    // answers; the response timeout is far longer than the connect timeout.
    let c = config(&s.host_port(), connect_timeout, Duration::from_secs(30));
    let stopped = Stopped::new(pid);
    let start = Instant::now();
    let err = Valkey::connect(&c).await.unwrap_err();
    let took = start.elapsed();
    drop(stopped);
    println!("connect, stopped server: {err} in {took:?} (bound {connect_timeout:?} + {MARGIN:?})");
    assert!(matches!(err, ConnectError::Unreachable { .. }), "{err:?}");
    assert!(took < connect_timeout + MARGIN, "took {took:?}");
    assert!(err.to_string().contains(&s.host_port()), "{err}");
}

#[tokio::test]
async fn health_of_a_stopped_server_answers_within_the_response_timeout() {
    let s = local_server();
    let pid = server_pid(&s).await;
    let response_timeout = Duration::from_millis(500);
    let valkey = Valkey::connect(&config(&s.host_port(), Duration::from_secs(3), response_timeout))
        .await
        .unwrap_or_else(|e| s.fail("connect", &e));
    assert!(valkey.health().await.is_healthy());
    {
        let _stopped = Stopped::new(pid);
        unhealthy_within(&valkey, response_timeout, "stopped server").await;
        // Again, now that a reply is overdue on the connection.
        unhealthy_within(&valkey, response_timeout, "stopped server, second check").await;
        let start = Instant::now();
        let err = valkey.ping().await.unwrap_err();
        let took = start.elapsed();
        println!("stopped server: ping() -> {err} in {took:?}");
        assert!(err.is_connection(), "{err:?}");
        assert!(took < response_timeout + MARGIN, "ping took {took:?}");
    }
    // Continued: healthy again without rebuilding the handle.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let h = valkey.health().await;
        if h.is_healthy() {
            break;
        }
        assert!(Instant::now() < deadline, "still unhealthy after SIGCONT: {h:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn health_of_a_killed_server_answers_within_the_response_timeout() {
    let mut s = local_server();
    let response_timeout = Duration::from_millis(500);
    let valkey = Valkey::connect(&config(&s.host_port(), Duration::from_secs(3), response_timeout))
        .await
        .unwrap_or_else(|e| s.fail("connect", &e));
    assert!(valkey.health().await.is_healthy());
    s.kill();
    // The first check finds the connection dropped and starts the
    // reconnect; the later ones wait on that reconnect's backoff, which
    // alone would take seconds.
    for i in 0..3 {
        unhealthy_within(&valkey, response_timeout, &format!("killed server, check {i}")).await;
    }
    match valkey.health().await {
        Health::Unhealthy { reason } => assert!(reason.contains(&s.host_port()), "names the endpoint: {reason}"),
        h => panic!("{h:?}"),
    }
}

/// Slack over the bounds of reads and writes, which make several round
/// trips and sleeps on a shared machine.
const OP_MARGIN: Duration = Duration::from_secs(2);

/// The settings of the read and write bound tests: short enough to run
/// quickly, long enough that a read that waits twice, or a write attempt that
/// waits on the reconnect backoff, shows over the margin.
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(1500);
const WRITE_ATTEMPTS: u32 = 3;
const WRITE_RETRY_DELAY: Duration = Duration::from_millis(100);

/// A read waits at most one response timeout, plus one retry delay and a
/// quick reconnect after a dropped connection.
const READ_BOUND: Duration = RESPONSE_TIMEOUT.saturating_add(WRITE_RETRY_DELAY);

/// A write waits at most `attempts x (response timeout + retry delay)`.
const WRITE_BOUND: Duration = Duration::from_millis(
    (WRITE_ATTEMPTS as u64) * (RESPONSE_TIMEOUT.as_millis() + WRITE_RETRY_DELAY.as_millis()) as u64,
);

async fn store_env(s: &ValkeyServer) -> (Valkey, microdcs_valkey::Store<JobResponse>) {
    let c = ValkeyConfig {
        write_attempts: WRITE_ATTEMPTS,
        write_retry_delay: WRITE_RETRY_DELAY,
        ..config(&s.host_port(), Duration::from_secs(3), RESPONSE_TIMEOUT)
    };
    let valkey = Valkey::connect(&c).await.unwrap_or_else(|e| s.fail("connect", &e));
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    created(&store, &JobResponse::new("r-1", "s1", "o-1", &["A"])).await;
    (valkey, store)
}

/// Runs `op`, prints its time and asserts it failed within `bound` + margin.
async fn fails_within<T: std::fmt::Debug>(
    what: &str,
    bound: Duration,
    op: impl Future<Output = Result<T, Error>>,
) -> Duration {
    let start = Instant::now();
    let out = op.await;
    let took = start.elapsed();
    println!("{what}: {took:?} (bound {bound:?} + {OP_MARGIN:?}) -> {out:?}");
    let err = out.expect_err(what);
    assert!(err.is_connection(), "{what}: a connection error, got {err:?}");
    assert!(took < bound + OP_MARGIN, "{what}: took {took:?}, bound {bound:?}");
    took
}

/// Every read and write kind against a server that does not answer.
async fn reads_and_writes_fail_within_their_bounds(store: &microdcs_valkey::Store<JobResponse>, how: &str) {
    let read = JobResponse::new("r-1", "s1", "o-1", &["B"]);
    let took = fails_within(&format!("{how}: get"), READ_BOUND, store.get("r-1")).await;
    if how == "stopped" {
        // A read that timed out is not repeated: it would only wait again.
        assert!(took < 2 * RESPONSE_TIMEOUT, "{how}: get waited {took:?}, more than one response timeout");
    }
    fails_within(&format!("{how}: get again"), READ_BOUND, store.get("r-1")).await;
    fails_within(&format!("{how}: find"), READ_BOUND, store.find(JobResponse::by_order("o-1"))).await;
    fails_within(&format!("{how}: create"), WRITE_BOUND, store.create(&JobResponse::new("r-2", "s1", "o-2", &[])))
        .await;
    // These read first: a failed read ends them.
    fails_within(&format!("{how}: put(Any)"), READ_BOUND + WRITE_BOUND, store.put(&read, Expect::Any)).await;
    fails_within(&format!("{how}: delete_id"), READ_BOUND + WRITE_BOUND, store.delete_id("r-1", DeleteExpect::Any))
        .await;
}

#[tokio::test]
async fn reads_and_writes_of_a_stopped_server_end_within_their_bounds() {
    let s = local_server();
    let pid = server_pid(&s).await;
    let (valkey, store) = store_env(&s).await;
    let before = store.get("r-1").await.unwrap().unwrap();
    {
        let _stopped = Stopped::new(pid);
        reads_and_writes_fail_within_their_bounds(&store, "stopped").await;
        let next = JobResponse { state: vec!["C".into()], ..before.doc.clone() };
        let update = store.update(&before, &next);
        let took = fails_within("stopped: update", WRITE_BOUND, update).await;
        assert!(took >= RESPONSE_TIMEOUT, "waited for the reply: {took:?}");
    }
    // Continued: the same handle works again.
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.get("r-1").await.is_err() {
        assert!(Instant::now() < deadline, "still failing after SIGCONT");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = valkey;
}

#[tokio::test]
async fn reads_and_writes_of_a_killed_server_end_within_their_bounds() {
    let mut s = local_server();
    let (_valkey, store) = store_env(&s).await;
    let before = store.get("r-1").await.unwrap().unwrap();
    s.kill();
    reads_and_writes_fail_within_their_bounds(&store, "killed").await;
    let next = JobResponse { state: vec!["C".into()], ..before.doc.clone() };
    fails_within("killed: update", WRITE_BOUND, store.update(&before, &next)).await;
}

// ---- streams, leases, fingerprints, maintenance and the poller ----
//
// Every one of these used to send a raw command on the shared connection
// manager: while the server was gone each waited for the manager's own
// reconnect (its retries times the connect timeout, plus backoff).

use microdcs_valkey::{
    Document, lease::LeaseBackend, lease::LeaseStore, poller::BoxError, poller::BoxFuture, poller::Poller,
    poller::StreamConsumer, store::MaintenanceOptions, streams::StreamEntry, streams::Streams,
};

/// A write sent once (`append`): one response timeout.
const ONCE_BOUND: Duration = RESPONSE_TIMEOUT;

/// Stream, lease, fingerprint and maintenance calls against a server that
/// does not answer, each within its bound.
async fn helpers_fail_within_their_bounds(
    valkey: &Valkey,
    store: &microdcs_valkey::Store<JobResponse>,
    stream: &str,
    how: &str,
) {
    let streams = Streams::new(valkey.clone());
    let f: &[(&str, &[u8])] = &[("k", b"v")];
    fails_within(&format!("{how}: Streams::create_group"), WRITE_BOUND, streams.create_group(stream, "g2")).await;
    fails_within(&format!("{how}: Streams::append"), ONCE_BOUND, streams.append(stream, f)).await;
    fails_within(&format!("{how}: Streams::append_capped"), ONCE_BOUND, streams.append_capped(stream, 10, f)).await;
    fails_within(&format!("{how}: Streams::read"), READ_BOUND, streams.read(stream, "g", "c", 10)).await;
    fails_within(&format!("{how}: Streams::read_from"), READ_BOUND, streams.read_from(stream, "g", "c", 10, "0")).await;
    fails_within(&format!("{how}: Streams::ack"), WRITE_BOUND, streams.ack(stream, "g", &["1-0".to_owned()])).await;
    fails_within(&format!("{how}: Streams::trim_acknowledged"), WRITE_BOUND, streams.trim_acknowledged(stream)).await;
    let claim = streams.autoclaim(stream, "g", "c", Duration::ZERO, 10);
    fails_within(&format!("{how}: Streams::autoclaim"), READ_BOUND, claim).await;
    let leases = LeaseStore::new(valkey.clone());
    fails_within(&format!("{how}: LeaseStore::read_protected"), READ_BOUND, leases.read_protected("press")).await;
    fails_within(&format!("{how}: LeaseStore::fence"), READ_BOUND, leases.fence("press")).await;
    fails_within(&format!("{how}: needs_rebuild"), READ_BOUND, store.needs_rebuild()).await;
    // A run fails at its first command: the first SCAN.
    let opts = MaintenanceOptions::default();
    fails_within(&format!("{how}: verify"), READ_BOUND, store.verify(&opts)).await;
    fails_within(&format!("{how}: rebuild"), READ_BOUND, store.rebuild(&opts)).await;
}

/// A stream with group `g` and one pending entry of consumer `c`.
async fn stream_env(valkey: &Valkey) -> String {
    let stream = format!("{}:bounds:stream", valkey.prefix().as_str());
    let streams = Streams::new(valkey.clone());
    streams.create_group(&stream, "g").await.unwrap();
    streams.append(&stream, &[("k", b"v")]).await.unwrap();
    assert_eq!(streams.read(&stream, "g", "c", 10).await.unwrap().len(), 1);
    stream
}

#[tokio::test]
async fn stream_lease_and_maintenance_calls_of_a_stopped_server_end_within_their_bounds() {
    let s = local_server();
    let pid = server_pid(&s).await;
    let (valkey, store) = store_env(&s).await;
    let stream = stream_env(&valkey).await;
    {
        let _stopped = Stopped::new(pid);
        helpers_fail_within_their_bounds(&valkey, &store, &stream, "stopped").await;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Streams::new(valkey.clone()).read_from(&stream, "g", "c", 10, "0").await.is_err() {
        assert!(Instant::now() < deadline, "still failing after SIGCONT");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn stream_lease_and_maintenance_calls_of_a_killed_server_end_within_their_bounds() {
    let mut s = local_server();
    let (valkey, store) = store_env(&s).await;
    let stream = stream_env(&valkey).await;
    s.kill();
    helpers_fail_within_their_bounds(&valkey, &store, &stream, "killed").await;
}

/// A consumer of the change stream of `JobResponse` that takes its time
/// with nothing (it only counts).
struct Count(std::sync::Arc<std::sync::atomic::AtomicU32>);

impl StreamConsumer for Count {
    fn feed(&self) -> microdcs_valkey::schema::Feed<'_> {
        JobResponse::SPEC.feed().expect("job responses have a change stream")
    }
    fn group(&self) -> &str {
        "bounds"
    }
    fn handle<'a>(&'a self, _scope: &'a str, entries: &'a [StreamEntry]) -> BoxFuture<'a, Result<(), BoxError>> {
        self.0.fetch_add(entries.len() as u32, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async { Ok(()) })
    }
}

fn count_consumer() -> Count {
    Count(std::sync::Arc::default())
}

/// The connect timeout of the poller tests: the pub/sub connection of
/// `Poller::start` waits at most this long.
const POLLER_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

async fn poller_env(s: &ValkeyServer, poll: Duration) -> Valkey {
    let c = ValkeyConfig {
        write_attempts: WRITE_ATTEMPTS,
        write_retry_delay: WRITE_RETRY_DELAY,
        poll_interval: poll,
        scope_refresh_interval: poll,
        ..config(&s.host_port(), POLLER_CONNECT_TIMEOUT, RESPONSE_TIMEOUT)
    };
    let valkey = Valkey::connect(&c).await.unwrap_or_else(|e| s.fail("connect", &e));
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    created(&store, &JobResponse::new("r-1", "s1", "o-1", &["A"])).await;
    valkey
}

async fn start_fails_within(valkey: Valkey, how: &str) {
    let start = Instant::now();
    let out = Poller::new(valkey, "instance-1").consumer(count_consumer()).start().await;
    let took = start.elapsed();
    let bound = POLLER_CONNECT_TIMEOUT + RESPONSE_TIMEOUT;
    println!("{how}: Poller::start {took:?} (bound {bound:?} + {OP_MARGIN:?}) -> {out:?}");
    let err = out.expect_err(how);
    assert!(err.is_connection(), "{how}: a connection error, got {err:?}");
    assert!(took < bound + OP_MARGIN, "{how}: took {took:?}, bound {bound:?}");
}

#[tokio::test]
async fn poller_start_against_a_stopped_server_ends_within_its_bound() {
    let s = local_server();
    let pid = server_pid(&s).await;
    let valkey = poller_env(&s, Duration::from_secs(1)).await;
    let _stopped = Stopped::new(pid);
    start_fails_within(valkey, "stopped").await;
}

#[tokio::test]
async fn poller_start_against_a_killed_server_ends_within_its_bound() {
    let mut s = local_server();
    let valkey = poller_env(&s, Duration::from_secs(1)).await;
    s.kill();
    start_fails_within(valkey, "killed").await;
}

/// Starts a poller on three scopes, makes the server stop answering (`how`)
/// while fallback polls run every 100 ms, and shuts the poller down: the
/// shutdown does not wait for a poll in flight to give up.
async fn shutdown_within_a_response_timeout(how: &str) {
    let mut s = local_server();
    let pid = server_pid(&s).await;
    let valkey = poller_env(&s, Duration::from_millis(100)).await;
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    for scope in ["s2", "s3"] {
        created(&store, &JobResponse::new(&format!("r-{scope}"), scope, &format!("o-{scope}"), &["A"])).await;
    }
    let consumer = count_consumer();
    let seen = consumer.0.clone();
    let poller = Poller::new(valkey, "instance-1").consumer(consumer).start().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.load(std::sync::atomic::Ordering::SeqCst) < 3 {
        assert!(Instant::now() < deadline, "the poller never delivered the changes");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stopped = if how == "stopped" {
        Some(Stopped::new(pid))
    } else {
        s.kill();
        None
    };
    // Polls start and hang on the server that does not answer.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let start = Instant::now();
    poller.shutdown().await;
    let took = start.elapsed();
    drop(stopped);
    println!("{how}: PollerHandle::shutdown {took:?} (bound {RESPONSE_TIMEOUT:?} + {OP_MARGIN:?})");
    assert!(took < RESPONSE_TIMEOUT + OP_MARGIN, "{how}: shutdown took {took:?}");
}

#[tokio::test]
async fn poller_shutdown_with_a_stopped_server_ends_within_a_response_timeout() {
    shutdown_within_a_response_timeout("stopped").await;
}

#[tokio::test]
async fn poller_shutdown_with_a_killed_server_ends_within_a_response_timeout() {
    shutdown_within_a_response_timeout("killed").await;
}

// ---- damaged state and out-of-range arguments: typed answers, nothing written ----

#[tokio::test]
async fn a_damaged_fingerprints_key_is_wrong_type() {
    let s = local_server();
    let (valkey, store) = store_env(&s).await;
    let key = format!("{}:schema:fingerprints", valkey.prefix().as_str());
    let mut con = valkey.connection();
    let _: () = redis::cmd("SET").arg(&key).arg("not a hash").query_async(&mut con).await.unwrap();
    let err = store.needs_rebuild().await.unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }) && err.is_corrupt(), "needs_rebuild: {err:?}");
    let err = store.rebuild(&MaintenanceOptions::default()).await.unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "rebuild: {err:?}");
    let v: String = redis::cmd("GET").arg(&key).query_async(&mut con).await.unwrap();
    assert_eq!(v, "not a hash", "left alone");
}

#[tokio::test]
async fn a_damaged_cached_lease_result_is_lease_corrupt_and_changes_nothing() {
    let s = local_server();
    let (valkey, _store) = store_env(&s).await;
    let leases = LeaseStore::new(valkey.clone());
    let ttl = Duration::from_secs(30);
    let microdcs_valkey::lease::Acquire::Acquired(lease) =
        leases.acquire("press", "alice", ttl, "req-1").await.unwrap()
    else {
        panic!("a free lease")
    };
    let mut con = valkey.connection();
    let pattern = format!("{}:lease:*:req:*", valkey.prefix().as_str());
    let keys: Vec<String> = redis::cmd("KEYS").arg(&pattern).query_async(&mut con).await.unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let all = |con: &mut microdcs_valkey::client::Connection| {
        let mut con = con.clone();
        let pattern = format!("{}:*", valkey.prefix().as_str());
        async move {
            let mut keys: Vec<String> = redis::cmd("KEYS").arg(&pattern).query_async(&mut con).await.unwrap();
            keys.sort();
            let mut dump = Vec::new();
            for k in keys {
                let t: String = redis::cmd("TYPE").arg(&k).query_async(&mut con).await.unwrap();
                let v: redis::Value = match t.as_str() {
                    "hash" => redis::cmd("HGETALL").arg(&k).query_async(&mut con).await.unwrap(),
                    "string" => redis::cmd("GET").arg(&k).query_async(&mut con).await.unwrap(),
                    _ => redis::Value::Nil,
                };
                dump.push(format!("{k} {t} {v:?}"));
            }
            dump
        }
    };
    for (field, value) in [("r1", "bogus"), ("r1", "held"), ("r3", "07")] {
        // Each time a fresh copy of the cached acquire, then one field damaged.
        let _: () = redis::cmd("HSET")
            .arg(&keys[0])
            .arg("r1")
            .arg("acquired")
            .arg("r3")
            .arg(lease.token.to_string())
            .query_async(&mut con)
            .await
            .unwrap();
        let _: () = redis::cmd("HSET").arg(&keys[0]).arg(field).arg(value).query_async(&mut con).await.unwrap();
        if (field, value) == ("r1", "held") {
            // `held` needs a number where the acquire cached a lease id.
            let _: () = redis::cmd("HSET").arg(&keys[0]).arg("r3").arg("x").query_async(&mut con).await.unwrap();
        }
        let before = all(&mut con).await;
        let err = leases.acquire("press", "alice", ttl, "req-1").await.unwrap_err();
        println!("cached {field}={value}: {err}");
        assert!(matches!(err, Error::LeaseCorrupt { .. }) && err.is_corrupt(), "{field}={value}: {err:?}");
        assert_eq!(all(&mut con).await, before, "{field}={value}: nothing written");
    }
    // Renew and release replay their own cache the same way.
    leases.renew(&lease, ttl, "req-2").await.unwrap();
    let renew_key: Vec<String> = redis::cmd("KEYS").arg(&pattern).query_async(&mut con).await.unwrap();
    for k in &renew_key {
        let _: () = redis::cmd("HSET").arg(k).arg("r1").arg("bogus").query_async(&mut con).await.unwrap();
    }
    let err = leases.renew(&lease, ttl, "req-2").await.unwrap_err();
    assert!(matches!(err, Error::LeaseCorrupt { .. }), "renew: {err:?}");
    leases.release(&lease, "req-3").await.unwrap();
    let release_keys: Vec<String> = redis::cmd("KEYS").arg(&pattern).query_async(&mut con).await.unwrap();
    for k in &release_keys {
        let _: () = redis::cmd("HSET").arg(k).arg("r1").arg("bogus").query_async(&mut con).await.unwrap();
    }
    let err = leases.release(&lease, "req-3").await.unwrap_err();
    assert!(matches!(err, Error::LeaseCorrupt { .. }), "release: {err:?}");
}

#[tokio::test]
async fn huge_batches_and_counts_are_taken_as_the_maximum() {
    let s = local_server();
    let (valkey, store) = store_env(&s).await;
    let stream = stream_env(&valkey).await;
    let streams = Streams::new(valkey.clone());
    // The pending entry moves from one consumer to the other each round.
    for (count, owner, other) in [(usize::MAX, "c", "c2"), (100_000_000_000_000_000, "c2", "c")] {
        assert_eq!(streams.read_from(&stream, "g", owner, count, "0").await.unwrap().len(), 1, "read_from {count}");
        assert!(streams.read(&stream, "g", owner, count).await.unwrap().is_empty(), "read {count}");
        let claimed = streams.autoclaim(&stream, "g", other, Duration::ZERO, count).await.unwrap();
        assert_eq!(claimed.len(), 1, "autoclaim {count}");
        let opts = MaintenanceOptions { batch: count, ..MaintenanceOptions::default() };
        assert!(store.verify(&opts).await.unwrap().is_clean(), "verify batch {count}");
        store.rebuild(&opts).await.unwrap();
    }
    // Also the longest idle time and a length cap past the server's integers.
    streams.autoclaim(&stream, "g", "c", Duration::MAX, 10).await.unwrap();
    streams.append_capped(&stream, u64::MAX, &[("k", b"v")]).await.unwrap();
}
