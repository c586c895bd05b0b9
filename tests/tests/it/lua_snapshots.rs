//! The generated Lua is reviewed like code: the put, delete and find scripts
//! of every document type of the plant and extras keyspaces (the types the
//! tests and the demo use) are committed under `tests/snapshots/lua/<kind>.<op>.lua`, and
//! this test fails when the generator's output differs from them. After an
//! intended generator change, rewrite them with
//! `BLESS=1 cargo test -p microdcs-tests --test it lua_snapshots` and review the
//! Lua diff in the commit.

use std::path::{Path, PathBuf};

use microdcs_examples::plant::sharded::{self, ShardedPlant};
use microdcs_tests::fixtures::{
    Article, Extras, Idempotency, Job, JobOrder, JobResponse, Plant, Session, SfcState, Ticket, WorkMaster,
};
use microdcs_valkey::Document;

/// `(kind, op, text)` for one document type: the step of a type with an
/// outbox, the write with effects (the same script without the outbox's
/// parts) of one without.
fn scripts<D: Document>() -> Vec<(String, &'static str, &'static str)> {
    // A sharded type's files are named apart: the sharded plant reuses the
    // plant's kinds.
    let kind = if D::SPEC.is_sharded() { format!("sharded-{}", D::SPEC.kind) } else { D::SPEC.kind.to_owned() };
    named::<D>(kind)
}

/// The scripts of `D`, filed under `kind`.
fn named<D: Document>(kind: String) -> Vec<(String, &'static str, &'static str)> {
    let mut out = vec![
        (kind.clone(), "put", D::PUT_SCRIPT),
        (kind.clone(), "delete", D::DELETE_SCRIPT),
        (kind.clone(), "find", D::FIND_SCRIPT),
    ];
    out.push((kind, if D::SPEC.outbox.is_some() { "step" } else { "write" }, D::STEP_SCRIPT));
    out
}

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots").join("lua")
}

#[test]
fn generated_lua_matches_the_committed_snapshots() {
    let all: Vec<_> = [
        scripts::<JobOrder>(),
        scripts::<JobResponse>(),
        scripts::<WorkMaster>(),
        scripts::<SfcState>(),
        scripts::<Session>(),
        scripts::<Idempotency>(),
        scripts::<Job>(),
        scripts::<Ticket>(),
        scripts::<Article>(),
        scripts::<sharded::JobOrder>(),
        scripts::<sharded::JobResponse>(),
        scripts::<sharded::WorkMaster>(),
        scripts::<sharded::SfcState>(),
        // The queue program's job: an outbox and a multi-valued index in
        // one script (its kind is the fixtures' too, so it is filed apart).
        named::<microdcs_examples::queue::Job>("queue-job".to_owned()),
        // An unscoped type with a lifetime (miroir's idempotency entries):
        // its hash holds no scope.
        named::<microdcs_examples::miroir::Idempotency>("miroir-idemp".to_owned()),
    ]
    .into_iter()
    .flatten()
    .collect();
    // Every document type of the keyspace is covered (a type added to the
    // keyspace must be added here, so its scripts are reviewed too).
    let mut covered: Vec<&str> = all.iter().map(|(k, _, _)| k.as_str()).collect();
    covered.dedup();
    let sharded_kinds: Vec<String> =
        ShardedPlant::SPEC.documents.iter().map(|d| format!("sharded-{}", d.kind)).collect();
    let mut declared: Vec<&str> = Plant::SPEC
        .documents
        .iter()
        .chain(Extras::SPEC.documents)
        .map(|d| d.kind)
        .chain(sharded_kinds.iter().map(String::as_str))
        .chain(microdcs_examples::queue::Queues::SPEC.documents.iter().map(|_| "queue-job"))
        .chain(["miroir-idemp"])
        .collect();
    declared.sort_unstable();
    covered.sort_unstable();
    assert_eq!(covered, declared, "snapshot list and the plant keyspace differ");

    let bless = std::env::var_os("BLESS").is_some_and(|v| v != "0");
    let mut stale = Vec::new();
    for (kind, op, text) in &all {
        assert!(!text.is_empty(), "{kind}.{op}: empty script");
        let path = dir().join(format!("{kind}.{op}.lua"));
        if bless {
            std::fs::create_dir_all(dir()).unwrap();
            std::fs::write(&path, text).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(committed) if committed == *text => {}
            Ok(committed) => {
                let line = committed
                    .lines()
                    .zip(text.lines())
                    .position(|(a, b)| a != b)
                    .map_or_else(|| committed.lines().count().min(text.lines().count()) + 1, |i| i + 1);
                stale.push(format!("{} differs from the generator from line {line}", path.display()));
            }
            Err(e) => stale.push(format!("{}: {e}", path.display())),
        }
    }
    // No snapshot without a script: a removed type or operation must take its file along.
    for entry in std::fs::read_dir(dir()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if !all.iter().any(|(k, op, _)| name == format!("{k}.{op}.lua")) {
            stale.push(format!("{name}: no document type generates it"));
        }
    }
    assert!(
        stale.is_empty(),
        "generated Lua differs from tests/snapshots/lua:\n  {}\nreview the change, then bless it with \
         `BLESS=1 cargo test -p microdcs-tests --test it lua_snapshots`",
        stale.join("\n  ")
    );
}
