//! Compile-time checks of `#[derive(Document)]` and `keyspace!`: every fail
//! case's `.stderr` is reviewed and points at the offending tokens.
//! Regenerate with `TRYBUILD=overwrite cargo test -p microdcs-tests --test ui`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("ui/pass/*.rs");
    t.compile_fail("ui/fail/*.rs");
}
