use super::*;
use crate::limits::MAX_LEASE_TTL as MAX_TTL;

#[test]
fn fingerprints_are_unambiguous() {
    assert_ne!(fingerprint("renew", &["a|b", "c"]), fingerprint("renew", &["a", "b|c"]));
    assert_eq!(fingerprint("release", &["id", "o"]), "release|2:id|1:o");
}

#[test]
fn ttl_bounds() {
    assert!(check_ttl(Duration::from_millis(1)).is_ok());
    assert!(check_ttl(MAX_TTL).is_ok());
    assert!(matches!(check_ttl(Duration::ZERO), Err(Error::InvalidArgument(_))));
    assert!(matches!(check_ttl(Duration::from_micros(500)), Err(Error::InvalidArgument(_))));
    assert!(matches!(check_ttl(MAX_TTL + Duration::from_secs(1)), Err(Error::InvalidArgument(_))));
}

fn block<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

#[test]
fn debug_redacts_owner_and_ids() {
    let m = MemoryLeases::default();
    let Acquire::Acquired(l) = block(m.acquire("press", "alice", Duration::from_secs(5), "req-secret")).unwrap() else {
        panic!("free lease")
    };
    let held = block(m.acquire("press", "bob", Duration::from_secs(5), "req-other")).unwrap();
    let conflict = block(m.acquire("press", "mallory", Duration::from_secs(5), "req-secret")).unwrap_err();
    let bad_id = block(m.acquire("press", "alice", Duration::from_secs(5), "bad id!")).unwrap_err();
    for text in [
        format!("{l:?}"),
        format!("{held:?}"),
        format!("{m:?}"),
        format!("{conflict:?}"),
        conflict.to_string(),
        format!("{bad_id:?}"),
        bad_id.to_string(),
    ] {
        for secret in ["alice", "bob", "mallory", "req-secret", "req-other", "bad id!", l.id.as_str()] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }
    // What is not metadata stays visible.
    assert!(format!("{l:?}").contains("press") && format!("{l:?}").contains("token: 1"), "{l:?}");
    assert!(matches!(conflict, Error::RequestConflict { .. }));
}

#[test]
fn one_counter_grammar() {
    for ok in ["0", "1", "42", "9007199254740991"] {
        assert_eq!(parse_counter(ok), Some(ok.parse().unwrap()), "{ok}");
    }
    for bad in ["", "xyz", "-3", "+3", "1e3", " 1", "1 ", "01", "00", "9007199254740992", "99999999999999999999", "1.0"]
    {
        assert_eq!(parse_counter(bad), None, "{bad:?}");
    }
}

#[test]
fn unknown_outcome_after_the_last_attempt() {
    let cut = || redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
    match (retry::Failure::Unknown { source: cut(), attempts: 4 }).into_error("k") {
        Error::UnknownOutcome { key, attempts, .. } => assert_eq!((key.as_str(), attempts), ("k", 4)),
        other => panic!("{other:?}"),
    }
    let server = |reply: &[u8]| redis::parse_redis_value(reply).unwrap().extract_error().unwrap_err();
    let wrong = server(b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
    assert!(matches!(retry::Failure::Failed(wrong).into_error("k"), Error::WrongType { .. }));
    // Matched by the error code, not by words in a message.
    let other = server(b"-ERR user script mentions WRONGTYPE\r\n");
    assert!(matches!(retry::Failure::Failed(other).into_error("k"), Error::Redis(_)));
}

#[test]
fn memory_leases_refuse_the_names_a_lease_store_refuses() {
    let m = MemoryLeases::default();
    let ttl = Duration::from_secs(5);
    let long = "x".repeat(1025);
    for name in ["", long.as_str()] {
        let e = block(m.acquire(name, "alice", ttl, "req-1")).unwrap_err();
        assert!(matches!(e, Error::Key(_)), "acquire {}: {e:?}", name.len());
        let lease = Lease { name: name.to_owned(), id: "i".into(), owner: "o".into(), token: 1, ttl };
        assert!(matches!(block(m.renew(&lease, ttl, "req-2")), Err(Error::Key(_))));
        assert!(matches!(block(m.release(&lease, "req-3")), Err(Error::Key(_))));
        assert!(matches!(block(m.fenced_write(name, 1, b"v")), Err(Error::Key(_))));
        assert!(matches!(block(m.read_protected(name)), Err(Error::Key(_))));
        assert!(matches!(block(m.fence(name)), Err(Error::Key(_))));
    }
    let edge = "x".repeat(1024);
    assert!(matches!(block(m.acquire(&edge, "alice", ttl, "req-4")), Ok(Acquire::Acquired(_))));
}
