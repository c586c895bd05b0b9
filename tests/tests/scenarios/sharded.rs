//! A keyspace sharded by scope (`ShardedPlant`, `shard: scope`) on one
//! server, on one cluster node that holds every slot (which refuses any
//! script, transaction or pipeline across slots: the cheapest proof that
//! nothing we send spans slots) and on three primaries, where scopes land
//! on different primaries: writes and reads, unique lookups, lists, steps
//! with work and event markers, deletes and their tombstones, the scope
//! registry written outside the scripts, walks over every primary, verify
//! and rebuild (the registry among what they check), and the `Placement`
//! rules at connect.
//!
//! One test: the clusters are started once for the binary.

use std::collections::{BTreeMap, BTreeSet};

use microdcs_examples::plant::sharded::{JobResponse, SfcState, ShardedPlant};
use microdcs_tests::{change_channel, server};
use microdcs_valkey::config::Secret;
use microdcs_valkey::redis::{self, Value};
use microdcs_valkey::testing::{ValkeyCluster, command, unique_island, unique_prefix};
use microdcs_valkey::{
    MicroDcsConfig, Page, PutOutcome, Valkey, changes::Changes, client::ConnectError, config::Placement,
    config::ValkeyConfig, inspect::Inspector, poller::Poller, store::DeleteExpect, store::DeleteOutcome,
    store::DiffKind, store::Effects, store::Event, store::MaintenanceOptions, store::StepOutcome, store::WorkEntry,
};

const SCOPES: usize = 12;

fn config(connection_string: String, prefix: &str, placement: Placement) -> ValkeyConfig {
    ValkeyConfig {
        connection_string: Secret::new(connection_string),
        key_prefix: prefix.to_owned(),
        placement,
        // The poller's fallback poll is off in effect, so a change of a
        // known scope can only come by its nudge; new scopes come from the
        // registry, read often.
        poll_interval: std::time::Duration::from_secs(3600),
        scope_refresh_interval: std::time::Duration::from_millis(200),
        ..MicroDcsConfig::default().valkey
    }
}

async fn connect(connection_string: String, name: &str) -> Valkey {
    let prefix = unique_prefix(name);
    Valkey::connect(&config(connection_string, prefix.as_str(), Placement::Sharded))
        .await
        .unwrap_or_else(|e| panic!("connect {name}: {e}"))
}

fn scope(i: usize) -> String {
    format!("site-{i}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_keyspace_on_one_server_one_node_and_three_primaries() {
    let one = server();
    let flow = everything_a_sharded_keyspace_does(connect(format!("127.0.0.1:{}", one.port()), "sh-one").await).await;
    assert_eq!(flow.primaries, 1);
    drop(one);

    let single = ValkeyCluster::start_local(1, 0).unwrap_or_else(|e| panic!("{e}"));
    let flow = everything_a_sharded_keyspace_does(connect(single.connection_string(), "sh-node").await).await;
    assert_eq!(flow.primaries, 1);
    drop(single);

    let cluster = ValkeyCluster::start(3, 0).unwrap_or_else(|e| panic!("{e}"));
    let valkey = connect(cluster.connection_string(), "sh-three").await;
    let flow = everything_a_sharded_keyspace_does(valkey.clone()).await;
    eprintln!("scopes by primary: {:?}", flow.by_primary);
    assert!(flow.primaries >= 2, "{SCOPES} scopes should spread over the primaries: {:?}", flow.by_primary);
    placement_is_checked_at_connect(&cluster).await;
    // What `plant sharded` runs, on the same three primaries.
    let lines =
        microdcs_examples::plant::sharded::demo(&connect(cluster.connection_string(), "sh-demo").await).await.unwrap();
    assert!(lines.iter().any(|l| l == "scopes in the registry: 6"), "{lines:?}");
    assert!(lines.iter().any(|l| l == "verify: 6 documents, 0 differences"), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("Some((\"line-3\", \"r-1\"))")), "{lines:?}");
    // The demo's step numbered the job and added the reference in its script.
    assert!(lines.iter().any(|l| l == "step j-1 in line-2: Written { version: 1, values: [1, 1] }"), "{lines:?}");
}

/// What the flow saw of the deployment.
struct Flow {
    /// Primaries holding at least one scope (by the server's own
    /// `CLUSTER KEYSLOT` and `CLUSTER SLOTS`; 1 off a cluster).
    primaries: usize,
    by_primary: BTreeMap<String, Vec<String>>,
}

async fn everything_a_sharded_keyspace_does(valkey: Valkey) -> Flow {
    let prefix = valkey.prefix().clone();
    let plant = ShardedPlant::open(valkey.clone());
    let responses = plant.store::<JobResponse>();
    let states = plant.store::<SfcState>();

    // Three responses in each scope, the same ids in every scope.
    for i in 0..SCOPES {
        for r in 0..3 {
            let doc = JobResponse::new(&format!("r-{r}"), &scope(i), &format!("o-{r}"), &["Running"]);
            assert_eq!(responses.create(&doc).await.unwrap(), PutOutcome::Written { version: 1 });
        }
    }
    let s3 = scope(3);
    let read = responses.get_in(&s3, "r-1").await.unwrap().expect("written");
    assert_eq!(read.scope, s3);
    assert!(responses.get("r-1").await.is_err(), "a sharded type names a document by scope and id");
    let many = responses.get_many_in(&s3, &["r-0", "r-2", "r-9"]).await.unwrap();
    assert_eq!(many.iter().map(Option::is_some).collect::<Vec<_>>(), [true, true, false]);
    // The unique index is per scope: `o-1` names one response in each.
    let found = responses.find(JobResponse::by_order(&s3, "o-1")).await.unwrap().expect("found");
    assert_eq!((found.id.as_str(), found.scope.as_str()), ("r-1", s3.as_str()));
    assert_eq!(responses.list(&s3, Page::first(10)).await.unwrap().ids.len(), 3);
    assert_eq!(responses.ids(JobResponse::by_state(&s3, "Running"), Page::first(10)).await.unwrap().ids.len(), 3);

    // A compare-and-set update moves the group entry in the scope's slot.
    let held = JobResponse { state: vec!["Held".into()], ..read.doc.clone() };
    assert_eq!(responses.update(&read, &held).await.unwrap(), PutOutcome::Written { version: 2 });
    assert_eq!(responses.ids(JobResponse::by_state(&s3, "Held"), Page::first(10)).await.unwrap().ids, ["r-1"]);

    // A delete leaves its tombstone in the scope's slot, and a retried
    // create of the deleted document is recognised by it.
    let s5 = scope(5);
    let doomed = JobResponse::new("r-2", &s5, "o-2", &["Running"]);
    let gone = responses.get_in(&s5, "r-2").await.unwrap().unwrap();
    assert!(matches!(responses.delete(&gone).await.unwrap(), DeleteOutcome::Deleted { version: 1 }));
    let tomb = responses.tombstone_key_in(&s5, "r-2").unwrap();
    assert!(tomb.contains(&format!("{{{s5}}}")), "{tomb}");
    let mut raw = raw(&valkey);
    let exists: i64 = redis::cmd("EXISTS").arg(&tomb).query_async(&mut raw).await.unwrap();
    assert_eq!(exists, 1);
    assert!(matches!(
        responses.delete_id("r-2", DeleteExpect::Any).in_scope(&s5).await.unwrap(),
        DeleteOutcome::NotFound | DeleteOutcome::Deleted { .. }
    ));
    let _ = doomed;

    // Every scope is in the registry, which the scripts do not write.
    let mut listed = BTreeSet::new();
    let mut page = Some(Page::first(5));
    while let Some(p) = page {
        let got = responses.scopes(p).await.unwrap();
        listed.extend(got.ids);
        page = got.next;
    }
    assert_eq!(listed, (0..SCOPES).map(scope).collect::<BTreeSet<_>>());

    // A step: the state, its work entry and its event marker, one script
    // in the scope's slot; the same event again is recognised.
    let s7 = scope(7);
    let st = SfcState {
        job_id: "j-1".into(),
        scope: s7.clone(),
        step: "mix".into(),
        deadline: Some(100),
        running: true,
        wait_type: None,
        wait_start: None,
    };
    let effects = Effects::new().work(WorkEntry::new().field("step", "mix")).event(Event::new("urn:line-1", "e-1"));
    assert_eq!(states.step(None, &st, &effects).await.unwrap(), StepOutcome::Written { version: 1, values: vec![] });
    let again = SfcState { job_id: "j-2".into(), ..st.clone() };
    assert!(matches!(states.step(None, &again, &effects).await.unwrap(), StepOutcome::EventApplied { .. }));
    let work = ShardedPlant::sfc_work_key(&prefix, &s7).unwrap();
    let len: i64 = redis::cmd("XLEN").arg(&work).query_async(&mut raw).await.unwrap();
    assert_eq!(len, 1);
    let changes = ShardedPlant::changes_key(&prefix, &s3).unwrap();
    let len: i64 = redis::cmd("XLEN").arg(&changes).query_async(&mut raw).await.unwrap();
    assert_eq!(len, 4, "three creates and the update of scope 3");

    // A walk visits every primary: every document of every scope, once.
    let mut walked = Vec::new();
    let mut cursor = 0;
    loop {
        let page = responses.scan(cursor, 7).await.unwrap();
        assert!(page.damaged.is_empty());
        walked.extend(page.documents.into_iter().map(|d| (d.scope, d.id)));
        match page.next {
            Some(n) => cursor = n,
            None => break,
        }
    }
    walked.sort();
    walked.dedup();
    assert_eq!(walked.len(), SCOPES * 3 - 1, "every document but the deleted one");

    // Verify is clean; a scope lost from the registry and a list entry
    // lost are found, and rebuild puts both back.
    let opts = MaintenanceOptions::default();
    let clean = responses.verify(&opts).await.unwrap();
    assert!(clean.differences.is_empty(), "{:?}", clean.differences);
    assert_eq!(clean.documents, (SCOPES * 3 - 1) as u64);
    let registry = ShardedPlant::scopes_key(&prefix).unwrap();
    let _: i64 = redis::cmd("SREM").arg(&registry).arg(scope(9)).query_async(&mut raw).await.unwrap();
    let list = JobResponse::list_key(&prefix, &scope(10)).unwrap();
    let _: i64 = redis::cmd("ZREM").arg(&list).arg("r-0").query_async(&mut raw).await.unwrap();
    let report = responses.verify(&opts).await.unwrap();
    let kinds: Vec<(String, String, DiffKind)> =
        report.differences.iter().map(|d| (d.index.clone(), d.id.clone(), d.kind.clone())).collect();
    assert!(kinds.iter().any(|(ix, _, k)| ix == "scopes" && *k == DiffKind::Missing), "{kinds:?}");
    assert!(kinds.contains(&("list".to_owned(), "r-0".to_owned(), DiffKind::Missing)), "{kinds:?}");
    let fixed = responses.rebuild(&opts).await.unwrap();
    assert!(fixed.fixed >= 2, "{fixed:?}");
    let after = responses.verify(&opts).await.unwrap();
    assert!(after.differences.is_empty(), "{:?}", after.differences);

    // The inspector reads a sharded type by scope: the registry, a page of
    // the list, a document and a scope's change stream.
    let inspector = Inspector::new(&plant);
    assert_eq!(inspector.scopes("jobresponse").await.unwrap().len(), SCOPES);
    assert_eq!(inspector.ids("jobresponse", &s3, 0, 10).await.unwrap().ids.len(), 3);
    let view = inspector.document_in("jobresponse", &s3, "r-1").await.unwrap().expect("there");
    assert_eq!((view.version.as_deref(), view.scope.as_deref()), (Some("2"), Some(s3.as_str())));
    assert!(view.key.contains(&format!("{{{s3}}}")), "{}", view.key);
    assert_eq!(inspector.changes("jobresponse", &s3).await.unwrap().length, 4);

    // The poller hands on the changes of every scope, wherever its stream
    // lives: nudges are published from each scope's primary and reach the
    // subscriber on any node.
    let (handler, mut rx) = change_channel::<JobResponse>();
    let poller = Poller::new(valkey.clone(), "sharded")
        .consumer(Changes::new(responses.clone(), "sharded", handler).fetching())
        .start()
        .await
        .unwrap();
    let mut seen = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while seen.len() < SCOPES {
        let got = tokio::time::timeout_at(deadline, rx.recv()).await;
        let Ok(Some(change)) = got else { panic!("changes of every scope: got those of {seen:?}") };
        seen.insert(change.scope.clone());
    }
    // A change in a known scope comes by its nudge alone: `SPUBLISH` on the
    // scope's shard channel from its primary, `SSUBSCRIBE`d by the poller
    // when it found the scope (no fallback poll runs within the hour; the
    // first one, at start, has ended after this wait).
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    for s in [scope(0), s3.clone()] {
        let doc = JobResponse::new("r-nudged", &s, &format!("o-nudged-{s}"), &["Running"]);
        assert_eq!(responses.create(&doc).await.unwrap(), PutOutcome::Written { version: 1 });
        loop {
            let got = tokio::time::timeout_at(deadline, rx.recv()).await;
            let Ok(Some(change)) = got else { panic!("no nudge for a change in known scope {s}") };
            if change.id == "r-nudged" && change.scope == s {
                break;
            }
        }
    }
    // And a new write in a new scope: registered first, found by the
    // poller's next read of the registry.
    let late = scope(SCOPES + 1);
    let doc = JobResponse::new("r-late", &late, "o-late", &["Running"]);
    assert_eq!(responses.create(&doc).await.unwrap(), PutOutcome::Written { version: 1 });
    loop {
        let got = tokio::time::timeout_at(deadline, rx.recv()).await;
        let Ok(Some(change)) = got else { panic!("the change in a new scope never came") };
        if change.id == "r-late" {
            assert_eq!(change.scope, late);
            break;
        }
    }
    poller.shutdown().await;

    // Where the scopes live: their slots' primaries, by the server.
    let by_primary = primaries_of(&mut raw, &prefix, valkey.is_cluster()).await;
    Flow { primaries: by_primary.len(), by_primary }
}

/// A raw connection of the handle's kind, for checks behind the API.
fn raw(valkey: &Valkey) -> microdcs_valkey::client::Connection {
    valkey.connection()
}

/// Scope -> the address of the primary serving its slot, grouped.
async fn primaries_of(
    raw: &mut microdcs_valkey::client::Connection,
    prefix: &microdcs_valkey::KeyPrefix,
    cluster: bool,
) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if !cluster {
        out.insert("server".into(), (0..SCOPES).map(scope).collect());
        return out;
    }
    let ranges: Value = redis::cmd("CLUSTER").arg("SLOTS").query_async(raw).await.unwrap();
    let Value::Array(ranges) = ranges else { panic!("CLUSTER SLOTS: {ranges:?}") };
    for i in 0..SCOPES {
        let key = JobResponse::list_key(prefix, &scope(i)).unwrap();
        let slot: i64 = redis::cmd("CLUSTER").arg("KEYSLOT").arg(&key).query_async(raw).await.unwrap();
        assert_eq!(slot as u16, microdcs_schema::slot::key_slot(key.as_bytes()), "{key}");
        let owner = ranges.iter().find_map(|r| {
            let Value::Array(p) = r else { return None };
            let (Value::Int(a), Value::Int(b), Value::Array(node)) = (&p[0], &p[1], &p[2]) else { return None };
            let Value::Int(port) = &node[1] else { return None };
            (*a <= slot && slot <= *b).then(|| port.to_string())
        });
        out.entry(owner.expect("every slot served")).or_default().push(scope(i));
    }
    out
}

async fn placement_is_checked_at_connect(cluster: &ValkeyCluster) {
    // A tagged prefix under `Placement=sharded` would put every scope in
    // one slot: refused, naming the fix.
    let tagged = unique_island("sh-tagged");
    let e = Valkey::connect(&config(cluster.connection_string(), tagged.as_str(), Placement::Sharded)).await;
    let Err(ConnectError::Config(e)) = e else { panic!("a tagged prefix under Placement=sharded: {e:?}") };
    assert!(e.to_string().contains("Placement"), "{e}");
    // And an untagged one under the default placement, naming the setting.
    let plain = unique_prefix("sh-plain");
    let e = Valkey::connect(&config(cluster.connection_string(), plain.as_str(), Placement::Island)).await;
    let Err(ConnectError::Config(e)) = e else { panic!("an untagged island on a cluster: {e:?}") };
    let text = e.to_string();
    assert!(text.contains("`Placement` to `sharded`"), "{e}");
    // The fix for a keyspace sharded by scope comes first: the tagged
    // prefix suits only islands, and would turn sharding off.
    let tag_at = text.find(&format!("`{{{}}}`", plain.as_str())).unwrap_or_else(|| panic!("no tagged form: {text}"));
    assert!(text.find("`Placement` to `sharded`").unwrap() < tag_at, "{text}");
    // A keyspace sharded by scope on an island (a tagged prefix, the
    // default placement): every scope would share the island's one slot,
    // sharding silently off. Its writes and lookups are refused before
    // anything is sent, naming the setting that shards.
    let island = unique_island("sh-island");
    let valkey =
        Valkey::connect(&config(cluster.connection_string(), island.as_str(), Placement::Island)).await.unwrap();
    let responses = ShardedPlant::open(valkey.clone()).store::<JobResponse>();
    let doc = JobResponse::new("r-1", "s1", "o-1", &["Running"]);
    let e = responses.create(&doc).await.expect_err("a sharded type on an island");
    assert!(matches!(e, microdcs_valkey::Error::Placement { type_name: "JobResponse", .. }), "{e:?}");
    assert!(e.is_invalid_input(), "{e:?}");
    assert!(e.to_string().contains("Placement=sharded"), "{e}");
    let e = responses.find(JobResponse::by_order("s1", "o-1")).await.expect_err("a unique lookup too");
    assert!(matches!(e, microdcs_valkey::Error::Placement { .. }), "{e:?}");
    assert_eq!(responses.get_in("s1", "r-1").await.unwrap(), None, "nothing written");
    // The setting reads from configuration text.
    let mut c = MicroDcsConfig::default();
    c.set("Valkey:Placement", "Sharded").unwrap();
    assert_eq!(c.valkey.placement, Placement::Sharded);
    assert!(c.set("Valkey:Placement", "spread").is_err());
    // A keyspace that is not sharded, opened on a sharded handle: its
    // writes and unique lookups are refused before anything is sent,
    // naming the type and the fix (the cluster would refuse each script
    // with CROSSSLOT).
    let valkey = connect(cluster.connection_string(), "sh-unsharded").await;
    let plant = microdcs_examples::plant::Plant::open(valkey.clone());
    let orders = plant.store::<microdcs_examples::plant::JobResponse>();
    let doc = microdcs_examples::plant::JobResponse::new("r-1", "s1", "o-1", &["Running"]);
    let e = orders.create(&doc).await.expect_err("an unsharded type on a sharded handle");
    assert!(matches!(e, microdcs_valkey::Error::Placement { type_name: "JobResponse", .. }), "{e:?}");
    assert!(e.to_string().contains("`JobResponse`") && e.to_string().contains("not sharded by scope"), "{e}");
    assert!(e.to_string().contains("shard: scope"), "{e}");
    let e = orders.delete_id("r-1", DeleteExpect::Any).await.expect_err("a delete too");
    assert!(matches!(e, microdcs_valkey::Error::Placement { .. }), "{e:?}");
    let e = orders.find(microdcs_examples::plant::JobResponse::by_order("o-1")).await.expect_err("a unique lookup too");
    assert!(matches!(e, microdcs_valkey::Error::Placement { .. }), "{e:?}");
    // Nothing was written: a read by key finds nothing.
    assert_eq!(orders.get("r-1").await.unwrap(), None);
    assert!(valkey.prefix().slot().is_none());
    let _ = command;
}
