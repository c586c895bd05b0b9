//! Through Sentinel, against a real primary, replica and three Sentinels:
//! the handle finds the primary by the service name, follows a failover
//! (the old primary killed, or turned replica on request) with writes,
//! reads, the poller, leases and the inspector, never shows a `READONLY`
//! reply, and refuses a wrong service or missing Sentinel credentials at
//! start with a typed error.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use microdcs_examples::plant::sharded::{self, ShardedPlant};
use microdcs_tests::fixtures::{JobResponse, Plant};
use microdcs_tests::unique_prefix;
use microdcs_valkey::testing::{DOWN_AFTER_MS, Sentinel, command};
use microdcs_valkey::{
    Document, Error, Expect, MicroDcsConfig, PutOutcome, Valkey, client::ConnectError, config::Durability,
    config::ValkeyConfig, inspect::Inspector, lease::LeaseBackend, lease::LeaseStore, poller::BoxError,
    poller::BoxFuture, poller::Poller, poller::StreamConsumer, schema::Feed, streams::StreamEntry,
};
use tokio::sync::mpsc;

fn deployment() -> Sentinel {
    Sentinel::start().unwrap_or_else(|e| panic!("{e}"))
}

fn config(s: &Sentinel, name: &str) -> ValkeyConfig {
    config_for(&s.connection_string(), name)
}

fn config_for(connection_string: &str, name: &str) -> ValkeyConfig {
    let mut c = MicroDcsConfig::default();
    c.set("Valkey:ConnectionString", connection_string).unwrap();
    c.set("Valkey:KeyPrefix", unique_prefix(name).as_str()).unwrap();
    c.set("Valkey:PollInterval", "30s").unwrap();
    c.set("Valkey:ScopeRefreshInterval", "200ms").unwrap();
    c.set("Valkey:WriteRetryDelay", "50ms").unwrap();
    c.valkey
}

async fn connect(s: &Sentinel, name: &str) -> Valkey {
    Valkey::connect(&config(s, name)).await.unwrap_or_else(|e| panic!("connect through sentinel: {e}"))
}

/// Every error a caller may see while the primary changes: a lost
/// connection or an unknown outcome, never a server's refusal.
fn assert_transient(e: &Error) {
    let text = e.to_string();
    assert!(!text.contains("READONLY") && !text.contains("read only"), "a replica's refusal surfaced: {text}");
    assert!(e.is_connection() || e.is_unknown_outcome(), "not a connection error: {e:?}");
}

/// Sends the id of every delivered entry to a channel.
struct Collect {
    tx: mpsc::UnboundedSender<String>,
    feed: Feed<'static>,
}

impl StreamConsumer for Collect {
    fn feed(&self) -> Feed<'_> {
        self.feed
    }
    fn group(&self) -> &str {
        "sentinel-test"
    }
    fn handle<'a>(&'a self, _scope: &'a str, entries: &'a [StreamEntry]) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            for e in entries {
                let _ = self.tx.send(e.field("id").unwrap_or_default().to_owned());
            }
            Ok(())
        })
    }
}

async fn delivered(rx: &mut mpsc::UnboundedReceiver<String>, id: &str, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while let Ok(Some(got)) = tokio::time::timeout_at(deadline, rx.recv()).await {
        if got == id {
            return true;
        }
    }
    false
}

#[tokio::test]
async fn a_killed_primary_is_followed_by_writes_the_poller_leases_and_the_inspector() {
    let mut s = deployment();
    let valkey = connect(&s, "sentinel-kill").await;
    assert!(!valkey.is_cluster());
    let plant = Plant::open(valkey.clone());
    let store = plant.store::<JobResponse>();
    let (tx, mut rx) = mpsc::unbounded_channel();
    // And a sharded type, whose nudges go per scope (`SPUBLISH` and
    // `SSUBSCRIBE`), which the pub/sub follower must carry over too.
    let per_scope = ShardedPlant::open(valkey.clone()).store::<sharded::JobResponse>();
    let _ = per_scope.create(&sharded::JobResponse::new("sr-0", "s1", "o-0", &["A"])).await.unwrap();
    let (stx, mut srx) = mpsc::unbounded_channel();
    let sharded_feed = <sharded::JobResponse as Document>::SPEC.feed().expect("has a change stream");
    let poller = Poller::new(valkey.clone(), "instance-1")
        .consumer(Collect { tx, feed: JobResponse::SPEC.feed().expect("has a change stream") })
        .consumer(Collect { tx: stx, feed: sharded_feed })
        .start()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(delivered(&mut srx, "sr-0", Duration::from_secs(10)).await, "the sharded type's first change");
    let _ = per_scope.create(&sharded::JobResponse::new("sr-1", "s1", "o-1", &["A"])).await.unwrap();
    assert!(delivered(&mut srx, "sr-1", Duration::from_secs(10)).await, "a per-scope nudge before the failover");
    // On the replica before the kill, so it survives the failover.
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    let written = store.create(&doc).durability(Durability::replicas(1)).await.unwrap();
    assert_eq!(written, PutOutcome::Written { version: 1 });
    assert!(delivered(&mut rx, "r-1", Duration::from_secs(10)).await, "delivered before the failover");
    let read = store.get("r-1").await.unwrap().unwrap();

    let killed_at = Instant::now();
    s.data_node_mut(0).kill();
    // Writes fail with connection errors until the Sentinels promote the
    // replica; then they resume on the same handle.
    let mut failures = 0;
    let next = JobResponse { state: vec!["B".into()], ..doc.clone() };
    let resumed = loop {
        match store.update(&read, &next).await {
            Ok(outcome) => break outcome,
            Err(e) => {
                assert_transient(&e);
                failures += 1;
            }
        }
        assert!(killed_at.elapsed() < Duration::from_secs(60), "writes never resumed ({failures} failures)");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let took = killed_at.elapsed();
    println!(
        "writes resumed {} ms after the kill ({failures} failed calls; down-after {DOWN_AFTER_MS} ms)",
        took.as_millis()
    );
    assert_eq!(resumed, PutOutcome::Written { version: 2 }, "the replicated read still matched");
    assert_eq!(s.primary(), Some(1), "the replica was promoted");
    assert!(valkey.health().await.is_healthy());

    // The poller resubscribed on the new primary: a nudge reaches it long
    // before its 30 s poll.
    let other = JobResponse::new("r-2", "s1", "o-2", &["A"]);
    assert_eq!(store.create(&other).await.unwrap(), PutOutcome::Written { version: 1 });
    assert!(delivered(&mut rx, "r-2", Duration::from_secs(10)).await, "the nudge on the new primary arrived");
    // After the read every switch makes (so only the nudge can bring it).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _ = per_scope.create(&sharded::JobResponse::new("sr-2", "s1", "o-2", &["A"])).await.unwrap();
    assert!(delivered(&mut srx, "sr-2", Duration::from_secs(10)).await, "the per-scope nudge on the new primary");

    let leases = LeaseStore::new(valkey.clone());
    let taken = leases.acquire("leader", "node-1", Duration::from_secs(30), "q-1").await.unwrap();
    assert!(matches!(taken, microdcs_valkey::lease::Acquire::Acquired(_)), "{taken:?}");
    let inspector = Inspector::new(&plant);
    let view = inspector.document("jobresponse", "r-1").await.unwrap().expect("the inspector reads it");
    assert_eq!(view.version.as_deref(), Some("2"));
    poller.shutdown().await;
}

#[tokio::test]
async fn a_requested_failover_never_shows_a_replica_refusal() {
    let s = deployment();
    let valkey = connect(&s, "sentinel-ask").await;
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    let _ = store.create(&doc).durability(Durability::replicas(1)).await.unwrap();

    // A writer runs through the failover, on the one handle.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let store = store.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let (mut ok, mut failed) = (0u32, Vec::new());
            let mut n = 0u32;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                let next =
                    JobResponse { job_order_id: format!("o-{n}"), ..JobResponse::new("r-1", "s1", "o-1", &["A"]) };
                match store.put(&next, Expect::Any).await {
                    Ok(_) => ok += 1,
                    Err(e) => failed.push(e),
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            (ok, failed)
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let new = s.failover().unwrap_or_else(|e| panic!("{e}"));
    println!("requested failover done in {} ms", started.elapsed().as_millis());
    assert_eq!(new, 1);
    // The old primary is a replica now: a handle still on it would be refused.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !command(&s.data_nodes()[0], &["ROLE"]).unwrap_or_default().contains("slave") {
        assert!(Instant::now() < deadline, "the old primary never turned replica");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::SeqCst);
    let (ok, failed) = writer.await.unwrap();
    println!("writer: {ok} writes, {} failed during the failover", failed.len());
    failed.iter().for_each(assert_transient);
    assert!(ok > 0);
    // Afterwards every write succeeds, on the new primary.
    for i in 0..20 {
        let next = JobResponse { job_order_id: format!("after-{i}"), ..doc.clone() };
        let _ = store.put(&next, Expect::Any).await.unwrap_or_else(|e| panic!("write {i} after the failover: {e}"));
    }
    let key = store.key("r-1").unwrap();
    let on_new = command(&s.data_nodes()[1], &["HGET", &key, "v"]).unwrap();
    let read = store.get("r-1").await.unwrap().unwrap();
    assert_eq!(on_new, read.version.to_string(), "the handle reads and writes the new primary");
}

#[tokio::test]
async fn a_wrong_service_or_missing_sentinel_credentials_fail_the_start() {
    let s = Sentinel::start_with_sentinel_password("s3ntinel-pw").unwrap_or_else(|e| panic!("{e}"));
    // No SentinelPasswordFile: refused by the Sentinel, named, typed.
    let mut c = config(&s, "sentinel-auth");
    let started = Instant::now();
    match Valkey::connect(&c).await {
        Err(e @ ConnectError::Auth { .. }) => {
            let text = e.to_string();
            assert!(text.contains(&s.sentinels()[0].host_port()), "{text}");
            assert!(text.contains("SentinelPasswordFile"), "{text}");
        }
        other => panic!("expected an authentication error, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(4), "refused at once, not after the connect timeout");

    let dir = std::env::temp_dir().join(format!("microdcs-sentinel-pw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("pw");
    std::fs::write(&file, "s3ntinel-pw\n").unwrap();
    c.sentinel_password_file = Some(file.clone());
    let valkey = Valkey::connect(&c).await.unwrap_or_else(|e| panic!("with the sentinel password: {e}"));
    assert!(valkey.ping().await.is_ok());
    assert!(!format!("{c:?}").contains("s3ntinel-pw"));

    // A service no Sentinel monitors is a configuration error, at once.
    let mut c = config_for(&format!("{},serviceName=nobody", s.sentinels()[0].host_port()), "sentinel-unknown");
    c.sentinel_password_file = Some(file);
    let started = Instant::now();
    match Valkey::connect(&c).await {
        Err(ConnectError::Config(e)) => assert!(e.to_string().contains("serviceName `nobody`"), "{e}"),
        other => panic!("expected a configuration error, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(4));

    // Sentinel settings without a service are refused, not ignored.
    let mut plain = MicroDcsConfig::default();
    plain.set("Valkey:ConnectionString", "127.0.0.1:6379").unwrap();
    plain.set("Valkey:SentinelTls", "true").unwrap();
    let e = plain.valkey.validate().unwrap_err().to_string();
    assert!(e.contains("SentinelTls") && e.contains("serviceName"), "{e}");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn sentinels_and_data_nodes_over_tls_each_as_configured() {
    let dir = microdcs_tests::tls::temp_dir("sentinel-tls");
    microdcs_tests::tls::certificates(&dir);
    let s = Sentinel::start_tls(&dir.join("server.crt"), &dir.join("server.key"), &dir.join("ca.crt"))
        .unwrap_or_else(|e| panic!("{e}"));
    let endpoints: Vec<String> = s.sentinels().iter().map(|n| format!("localhost:{}", n.port())).collect();
    let cs = format!("{},serviceName={},ssl=true", endpoints.join(","), microdcs_valkey::testing::SERVICE_NAME);
    let mut c = config_for(&cs, "sentinel-tls");
    c.tls_ca_file = Some(dir.join("ca.crt"));
    c.require_tls = true;
    // The Sentinels speak TLS as the data nodes do, trusting the same CA.
    let valkey = Valkey::connect(&c).await.unwrap_or_else(|e| panic!("TLS through sentinel: {e}"));
    assert!(valkey.is_tls());
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    assert_eq!(store.create(&doc).await.unwrap(), PutOutcome::Written { version: 1 });
    assert_eq!(store.get("r-1").await.unwrap().unwrap().doc, doc);

    // `SentinelTls=false` is honoured: plain text to a TLS Sentinel gets
    // no answer, reported as unreachable, naming the service.
    c.sentinel_tls = Some(false);
    c.connect_timeout = Duration::from_secs(1);
    // With TLS required, plain Sentinels are refused before any traffic.
    match Valkey::connect(&c).await {
        Err(ConnectError::Config(e)) => assert!(e.to_string().contains("SentinelTls"), "{e}"),
        other => panic!("expected SentinelTls=false to be refused under RequireTls, got {other:?}"),
    }
    c.require_tls = false;
    match Valkey::connect(&c).await {
        Err(e @ ConnectError::Unreachable { .. }) => assert!(e.to_string().contains("via Sentinel"), "{e}"),
        other => panic!("expected no answer from a TLS sentinel spoken to in plain text, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn the_handle_keeps_its_primary_while_the_sentinels_are_down_and_follows_again_after() {
    let mut s = deployment();
    let valkey = connect(&s, "sentinel-down").await;
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    assert_eq!(store.create(&doc).await.unwrap(), PutOutcome::Written { version: 1 });
    // Every Sentinel gone: nothing to ask, but the primary still serves.
    for i in 0..3 {
        s.sentinel_mut(i).kill();
    }
    for n in 2..=6 {
        let read = store.get("r-1").await.unwrap().unwrap();
        let next = JobResponse { state: vec![format!("S{n}")], ..doc.clone() };
        assert_eq!(store.update(&read, &next).await.unwrap(), PutOutcome::Written { version: n });
    }
    assert!(valkey.health().await.is_healthy());
    // The Sentinels come back (same ports, their configuration kept) and a
    // failover is followed again.
    for i in 0..3 {
        s.sentinel_mut(i).restart().unwrap_or_else(|e| panic!("{e}"));
    }
    s.wait_replicated(Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));
    let new = s.failover().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(new, 1);
    // Until the Sentinels turn the old primary into a replica it still
    // takes writes (Sentinel's window of two primaries); after, it refuses.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !command(&s.data_nodes()[0], &["ROLE"]).unwrap_or_default().contains("slave") {
        assert!(Instant::now() < deadline, "the old primary never turned replica");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let version = loop {
        let read = store.get("r-1").await;
        match read {
            Ok(Some(read)) => match store.update(&read, &doc).await {
                Ok(PutOutcome::Written { version }) => break version,
                Ok(other) => panic!("{other:?}"),
                Err(e) => assert_transient(&e),
            },
            Ok(None) => panic!("the document was lost"),
            Err(e) => assert_transient(&e),
        }
        assert!(Instant::now() < deadline, "writes never reached the new primary");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(version, 7);
    let key = store.key("r-1").unwrap();
    assert_eq!(command(&s.data_nodes()[1], &["HGET", &key, "v"]).unwrap(), "7", "written on the new primary");
}

/// A Sentinel that accepts connections and never answers (a host gone
/// silent), listed first: the start waits for it once, within the connect
/// timeout, and the handle still follows a failover.
#[tokio::test]
async fn a_silent_sentinel_listed_first_does_not_stop_the_start_or_a_failover() {
    let s = deployment();
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_at = silent.local_addr().unwrap().to_string();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let mut c = config_for(&format!("{silent_at},{}", s.connection_string()), "sentinel-silent");
    c.connect_timeout = Duration::from_secs(1);
    let valkey = Valkey::connect(&c).await.unwrap_or_else(|e| panic!("connect past a silent sentinel: {e}"));
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    assert_eq!(store.create(&doc).await.unwrap(), PutOutcome::Written { version: 1 });
    s.wait_replicated(Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.failover().unwrap_or_else(|e| panic!("{e}")), 1);
    // Writes before the old primary turns replica may still land on it
    // (Sentinel's window of two primaries): write after.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !command(&s.data_nodes()[0], &["ROLE"]).unwrap_or_default().contains("slave") {
        assert!(Instant::now() < deadline, "the old primary never turned replica");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match store.get("r-1").await {
            Ok(Some(read)) => {
                match store.update(&read, &JobResponse { state: vec!["B".into()], ..doc.clone() }).await {
                    Ok(PutOutcome::Written { version }) => {
                        assert_eq!(version, 2);
                        break;
                    }
                    Ok(other) => panic!("{other:?}"),
                    Err(e) => assert_transient(&e),
                }
            }
            Ok(None) => panic!("the document was lost"),
            Err(e) => assert_transient(&e),
        }
        assert!(Instant::now() < deadline, "writes never reached the new primary");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let key = store.key("r-1").unwrap();
    assert_eq!(command(&s.data_nodes()[1], &["HGET", &key, "v"]).unwrap(), "2", "written on the new primary");
    held.abort();
}
