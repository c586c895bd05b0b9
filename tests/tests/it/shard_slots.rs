//! The co-location a sharded keyspace promises, checked on rendered keys:
//! every key every script of every document type of `ShardedPlant` touches
//! (document, list, indexes, change stream, tombstone, work stream, event
//! marker), and every key of a multi-valued index, lands in the slot of its
//! scope, for any scope, id and index
//! values. Each slot is computed twice, by our CRC16 and by redis-rs's
//! `Slot::for_key`, so neither can drift from the cluster's rule alone.
//! No server: the rule is pure. `PROPTEST_CASES` deepens it.

use microdcs_examples::plant::sharded::{JobResponse, SfcState, ShardedPlant, WorkMaster};
use microdcs_schema::slot::key_slot;
use microdcs_schema::{Document, DocumentSpec, KeyPrefix, KeyTemplate};
use microdcs_valkey::redis::cluster_routing::Slot;
use proptest::prelude::*;

/// A sharded type with a multi-valued index: its keys are many per
/// document, and each must land in the scope's slot too.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, microdcs_valkey::Document)]
#[microdcs(kind = "tagged", key = "tagged:{#scope}:{id}", each(key = "tagged:bytag:{#scope}:{tag}", tag = tags, name = "by_tag"))]
struct Tagged {
    id: String,
    scope: String,
    tags: Vec<String>,
}

/// Any text a value may be: encoded on the way into a key, braces too.
fn value() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 :{}|%*_.-]{1,24}"
}

/// Every key template a script of `spec` touches, as the store renders it.
fn script_templates(spec: &DocumentSpec<'static>) -> Vec<&'static str> {
    let mut out = vec![spec.key, spec.tombstones().key];
    out.extend(spec.list.map(|l| l.key));
    out.extend(spec.unique.iter().chain(spec.groups).map(|ix| ix.key));
    out.extend(spec.changes);
    // A shard channel counts as a key in the script's slot check.
    if spec.shard_nudge() {
        out.push(spec.nudge);
    }
    if let Some(o) = spec.outbox {
        out.push(o.stream);
        out.extend(o.events);
    }
    out
}

/// Renders `template` with `scope` for `{scope}`/`{#scope}`, `kind` for
/// `{kind}` and `others` (cycled) for every other placeholder.
fn render(template: &str, prefix: &KeyPrefix, scope: &str, kind: &str, others: &[String]) -> String {
    let t = KeyTemplate::parse(template).unwrap();
    let mut next = others.iter().cycle();
    let values: Vec<String> = t
        .placeholders()
        .map(|p| match p {
            "scope" => scope.to_owned(),
            "kind" => kind.to_owned(),
            _ => next.next().unwrap().clone(),
        })
        .collect();
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    t.render(prefix, &refs).unwrap()
}

fn slots_of(keys: &[String]) -> Vec<(u16, Slot)> {
    keys.iter().map(|k| (key_slot(k.as_bytes()), Slot::for_key(k.as_bytes()))).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(300)
    ))]

    #[test]
    fn every_script_key_of_a_sharded_keyspace_lands_in_its_scopes_slot(
        scope in value(),
        others in proptest::collection::vec(value(), 1..4),
        prefix in "[a-z][a-z0-9:._-]{0,20}[a-z0-9]",
    ) {
        let prefix = KeyPrefix::new(prefix).unwrap();
        prop_assert_eq!(ShardedPlant::SPEC.shard, Some("scope"));
        let scope_slot = key_slot(microdcs_schema::encode::encode(&scope).unwrap().as_bytes());
        for spec in ShardedPlant::SPEC.documents {
            prop_assert!(spec.is_sharded(), "{}", spec.type_name);
            let keys: Vec<String> = script_templates(spec)
                .into_iter()
                .map(|t| render(t, &prefix, &scope, spec.kind, &others))
                .collect();
            for ((ours, theirs), key) in slots_of(&keys).into_iter().zip(&keys) {
                prop_assert_eq!(ours, scope_slot, "{} of {} is not in its scope's slot", key, spec.type_name);
                prop_assert_eq!(Some(theirs), Slot::new(ours), "redis-rs hashes {} elsewhere", key);
            }
        }
    }

    #[test]
    fn the_entries_a_document_writes_share_its_slot(
        scope in value(),
        id in value(),
        order in value(),
        state in proptest::collection::vec("[A-Za-z]{1,8}", 0..3),
        wait in proptest::option::of(value()),
        tags in proptest::collection::vec(value(), 0..6),
    ) {
        let prefix = KeyPrefix::default();
        let tagged = Tagged { id: id.clone(), scope: scope.clone(), tags: tags.clone() }.index_entries(&prefix).unwrap();
        let r = JobResponse { id: id.clone(), scope: scope.clone(), job_order_id: order, start_time: 1, state };
        let s = SfcState {
            job_id: id,
            scope,
            step: "mix".into(),
            deadline: Some(5),
            running: true,
            wait_type: wait,
            wait_start: Some(7),
        };

        let each = tagged.groups[0].as_ref().map_or(0, |e| e.keys().count());
        prop_assert_eq!(each, tags.iter().collect::<std::collections::BTreeSet<_>>().len(), "one key per distinct tag");
        for entries in [r.index_entries(&prefix).unwrap(), s.index_entries(&prefix).unwrap(), tagged] {
            let mut keys = vec![entries.key.clone()];
            keys.extend(entries.list.iter().map(|l| l.key.clone()));
            keys.extend(
                entries.unique.iter().chain(&entries.groups).flatten().flat_map(|e| e.keys().map(str::to_owned)),
            );
            let slots = slots_of(&keys);
            for ((ours, theirs), key) in slots.iter().zip(&keys) {
                prop_assert_eq!(*ours, slots[0].0, "{} is not in the document's slot", key);
                prop_assert_eq!(Some(*theirs), Slot::new(*ours));
            }
        }
    }
}

#[test]
fn the_scope_tag_is_the_first_tag_of_every_key() {
    // Pinned: the literal shapes a sharded type writes (a change would
    // strand data written before it).
    let p = KeyPrefix::default();
    assert_eq!(JobResponse::key(&p, "s1", "r-1").unwrap(), "microdcs:jobresponse:{s1}:r-1");
    // Job responses send their nudge per scope; work masters on the kind's channel.
    assert!(JobResponse::SPEC.shard_nudge() && !WorkMaster::SPEC.shard_nudge());
    assert_eq!(JobResponse::SPEC.nudge, "nudge:{kind}:{#scope}");
    assert_eq!(JobResponse::by_order_key(&p, "s1", "o:1").unwrap(), "microdcs:jobresponse:byorder:{s1}:o%3A1");
    assert_eq!(
        ShardedPlant::tombstones_key(&p, "jobresponse", "s1", "r-1").unwrap(),
        "microdcs:tomb:jobresponse:{s1}:r-1"
    );
    assert_eq!(ShardedPlant::changes_key(&p, "s{1}").unwrap(), "microdcs:changes:{s%7B1%7D}");
    // Slots the server answers to `CLUSTER KEYSLOT` (Valkey 9.1).
    assert_eq!(key_slot(b"microdcs:jobresponse:{s1}:r-1"), 15224);
    assert_eq!(key_slot(b"microdcs:changes:{s1}"), 15224);
    // A document of the plain plant type is not tagged: its slot is its own.
    let plain = microdcs_examples::plant::JobResponse::key(&p, "r-1").unwrap();
    assert_ne!(key_slot(plain.as_bytes()), 15224);
}

/// The rewrites two derive errors suggest compile and shard as promised: a
/// scope field named `tenant` is still `{#scope}` in a template
/// (`ui/fail/scope_tag_named_after_field.rs`), and a list beside
/// `x:{#scope}:{id}` gets a segment of its own
/// (`ui/fail/overlap_index_beside_document.rs`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, microdcs_valkey::Document)]
#[microdcs(kind = "order", key = "order:{#scope}:{id}", list(key = "order:list:{#scope}:name", score = rank))]
struct Order {
    id: String,
    #[microdcs(scope)]
    tenant: String,
    rank: i64,
}

#[test]
fn the_suggested_rewrites_compile_and_shard_by_scope() {
    let p = KeyPrefix::default();
    assert!(Order::SPEC.is_sharded());
    let key = Order::key(&p, "acme", "name").unwrap();
    let list = Order::list_key(&p, "acme").unwrap();
    assert_eq!((key.as_str(), list.as_str()), ("microdcs:order:{acme}:name", "microdcs:order:list:{acme}:name"));
    assert_eq!(key_slot(key.as_bytes()), key_slot(list.as_bytes()));
}
