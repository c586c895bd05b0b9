use super::*;

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
    assert!(matches!(check_ttl(MAX_TTL + Duration::from_secs(1)), Err(Error::InvalidArgument(_))));
}
