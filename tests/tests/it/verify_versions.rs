//! A document hash whose stored version `v` is not in the one version
//! grammar (decimal digits, no sign, no leading zero, 1 to 2^53-1) is
//! damaged: a reader must not guess a number from it. Verify reports it as a
//! difference (neither an error that stops the run nor a clean report),
//! reads and every kind of write refuse it with `Error::Corrupt`, and
//! nothing under the prefix changes.

use microdcs_tests::{created, server, snapshot, unique_prefix};
use microdcs_valkey::redis;
use microdcs_valkey::{
    Document, Error, Expect, KeyPrefix, Store, Valkey, store::DiffKind, store::MaintenanceOptions, store::Report,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "meter", list(key = "meter:list:{scope}", score = n))]
struct Meter {
    id: String,
    scope: String,
    n: i64,
}

microdcs_valkey::keyspace! {
    Meters {
        documents: [Meter],
    }
}

/// Versions no writer produces. Each is something a lax parser would turn
/// into a number (`007` and `+5` into small ones, `1e3` through a float,
/// 2^53+1 rounded to 2^53, u64::MAX and `-1` as plain integers), so
/// accepting any of them means a number was guessed from damaged data.
const BAD_VERSIONS: &[&str] = &[
    "007",
    "+5",
    "9007199254740993",
    "18446744073709551615",
    "-1",
    "1e3",
    // Further spellings of small numbers and the one number that is never a version.
    "5.0",
    "0x5",
    " 5",
    "0",
    "",
];

/// The number a lax reader would take `v` for, when it is one a caller could
/// legitimately expect (1 to 2^53-1): a write expecting exactly that version
/// is the sharpest probe of the script's version check.
fn lax_reading(v: &str) -> Option<u64> {
    let t = v.trim();
    let n = if let Some(hex) = t.strip_prefix("0x") {
        u64::from_str_radix(hex, 16).ok()? as f64
    } else {
        t.parse::<f64>().ok()?
    };
    (n.fract() == 0.0 && (1.0..=9_007_199_254_740_991.0).contains(&n)).then_some(n as u64)
}

async fn connect(prefix: &KeyPrefix, url: &str) -> Valkey {
    Valkey::connect_url(url, prefix.clone(), Default::default()).await.unwrap()
}

/// Overwrites the `v` field of a document hash, nothing else.
async fn set_version(valkey: &Valkey, key: &str, v: &str) {
    let _: i64 = redis::cmd("HSET").arg(key).arg("v").arg(v).query_async(&mut valkey.connection()).await.unwrap();
}

/// `Ok` when `r` is `Error::Corrupt` naming `key`, else what it was.
fn corrupt_at<T: std::fmt::Debug>(r: Result<T, Error>, key: &str) -> Result<(), String> {
    match r {
        Err(Error::Corrupt { key: k, .. }) if k == key => Ok(()),
        other => Err(format!("{other:?}")),
    }
}

/// Whether `report` has a corrupt-document difference for `id`.
fn reports_corrupt(report: &Report, id: &str) -> bool {
    report.differences.iter().any(|d| d.id == id && matches!(d.kind, DiffKind::Corrupt { .. }))
}

async fn meters(valkey: &Valkey) -> Store<Meter> {
    Meters::open(valkey.clone()).store::<Meter>()
}

#[tokio::test]
async fn non_canonical_versions_are_corrupt_everywhere_and_change_nothing() {
    let s = server();
    let prefix = unique_prefix("badv");
    let valkey = connect(&prefix, s.url()).await;
    let store = meters(&valkey).await;
    // A clean document next to the damaged ones: verify must not blame it.
    created(&store, &Meter { id: "ok-1".into(), scope: "s1".into(), n: 1 }).await;

    let mut problems: Vec<String> = Vec::new();
    for (i, bad) in BAD_VERSIONS.iter().enumerate() {
        let id = format!("m-{i}");
        let doc = Meter { id: id.clone(), scope: "s1".into(), n: 10 + i as i64 };
        created(&store, &doc).await;
        let read = store.get(&id).await.unwrap().expect("just created");
        let key = store.key(&id).unwrap();
        set_version(&valkey, &key, bad).await;
        let before = snapshot(&mut valkey.connection(), &prefix).await;
        let changed = Meter { n: doc.n + 100, ..doc.clone() };
        let mut checks: Vec<(String, Result<(), String>)> = Vec::new();
        checks.push(("get".into(), corrupt_at(store.get(&id).await, &key)));
        checks.push(("update".into(), corrupt_at(store.update(&read, &changed).await, &key)));
        let mut in_place = read.clone();
        let r = store.update_in_place(&mut in_place, changed.clone()).await;
        checks.push(("update_in_place".into(), corrupt_at(r, &key)));
        if in_place != read {
            checks.push(("update_in_place".into(), Err("a moved read".into())));
        }
        checks.push(("put(Any)".into(), corrupt_at(store.put(&changed, Expect::Any).await, &key)));
        checks.push(("create".into(), corrupt_at(store.create(&changed).await, &key)));
        if let Some(n) = lax_reading(bad) {
            let r = store.put(&changed, Expect::Version(n)).await;
            checks.push((format!("put(Version({n}))"), corrupt_at(r, &key)));
        }
        for (what, r) in checks {
            if let Err(got) = r {
                problems.push(format!("v={bad:?}: {what} gave {got}, expected Error::Corrupt at {key}"));
            }
        }

        let after = snapshot(&mut valkey.connection(), &prefix).await;
        if before != after {
            let diff: Vec<String> = after
                .iter()
                .filter(|(k, v)| before.get(*k) != Some(*v))
                .map(|(k, v)| format!("{k} = {v}"))
                .chain(before.keys().filter(|k| !after.contains_key(*k)).map(|k| format!("{k} deleted")))
                .collect();
            problems.push(format!("v={bad:?}: a refused call wrote: {diff:?}"));
        }
    }

    // Verify: a difference per damaged document, not an error, not clean.
    let before = snapshot(&mut valkey.connection(), &prefix).await;
    let report = store
        .verify(&MaintenanceOptions::default())
        .await
        .unwrap_or_else(|e| panic!("verify must report damaged documents, not fail: {e}"));
    assert_eq!(before, snapshot(&mut valkey.connection(), &prefix).await, "verify is read-only");
    if report.is_clean() {
        problems.push("verify reported a clean keyspace".into());
    }
    for (i, bad) in BAD_VERSIONS.iter().enumerate() {
        if !reports_corrupt(&report, &format!("m-{i}")) {
            problems.push(format!("verify did not report v={bad:?} (m-{i}) as a corrupt document"));
        }
    }
    let blamed: Vec<String> = report.differences.iter().filter(|d| d.id == "ok-1").map(ToString::to_string).collect();
    assert!(blamed.is_empty(), "the clean document was blamed: {blamed:?}");
    assert!(problems.is_empty(), "{} problem(s):\n{}", problems.len(), problems.join("\n"));
}

/// `verify --scope s1` must see a damaged document of `s1`: the hash's
/// `scope` field is intact, so the filter can tell whose it is, and a
/// filtered run that says "clean" over a damaged document hides it.
#[tokio::test]
async fn a_scope_filtered_verify_still_reports_a_damaged_version() {
    let s = server();
    let prefix = unique_prefix("badv-scope");
    let valkey = connect(&prefix, s.url()).await;
    let store = meters(&valkey).await;
    created(&store, &Meter { id: "m-1".into(), scope: "s1".into(), n: 1 }).await;
    created(&store, &Meter { id: "m-2".into(), scope: "s2".into(), n: 2 }).await;
    set_version(&valkey, &store.key("m-1").unwrap(), "007").await;
    set_version(&valkey, &store.key("m-2").unwrap(), "007").await;

    let unfiltered = store.verify(&MaintenanceOptions::default()).await.unwrap();
    assert!(reports_corrupt(&unfiltered, "m-1") && reports_corrupt(&unfiltered, "m-2"), "{unfiltered:?}");

    let s1 = store.verify(&MaintenanceOptions { scope: Some("s1"), ..Default::default() }).await.unwrap();
    assert!(
        reports_corrupt(&s1, "m-1"),
        "verify of scope s1 did not report its document with v=\"007\" (clean: {}): {s1:?}",
        s1.is_clean()
    );
    assert!(!reports_corrupt(&s1, "m-2"), "the s2 document is outside the filter: {s1:?}");
}
