//! Compile-time checks of `#[derive(Document)]` and `keyspace!`: every fail
//! case's `.stderr` is reviewed and points at the offending tokens.
//! Regenerate with `TRYBUILD=overwrite cargo test -p microdcs-ui --test ui`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("pass/*.rs");
    t.compile_fail("fail/*.rs");
}
