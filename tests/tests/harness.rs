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
