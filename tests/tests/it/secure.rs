//! The lease store, the dedupe store and the poller against servers that
//! insist on credentials or on TLS: (a) a server whose default user needs a
//! password, reached as an ACL user whose password comes from a file, and
//! (b) a TLS-only server (Debian's redis-server) trusted through a CA file.
//! Connection tests elsewhere prove that plain commands get through; these
//! prove the scripts, and above all the poller's own RESP3 pub/sub
//! connection, use the same credentials and TLS settings.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use microdcs_tests::change_channel;
use microdcs_tests::tls::{certificates, temp_dir};
use microdcs_tests::{ValkeyServer, unique_prefix};
use microdcs_valkey::client::Connection;
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{
    Document, Error, MicroDcsConfig, PutOutcome, Valkey, changes::ChangeKind, changes::Changes, client::ConnectError,
    config::ValkeyConfig, dedupe::Claim, dedupe::DedupeStore, dedupe::ValkeyDedupe, lease::Acquire,
    lease::LeaseBackend, lease::LeaseStore, poller::Poller,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "reading", list(key = "reading:list:{scope}", score = n))]
struct Reading {
    id: String,
    scope: String,
    n: i64,
}

microdcs_valkey::keyspace! {
    Secure {
        documents: [Reading],
    }
}

/// The ACL user of the password-protected server and its password.
const USER: &str = "app";
const USER_PASSWORD: &str = "Secure-App-Pw-4711";
/// What the default user needs on that server (only our admin connection uses it).
const ADMIN_PASSWORD: &str = "Secure-Admin-Pw-0815";

/// Long enough that only the nudge can deliver a change in time.
const SLOW_POLL: &str = "30s";
/// How long a nudged change may take: far below `SLOW_POLL`.
const NUDGE_DEADLINE: Duration = Duration::from_secs(5);

fn base_config(cs: &str, prefix: &str) -> ValkeyConfig {
    let mut c = MicroDcsConfig::default();
    c.set("Valkey:ConnectionString", cs).unwrap();
    c.set("Valkey:KeyPrefix", prefix).unwrap();
    c.set("Valkey:ConnectTimeout", "5s").unwrap();
    c.set("Valkey:PollInterval", SLOW_POLL).unwrap();
    c.set("Valkey:ScopeRefreshInterval", SLOW_POLL).unwrap();
    c.valkey
}

/// One of the two protected servers, with a config that gets in.
struct Protected {
    server: ValkeyServer,
    config: ValkeyConfig,
    /// A connection outside the code under test, for inspecting the server.
    admin: Connection,
    /// What the setup is, for messages.
    label: &'static str,
    /// Where the certificates and the password file are.
    dir: PathBuf,
}

impl Protected {
    async fn connect(&self) -> Valkey {
        let v = Valkey::connect(&self.config).await.unwrap_or_else(|e| self.server.fail(self.label, &e));
        assert!(v.health().await.is_healthy(), "{}", self.label);
        v
    }
}

/// Adds the ACL user, makes the default user need a password (our admin
/// connection is already in and stays so), and writes the user's password
/// file; returns its path.
async fn require_acl_user(admin: &mut Connection, dir: &Path) -> PathBuf {
    // `&*`: the poller's nudge subscription needs the channels too.
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(USER)
        .arg("on")
        .arg(format!(">{USER_PASSWORD}"))
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .query_async(admin)
        .await
        .unwrap();
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("requirepass").arg(ADMIN_PASSWORD).query_async(admin).await.unwrap();
    let pw_file = dir.join("password");
    std::fs::write(&pw_file, format!("{USER_PASSWORD}\n")).unwrap();
    pw_file
}

/// A local server whose default user needs a password, plus an ACL user
/// whose password the client reads from a file. The password is set after
/// the start because the harness checks readiness with an unauthenticated PING.
async fn password_server(name: &str) -> Protected {
    let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
    let mut admin: Connection = ConnectionManager::new(redis::Client::open(server.url()).unwrap())
        .await
        .unwrap_or_else(|e| server.fail("admin", &e))
        .into();
    let dir = temp_dir(name);
    let pw_file = require_acl_user(&mut admin, &dir).await;

    // The server really refuses a client without credentials.
    let anonymous = base_config(&server.host_port(), "p");
    let err = Valkey::connect(&anonymous).await.unwrap_err();
    assert!(matches!(err, ConnectError::Auth { .. }), "the server must demand a password: {err:?}");

    let mut config = base_config(&server.host_port(), unique_prefix(name).as_str());
    config.user = Some(USER.into());
    config.password_file = Some(pw_file);
    Protected { server, config, admin, label: "password server, ACL user, password file", dir }
}

/// A TLS-only server (no plain port at all) and a config trusting its CA
/// through `TlsCaFile`, with TLS required.
async fn tls_server(name: &str) -> Protected {
    let dir = temp_dir(name);
    certificates(&dir);
    let server = ValkeyServer::start_redis_tls(&dir.join("server.crt"), &dir.join("server.key"), &dir.join("ca.crt"))
        .unwrap_or_else(|e| panic!("{e}"));
    let cs = format!("localhost:{}", server.port());
    let mut config = base_config(&cs, unique_prefix(name).as_str());
    config.tls_ca_file = Some(dir.join("ca.crt"));
    config.require_tls = true;
    // The admin connection goes through the library too: nothing else here speaks TLS.
    let admin_config = ValkeyConfig { key_prefix: unique_prefix("admin").as_str().to_owned(), ..config.clone() };
    let admin = Valkey::connect(&admin_config).await.unwrap_or_else(|e| server.fail("admin TLS connect", &e));
    assert!(admin.is_tls());
    let admin = admin.connection();
    Protected { server, config, admin, label: "TLS-only server, CA file", dir }
}

// ---------------------------------------------------------------- leases

/// Acquire, fenced write, renew, fence, release; then a takeover after
/// expiry gets a larger token and the old token's write is refused.
async fn leases_work(p: &Protected) {
    let valkey = p.connect().await;
    let leases = LeaseStore::new(valkey.clone());
    let label = p.label;
    let name = "press-7";
    let ttl = Duration::from_secs(10);
    let lease = match leases.acquire(name, "node-a", ttl, "req-1").await {
        Ok(Acquire::Acquired(l)) => l,
        other => panic!("{label}: acquire: {other:?}"),
    };
    assert_eq!(lease.token, 1, "{label}: first grant");
    assert_eq!(lease.ttl, ttl, "{label}");
    assert_eq!(leases.fence(name).await.unwrap(), 1, "{label}");
    leases.fenced_write(name, lease.token, b"setpoint=42").await.unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(leases.read_protected(name).await.unwrap().as_deref(), Some(&b"setpoint=42"[..]), "{label}");
    // Someone else cannot take a held lease.
    match leases.acquire(name, "node-b", ttl, "req-b1").await {
        Ok(Acquire::Held { remaining, .. }) => assert!(remaining > Duration::ZERO && remaining <= ttl, "{label}"),
        other => panic!("{label}: acquire of a held lease: {other:?}"),
    }
    let granted =
        leases.renew(&lease, Duration::from_secs(20), "req-2").await.unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(granted, Duration::from_secs(20), "{label}");
    leases.release(&lease, "req-3").await.unwrap_or_else(|e| panic!("{label}: {e}"));
    // Released: renewing it again is refused, the fence stays.
    assert!(
        matches!(leases.renew(&lease, ttl, "req-4").await, Err(Error::LeaseLost { .. })),
        "{label}: a released lease cannot be renewed"
    );
    assert_eq!(leases.fence(name).await.unwrap(), 1, "{label}");

    // A takeover: a short lease left to expire, then another owner.
    let short = match leases.acquire(name, "node-a", Duration::from_millis(100), "req-5").await {
        Ok(Acquire::Acquired(l)) => l,
        other => panic!("{label}: acquire: {other:?}"),
    };
    assert_eq!(short.token, 2, "{label}");
    tokio::time::sleep(Duration::from_millis(250)).await;
    let taken = match leases.acquire(name, "node-b", ttl, "req-b2").await {
        Ok(Acquire::Acquired(l)) => l,
        other => panic!("{label}: takeover after expiry: {other:?}"),
    };
    assert_eq!(taken.token, 3, "{label}");
    leases.fenced_write(name, taken.token, b"setpoint=43").await.unwrap_or_else(|e| panic!("{label}: {e}"));
    match leases.fenced_write(name, short.token, b"setpoint=stale").await {
        Err(Error::Fenced { token: 2, highest: 3, .. }) => {}
        other => panic!("{label}: stale token must be fenced: {other:?}"),
    }
    assert_eq!(leases.read_protected(name).await.unwrap().as_deref(), Some(&b"setpoint=43"[..]), "{label}");
    assert!(matches!(leases.renew(&short, ttl, "req-6").await, Err(Error::LeaseLost { .. })), "{label}");
    assert_eq!(leases.fence(name).await.unwrap(), 3, "{label}");
}

#[tokio::test]
async fn leases_with_an_acl_user_and_a_password_file() {
    let p = password_server("lease-auth").await;
    leases_work(&p).await;
}

#[tokio::test]
async fn leases_over_tls_with_a_ca_file() {
    let p = tls_server("lease-tls").await;
    leases_work(&p).await;
}

// ---------------------------------------------------------------- dedupe

async fn dedupe_works(p: &Protected) {
    let valkey = p.connect().await;
    let label = p.label;
    let dedupe = ValkeyDedupe::new(valkey, Duration::from_secs(30), Duration::from_secs(3600));
    let (source, id) = ("urn:line-1", "e-1");
    assert_eq!(dedupe.claim(source, id, "tok-1").await.unwrap_or_else(|e| panic!("{label}: {e}")), Claim::Claimed);
    assert_eq!(dedupe.claim(source, id, "tok-1").await.unwrap(), Claim::Claimed, "{label}: our own claim again");
    assert_eq!(dedupe.claim(source, id, "tok-2").await.unwrap(), Claim::Busy, "{label}");
    dedupe.mark_done(source, id).await.unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(dedupe.claim(source, id, "tok-2").await.unwrap(), Claim::Done, "{label}");
    let left = dedupe.lease_remaining(source, id).await.unwrap();
    assert!(left > Duration::from_secs(3500), "{label}: the retention holds: {left:?}");
}

#[tokio::test]
async fn dedupe_with_an_acl_user_and_a_password_file() {
    let p = password_server("dedupe-auth").await;
    dedupe_works(&p).await;
}

#[tokio::test]
async fn dedupe_over_tls_with_a_ca_file() {
    let p = tls_server("dedupe-tls").await;
    dedupe_works(&p).await;
}

// ---------------------------------------------------------------- poller

/// The client connections of the server as `CLIENT LIST` lines.
async fn clients(admin: &mut Connection) -> Vec<String> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query_async(admin).await.unwrap();
    list.lines().map(str::to_owned).collect()
}

/// A typed `Changes` consumer on a poller that polls only every 30 s: a
/// write must come back through its nudge within a few seconds, which needs
/// the poller's separate RESP3 subscription to have got in.
async fn nudged_change_arrives(p: &mut Protected, user: Option<&str>) {
    let valkey = p.connect().await;
    let label = p.label;
    let readings = Secure::open(valkey.clone()).store::<Reading>();
    let (handler, mut rx) = change_channel::<Reading>();
    let poller = Poller::new(valkey.clone(), "instance-1")
        .consumer(Changes::new(readings.clone(), "audit", handler).fetching())
        .start()
        .await
        .unwrap_or_else(|e| p.server.fail(&format!("{label}: poller start"), &e));

    // The subscription exists, on a RESP3 connection, as our user.
    let channel = format!("{}:nudge:reading", valkey.prefix().as_str());
    let (subscribers,): (Vec<(String, u64)>,) =
        redis::pipe().cmd("PUBSUB").arg("NUMSUB").arg(&channel).query_async(&mut p.admin).await.unwrap();
    assert_eq!(subscribers[0].1, 1, "{label}: the poller listens on {channel}");
    let lines = clients(&mut p.admin).await;
    let sub = lines
        .iter()
        .find(|l| l.contains(" resp=3") && l.split(' ').any(|f| f.starts_with("sub=") && f != "sub=0"))
        .unwrap_or_else(|| panic!("{label}: no RESP3 subscriber among the clients:\n{}", lines.join("\n")));
    if let Some(u) = user {
        assert!(sub.contains(&format!(" user={u} ")), "{label}: the subscription runs as `{u}`: {sub}");
    }

    // Past the poller's first poll and scope refresh (both run at start),
    // so the next ones are 30 s away.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t0 = Instant::now();
    let r = Reading { id: "r-1".into(), scope: "s1".into(), n: 7 };
    assert_eq!(readings.create(&r).await.unwrap(), PutOutcome::Written { version: 1 }, "{label}");
    let c = tokio::time::timeout(NUDGE_DEADLINE, rx.recv())
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("{label}: no change within {NUDGE_DEADLINE:?}; the nudge did not arrive"));
    let took = t0.elapsed();
    assert_eq!((c.kind, c.version, c.id.as_str(), c.scope.as_str()), (ChangeKind::Created, 1, "r-1", "s1"), "{label}");
    assert_eq!(c.document.as_ref().map(|d| &d.doc), Some(&r), "{label}: fetched");
    // A second write to the now known scope.
    let read = readings.get("r-1").await.unwrap().unwrap();
    let r2 = Reading { n: 8, ..r };
    assert_eq!(readings.update(&read, &r2).await.unwrap(), PutOutcome::Written { version: 2 }, "{label}");
    let c = tokio::time::timeout(NUDGE_DEADLINE, rx.recv()).await.ok().flatten();
    let c = c.unwrap_or_else(|| panic!("{label}: no second change within {NUDGE_DEADLINE:?}"));
    assert_eq!((c.kind, c.version), (ChangeKind::Updated, 2), "{label}");
    eprintln!("{label}: first change delivered after {took:?}");
    poller.shutdown().await;
}

#[tokio::test]
async fn poller_nudges_with_an_acl_user_and_a_password_file() {
    let mut p = password_server("poller-auth").await;
    nudged_change_arrives(&mut p, Some(USER)).await;
}

#[tokio::test]
async fn poller_nudges_over_tls_with_a_ca_file() {
    let mut p = tls_server("poller-tls").await;
    nudged_change_arrives(&mut p, None).await;
}

/// Both at once, as a production deployment runs: TLS and an ACL user
/// whose password comes from a file.
#[tokio::test]
async fn leases_dedupe_and_poller_over_tls_as_an_acl_user() {
    let mut p = tls_server("all-tls-auth").await;
    let pw_file = require_acl_user(&mut p.admin, &p.dir).await;
    let mut anonymous = p.config.clone();
    anonymous.connect_timeout = Duration::from_secs(2);
    let err = Valkey::connect(&anonymous).await.unwrap_err();
    assert!(matches!(err, ConnectError::Auth { .. }), "the server must demand a password: {err:?}");
    p.config.user = Some(USER.into());
    p.config.password_file = Some(pw_file);
    p.label = "TLS-only server, CA file, ACL user, password file";
    leases_work(&p).await;
    dedupe_works(&p).await;
    nudged_change_arrives(&mut p, Some(USER)).await;
}
