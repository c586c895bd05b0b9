//! Connection and configuration against real servers: start-up failures,
//! password file rotation, TLS (Debian's redis-server), restarts, health,
//! and that no secret reaches logs, `Debug` or error texts.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use microdcs_tests::tls::{certificates, temp_dir};
use microdcs_tests::{ValkeyServer, server, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{
    Document, MicroDcsConfig, PutOutcome, Valkey, client::ConnectError, client::Health, config::ValkeyConfig,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "item")]
struct Item {
    id: String,
    scope: String,
    n: u32,
}

microdcs_valkey::keyspace! { Items { documents: [Item] } }

/// Captures every tracing event and span field of the process.
#[derive(Default)]
struct Capture {
    lines: Mutex<Vec<String>>,
    next: std::sync::atomic::AtomicU64,
}

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write;
        let _ = write!(self.0, " {}={:?}", field.name(), value);
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut line = format!("span {}", span.metadata().name());
        span.record(&mut Fields(&mut line));
        self.lines.lock().unwrap().push(line);
        tracing::span::Id::from_u64(1 + self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut line = String::from("record");
        values.record(&mut Fields(&mut line));
        self.lines.lock().unwrap().push(line);
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut line = format!("{} {}", event.metadata().level(), event.metadata().target());
        event.record(&mut Fields(&mut line));
        self.lines.lock().unwrap().push(line);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

fn capture() -> Arc<Capture> {
    static CAPTURE: OnceLock<Arc<Capture>> = OnceLock::new();
    CAPTURE
        .get_or_init(|| {
            let c = Arc::new(Capture::default());
            tracing::subscriber::set_global_default(Dispatch(c.clone())).expect("first subscriber");
            c
        })
        .clone()
}

/// `Arc<Capture>` as a subscriber.
struct Dispatch(Arc<Capture>);

impl tracing::Subscriber for Dispatch {
    fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
        self.0.enabled(m)
    }
    fn new_span(&self, s: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        self.0.new_span(s)
    }
    fn record(&self, i: &tracing::span::Id, v: &tracing::span::Record<'_>) {
        self.0.record(i, v);
    }
    fn record_follows_from(&self, a: &tracing::span::Id, b: &tracing::span::Id) {
        self.0.record_follows_from(a, b);
    }
    fn event(&self, e: &tracing::Event<'_>) {
        self.0.event(e);
    }
    fn enter(&self, i: &tracing::span::Id) {
        self.0.enter(i);
    }
    fn exit(&self, i: &tracing::span::Id) {
        self.0.exit(i);
    }
}

fn config(cs: &str, prefix: &str) -> ValkeyConfig {
    let mut c = MicroDcsConfig::default();
    c.set("Valkey:ConnectionString", cs).unwrap();
    c.set("Valkey:KeyPrefix", prefix).unwrap();
    c.set("Valkey:ConnectTimeout", "3s").unwrap();
    c.valkey
}

async fn raw(server: &ValkeyServer) -> ConnectionManager {
    ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap()
}

#[tokio::test]
async fn password_file_rotation_reaches_the_next_reconnect() {
    let cap = capture();
    let s = server();
    let mut admin = raw(&s).await;
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("app-rotate")
        .arg("on")
        .arg(">Rotate-Old-7x1")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .query_async(&mut admin)
        .await
        .unwrap();
    let dir = temp_dir("pw");
    let pw_file = dir.join("password");
    std::fs::write(&pw_file, "Rotate-Old-7x1\n").unwrap();
    let mut c = config(&s.host_port(), unique_prefix("rotate").as_str());
    c.user = Some("app-rotate".into());
    c.password_file = Some(pw_file.clone());
    let valkey = Valkey::connect(&c).await.unwrap_or_else(|e| s.fail("connect", &e));
    let store = Items::open(valkey.clone()).store::<Item>();
    assert!(matches!(
        store.create(&Item { id: "a".into(), scope: "s".into(), n: 1 }).await.unwrap(),
        PutOutcome::Written { .. }
    ));

    // Rotate: new password on the server and in the file, then drop the client's connection.
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("app-rotate")
        .arg("resetpass")
        .arg(">Rotate-New-9q2")
        .query_async(&mut admin)
        .await
        .unwrap();
    std::fs::write(&pw_file, "Rotate-New-9q2\r\n").unwrap();
    let killed: i64 =
        redis::cmd("CLIENT").arg("KILL").arg("USER").arg("app-rotate").query_async(&mut admin).await.unwrap();
    assert!(killed >= 1);
    // The next operation succeeds without rebuilding the client.
    let got = store.get("a").await.unwrap_or_else(|e| s.fail("get after rotation", &e)).unwrap();
    assert_eq!(got.doc.n, 1);
    let who: String = redis::cmd("ACL").arg("WHOAMI").query_async(&mut valkey.connection()).await.unwrap();
    assert_eq!(who, "app-rotate");
    let log = cap.lines.lock().unwrap().join("\n");
    assert!(!log.contains("Rotate-Old-7x1") && !log.contains("Rotate-New-9q2"), "a password reached the log");
    assert!(!format!("{c:?} {valkey:?}").contains("Rotate-"), "a password reached Debug");
}

#[tokio::test]
async fn unreachable_server_fails_within_the_connect_timeout() {
    // A listener that accepts and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let mut c = config(&addr.to_string(), "p");
    c.connect_timeout = Duration::from_millis(400);
    let start = Instant::now();
    let err = Valkey::connect(&c).await.unwrap_err();
    let took = start.elapsed();
    assert!(matches!(err, ConnectError::Unreachable { .. }), "{err:?}");
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    assert!(err.to_string().contains(&addr.to_string()), "{err}");

    // A closed port.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let c = ValkeyConfig { connect_timeout: Duration::from_millis(400), ..config(&format!("127.0.0.1:{port}"), "p") };
    let start = Instant::now();
    let err = Valkey::connect(&c).await.unwrap_err();
    assert!(matches!(err, ConnectError::Unreachable { .. }), "{err:?}");
    assert!(start.elapsed() < Duration::from_millis(1500), "took {:?}", start.elapsed());
    drop(silent);
}

#[tokio::test]
async fn tls_with_a_ca_file() {
    let dir = temp_dir("tls");
    certificates(&dir);
    let s = ValkeyServer::start_redis_tls(&dir.join("server.crt"), &dir.join("server.key"), &dir.join("ca.crt"))
        .unwrap_or_else(|e| panic!("{e}"));
    let cs = format!("localhost:{}", s.port());

    // Trusted through TlsCaFile (besides the system store).
    let mut c = config(&cs, unique_prefix("tls").as_str());
    c.tls_ca_file = Some(dir.join("ca.crt"));
    c.require_tls = true;
    // Loading the system trust store and the handshake take seconds on a
    // machine busy compiling; the point here is trust, not speed.
    c.connect_timeout = Duration::from_secs(30);
    let valkey = Valkey::connect(&c).await.unwrap_or_else(|e| s.fail("TLS connect", &e));
    assert!(valkey.is_tls());
    let store = Items::open(valkey.clone()).store::<Item>();
    assert!(matches!(
        store.create(&Item { id: "a".into(), scope: "s".into(), n: 1 }).await.unwrap(),
        PutOutcome::Written { .. }
    ));
    assert!(valkey.health().await.is_healthy());

    // A CA that did not sign the server certificate: refused at start.
    let mut wrong = config(&cs, "p");
    wrong.tls_ca_file = Some(dir.join("other.crt"));
    wrong.connect_timeout = Duration::from_secs(2);
    let err = Valkey::connect(&wrong).await.unwrap_err();
    assert!(matches!(err, ConnectError::Unreachable { .. }), "{err:?}");

    // ssl=true alone uses the system store only: our test CA is not in it.
    let mut system_only = config(&format!("{cs},ssl=true"), "p");
    system_only.connect_timeout = Duration::from_secs(2);
    assert!(Valkey::connect(&system_only).await.is_err());

    // A CA file that does not exist is a configuration error naming the setting.
    let mut missing = config(&cs, "p");
    missing.tls_ca_file = Some(dir.join("nope.crt"));
    let err = Valkey::connect(&missing).await.unwrap_err().to_string();
    assert!(err.contains("MicroDcs:Valkey:TlsCaFile"), "{err}");
}

#[tokio::test]
async fn require_tls_without_tls_fails_at_start() {
    let s = server();
    let mut c = config(&s.host_port(), "p");
    c.require_tls = true;
    let err = Valkey::connect(&c).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ConnectError::Config(_)), "{err:?}");
    assert!(text.contains("MicroDcs:Valkey:RequireTls") && text.contains("TLS is off"), "{text}");
}

#[tokio::test]
async fn secrets_never_reach_logs_debug_or_errors() {
    let cap = capture();
    let s = server();
    let mut admin = raw(&s).await;
    let secret = "Zq-Secret-Never-Logged-31";
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("app-secret")
        .arg("on")
        .arg(format!(">{secret}"))
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .query_async(&mut admin)
        .await
        .unwrap();
    let mut texts = Vec::new();
    // In the connection string (URL and StackExchange forms).
    for cs in [
        format!("redis://app-secret:{secret}@{}/", s.host_port()),
        format!("{},user=app-secret,password={secret}", s.host_port()),
    ] {
        let c = config(&cs, unique_prefix("secret").as_str());
        texts.push(format!("{c:?} {c}"));
        let valkey = Valkey::connect(&c).await.unwrap_or_else(|e| s.fail("connect", &e));
        texts.push(format!("{valkey:?}"));
        let store = Items::open(valkey.clone()).store::<Item>();
        let _ = store.create(&Item { id: "a".into(), scope: "s".into(), n: 1 }).await.unwrap();
        let _: i64 =
            redis::cmd("CLIENT").arg("KILL").arg("USER").arg("app-secret").query_async(&mut admin).await.unwrap();
        let _ = store.get("a").await.unwrap();
    }
    // Bad configurations and failed connects.
    let pw = temp_dir("secret").join("pw");
    std::fs::write(&pw, secret).unwrap();
    let mut both = config(&format!("{},password={secret}", s.host_port()), "p");
    both.password_file = Some(pw.clone());
    let err = Valkey::connect(&both).await.unwrap_err();
    texts.push(format!("{err} {err:?}"));
    let err =
        Valkey::connect(&config(&format!("redis://app-secret:{secret}x@{}/", s.host_port()), "p")).await.unwrap_err();
    texts.push(format!("{err} {err:?}"));
    let mut env_err = MicroDcsConfig::from_vars([(
        "APP_MicroDcs__Valkey__ConnectionString",
        format!("h:1,password={secret},bogus=1"),
    )])
    .unwrap_err()
    .to_string();
    env_err.push_str(&format!(
        "{:?}",
        MicroDcsConfig::from_vars([(
            "APP_MicroDcs__Valkey__ConnectionString",
            format!("redis://u:{secret}@h:notaport")
        )])
    ));
    texts.push(env_err);
    for t in &texts {
        assert!(!t.contains(secret), "secret in: {t}");
    }
    let log = cap.lines.lock().unwrap().join("\n");
    assert!(!log.is_empty());
    assert!(!log.contains(secret), "secret in the log");
}

/// A local server whose default user needs `password` (set after start, as
/// the harness's readiness check is an unauthenticated PING).
async fn server_requiring(password: &str) -> ValkeyServer {
    let s = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
    let mut admin = raw(&s).await;
    let _: () = redis::cmd("CONFIG").arg("SET").arg("requirepass").arg(password).query_async(&mut admin).await.unwrap();
    s
}

/// Asserts `texts` name `endpoint` and never contain `password`.
fn names_endpoint_not_password(texts: &[String], endpoint: &str, password: &str) {
    for t in texts {
        assert!(t.contains(endpoint), "endpoint `{endpoint}` missing in: {t}");
        assert!(!t.contains(password), "password in: {t}");
    }
}

#[tokio::test]
async fn missing_password_is_an_authentication_error() {
    let s = server_requiring("Needed-Pw-81").await;
    let c = ValkeyConfig { connect_timeout: Duration::from_secs(3), ..config(&s.host_port(), "p") };
    let start = Instant::now();
    let err = Valkey::connect(&c).await.unwrap_err();
    let took = start.elapsed();
    assert!(matches!(err, ConnectError::Auth { .. }), "NOAUTH is Auth, not a timeout: {err:?}");
    assert!(took < Duration::from_secs(2), "refused at once, not after the connect timeout: {took:?}");
    names_endpoint_not_password(&[err.to_string(), format!("{err:?}")], &s.host_port(), "Needed-Pw-81");

    let err = Valkey::connect_url(s.url(), unique_prefix("noauth"), Default::default()).await.unwrap_err();
    match &err {
        microdcs_valkey::Error::Redis(e) => assert_eq!(e.kind(), redis::ErrorKind::AuthenticationFailed, "{err}"),
        other => panic!("{other:?}"),
    }
    assert!(!err.is_connection(), "{err}");
    names_endpoint_not_password(&[err.to_string(), format!("{err:?}")], &s.host_port(), "Needed-Pw-81");

    // With the password, both constructors get in.
    let cs = format!("{},password=Needed-Pw-81", s.host_port());
    let valkey = Valkey::connect(&config(&cs, "p")).await.unwrap_or_else(|e| s.fail("connect", &e));
    assert!(valkey.health().await.is_healthy());
    let url = format!("redis://:Needed-Pw-81@{}/", s.host_port());
    let valkey = Valkey::connect_url(&url, unique_prefix("auth"), Default::default())
        .await
        .unwrap_or_else(|e| s.fail("connect_url", &e));
    assert!(valkey.health().await.is_healthy());
}

#[tokio::test]
async fn wrong_password_is_an_authentication_error_from_both_constructors() {
    let s = server_requiring("Right-Pw-92").await;
    for cs in [format!("{},password=Wrong-Pw-93", s.host_port()), format!("redis://:Wrong-Pw-93@{}/", s.host_port())] {
        let err = Valkey::connect(&config(&cs, "p")).await.unwrap_err();
        assert!(matches!(err, ConnectError::Auth { .. }), "WRONGPASS is Auth: {err:?}");
        names_endpoint_not_password(&[err.to_string(), format!("{err:?}")], &s.host_port(), "Wrong-Pw-93");
    }
    let url = format!("redis://:Wrong-Pw-93@{}/", s.host_port());
    let err = Valkey::connect_url(&url, unique_prefix("wrongpass"), Default::default()).await.unwrap_err();
    match &err {
        microdcs_valkey::Error::Redis(e) => assert_eq!(e.kind(), redis::ErrorKind::AuthenticationFailed, "{err}"),
        other => panic!("{other:?}"),
    }
    names_endpoint_not_password(&[err.to_string(), format!("{err:?}")], &s.host_port(), "Wrong-Pw-93");
}

#[tokio::test]
async fn unreachable_errors_name_the_endpoint_not_the_password() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let endpoint = format!("127.0.0.1:{port}");
    let password = "Closed-Port-Pw-17";
    for cs in [format!("redis://app:{password}@{endpoint}/"), format!("{endpoint},user=app,password={password}")] {
        let c = ValkeyConfig { connect_timeout: Duration::from_millis(300), ..config(&cs, "p") };
        let err = Valkey::connect(&c).await.unwrap_err();
        assert!(matches!(err, ConnectError::Unreachable { .. }), "{err:?}");
        names_endpoint_not_password(&[err.to_string(), format!("{err:?}")], &endpoint, password);
    }
}

#[tokio::test]
async fn a_bad_url_is_the_callers_mistake_not_tls() {
    let err = Valkey::connect_url("redis://u:Bad-Url-Pw-5@h:notaport/", unique_prefix("url"), Default::default())
        .await
        .unwrap_err();
    assert!(matches!(err, microdcs_valkey::Error::InvalidArgument(_)), "{err:?}");
    assert!(!format!("{err} {err:?}").contains("Bad-Url-Pw-5"), "{err:?}");
    let err = Valkey::connect(&config("redis://u:Bad-Url-Pw-5@h:notaport/", "p")).await.unwrap_err();
    assert!(matches!(err, ConnectError::Config(_)), "{err:?}");
    assert!(!format!("{err} {err:?}").contains("Bad-Url-Pw-5"), "{err:?}");
}

#[tokio::test]
async fn passwords_in_malformed_connection_strings_never_show() {
    let cap = capture();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let secret = "Pw-Malformed-77";
    let forms = [
        // An unencoded `/` in the password: not a valid URL, and the text
        // before the `/` is no authority to cut at.
        format!("redis://app:{secret}/x@127.0.0.1:{port}/"),
        format!("redis://app:x{secret}@y@127.0.0.1:{port}/"),
        format!("unix:///tmp/valkey.sock?pass={secret}"),
        format!("redis+unix:///tmp/valkey.sock?db=1&password={secret}"),
        format!("redis://127.0.0.1:{port}/0?password={secret}"),
        // No scheme: refused rather than taken as host `app:secret@127.0.0.1`.
        format!("app:{secret}@127.0.0.1:{port}"),
        format!("127.0.0.1:{port},password=a,{secret}"),
    ];
    let mut texts = Vec::new();
    for (i, cs) in forms.iter().enumerate() {
        let c = ValkeyConfig { connect_timeout: Duration::from_millis(300), ..config(cs, "p") };
        texts.push(format!("{c:?} {c}"));
        texts.push(format!("{:?}", c.validate()));
        texts.push(format!("{:?}", c.endpoint()));
        if let Err(e) = c.validate() {
            texts.push(e.to_string());
        }
        texts.push(format!("{:?}", MicroDcsConfig::from_vars([("APP_MicroDcs__Valkey__ConnectionString", cs)])));
        let err = Valkey::connect(&c).await.unwrap_err();
        texts.push(format!("{err} {err:?}"));
        // Only the forms `connect_url` refuses at once: a URL it accepts
        // would wait out the 5 s default connect timeout.
        if [0, 5, 6].contains(&i) {
            let err = Valkey::connect_url(cs, unique_prefix("mal"), Default::default()).await.unwrap_err();
            texts.push(format!("{err} {err:?}"));
        }
    }
    for t in &texts {
        assert!(!t.contains(secret), "secret in: {t}");
    }
    let log = cap.lines.lock().unwrap().join("\n");
    assert!(!log.contains(secret), "secret in the log");
    // The scheme-less form says what to write instead.
    let e = config(&forms[5], "p").validate().unwrap_err();
    assert_eq!(e.problems[0].setting, "MicroDcs:Valkey:ConnectionString");
    assert!(e.problems[0].problem.contains("user=") && e.problems[0].problem.contains("URL"), "{e}");
}

/// A server whose operator removed the Lua engine (Valkey 9.1 can run
/// without it) fails the start with a named error, not the first write.
#[tokio::test]
async fn a_server_without_lua_fails_at_start_with_a_named_error() {
    let s = ValkeyServer::start_local(&["--enable-module-command", "yes"]).unwrap_or_else(|e| panic!("{e}"));
    let mut con = raw(&s).await;
    // Before: connects.
    Valkey::connect(&config(&s.host_port(), "nolua")).await.expect("a server with Lua");
    let _: () = redis::cmd("MODULE").arg("UNLOAD").arg("lua").query_async(&mut con).await.unwrap();
    let err = Valkey::connect(&config(&s.host_port(), "nolua")).await.unwrap_err();
    assert!(matches!(err, ConnectError::NoScripting { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(&s.host_port()) && text.contains("Lua"), "{text}");
    // The URL constructor says the same, as an invalid set-up.
    let err = Valkey::connect_url(s.url(), microdcs_valkey::KeyPrefix::new("nolua").unwrap(), Default::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("without Lua"), "{err}");
}

/// Tests that stop, restart or cut their server, kill its clients or count
/// its commands: each starts a server of its own (the cluster suite leaves
/// this module out).
mod standalone {
    use super::*;

    use microdcs_tests::own_server as server;

    #[tokio::test]
    async fn connects_from_config_and_reports_health() {
        let cap = capture();
        let s = server();
        let prefix = unique_prefix("health");
        let valkey =
            Valkey::connect(&config(&s.host_port(), prefix.as_str())).await.unwrap_or_else(|e| s.fail("connect", &e));
        assert_eq!(valkey.prefix(), &prefix);
        match valkey.health().await {
            Health::Healthy { rtt } => assert!(rtt > Duration::ZERO && rtt < Duration::from_secs(1)),
            other => panic!("{other:?}"),
        }
        let store = Items::open(valkey.clone()).store::<Item>();
        assert_eq!(
            store.create(&Item { id: "a".into(), scope: "s".into(), n: 1 }).await.unwrap(),
            PutOutcome::Written { version: 1 }
        );
        let log = cap.lines.lock().unwrap().join("\n");
        assert!(log.contains("connected to valkey"), "the capture sees our events: {log}");
        drop(s);
        // The server is gone: health says so instead of hanging or panicking.
        let h = valkey.health().await;
        assert!(!h.is_healthy(), "{h:?}");
    }

    #[tokio::test]
    async fn operations_resume_after_a_server_restart() {
        let mut s = server();
        let valkey = Valkey::connect(&config(&s.host_port(), unique_prefix("restart").as_str()))
            .await
            .unwrap_or_else(|e| s.fail("connect", &e));
        let store = Items::open(valkey.clone()).store::<Item>();
        assert!(matches!(
            store.create(&Item { id: "a".into(), scope: "s".into(), n: 1 }).await.unwrap(),
            PutOutcome::Written { .. }
        ));
        s.restart().unwrap_or_else(|e| panic!("{e}"));
        // Empty server (no persistence), no scripts loaded: the write goes through
        // the reconnect and the NOSCRIPT reload without manual action.
        let out = store
            .create(&Item { id: "b".into(), scope: "s".into(), n: 2 })
            .await
            .unwrap_or_else(|e| s.fail("write after restart", &e));
        assert_eq!(out, PutOutcome::Written { version: 1 });
        assert_eq!(store.get("b").await.unwrap().unwrap().doc.n, 2);
        assert!(valkey.health().await.is_healthy());
    }

    #[tokio::test]
    async fn wrong_password_fails_at_start_without_the_password() {
        let s = server();
        let mut admin = raw(&s).await;
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg("app-wrong")
            .arg("on")
            .arg(">Right-Pw-55")
            .arg("~*")
            .arg("+@all")
            .query_async(&mut admin)
            .await
            .unwrap();
        let cs = format!("redis://app-wrong:Wrong-Pw-66@{}/", s.host_port());
        let err = Valkey::connect(&config(&cs, "p")).await.unwrap_err();
        assert!(matches!(err, ConnectError::Auth { .. }), "{err:?}");
        for text in [err.to_string(), format!("{err:?}")] {
            assert!(!text.contains("Wrong-Pw-66"), "{text}");
            assert!(text.contains(&s.host_port()), "the endpoint is named: {text}");
        }
        let cs = format!("{},user=app-wrong,password=Right-Pw-55", s.host_port());
        let valkey = Valkey::connect(&config(&cs, "p")).await.unwrap_or_else(|e| s.fail("connect", &e));
        assert!(valkey.health().await.is_healthy());
        assert!(!format!("{valkey:?}").contains("Right-Pw-55"));
    }
}
