//! Writes that wait for replicas, against a real primary and replica: the
//! outcome tells whether a copy exists, a shortfall carries the version
//! written, a refusal by `min-replicas-to-write` writes nothing, and a
//! repeat after a lost reply (on another connection) still waits for the
//! write it repeats.

use std::time::{Duration, Instant};

use microdcs_tests::fixtures::{JobResponse, Plant};
use microdcs_tests::{ValkeyServer, unique_prefix};
use microdcs_valkey::testing::command;
use microdcs_valkey::{
    Error, Expect, KeyPrefix, MicroDcsConfig, PutOutcome, Valkey, config::Durability, config::WriteOptions,
    store::DeleteExpect, store::DeleteOutcome,
};

/// A primary and one replica of it on loopback, both with an append-only
/// file, the replica caught up before the test starts.
struct Pair {
    primary: ValkeyServer,
    replica: ValkeyServer,
}

fn pair() -> Pair {
    let fast = ["--appendonly", "yes", "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"];
    let primary = ValkeyServer::start_local(&fast).unwrap_or_else(|e| panic!("{e}"));
    let port = primary.port().to_string();
    let mut args = fast.to_vec();
    args.extend(["--replicaof", "127.0.0.1", &port]);
    let replica = ValkeyServer::start_local(&args).unwrap_or_else(|e| panic!("{e}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = command(&replica, &["INFO", "replication"]).unwrap_or_default();
        if info.contains("master_link_status:up") {
            break;
        }
        assert!(Instant::now() < deadline, "the replica never caught up:\n{info}\n{}", replica.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    Pair { primary, replica }
}

/// Stops a server process (SIGSTOP) until dropped: it keeps its
/// connections but answers nothing, as a replica behind a slow network.
struct Stopped(u32);

fn stop(server: &ValkeyServer) -> Stopped {
    let pid = server.pid().expect("a local server");
    signal("-STOP", pid);
    Stopped(pid)
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal("-CONT", self.0);
    }
}

fn signal(which: &str, pid: u32) {
    let status = std::process::Command::new("kill").args([which, &pid.to_string()]).status().expect("kill");
    assert!(status.success(), "kill {which} {pid}");
}

async fn connect(server: &ValkeyServer, name: &str, durability: Durability) -> Valkey {
    connect_in(server, unique_prefix(name), durability).await
}

/// A new handle (its own connections) on `prefix`.
async fn connect_in(server: &ValkeyServer, prefix: KeyPrefix, durability: Durability) -> Valkey {
    let write = WriteOptions { durability, retry_delay: Duration::from_millis(20), ..WriteOptions::default() };
    Valkey::connect_url(server.url(), prefix, write).await.unwrap_or_else(|e| server.fail("connect", &e))
}

/// A field of a hash on `server`, read directly.
fn hget(server: &ValkeyServer, key: &str, field: &str) -> String {
    command(server, &["HGET", key, field]).unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn a_write_that_waits_is_on_the_replica_when_it_returns() {
    let p = pair();
    let valkey = connect(&p.primary, "repl-ok", Durability::replicas(1)).await;
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    assert_eq!(store.create(&doc).await.unwrap(), PutOutcome::Written { version: 1 });
    let key = store.key("r-1").unwrap();
    // Read on the replica at once: the write waited for it.
    assert_eq!(hget(&p.replica, &key, "v"), "1");
    let read = store.get("r-1").await.unwrap().unwrap();
    let next = JobResponse { state: vec!["B".into()], ..doc.clone() };
    assert_eq!(store.update(&read, &next).await.unwrap(), PutOutcome::Written { version: 2 });
    assert_eq!(hget(&p.replica, &key, "v"), "2");
    // The append-only files too (both servers run one).
    let read = store.get("r-1").await.unwrap().unwrap();
    let aof = Durability::replicas(1).with_aof();
    assert_eq!(store.update(&read, &doc).durability(aof).await.unwrap(), PutOutcome::Written { version: 3 });
    // A flushed script cache is reloaded on the waiting connection too,
    // and the wait still covers the write.
    command(&p.primary, &["SCRIPT", "FLUSH"]).unwrap();
    let read = store.get("r-1").await.unwrap().unwrap();
    assert_eq!(store.update(&read, &next).await.unwrap(), PutOutcome::Written { version: 4 });
    assert_eq!(hget(&p.replica, &key, "v"), "4");
    let read = store.get("r-1").await.unwrap().unwrap();
    assert_eq!(store.delete(&read).await.unwrap(), DeleteOutcome::Deleted { version: 4 });
    assert_eq!(command(&p.replica, &["EXISTS", &key]).unwrap(), "0", "the delete is on the replica");
}

#[tokio::test]
async fn a_shortfall_carries_the_version_written_and_a_repeat_waits_again() {
    let p = pair();
    let short = Durability::replicas(1).with_timeout(Duration::from_millis(300));
    let a = connect(&p.primary, "repl-short", Durability::NONE).await;
    let store = Plant::open(a.clone()).store::<JobResponse>();
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    let key = store.key("r-1").unwrap();
    let stopped = stop(&p.replica);

    let started = Instant::now();
    match store.create(&doc).op("c-1").durability(short).await {
        Err(Error::NotReplicated { key: k, version, acked, wanted, reason }) => {
            assert_eq!((k.as_str(), version, acked, wanted), (key.as_str(), 1, 0, 1), "{reason}");
            assert!(reason.contains("0 of 1 replica"), "{reason}");
        }
        other => panic!("expected NotReplicated, got {other:?}"),
    }
    assert!(started.elapsed() >= Duration::from_millis(300), "it waited its timeout");
    // The write stands on the primary.
    assert_eq!(store.get("r-1").await.unwrap().unwrap().version, 1);
    // A write that does not wait is not held by the stopped replica.
    let other = JobResponse::new("r-2", "s1", "o-2", &["A"]);
    assert_eq!(store.create(&other).await.unwrap(), PutOutcome::Written { version: 1 });

    // The repeat, from another client (as after a lost reply and a new
    // connection, which has written nothing itself), is recognised and
    // still waits for the write: no false "replicated".
    let b = connect_in(&p.primary, a.prefix().clone(), Durability::NONE).await;
    let store_b = Plant::open(b.clone()).store::<JobResponse>();
    match store_b.create(&doc).op("c-1").durability(short).await {
        Err(Error::NotReplicated { version: 1, acked: 0, .. }) => {}
        other => panic!("expected NotReplicated at version 1, got {other:?}"),
    }
    assert_eq!(store_b.get("r-1").await.unwrap().unwrap().version, 1, "the repeat wrote nothing new");
    // A put expecting a version: its repeat finds the version moved on by
    // its own first attempt and still waits (not a conflict).
    let third = JobResponse::new("r-3", "s1", "o-3", &["A"]);
    assert_eq!(store_b.create(&third).await.unwrap(), PutOutcome::Written { version: 1 });
    let next = JobResponse { state: vec!["B".into()], ..third.clone() };
    for attempt in ["first", "repeat"] {
        match store_b.put(&next, Expect::Version(1)).op("p-1").durability(short).await {
            Err(Error::NotReplicated { version: 2, acked: 0, .. }) => {}
            other => panic!("{attempt}: expected NotReplicated at version 2, got {other:?}"),
        }
    }
    assert_eq!(store_b.get("r-3").await.unwrap().unwrap().version, 2, "written once");

    drop(stopped);
    // Once the replica is back, the same repeat reports the write
    // replicated, at the version it made.
    let c = connect_in(&p.primary, a.prefix().clone(), Durability::NONE).await;
    let store_c = Plant::open(c).store::<JobResponse>();
    let long = Durability::replicas(1).with_timeout(Duration::from_secs(10));
    assert_eq!(store_c.create(&doc).op("c-1").durability(long).await.unwrap(), PutOutcome::Written { version: 1 });
    assert_eq!(hget(&p.replica, &key, "v"), "1");
    // Deletes report a shortfall the same way.
    let stopped = stop(&p.replica);
    match store.delete_id("r-1", DeleteExpect::Any).op("d-1").durability(short).await {
        Err(Error::NotReplicated { version: 1, acked: 0, wanted: 1, .. }) => {}
        other => panic!("expected NotReplicated for the delete, got {other:?}"),
    }
    assert!(store.get("r-1").await.unwrap().is_none(), "the delete stands");
    // Its repeat from a new connection is recognised by the tombstone and
    // waits for the delete too.
    let d = connect_in(&p.primary, a.prefix().clone(), Durability::NONE).await;
    let store_d = Plant::open(d).store::<JobResponse>();
    match store_d.delete_id("r-1", DeleteExpect::Any).op("d-1").durability(short).await {
        Err(Error::NotReplicated { version: 1, acked: 0, .. }) => {}
        other => panic!("expected NotReplicated for the repeated delete, got {other:?}"),
    }
    drop(stopped);
    assert_eq!(
        store_d.delete_id("r-1", DeleteExpect::Any).op("d-1").durability(long).await.unwrap(),
        DeleteOutcome::Deleted { version: 1 }
    );
    assert_eq!(command(&p.replica, &["EXISTS", &key]).unwrap(), "0");
}

#[tokio::test]
async fn too_few_replicas_refuse_the_write_and_nothing_is_written() {
    let p = pair();
    let valkey = connect(&p.primary, "repl-min", Durability::NONE).await;
    let store = Plant::open(valkey).store::<JobResponse>();
    command(&p.primary, &["CONFIG", "SET", "min-replicas-to-write", "1", "min-replicas-max-lag", "1"]).unwrap();
    let stopped = stop(&p.replica);
    // The primary counts a replica good while its last ack is at most the
    // lag old: wait until it no longer does.
    let deadline = Instant::now() + Duration::from_secs(15);
    while !command(&p.primary, &["INFO", "replication"]).unwrap().contains("min_slaves_good_slaves:0") {
        assert!(Instant::now() < deadline, "the primary still counts the stopped replica");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    match store.create(&doc).await {
        Err(Error::NoReplicas { key, .. }) => assert_eq!(key, store.key("r-1").unwrap()),
        other => panic!("expected NoReplicas, got {other:?}"),
    }
    drop(stopped);
    command(&p.primary, &["CONFIG", "SET", "min-replicas-to-write", "0"]).unwrap();
    assert!(store.get("r-1").await.unwrap().is_none(), "nothing written");
    let keys = command(&p.primary, &["DBSIZE"]).unwrap();
    assert_eq!(keys, "0", "no key of the refused write");
}

#[tokio::test]
async fn waiting_for_an_append_only_file_the_server_does_not_keep_is_reported() {
    // One server, no append-only file: the wait is refused, the write stands.
    let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
    let valkey = connect(&server, "repl-noaof", Durability::replicas(0).with_aof()).await;
    let store = Plant::open(valkey).store::<JobResponse>();
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    match store.create(&doc).await {
        Err(Error::NotReplicated { version: 1, wanted: 0, reason, .. }) => {
            assert!(reason.contains("refused the wait"), "{reason}");
        }
        other => panic!("expected NotReplicated, got {other:?}"),
    }
    assert_eq!(store.get("r-1").await.unwrap().unwrap().version, 1);
}

#[test]
fn durability_settings_parse_and_reach_the_write_options() {
    let mut config = MicroDcsConfig::default();
    config.set("Valkey:WriteReplicas", "2").unwrap();
    config.set("Valkey:WriteReplicaTimeout", "250ms").unwrap();
    config.set("Valkey:WriteWaitAof", "true").unwrap();
    config.validate().unwrap();
    assert_eq!(
        config.valkey.write_options().durability,
        Durability { replicas: 2, aof: true, timeout: Duration::from_millis(250), every_replica: false }
    );
    config.set("Valkey:WriteReplicaTimeout", "0s").unwrap();
    let e = config.validate().unwrap_err().to_string();
    assert!(e.contains("WriteReplicaTimeout"), "{e}");
    config.set("Valkey:WriteReplicaTimeout", "61s").unwrap();
    assert!(config.validate().is_err());
    assert_eq!(Durability::default(), Durability::NONE);
    assert_eq!(Durability::NONE.timeout, Duration::from_secs(1));
}

#[tokio::test]
async fn every_replica_off_sentinel_is_refused_before_anything_is_written() {
    // Only the Sentinels and a cluster keep a count of replicas a
    // promotion does not shrink: on one server with replicas the level is
    // refused, typed, with nothing written.
    let p = pair();
    let valkey = connect(&p.primary, "repl-every", Durability::every_replica()).await;
    let store = Plant::open(valkey).store::<JobResponse>();
    let doc = JobResponse::new("r-1", "s1", "o-1", &["A"]);
    match store.create(&doc).await {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("Sentinel"), "{why}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert!(store.get("r-1").await.unwrap().is_none(), "nothing written");
    assert_eq!(command(&p.primary, &["DBSIZE"]).unwrap(), "0");
}

/// A claim under a durability that waits, its replica stopped: the claim
/// applied on the primary, unconfirmed, is still handed to the caller. As
/// `NotReplicated` it would have left the job out of its queue and held by
/// no worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconfirmed_claim_is_still_handed_to_its_claimer() {
    let p = pair();
    let write = WriteOptions {
        durability: Durability::replicas(1).with_timeout(Duration::from_millis(300)),
        ..WriteOptions::default()
    };
    let valkey = Valkey::connect_url(p.primary.url(), unique_prefix("claim-unconfirmed"), write).await.unwrap();
    let store = Plant::open(valkey).store::<JobResponse>();
    let job = JobResponse::new("j-1", "s1", "o-1", &["Queued"]);
    assert_eq!(store.create(&job).await.unwrap(), PutOutcome::Written { version: 1 });
    let stopped = stop(&p.replica);
    let claimed = store
        .claim(JobResponse::by_state("s1", "Queued"), |d| {
            Some(JobResponse { state: vec!["Running".into()], ..d.clone() })
        })
        .await
        .expect("an applied claim is the claimer's, confirmed or not")
        .expect("the queued job");
    assert_eq!((claimed.id.as_str(), claimed.version), ("j-1", 2));
    assert_eq!(claimed.doc.state, ["Running"]);
    drop(stopped);
    let stored = store.get("j-1").await.unwrap().unwrap();
    assert_eq!((stored.version, stored.doc.state), (2, vec!["Running".to_owned()]));
}
