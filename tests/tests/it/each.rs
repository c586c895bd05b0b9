//! Multi-valued indexes (`each(...)`): a ticket is in one set per tag, moved
//! exactly on every write (tags added and removed, repeats merged, empty
//! tags left out), found by tag, verified and rebuilt like any index,
//! shown per tag by the inspector, refused when damaged or too many, and
//! kept exact under concurrent writers, with family effects in the same
//! script; on one server and on a one-node cluster, which refuses any
//! script whose keys span slots.

use std::collections::BTreeSet;

use microdcs_tests::server;
use microdcs_valkey::config::Secret;
use microdcs_valkey::inspect::{EntryState, Inspector};
use microdcs_valkey::redis::AsyncCommands;
use microdcs_valkey::testing::{ValkeyCluster, unique_prefix};
use microdcs_valkey::{
    Document, Error, Expect, MicroDcsConfig, Page, PutOutcome, Store, Valkey, config::Placement, config::ValkeyConfig,
    keyspace, store::DiffKind, store::Effects, store::MaintenanceOptions, store::StepOutcome,
};
use serde::{Deserialize, Serialize};

/// A support ticket, in one set per tag and one per state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(
    kind = "ticket",
    key = "ticket:{#scope}:{id}",
    each(key = "ticket:bytag:{#scope}:{tag}", tag = tags, name = "by_tag"),
    group(key = "ticket:bystate:{#scope}:{state}")
)]
struct Ticket {
    id: String,
    scope: String,
    state: String,
    tags: Vec<String>,
}

keyspace! {
    Desk {
        shard: scope,
        documents: [Ticket],
        opened: counter("desk:opened:{#scope}"),
    }
}

fn ticket(id: &str, tags: &[&str]) -> Ticket {
    Ticket { id: id.into(), scope: "s1".into(), state: "open".into(), tags: tags.iter().map(|t| (*t).into()).collect() }
}

/// The ids in the set of `tag`.
async fn tagged(store: &Store<Ticket>, tag: &str) -> BTreeSet<String> {
    store.ids(Ticket::by_tag("s1", tag), Page::first(1000)).await.unwrap().ids.into_iter().collect()
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

async fn everything(connection_string: String, name: &str) {
    let config = ValkeyConfig {
        connection_string: Secret::new(connection_string),
        key_prefix: unique_prefix(name).as_str().to_owned(),
        placement: Placement::Sharded,
        ..MicroDcsConfig::default().valkey
    };
    let valkey = Valkey::connect(&config).await.unwrap();
    let desk = Desk::open(valkey.clone());
    let store = desk.store::<Ticket>();
    let mut raw = valkey.connection();
    let p = valkey.prefix().clone();
    let opts = MaintenanceOptions::default();

    // Created with two tags (one repeated, one empty): in both sets.
    let t1 = ticket("t-1", &["billing", "urgent", "billing", ""]);
    assert_eq!(store.create(&t1).await.unwrap(), PutOutcome::Written { version: 1 });
    assert_eq!(tagged(&store, "billing").await, set(&["t-1"]));
    assert_eq!(tagged(&store, "urgent").await, set(&["t-1"]));
    // The hash keeps the values, encoded, sorted and joined.
    let doc_key = Ticket::key(&p, "s1", "t-1").unwrap();
    let kept: Option<String> = raw.hget(&doc_key, "by_tag").await.unwrap();
    assert_eq!(kept.as_deref(), Some("billing|urgent"));

    // Moved exactly: a tag dropped, one kept, one added (with a separator
    // and non-ASCII text, which are encoded into the key).
    let mut read = store.get_in("s1", "t-1").await.unwrap().unwrap();
    let next = Ticket { tags: vec!["urgent".into(), "a:b".into(), "größe".into()], ..t1.clone() };
    assert_eq!(store.update_in_place(&mut read, next.clone()).await.unwrap(), PutOutcome::Written { version: 2 });
    assert_eq!(tagged(&store, "billing").await, set(&[]));
    assert_eq!(tagged(&store, "urgent").await, set(&["t-1"]));
    assert_eq!(tagged(&store, "a:b").await, set(&["t-1"]));
    assert_eq!(tagged(&store, "größe").await, set(&["t-1"]));
    let odd = Ticket::by_tag_key(&p, "s1", "a:b").unwrap();
    assert!(odd.ends_with(":a%3Ab"), "{odd}");

    // A second ticket shares a tag; no tags at all: in no tag set.
    let t2 = ticket("t-2", &["urgent"]);
    assert_eq!(store.create(&t2).await.unwrap(), PutOutcome::Written { version: 1 });
    let t3 = ticket("t-3", &[]);
    assert_eq!(store.create(&t3).await.unwrap(), PutOutcome::Written { version: 1 });
    assert_eq!(tagged(&store, "urgent").await, set(&["t-1", "t-2"]));
    let none: Option<String> = raw.hget(Ticket::key(&p, "s1", "t-3").unwrap(), "by_tag").await.unwrap();
    assert_eq!(none, None, "no values, no field");
    // An overwrite without a read (`Expect::Any`) finds the stored tags.
    let t2b = ticket("t-2", &["billing"]);
    assert_eq!(store.put(&t2b, Expect::Any).await.unwrap(), PutOutcome::Written { version: 2 });
    assert_eq!(tagged(&store, "urgent").await, set(&["t-1"]));
    assert_eq!(tagged(&store, "billing").await, set(&["t-2"]));
    assert!(store.verify(&opts).await.unwrap().differences.is_empty());

    // The inspector shows one entry per tag, each present.
    let inspector = Inspector::new(&desk);
    let view = inspector.document_in("ticket", "s1", "t-1").await.unwrap().unwrap();
    let tags: Vec<_> = view.entries.iter().filter(|e| e.index == "by_tag").collect();
    assert_eq!(tags.len(), 3, "{tags:?}");
    assert!(tags.iter().all(|e| e.state == EntryState::Present), "{tags:?}");

    // A write with family effects on a type with a multi-valued index:
    // its keys come after the effects' keys.
    let opened = Desk::opened(&desk, "s1").unwrap();
    let t4 = ticket("t-4", &["urgent", "new"]);
    let out = store.write(None, &t4, &Effects::new().incr(&opened, 1)).await.unwrap();
    assert_eq!(out, StepOutcome::Written { version: 1, values: vec![1] });
    assert_eq!(tagged(&store, "new").await, set(&["t-4"]));

    // Damage: t-1 lost from one of its sets, t-2 in a set it does not
    // claim. Verify finds both; rebuild repairs them.
    let _: () = raw.srem(Ticket::by_tag_key(&p, "s1", "urgent").unwrap(), "t-1").await.unwrap();
    let _: () = raw.sadd(Ticket::by_tag_key(&p, "s1", "new").unwrap(), "t-2").await.unwrap();
    // The inspector sees it too, value by value (one pipelined read).
    let view = inspector.document_in("ticket", "s1", "t-1").await.unwrap().unwrap();
    let states: Vec<_> = view.entries.iter().filter(|e| e.index == "by_tag").map(|e| e.state.clone()).collect();
    assert_eq!(states.iter().filter(|s| **s == EntryState::Missing).count(), 1, "{states:?}");
    assert_eq!(states.iter().filter(|s| **s == EntryState::Present).count(), 2, "{states:?}");
    let report = store.verify(&opts).await.unwrap();
    let mut kinds: Vec<_> = report.differences.iter().map(|d| (d.id.clone(), d.kind.clone())).collect();
    kinds.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(kinds.len(), 2, "{:?}", report.differences);
    assert_eq!(kinds[0], ("t-1".to_owned(), DiffKind::Missing));
    // t-2 has one tag: that set is where it belongs.
    let billing = Ticket::by_tag_key(&p, "s1", "billing").unwrap();
    assert_eq!(kinds[1], ("t-2".to_owned(), DiffKind::WrongGroup { expected: Some(billing) }));
    let _ = store.rebuild(&opts).await.unwrap();
    assert!(store.verify(&opts).await.unwrap().differences.is_empty());
    assert_eq!(tagged(&store, "urgent").await, set(&["t-1", "t-4"]));
    assert_eq!(tagged(&store, "new").await, set(&["t-4"]));

    // A claim by tag takes a ticket out of that tag's set; a change that
    // keeps it there is refused (it would be claimed again at once).
    let keeps = store.claim(Ticket::by_tag("s1", "new"), |t| Some(Ticket { state: "taken".into(), ..t.clone() })).await;
    assert!(matches!(keeps, Err(Error::InvalidArgument(_))), "{keeps:?}");
    let taken = store
        .claim(Ticket::by_tag("s1", "new"), |t| {
            Some(Ticket { tags: t.tags.iter().filter(|x| *x != "new").cloned().collect(), ..t.clone() })
        })
        .await
        .unwrap()
        .expect("t-4 is tagged new");
    assert_eq!(taken.doc.id, "t-4");
    assert_eq!(tagged(&store, "new").await, set(&[]));
    assert_eq!(tagged(&store, "urgent").await, set(&["t-1", "t-4"]), "its other tag stays");

    // A value's key of another type is unreadable, the others still seen.
    let odd_key = Ticket::by_tag_key(&p, "s1", "a:b").unwrap();
    let _: () = raw.del(&odd_key).await.unwrap();
    let _: () = raw.set(&odd_key, "not a set").await.unwrap();
    let view = inspector.document_in("ticket", "s1", "t-1").await.unwrap().unwrap();
    let tags: Vec<_> = view.entries.iter().filter(|e| e.index == "by_tag").collect();
    assert_eq!(tags.len(), 3, "{tags:?}");
    for e in &tags {
        let unreadable = matches!(e.state, EntryState::Unreadable { .. });
        assert_eq!(unreadable, e.key.as_deref() == Some(odd_key.as_str()), "{e:?}");
        // The reason is the server's refusal, as for a single-valued entry.
        if let EntryState::Unreadable { reason } = &e.state {
            assert!(reason.contains("WRONGTYPE"), "{reason}");
        }
    }
    let _: () = raw.del(&odd_key).await.unwrap();
    let _: () = raw.sadd(&odd_key, "t-1").await.unwrap();

    // Deleted: out of every set.
    let read = store.get_in("s1", "t-1").await.unwrap().unwrap();
    assert!(matches!(store.delete(&read).await.unwrap(), microdcs_valkey::store::DeleteOutcome::Deleted { .. }));
    for tag in ["urgent", "a:b", "größe"] {
        assert!(!tagged(&store, tag).await.contains("t-1"), "{tag}");
    }

    // Too many values: refused before anything is sent.
    let many: Vec<String> = (0..=microdcs_valkey::schema::MAX_EACH_VALUES).map(|i| format!("tag-{i}")).collect();
    let crowded = Ticket { tags: many, ..ticket("t-5", &[]) };
    let e = store.create(&crowded).await.unwrap_err();
    assert!(matches!(e, Error::Index(microdcs_valkey::schema::IndexError::TooManyValues { count: 257, .. })), "{e:?}");
    assert_eq!(store.get_in("s1", "t-5").await.unwrap(), None);
    // A value too long for a key is refused the same way.
    let long = ticket("t-5", &[&"x".repeat(2000)]);
    assert!(matches!(store.create(&long).await, Err(Error::Key(_) | Error::Index(_))));

    // A damaged values field: the next write is refused as corrupt, and
    // nothing is written.
    let t2_key = Ticket::key(&p, "s1", "t-2").unwrap();
    let _: () = raw.hset(&t2_key, "by_tag", "bill:ing").await.unwrap();
    let e = store.put(&ticket("t-2", &["x"]), Expect::Any).await.unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }), "{e:?}");
    assert_eq!(tagged(&store, "x").await, set(&[]));
    let _: () = raw.hset(&t2_key, "by_tag", "billing").await.unwrap();

    // Concurrent writers overwriting one ticket's tags: whatever order
    // they land in, the sets hold exactly what the last write says.
    let t6 = ticket("t-6", &["a"]);
    assert_eq!(store.create(&t6).await.unwrap(), PutOutcome::Written { version: 1 });
    let mut tasks = Vec::new();
    for w in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..10 {
                let tags: Vec<String> = (0..3).map(|k| format!("c{}", (w * 7 + i * 3 + k) % 9)).collect();
                let t = Ticket { tags, ..ticket("t-6", &[]) };
                let _ = store.put(&t, Expect::Any).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let last = store.get_in("s1", "t-6").await.unwrap().unwrap().doc;
    for k in 0..9 {
        let tag = format!("c{k}");
        let holds = tagged(&store, &tag).await.contains("t-6");
        assert_eq!(holds, last.tags.contains(&tag), "{tag}: {:?}", last.tags);
    }
    assert!(store.verify(&opts).await.unwrap().differences.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_index_on_one_server_and_a_cluster_node() {
    let one = server();
    everything(one.host_port(), "each-one").await;
    let node = ValkeyCluster::start_local(1, 0).unwrap_or_else(|e| panic!("{e}"));
    everything(node.connection_string(), "each-node").await;
}
