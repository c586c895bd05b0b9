//! Expiring ordered data: messages kept in order (a sorted list) for 30
//! days, their end of life in a sorted index scored by a method, and an
//! `ExpirySweep` deleting expired ones through the delete script, so the
//! list and every index stay exact, change consumers see `deleted`
//! entries, and verify stays clean.

use std::time::Duration;

use microdcs_tests::{server, stream_entries};
use microdcs_valkey::redis::{AsyncCommands, aio::ConnectionManager};
use microdcs_valkey::testing::unique_prefix;
use microdcs_valkey::{
    Document, Page, PutOutcome, Valkey, config::WriteOptions, keyspace, poller::Poller, store::MaintenanceOptions,
    sweep::Expired, sweep::ExpirySweep,
};
use serde::{Deserialize, Serialize};

const DAY_MS: i64 = 24 * 3600 * 1000;

/// A chat message, kept 30 days after it was sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(
    kind = "message",
    list(key = "msg:list:{scope}", score = sent_at),
    sorted(key = "msg:expiry:{scope}", score = expires_at(), name = "expiry"),
    group(key = "msg:bytext:{scope}:{text}", name = "by_text")
)]
struct Message {
    id: String,
    scope: String,
    text: String,
    /// Unix milliseconds.
    sent_at: i64,
}

impl Message {
    /// The end of its life: 30 days after it was sent.
    fn expires_at(&self) -> i64 {
        self.sent_at + 30 * DAY_MS
    }
}

keyspace! {
    Chat {
        documents: [Message],
        changes: stream("changes:{scope}"),
    }
}

fn now_ms() -> i64 {
    i64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()).unwrap()
}

fn message(id: &str, conversation: &str, age_days: i64) -> Message {
    Message {
        id: id.into(),
        scope: conversation.into(),
        text: format!("text of {id}"),
        sent_at: now_ms() - age_days * DAY_MS,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_messages_are_deleted_through_the_delete_script() {
    let s = server();
    let valkey = Valkey::connect_url(s.url(), unique_prefix("expiry"), WriteOptions::default()).await.unwrap();
    let mut raw = ConnectionManager::new(microdcs_valkey::redis::Client::open(s.url()).unwrap()).await.unwrap();
    let store = Chat::open(valkey.clone()).store::<Message>();
    let p = valkey.prefix().clone();
    // Three expired (31 and 40 days old) in two conversations, two fresh.
    for m in [message("m-1", "c1", 31), message("m-2", "c1", 40), message("m-3", "c2", 31)] {
        assert_eq!(store.create(&m).await.unwrap(), PutOutcome::Written { version: 1 });
    }
    for m in [message("m-4", "c1", 1), message("m-5", "c2", 29)] {
        assert_eq!(store.create(&m).await.unwrap(), PutOutcome::Written { version: 1 });
    }
    // The index names m-4 as expired, but the document says otherwise:
    // the document is the truth, and the index entry is verify's to find.
    let expiry_c1 = Message::expiry("c1");
    let key = Message::SPEC.groups[expiry_c1.index()].key;
    let key = microdcs_valkey::schema::KeyTemplate::parse(key).unwrap().render(&p, &["c1"]).unwrap();
    let _: () = raw.zadd(&key, "m-4", 0).await.unwrap();

    let sweep = ExpirySweep::new(store.clone(), Message::expiry, Duration::from_secs(3600));
    assert_eq!(sweep.sweep().await.unwrap(), Expired { deleted: 3, kept: 1, ..Expired::default() });
    for (c, id) in [("c1", "m-1"), ("c1", "m-2"), ("c2", "m-3")] {
        assert_eq!(store.get_in(c, id).await.unwrap(), None, "{id} expired");
    }
    assert!(store.get_in("c1", "m-4").await.unwrap().is_some());
    assert!(store.get_in("c2", "m-5").await.unwrap().is_some());
    // The list holds the survivors only, in order.
    assert_eq!(store.list("c1", Page::first(10)).await.unwrap().ids, vec!["m-4".to_owned()]);
    // Change consumers see each expiry as a delete, the oldest first.
    let changes = Chat::changes_key(&p, "c1").unwrap();
    let deleted: Vec<String> = stream_entries(&mut raw, &changes)
        .await
        .into_iter()
        .filter(|e| e.get("change").map(String::as_str) == Some("deleted"))
        .filter_map(|e| e.get("id").cloned())
        .collect();
    assert_eq!(deleted, vec!["m-2".to_owned(), "m-1".to_owned()]);
    // Verify finds the damaged entry (and only it); rebuild puts it back.
    let opts = MaintenanceOptions::default();
    let report = store.verify(&opts).await.unwrap();
    assert_eq!(report.differences.len(), 1, "{:?}", report.differences);
    let _ = store.rebuild(&opts).await.unwrap();
    assert!(store.verify(&opts).await.unwrap().differences.is_empty());
    // Nothing left to expire: a second run deletes nothing.
    assert_eq!(sweep.sweep().await.unwrap(), Expired::default());

    // As a poller task: a message that expires comes and goes.
    let fast = ExpirySweep::new(store.clone(), Message::expiry, Duration::from_millis(100)).batch(10);
    let poller = Poller::new(valkey.clone(), "expiry").task(fast).start().await.unwrap();
    let mut late = message("m-6", "c2", 0);
    late.sent_at = now_ms() - 30 * DAY_MS + 300;
    assert_eq!(store.create(&late).await.unwrap(), PutOutcome::Written { version: 1 });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while store.get_in("c2", "m-6").await.unwrap().is_some() {
        assert!(tokio::time::Instant::now() < deadline, "the poller's sweep never deleted m-6");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(store.get_in("c2", "m-5").await.unwrap().is_some(), "not yet expired");
    poller.shutdown().await;
    assert!(store.verify(&opts).await.unwrap().differences.is_empty());
}

/// Damage at the head of a scope's expired entries (index entries without
/// their document, a corrupt document, an entry the document contradicts)
/// never hides the expired documents behind it: orphans are removed, the
/// rest is stepped over and counted, and the run goes on. Strays removed
/// only while their document is absent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damage_at_the_head_does_not_stop_the_sweep() {
    let s = server();
    let valkey = Valkey::connect_url(s.url(), unique_prefix("expiry-damage"), WriteOptions::default()).await.unwrap();
    let mut raw = ConnectionManager::new(microdcs_valkey::redis::Client::open(s.url()).unwrap()).await.unwrap();
    let store = Chat::open(valkey.clone()).store::<Message>();
    let p = valkey.prefix().clone();
    let key = Message::SPEC.groups[Message::expiry("c1").index()].key;
    let index = microdcs_valkey::schema::KeyTemplate::parse(key).unwrap().render(&p, &["c1"]).unwrap();
    // Behind everything: two expired messages.
    for m in [message("m-1", "c1", 31), message("m-2", "c1", 32)] {
        assert_eq!(store.create(&m).await.unwrap(), PutOutcome::Written { version: 1 });
    }
    // At the head: three entries without documents, a corrupt document,
    // and a fresh message the index wrongly calls expired.
    for (i, ghost) in ["ghost-1", "ghost-2", "ghost-3"].iter().enumerate() {
        let _: () = raw.zadd(&index, *ghost, i).await.unwrap();
    }
    assert_eq!(store.create(&message("m-bad", "c1", 50)).await.unwrap(), PutOutcome::Written { version: 1 });
    let bad = Message::key(&p, "m-bad").unwrap();
    let _: () = raw.hset(&bad, "v", "not-a-version").await.unwrap();
    assert_eq!(store.create(&message("m-new", "c1", 1)).await.unwrap(), PutOutcome::Written { version: 1 });
    let _: () = raw.zadd(&index, "m-new", 5).await.unwrap();

    // A batch of 3: the orphans do not count against it, the corrupt and
    // the contradicted entries are stepped over, and both expired
    // messages behind them are deleted in this one run.
    let sweep = ExpirySweep::new(store.clone(), Message::expiry, Duration::from_secs(3600)).batch(3);
    assert_eq!(
        sweep.sweep().await.unwrap(),
        Expired { deleted: 2, kept: 1, orphans: 3, damaged: 1, ..Expired::default() }
    );
    assert_eq!(store.get_in("c1", "m-1").await.unwrap(), None);
    assert_eq!(store.get_in("c1", "m-2").await.unwrap(), None);
    let left: Vec<String> = raw.zrange(&index, 0, -1).await.unwrap();
    assert_eq!(left, vec!["m-new".to_owned(), "m-bad".to_owned()], "orphans removed, the rest left in place");
    let fields: std::collections::HashMap<String, String> = raw.hgetall(&bad).await.unwrap();
    assert_eq!(fields.get("v").map(String::as_str), Some("not-a-version"), "a damaged document is not touched");
    // The next run finds the same two and nothing else.
    assert_eq!(sweep.sweep().await.unwrap(), Expired { kept: 1, damaged: 1, ..Expired::default() });

    // With a batch of 1, one entry left in place ends the scope's run:
    // the bound holds whatever the head holds.
    let one = ExpirySweep::new(store.clone(), Message::expiry, Duration::from_secs(3600)).batch(1);
    assert_eq!(one.sweep().await.unwrap(), Expired { kept: 1, ..Expired::default() });
    // And the next runs start past what it left: a head of damage as long
    // as a run still lets the expired message behind it go, then the runs
    // start over at the head.
    assert_eq!(store.create(&message("m-3", "c1", 40)).await.unwrap(), PutOutcome::Written { version: 1 });
    assert_eq!(one.sweep().await.unwrap(), Expired { damaged: 1, ..Expired::default() });
    assert_eq!(one.sweep().await.unwrap(), Expired { deleted: 1, ..Expired::default() });
    assert_eq!(store.get_in("c1", "m-3").await.unwrap(), None);
    assert_eq!(one.sweep().await.unwrap(), Expired::default());
    assert_eq!(one.sweep().await.unwrap(), Expired { kept: 1, ..Expired::default() });

    // An index that is not sorted has no expiry order: refused.
    let unsorted = ExpirySweep::new(store.clone(), |c: &str| Message::by_text(c, "x"), Duration::from_secs(3600));
    assert!(matches!(unsorted.sweep().await, Err(microdcs_valkey::Error::InvalidArgument(_))));
    // An index of another scope than the one given is refused.
    let wrong = ExpirySweep::new(store.clone(), |_: &str| Message::expiry("c9"), Duration::from_secs(3600));
    assert!(matches!(wrong.sweep().await, Err(microdcs_valkey::Error::InvalidArgument(_))));
}

/// A post kept 30 days, in one set per tag: a multi-valued index whose
/// values the hash keeps, so the delete script knows which sets to leave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(
    kind = "post",
    sorted(key = "post:expiry:{scope}", score = expires_at(), name = "expiry"),
    each(key = "post:bytag:{scope}:{tag}", tag = tags, name = "by_tag")
)]
struct Post {
    id: String,
    scope: String,
    tags: Vec<String>,
    /// Unix milliseconds.
    sent_at: i64,
}

impl Post {
    fn expires_at(&self) -> i64 {
        self.sent_at + 30 * DAY_MS
    }
}

keyspace! {
    Board {
        documents: [Post],
        scopes: set("scopes"),
    }
}

fn post(id: &str, scope: &str, age_days: i64) -> Post {
    Post { id: id.into(), scope: scope.into(), tags: vec!["news".into()], sent_at: now_ms() - age_days * DAY_MS }
}

/// Every scope's expired posts but `broken`, which the caller damages.
async fn board(
    s: &microdcs_tests::ValkeyServer,
    name: &str,
) -> (Valkey, ConnectionManager, microdcs_valkey::Store<Post>) {
    let valkey = Valkey::connect_url(s.url(), unique_prefix(name), WriteOptions::default()).await.unwrap();
    let raw = ConnectionManager::new(microdcs_valkey::redis::Client::open(s.url()).unwrap()).await.unwrap();
    let store = Board::open(valkey.clone()).store::<Post>();
    // In each of four scopes: the oldest expired post at the head, one
    // more expired behind it, and a fresh one.
    for c in ["b1", "b2", "b3", "b4"] {
        for p in [post(&format!("{c}-old"), c, 50), post(&format!("{c}-exp"), c, 31), post(&format!("{c}-new"), c, 1)] {
            assert_eq!(store.create(&p).await.unwrap(), PutOutcome::Written { version: 1 });
        }
    }
    (valkey, raw, store)
}

/// The posts left in the four scopes.
async fn posts_left(store: &microdcs_valkey::Store<Post>) -> Vec<String> {
    let mut left = Vec::new();
    for c in ["b1", "b2", "b3", "b4"] {
        for id in ["old", "exp", "new"] {
            if store.get_in(c, &format!("{c}-{id}")).await.unwrap().is_some() {
                left.push(format!("{c}-{id}"));
            }
        }
    }
    left
}

/// An expired post whose stored tag values (the hash field the delete
/// script reads to leave its tag sets) are damaged: the sweep cannot
/// delete it without leaving its tag entries behind, so it leaves it in
/// place and counts it, and every other expired post, in its own scope
/// behind it and in every other scope, is deleted in the same run, and in
/// every run after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_tag_field_is_counted_and_stepped_over() {
    let s = server();
    let (valkey, mut raw, store) = board(&s, "expiry-each").await;
    let p = valkey.prefix().clone();
    let bad = Post::key(&p, "b2-old").unwrap();
    let _: () = raw.hset(&bad, "by_tag", "ne:ws").await.unwrap();

    let sweep = ExpirySweep::new(store.clone(), Post::expiry, Duration::from_secs(3600));
    let done = sweep.sweep().await.unwrap_or_else(|e| panic!("the sweep ended on one damaged post: {e}"));
    assert_eq!(done, Expired { deleted: 7, damaged: 1, ..Expired::default() });
    assert_eq!(valkey.metrics().sweep_damaged(), 1, "metered");
    assert_eq!(posts_left(&store).await, ["b1-new", "b2-old", "b2-new", "b3-new", "b4-new"]);
    // Left as it was: the damaged field, and its entry in the tag set.
    let field: Option<String> = raw.hget(&bad, "by_tag").await.unwrap();
    assert_eq!(field.as_deref(), Some("ne:ws"));
    let tagged = store.ids(Post::by_tag("b2", "news"), Page::first(10)).await.unwrap().ids;
    assert!(tagged.contains(&"b2-old".to_owned()), "{tagged:?}");
    // The next run meets it again, counts it again, and ends well.
    assert_eq!(sweep.sweep().await.unwrap(), Expired { damaged: 1, ..Expired::default() });
    assert_eq!(valkey.metrics().sweep_damaged(), 2);
    // Verify names it; once rebuilt, the next run deletes it.
    let opts = MaintenanceOptions::default();
    assert!(!store.verify(&opts).await.unwrap().differences.is_empty());
    let _ = store.rebuild(&opts).await.unwrap();
    assert_eq!(sweep.sweep().await.unwrap(), Expired { deleted: 1, ..Expired::default() });
    assert!(store.verify(&opts).await.unwrap().differences.is_empty());
}

/// Members of the scope registry that name no scope (an empty member, one
/// too long to be a scope) and a scope whose expiry index holds another
/// type are counted and stepped over: every other scope is still swept,
/// whatever order the set hands them out in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_scopes_do_not_stop_the_other_scopes() {
    let s = server();
    let (valkey, mut raw, store) = board(&s, "expiry-registry").await;
    let p = valkey.prefix().clone();
    let registry = format!("{}:scopes", p.as_str());
    let _: () = raw.sadd(&registry, "").await.unwrap();
    let _: () = raw.sadd(&registry, "x".repeat(5000)).await.unwrap();
    let b3 = microdcs_valkey::schema::KeyTemplate::parse("post:expiry:{scope}").unwrap().render(&p, &["b3"]).unwrap();
    let _: () = raw.del(&b3).await.unwrap();
    let _: () = raw.set(&b3, "garbage").await.unwrap();

    let sweep = ExpirySweep::new(store.clone(), Post::expiry, Duration::from_secs(3600));
    let done = sweep.sweep().await.unwrap_or_else(|e| panic!("the sweep ended on a damaged scope: {e}"));
    assert_eq!(done, Expired { deleted: 6, damaged_scopes: 3, ..Expired::default() });
    assert_eq!(valkey.metrics().sweep_damaged(), 3, "metered");
    assert_eq!(posts_left(&store).await, ["b1-new", "b2-new", "b3-old", "b3-exp", "b3-new", "b4-new"]);
    assert_eq!(sweep.sweep().await.unwrap(), Expired { damaged_scopes: 3, ..Expired::default() });
    // The damaged index rebuilt, its scope's expired posts go too; the
    // registry's stray members stay counted.
    let _ = store.rebuild(&MaintenanceOptions::default()).await.unwrap();
    assert_eq!(sweep.sweep().await.unwrap(), Expired { deleted: 2, damaged_scopes: 2, ..Expired::default() });
    assert_eq!(posts_left(&store).await, ["b1-new", "b2-new", "b3-new", "b4-new"]);
}
