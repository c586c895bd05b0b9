//! Index verification and rebuild: every way to damage every index kind is
//! reported exactly, and rebuild repairs it.

use std::collections::BTreeSet;

use microdcs_tests::{ValkeyServer, created, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{
    Document, Valkey, config::WriteOptions, store::DiffKind, store::MaintenanceOptions, store::Report,
};
use serde::{Deserialize, Serialize};

use microdcs_tests::fixtures::{JobResponse, WorkMaster};

/// The same documents before the by-state index existed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(
    kind = "jobresponse",
    key = "jobresponse:{id}",
    list(key = "jobresponse:list:{scope}", score = start_time),
    unique(key = "jobresponse:byorder:{order}", order = job_order_id)
)]
struct JobResponseV1 {
    id: String,
    scope: String,
    job_order_id: String,
    start_time: i64,
    state: Vec<String>,
}

microdcs_valkey::keyspace! { V1 { documents: [JobResponseV1] } }

microdcs_valkey::keyspace! {
    Space {
        documents: [JobResponse, WorkMaster],
        scopes: set("scopes"),
        changes: stream("changes:{scope}"),
        nudge: channel("nudge:{kind}"),
        fingerprints: hash("schema:fingerprints"),
    }
}

fn response(i: usize, scope: &str) -> JobResponse {
    JobResponse {
        id: format!("r-{i}"),
        scope: scope.into(),
        job_order_id: format!("o-{i}"),
        start_time: 1000 + i as i64,
        state: vec![if i.is_multiple_of(2) { "Running".into() } else { "Held".into() }],
        data: String::new(),
    }
}

struct Env {
    valkey: Valkey,
    raw: ConnectionManager,
    p: String,
}

async fn env(server: &ValkeyServer, name: &str) -> Env {
    let prefix = unique_prefix(name);
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default())
        .await
        .unwrap_or_else(|e| server.fail("connect", &e));
    let raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let responses = Space::open(valkey.clone()).store::<JobResponse>();
    for i in 0..6 {
        created(&responses, &response(i, "s1")).await;
    }
    created(&responses, &response(9, "s2")).await;
    let masters = Space::open(valkey.clone()).store::<WorkMaster>();
    for i in 0..3 {
        let wm = WorkMaster { id: format!("wm-{i}"), scope: "s1".into(), name: "x".into() };
        created(&masters, &wm).await;
    }
    Env { valkey, raw, p: prefix.as_str().to_owned() }
}

impl Env {
    async fn cmd(&mut self, args: &[&str]) {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(a.replace("{p}", &self.p));
        }
        let _: redis::Value = c.query_async(&mut self.raw).await.unwrap();
    }
}

fn found(r: &Report) -> BTreeSet<(String, String, String)> {
    r.differences.iter().map(|d| (d.index.clone(), d.kind.name().to_owned(), d.id.clone())).collect()
}

fn set(items: &[(&str, &str, &str)]) -> BTreeSet<(String, String, String)> {
    items.iter().map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned())).collect()
}

/// Damage, verify (exactly `expected`), rebuild, verify clean.
async fn case<D>(server: &ValkeyServer, name: &str, damage: &[&[&str]], expected: &[(&str, &str, &str)])
where
    D: microdcs_valkey::schema::InKeyspace<Space> + Serialize + for<'de> Deserialize<'de>,
{
    let mut e = env(server, name).await;
    let store = Space::open(e.valkey.clone()).store::<D>();
    let opts = MaintenanceOptions { batch: 3, ..MaintenanceOptions::default() };
    let clean = store.verify(&opts).await.unwrap();
    assert!(clean.is_clean(), "{name}: clean before damage: {:?}", clean.differences);
    assert!(clean.documents > 0);
    for d in damage {
        e.cmd(d).await;
    }
    let report = store.verify(&opts).await.unwrap();
    assert_eq!(found(&report), set(expected), "{name}: {:#?}", report.differences);
    let rebuilt = store.rebuild(&opts).await.unwrap();
    assert_eq!(found(&rebuilt), set(expected), "{name}: rebuild sees the same");
    let after = store.verify(&opts).await.unwrap();
    let left: Vec<_> = after.differences.iter().filter(|d| d.kind.name() != "corrupt").collect();
    assert!(left.is_empty(), "{name}: after rebuild: {left:#?}");
}

#[tokio::test]
async fn sorted_list_damage() {
    let s = microdcs_tests::own_server();
    case::<JobResponse>(
        &s,
        "zl-missing",
        &[&["ZREM", "{p}:jobresponse:list:s1", "r-1"]],
        &[("list", "missing", "r-1")],
    )
    .await;
    case::<JobResponse>(
        &s,
        "zl-orphan",
        &[&["ZADD", "{p}:jobresponse:list:s1", "5", "ghost"]],
        &[("list", "orphan", "ghost")],
    )
    .await;
    case::<JobResponse>(
        &s,
        "zl-score",
        &[&["ZADD", "{p}:jobresponse:list:s1", "999", "r-1"]],
        &[("list", "wrong score", "r-1")],
    )
    .await;
    // An id listed under another scope's list does not qualify there.
    case::<JobResponse>(
        &s,
        "zl-scope",
        &[&["ZADD", "{p}:jobresponse:list:s2", "1001", "r-1"]],
        &[("list", "orphan", "r-1")],
    )
    .await;
}

#[tokio::test]
async fn set_list_damage() {
    let s = microdcs_tests::own_server();
    case::<WorkMaster>(
        &s,
        "sl-missing",
        &[&["SREM", "{p}:workmaster:list:s1", "wm-1"]],
        &[("list", "missing", "wm-1")],
    )
    .await;
    case::<WorkMaster>(
        &s,
        "sl-orphan",
        &[&["SADD", "{p}:workmaster:list:s1", "ghost"]],
        &[("list", "orphan", "ghost")],
    )
    .await;
}

#[tokio::test]
async fn unique_index_damage() {
    let s = microdcs_tests::own_server();
    case::<JobResponse>(&s, "u-missing", &[&["DEL", "{p}:jobresponse:byorder:o-1"]], &[("by_order", "missing", "r-1")])
        .await;
    case::<JobResponse>(
        &s,
        "u-orphan",
        &[&["SET", "{p}:jobresponse:byorder:o-x", "ghost"]],
        &[("by_order", "orphan", "ghost")],
    )
    .await;
    case::<JobResponse>(
        &s,
        "u-stale",
        &[&["SET", "{p}:jobresponse:byorder:o-x", "r-2"]],
        &[("by_order", "orphan", "r-2")],
    )
    .await;
    case::<JobResponse>(
        &s,
        "u-elsewhere",
        &[&["SET", "{p}:jobresponse:byorder:o-1", "r-2"]],
        &[("by_order", "wrong id", "r-1")],
    )
    .await;
}

#[tokio::test]
async fn group_index_damage() {
    let s = microdcs_tests::own_server();
    case::<JobResponse>(
        &s,
        "g-missing",
        &[&["SREM", "{p}:jobresponse:bystate:s1:Running", "r-0"]],
        &[("by_state", "missing", "r-0")],
    )
    .await;
    case::<JobResponse>(
        &s,
        "g-orphan",
        &[&["SADD", "{p}:jobresponse:bystate:s1:Running", "ghost"]],
        &[("by_state", "orphan", "ghost")],
    )
    .await;
    case::<JobResponse>(
        &s,
        "g-moved",
        &[&["SREM", "{p}:jobresponse:bystate:s1:Running", "r-0"], &["SADD", "{p}:jobresponse:bystate:s1:Held", "r-0"]],
        &[("by_state", "wrong group", "r-0")],
    )
    .await;
    case::<JobResponse>(
        &s,
        "g-extra",
        &[&["SADD", "{p}:jobresponse:bystate:s1:Held", "r-0"]],
        &[("by_state", "wrong group", "r-0")],
    )
    .await;
    case::<JobResponse>(
        &s,
        "g-field",
        &[&["HSET", "{p}:jobresponse:r-0", "state", "Held"]],
        &[("by_state", "field", "r-0")],
    )
    .await;
}

/// Bytes that are not text in a document's hash (a field name, an index
/// field's value) are that document's damage, reported: the run goes on
/// over the others.
#[tokio::test]
async fn bytes_that_are_not_text_are_a_difference_not_the_end_of_the_run() {
    let s = microdcs_tests::own_server();
    for (name, field, value) in [("bin-name", &b"\xff"[..], &b"x"[..]), ("bin-value", &b"state"[..], &b"\xff\xfe"[..])]
    {
        let mut e = env(&s, name).await;
        let key = format!("{}:jobresponse:r-1", e.p);
        let _: () = redis::cmd("HSET").arg(&key).arg(field).arg(value).query_async(&mut e.raw).await.unwrap();
        let store = Space::open(e.valkey.clone()).store::<JobResponse>();
        let opts = MaintenanceOptions { batch: 3, ..MaintenanceOptions::default() };
        let report = store.verify(&opts).await.unwrap_or_else(|err| panic!("{name}: verify ended: {err}"));
        assert!(report.differences.iter().any(|d| d.id == "r-1"), "{name}: {:#?}", report.differences);
        assert!(report.differences.iter().all(|d| d.id == "r-1"), "{name}: only r-1: {:#?}", report.differences);
        assert!(report.documents >= 6, "{name}: the others were verified: {}", report.documents);
        let _ = store.rebuild(&opts).await.unwrap_or_else(|err| panic!("{name}: rebuild ended: {err}"));
    }
}

#[tokio::test]
async fn corrupt_documents_are_reported_and_their_entries_kept() {
    let s = microdcs_tests::own_server();
    for (name, damage) in [
        ("c-json", ["HSET", "{p}:jobresponse:r-1", "doc", "{not json"]),
        ("c-version", ["HSET", "{p}:jobresponse:r-1", "v", "seven"]),
        ("c-nodoc", ["HDEL", "{p}:jobresponse:r-1", "doc", ""]),
    ] {
        let mut e = env(&s, name).await;
        let damage: Vec<&str> = damage.iter().copied().filter(|a| !a.is_empty()).collect();
        e.cmd(&damage).await;
        let store = Space::open(e.valkey.clone()).store::<JobResponse>();
        let report = store.verify(&MaintenanceOptions::default()).await.unwrap();
        assert_eq!(found(&report), set(&[("document", "corrupt", "r-1")]), "{name}: {:#?}", report.differences);
        // Rebuild leaves a corrupt document's entries alone (it cannot know them).
        let _ = store.rebuild(&MaintenanceOptions::default()).await.unwrap();
        let member: bool = redis::cmd("SISMEMBER")
            .arg(format!("{}:jobresponse:bystate:s1:Held", e.p))
            .arg("r-1")
            .query_async(&mut e.raw)
            .await
            .unwrap();
        assert!(member, "{name}");
    }
}

#[tokio::test]
async fn scope_filter_and_key_shapes_that_look_like_documents() {
    let s = microdcs_tests::own_server();
    let mut e = env(&s, "scope").await;
    e.cmd(&["ZREM", "{p}:jobresponse:list:s1", "r-1"]).await;
    e.cmd(&["ZREM", "{p}:jobresponse:list:s2", "r-9"]).await;
    let store = Space::open(e.valkey.clone()).store::<JobResponse>();
    let only_s2 =
        store.verify(&MaintenanceOptions { scope: Some("s2"), ..MaintenanceOptions::default() }).await.unwrap();
    assert_eq!(found(&only_s2), set(&[("list", "missing", "r-9")]));
    assert_eq!(only_s2.documents, 1);
    let all = store.verify(&MaintenanceOptions::default()).await.unwrap();
    assert_eq!(all.documents, 7, "list and index keys are never counted as documents");
}

#[tokio::test]
async fn a_new_index_is_flagged_backfilled_and_leaves_the_others_alone() {
    let s = microdcs_tests::own_server();
    let prefix = unique_prefix("newindex");
    let valkey = Valkey::connect_url(s.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let mut raw = ConnectionManager::new(redis::Client::open(s.url()).unwrap()).await.unwrap();
    let v1 = V1::open(valkey.clone()).store::<JobResponseV1>();
    for i in 0..5 {
        let r = response(i, "s1");
        let doc = JobResponseV1 {
            id: r.id,
            scope: r.scope,
            job_order_id: r.job_order_id,
            start_time: r.start_time,
            state: r.state,
        };
        created(&v1, &doc).await;
    }
    assert_eq!(v1.needs_rebuild().await.unwrap(), ["list", "by_order"], "never rebuilt");
    assert!(v1.rebuild(&MaintenanceOptions::default()).await.unwrap().is_clean());
    assert!(v1.needs_rebuild().await.unwrap().is_empty());

    // The application now declares a by-state index.
    let v2 = Space::open(valkey.clone()).store::<JobResponse>();
    assert_eq!(v2.needs_rebuild().await.unwrap(), ["by_state"]);
    let report = v2.verify(&MaintenanceOptions::default()).await.unwrap();
    assert_eq!(report.differences.iter().filter(|d| d.index == "by_state" && d.kind.name() == "missing").count(), 5);
    // Damage another index: a rebuild of by_state must not touch it.
    let _: () = redis::cmd("ZREM")
        .arg(format!("{}:jobresponse:list:s1", prefix.as_str()))
        .arg("r-3")
        .query_async(&mut raw)
        .await
        .unwrap();
    let rebuilt =
        v2.rebuild(&MaintenanceOptions { index: Some("by_state"), ..MaintenanceOptions::default() }).await.unwrap();
    assert!(
        rebuilt.differences.iter().all(|d| d.index == "by_state" || d.index == "document"),
        "{:#?}",
        rebuilt.differences
    );
    assert!(v2.needs_rebuild().await.unwrap().is_empty());
    let after = v2.verify(&MaintenanceOptions::default()).await.unwrap();
    assert_eq!(found(&after), set(&[("list", "missing", "r-3")]), "the other index is undisturbed");
    assert!(
        v2.ids(JobResponse::by_state("s1", "Running"), microdcs_valkey::Page::first(100)).await.unwrap().ids.len() == 3
    );
    // Unknown index names are an error, not a silent no-op.
    assert!(
        v2.rebuild(&MaintenanceOptions { index: Some("by_colour"), ..MaintenanceOptions::default() }).await.is_err()
    );
}

/// The Valkey type of `key` (`none` when it does not exist).
async fn type_of(e: &mut Env, key: &str) -> String {
    redis::cmd("TYPE").arg(key.replace("{p}", &e.p)).query_async(&mut e.raw).await.unwrap()
}

/// The `wrong type` differences as (index, key, found), with the key's prefix
/// written as `{p}`. Which document led to the key depends on scan order, so
/// the id is not compared.
fn wrong_types(e: &Env, r: &Report) -> BTreeSet<(String, String, String)> {
    r.differences
        .iter()
        .filter_map(|d| match &d.kind {
            DiffKind::WrongType { found } => Some((d.index.clone(), d.key.replace(&e.p, "{p}"), found.clone())),
            _ => None,
        })
        .collect()
}

/// An index key overwritten with a value of another type: verify reports it
/// (once, naming the type found) instead of failing, and rebuild deletes the
/// key and writes it again from the documents.
async fn wrong_type_index_key(s: &ValkeyServer, name: &str, key: &str, index: &str, damage: &[&str], found: &str) {
    let mut e = env(s, name).await;
    let store = Space::open(e.valkey.clone()).store::<JobResponse>();
    // Small batches: the damaged key is met again in later batches.
    let opts = MaintenanceOptions { batch: 2, ..MaintenanceOptions::default() };
    e.cmd(&["DEL", key]).await;
    e.cmd(damage).await;
    let expected = set(&[(index, key, found)]);
    let report = store.verify(&opts).await.unwrap_or_else(|err| panic!("{name}: verify failed: {err}"));
    assert_eq!(wrong_types(&e, &report), expected, "{name}: {:#?}", report.differences);
    assert_eq!(report.differences.len(), 1, "{name}: one difference per damaged key: {:#?}", report.differences);
    let rebuilt = store.rebuild(&opts).await.unwrap_or_else(|err| panic!("{name}: rebuild failed: {err}"));
    assert_eq!(rebuilt.differences, report.differences, "{name}: rebuild sees what verify saw");
    let after = store.verify(&opts).await.unwrap();
    assert!(after.is_clean(), "{name}: after rebuild: {:#?}", after.differences);
}

#[tokio::test]
async fn a_list_key_of_the_wrong_type_is_a_difference_and_rewritten() {
    let s = microdcs_tests::own_server();
    let key = "{p}:jobresponse:list:s1";
    wrong_type_index_key(&s, "wt-list", key, "list", &["SET", key, "garbage"], "string").await;
    // A plain set where a sorted set belongs is the wrong type too.
    wrong_type_index_key(&s, "wt-list-set", key, "list", &["SADD", key, "r-0"], "set").await;
    let mut e = env(&s, "wt-list-check").await;
    e.cmd(&["SET", key, "garbage"]).await;
    let store = Space::open(e.valkey.clone()).store::<JobResponse>();
    store.rebuild(&MaintenanceOptions { batch: 2, ..MaintenanceOptions::default() }).await.unwrap();
    assert_eq!(type_of(&mut e, key).await, "zset");
    let listed = store.list("s1", microdcs_valkey::Page::first(100)).await.unwrap().ids;
    assert_eq!(listed, ["r-0", "r-1", "r-2", "r-3", "r-4", "r-5"], "every document listed again, by score");
}

#[tokio::test]
async fn a_unique_key_of_the_wrong_type_is_a_difference_and_rewritten() {
    let s = microdcs_tests::own_server();
    let key = "{p}:jobresponse:byorder:o-1";
    wrong_type_index_key(&s, "wt-unique", key, "by_order", &["SADD", key, "r-1"], "set").await;
    let mut e = env(&s, "wt-unique-check").await;
    e.cmd(&["DEL", key]).await;
    e.cmd(&["HSET", key, "x", "y"]).await;
    let store = Space::open(e.valkey.clone()).store::<JobResponse>();
    store.rebuild(&MaintenanceOptions::default()).await.unwrap();
    assert_eq!(store.find(JobResponse::by_order("o-1")).await.unwrap().map(|s| s.id).as_deref(), Some("r-1"));
}

#[tokio::test]
async fn a_group_key_of_the_wrong_type_is_a_difference_and_rewritten() {
    let s = microdcs_tests::own_server();
    let key = "{p}:jobresponse:bystate:s1:Running";
    wrong_type_index_key(&s, "wt-group", key, "by_state", &["RPUSH", key, "r-0"], "list").await;
    let mut e = env(&s, "wt-group-check").await;
    e.cmd(&["DEL", key]).await;
    e.cmd(&["SET", key, "garbage"]).await;
    let store = Space::open(e.valkey.clone()).store::<JobResponse>();
    store.rebuild(&MaintenanceOptions::default()).await.unwrap();
    let mut ids =
        store.ids(JobResponse::by_state("s1", "Running"), microdcs_valkey::Page::first(100)).await.unwrap().ids;
    ids.sort();
    assert_eq!(ids, ["r-0", "r-2", "r-4"]);
}

/// A document key holding a value that is not a hash, while index entries
/// still point at its id: reported as the document's difference, and left
/// alone by rebuild (it is not the index's to repair), entries included.
#[tokio::test]
async fn a_document_key_of_the_wrong_type_is_reported_and_left_alone() {
    let s = microdcs_tests::own_server();
    let mut e = env(&s, "wt-doc").await;
    let key = "{p}:jobresponse:r-1";
    e.cmd(&["DEL", key]).await;
    e.cmd(&["SET", key, "garbage"]).await;
    let store = Space::open(e.valkey.clone()).store::<JobResponse>();
    let opts = MaintenanceOptions { batch: 2, ..MaintenanceOptions::default() };
    let report = store.verify(&opts).await.unwrap_or_else(|err| panic!("verify failed: {err}"));
    assert_eq!(wrong_types(&e, &report), set(&[("document", key, "string")]), "{:#?}", report.differences);
    assert_eq!(found(&report), set(&[("document", "wrong type", "r-1")]), "{:#?}", report.differences);
    let rebuilt = store.rebuild(&opts).await.unwrap_or_else(|err| panic!("rebuild failed: {err}"));
    assert_eq!(found(&rebuilt), found(&report));
    assert_eq!(type_of(&mut e, key).await, "string", "the foreign value is left alone");
    let held: Option<String> =
        redis::cmd("GET").arg(format!("{}:jobresponse:byorder:o-1", e.p)).query_async(&mut e.raw).await.unwrap();
    assert_eq!(held.as_deref(), Some("r-1"), "its entries are left alone too");
    let after = store.verify(&opts).await.unwrap();
    assert_eq!(found(&after), found(&report), "still reported");
}

/// The scope registry overwritten with a value of another type: verify
/// reports it as one difference (naming the type found) and goes on to
/// find the rest; rebuild deletes it and registers every scope again.
#[tokio::test]
async fn a_registry_of_the_wrong_type_is_a_difference_and_rewritten() {
    let s = microdcs_tests::own_server();
    let mut e = env(&s, "wt-registry").await;
    let registry = "{p}:scopes";
    assert_eq!(type_of(&mut e, registry).await, "set", "the registry this test damages");
    e.cmd(&["DEL", registry]).await;
    e.cmd(&["SET", registry, "garbage"]).await;
    e.cmd(&["ZREM", "{p}:jobresponse:list:s1", "r-3"]).await;
    let store = Space::open(e.valkey.clone()).store::<JobResponse>();
    // Small batches: the registry is met again in every batch.
    let opts = MaintenanceOptions { batch: 2, ..MaintenanceOptions::default() };
    let report = store.verify(&opts).await.unwrap_or_else(|err| panic!("verify failed: {err}"));
    assert_eq!(wrong_types(&e, &report), set(&[("scopes", registry, "string")]), "{:#?}", report.differences);
    let kinds: BTreeSet<(String, String)> =
        report.differences.iter().map(|d| (d.index.clone(), d.kind.name().to_owned())).collect();
    let expected: BTreeSet<(String, String)> =
        [("list", "missing"), ("scopes", "wrong type")].iter().map(|(i, k)| ((*i).into(), (*k).into())).collect();
    assert_eq!(kinds, expected, "the run went on: {:#?}", report.differences);
    assert_eq!(report.differences.len(), 2, "one difference per damaged key: {:#?}", report.differences);
    assert_eq!(report.documents, 7, "every document read");
    assert_eq!(type_of(&mut e, registry).await, "string", "verify writes nothing");

    let rebuilt = store.rebuild(&opts).await.unwrap_or_else(|err| panic!("rebuild failed: {err}"));
    assert_eq!(rebuilt.differences, report.differences, "rebuild sees what verify saw");
    assert_eq!(type_of(&mut e, registry).await, "set");
    let mut scopes = store.scopes(microdcs_valkey::Page::first(100)).await.unwrap().ids;
    scopes.sort();
    assert_eq!(scopes, ["s1", "s2"], "every scope registered again");
    let after = store.verify(&opts).await.unwrap();
    assert!(after.is_clean(), "after rebuild: {:#?}", after.differences);
}

/// A first deploy flags nothing: with no layout recorded for the kind and
/// no document of it stored, `needs_rebuild` records the current layouts as
/// the baseline, so only a later change is flagged. A kind with documents
/// and no record (deployed before layouts were recorded) is flagged until
/// `accept_layouts` finds its indexes complete and records them.
#[tokio::test]
async fn a_first_deploy_is_the_baseline_and_only_later_changes_are_flagged() {
    let s = microdcs_tests::own_server();
    let prefix = unique_prefix("firstdeploy");
    let valkey = Valkey::connect_url(s.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let v1 = V1::open(valkey.clone()).store::<JobResponseV1>();
    assert_eq!(v1.needs_rebuild().await.unwrap(), Vec::<String>::new(), "a first deploy: nothing to rebuild");
    for i in 0..4 {
        let r = response(i, "s1");
        let doc = JobResponseV1 {
            id: r.id,
            scope: r.scope,
            job_order_id: r.job_order_id,
            start_time: r.start_time,
            state: r.state,
        };
        created(&v1, &doc).await;
    }
    assert!(v1.needs_rebuild().await.unwrap().is_empty(), "documents written since are indexed by their writes");
    // Release 2 adds the by-state index: that, and only that, is flagged.
    let v2 = Space::open(valkey.clone()).store::<JobResponse>();
    assert_eq!(v2.needs_rebuild().await.unwrap(), ["by_state"]);
    v2.rebuild(&MaintenanceOptions::default()).await.unwrap();
    assert!(v2.needs_rebuild().await.unwrap().is_empty());

    // A kind stored before layouts were recorded: unknown, so flagged, and
    // a clean verify records them.
    let masters = Space::open(valkey.clone()).store::<WorkMaster>();
    let mut raw = ConnectionManager::new(redis::Client::open(s.url()).unwrap()).await.unwrap();
    created(&masters, &WorkMaster { id: "wm-1".into(), scope: "s1".into(), name: "x".into() }).await;
    let fingerprints = format!("{}:schema:fingerprints", prefix.as_str());
    let _: () = redis::cmd("HDEL").arg(&fingerprints).arg("workmaster:list").query_async(&mut raw).await.unwrap();
    assert_eq!(masters.needs_rebuild().await.unwrap(), ["list"], "documents and no record: not a first deploy");
    // A damaged index is not accepted: nothing is recorded.
    let _: () = redis::cmd("SREM")
        .arg(format!("{}:workmaster:list:s1", prefix.as_str()))
        .arg("wm-1")
        .query_async(&mut raw)
        .await
        .unwrap();
    let report = masters.accept_layouts(&MaintenanceOptions::default()).await.unwrap();
    assert!(!report.is_clean());
    assert_eq!(masters.needs_rebuild().await.unwrap(), ["list"]);
    let _: () = redis::cmd("SADD")
        .arg(format!("{}:workmaster:list:s1", prefix.as_str()))
        .arg("wm-1")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(masters.accept_layouts(&MaintenanceOptions::default()).await.unwrap().is_clean());
    assert!(masters.needs_rebuild().await.unwrap().is_empty());
}
