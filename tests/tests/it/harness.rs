//! The harness starts a real server, gives it a free port, and stops it.

use std::io::{Read, Write};
use std::net::TcpStream;

use microdcs_tests::{ValkeyServer, find_server_binary, unique_prefix};

#[test]
fn starts_answers_and_stops() {
    let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
    let mut s = TcpStream::connect(server.host_port()).unwrap();
    s.write_all(b"PING\r\n").unwrap();
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"+PONG\r\n");
    assert!(server.log().contains("Ready to accept connections"), "{}", server.log());
    let port = server.port();
    drop(server);
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err(), "server still listening after drop");
}

#[test]
fn binary_is_found() {
    // A missing binary must fail the test suite, never skip it.
    let bin = find_server_binary().unwrap_or_else(|e| panic!("{e}"));
    assert!(bin.is_file());
}

#[test]
fn prefixes_are_unique_and_valid() {
    let a = unique_prefix("x");
    let b = unique_prefix("x");
    assert_ne!(a, b);
}

#[test]
fn a_bad_argument_fails_with_the_log() {
    let err = ValkeyServer::start_local(&["--no-such-option", "1"]).unwrap_err().to_string();
    assert!(err.contains("did not start"), "{err}");
}

/// The delaying proxy holds every chunk at least its delay each way, keeps
/// pipelined replies in order, and closes the client's side when the
/// server goes away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delaying_proxy_delays_in_order_and_closes_with_the_server() {
    use microdcs_tests::FaultProxy;
    use microdcs_valkey::redis;
    let mut server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
    let delay = std::time::Duration::from_millis(20);
    let proxy = FaultProxy::start_with_delay(server.host_port(), delay).await;
    let client = redis::Client::open(proxy.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let started = std::time::Instant::now();
    let _: String = redis::cmd("PING").query_async(&mut con).await.unwrap();
    assert!(started.elapsed() >= delay * 2, "a round trip holds the delay each way: {:?}", started.elapsed());
    // Pipelined commands come back in order, all of them.
    let mut pipe = redis::pipe();
    for i in 0..50 {
        pipe.cmd("ECHO").arg(i);
    }
    let echoed: Vec<i64> = pipe.query_async(&mut con).await.unwrap();
    assert_eq!(echoed, (0..50).collect::<Vec<i64>>());
    server.kill();
    let lost: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut con).await;
    assert!(lost.is_err(), "the client sees the server gone");
}

#[test]
fn a_start_error_shows_the_tail_of_a_long_log() {
    use microdcs_valkey::testing::HarnessError;
    // About 8 KB of log: the message keeps its end, where the reason is.
    let log: String = (1..=200).map(|i| format!("line {i:03} of a long server log, padded to forty\n")).collect();
    assert!(log.len() > 8000);
    let file = std::path::PathBuf::from("/tmp/some-dir/valkey.log");
    let err = HarnessError::Start { reason: "no PONG within 10s".into(), log, log_file: Some(file) };
    let shown = err.to_string();
    assert!(shown.contains("/tmp/some-dir/valkey.log"), "{shown}");
    assert!(shown.len() <= 2300, "{} bytes shown", shown.len());
    assert!(shown.contains("no PONG within 10s"), "{shown}");
    assert!(shown.contains("line 200") && shown.contains("line 181"), "{shown}");
    assert!(!shown.contains("line 001") && !shown.contains("line 180"), "{shown}");
}

#[test]
fn a_failed_start_keeps_its_whole_log_in_a_named_file() {
    // A module that does not exist: the server logs its start, then aborts.
    let err = ValkeyServer::start_local(&["--loadmodule", "/nonexistent/microdcs.so"]).unwrap_err();
    let shown = err.to_string();
    assert!(shown.contains("server aborting"), "{shown}");
    let file = shown
        .split_whitespace()
        .find(|w| w.ends_with(".log"))
        .unwrap_or_else(|| panic!("no log file named: {shown}"))
        .trim_matches(|c| c == '(' || c == ')' || c == ',' || c == ':' || c == '`');
    let kept = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file}: {e}"));
    assert!(kept.contains("failed to load") && kept.contains("server aborting"), "{kept}");
    let _ = std::fs::remove_file(file);
}
