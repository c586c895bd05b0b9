//! Step effects on the keyspace's families: a chat message stored with its
//! sequence number, unread counts, membership and recency in one script,
//! exactly once (a retry by operation id applies none again), checked
//! before any write (a corrupt counter, a family of another slot, another
//! prefix), on one server and on a one-node cluster, which refuses any
//! script whose keys span slots.

use microdcs_tests::server;
use microdcs_valkey::config::Secret;
use microdcs_valkey::redis::AsyncCommands;
use microdcs_valkey::testing::{ValkeyCluster, unique_prefix};
use microdcs_valkey::{
    Document, Error, KeyspaceHandle, MicroDcsConfig, Store, Valkey, config::Placement, config::ValkeyConfig, keyspace,
    store::Effects, store::StepOutcome,
};
use serde::{Deserialize, Serialize};

/// A chat message, per conversation (the scope): its number in the
/// conversation comes from the `seq` counter in the same script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "message", key = "msg:{#scope}:{id}", outbox(stream = "chat:work:{#scope}"))]
struct Message {
    id: String,
    scope: String,
    from: String,
    text: String,
}

/// A read receipt: a plain document type, no outbox, so no step; its
/// writes carry family effects through `Store::write`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "receipt", key = "receipt:{#scope}:{id}")]
struct Receipt {
    id: String,
    scope: String,
    reader: String,
    upto: u64,
}

keyspace! {
    Chat {
        shard: scope,
        documents: [Message, Receipt],
        seq: counter("chat:seq:{#scope}"),
        unread: hash("chat:unread:{#scope}"),
        members: set("chat:members:{#scope}"),
        recent: zset("chat:recent:{#scope}", ttl = "30s"),
        total: counter("chat:total"),
        work: stream("chat:work:{#scope}"),
    }
}

fn message(id: &str, conversation: &str, from: &str) -> Message {
    Message { id: id.into(), scope: conversation.into(), from: from.into(), text: format!("hello from {from}") }
}

/// Sends one message the way the guide shows (chapter 8): the document, the next
/// sequence number, an unread count for each other member, the sender's
/// membership and the conversation's recency, all in the step.
async fn send(
    chat: &KeyspaceHandle<Chat>,
    store: &Store<Message>,
    m: &Message,
    others: &[&str],
    op: &str,
) -> StepOutcome {
    let unread = Chat::unread(chat, &m.scope).unwrap();
    let mut effects = Effects::new()
        .incr(&Chat::seq(chat, &m.scope).unwrap(), 1)
        .add(&Chat::members(chat, &m.scope).unwrap(), &m.from)
        .zadd(&Chat::recent(chat, &m.scope).unwrap(), &m.id, 1_000.0)
        .op(op);
    for o in others {
        effects = effects.hincr(&unread, o, 1);
    }
    store.step(None, m, &effects).await.unwrap()
}

async fn everything(connection_string: String, name: &str) {
    let valkey = Valkey::connect(&config(connection_string.clone(), unique_prefix(name).as_str())).await.unwrap();
    let chat = Chat::open(valkey.clone());
    let store = chat.store::<Message>();
    let mut raw = valkey.connection();
    let c = "conv-1";

    // Three messages: numbered 1, 2, 3 by the counter, unread counts per
    // member, each returned by the step.
    let out = send(&chat, &store, &message("m-1", c, "ann"), &["bob", "cy"], "op-m1-000001").await;
    assert_eq!(out, StepOutcome::Written { version: 1, values: vec![1, 1, 1, 1, 1] });
    let out = send(&chat, &store, &message("m-2", c, "bob"), &["ann", "cy"], "op-m2-000001").await;
    assert_eq!(out, StepOutcome::Written { version: 1, values: vec![2, 1, 1, 1, 2] });
    let out = send(&chat, &store, &message("m-3", c, "ann"), &["bob", "cy"], "op-m3-000001").await;
    // ann is a member already (0); bob has 1 + 1, cy 2 + 1.
    assert_eq!(out, StepOutcome::Written { version: 1, values: vec![3, 0, 1, 2, 3] });

    // A retry of m-3 by its operation id applies nothing again: the
    // counters stay, and the step reports its write without values.
    let retry = send(&chat, &store, &message("m-3", c, "ann"), &["bob", "cy"], "op-m3-000001").await;
    assert!(matches!(retry, StepOutcome::Written { version: 1, ref values } if values.is_empty()), "{retry:?}");
    let seq = Chat::seq(&chat, c).unwrap();
    assert_eq!(seq.get().await.unwrap(), 3);
    let unread = Chat::unread(&chat, c).unwrap();
    assert_eq!(unread.get("cy").await.unwrap().as_deref(), Some("3"));
    assert_eq!(unread.get("bob").await.unwrap().as_deref(), Some("2"));
    let members = Chat::members(&chat, c).unwrap();
    assert!(members.contains("ann").await.unwrap() && members.contains("bob").await.unwrap());
    // The sorted set's declared lifetime is given again by the step.
    let recent = Chat::recent(&chat, c).unwrap();
    let ttl: i64 = raw.pttl(recent.key()).await.unwrap();
    assert!(ttl > 0 && ttl <= 30_000, "{ttl}");

    // Removes: a member leaves, a message leaves the recent set.
    let leave = Effects::new().remove(&members, "bob").zrem(&recent, "m-1").remove(&members, "nobody");
    let out = store.step(None, &message("m-4", c, "bob"), &leave).await.unwrap();
    assert_eq!(out, StepOutcome::Written { version: 1, values: vec![1, 1, 0] });
    assert!(!members.contains("bob").await.unwrap());

    // A corrupt counter: the step is refused before anything is written,
    // naming the counter's key.
    let _: () = raw.set(seq.key(), "seven").await.unwrap();
    let e = store
        .step(None, &message("m-5", c, "cy"), &Effects::new().incr(&seq, 1).hincr(&unread, "ann", 1))
        .await
        .expect_err("a counter that is not an integer");
    assert!(matches!(&e, Error::Corrupt { key, .. } if key == seq.key()), "{e:?}");
    assert_eq!(store.get_in(c, "m-5").await.unwrap(), None, "no document");
    assert_eq!(unread.get("ann").await.unwrap().as_deref(), Some("1"), "no increment");
    // A counter with a leading zero is no integer to the server either.
    let _: () = raw.set(seq.key(), "07").await.unwrap();
    let e = store.step(None, &message("m-5", c, "cy"), &Effects::new().incr(&seq, 1)).await.unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }), "{e:?}");
    let _: () = raw.set(seq.key(), "3").await.unwrap();
    // A key of another type: the server's type error, before any write.
    let _: () = raw.del(members.key()).await.unwrap();
    let _: () = raw.hset(members.key(), "f", "v").await.unwrap();
    let e = store.step(None, &message("m-6", c, "cy"), &Effects::new().incr(&seq, 1).add(&members, "cy")).await;
    assert!(matches!(&e, Err(Error::WrongType { key, .. }) if key == members.key()), "names the set: {e:?}");
    assert_eq!(store.get_in(c, "m-6").await.unwrap(), None);
    assert_eq!(seq.get().await.unwrap(), 3, "the increment before it was not applied either");

    // Counts past 2^53 come back exact (a Lua number would round them).
    let _: () = raw.set(seq.key(), "9007199254740992").await.unwrap();
    let out = store.step(None, &message("m-big", c, "cy"), &Effects::new().incr(&seq, 1)).await.unwrap();
    assert_eq!(out, StepOutcome::Written { version: 1, values: vec![9_007_199_254_740_993] });
    // A valid count beyond 16 digits is out of an increment's range: the
    // caller's argument error, not damage; nothing written.
    let _: () = raw.set(seq.key(), "12345678901234567").await.unwrap();
    let e = store.step(None, &message("m-6", c, "cy"), &Effects::new().incr(&seq, 1)).await.unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains(seq.key())), "{e:?}");
    assert_eq!(store.get_in(c, "m-6").await.unwrap(), None);
    // Beyond a 64-bit integer it is damage.
    let _: () = raw.set(seq.key(), "99999999999999999999").await.unwrap();
    let e = store.step(None, &message("m-6", c, "cy"), &Effects::new().incr(&seq, 1)).await.unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }), "{e:?}");
    let _: () = raw.set(seq.key(), "3").await.unwrap();

    // Bounds, before anything is sent: an increment too large to be
    // checked for overflow, a score that is not finite, too many effects.
    let big = Effects::new().incr(&seq, i64::MAX);
    let e = store.step(None, &message("m-7", c, "cy"), &big).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let nan = Effects::new().zadd(&recent, "m-7", f64::NAN);
    assert!(matches!(store.step(None, &message("m-7", c, "cy"), &nan).await, Err(Error::InvalidArgument(_))));
    let many = (0..65).fold(Effects::new(), |e, _| e.incr(&seq, 1));
    assert!(matches!(store.step(None, &message("m-7", c, "cy"), &many).await, Err(Error::InvalidArgument(_))));
    // A family handle of another prefix does not belong to this store.
    let other = Valkey::connect(&config(connection_string, unique_prefix("fx-other").as_str())).await.unwrap();
    let other = Chat::open(other);
    let foreign = Effects::new().incr(&Chat::seq(&other, c).unwrap(), 1);
    assert!(matches!(store.step(None, &message("m-7", c, "cy"), &foreign).await, Err(Error::InvalidArgument(_))));
    assert_eq!(store.get_in(c, "m-7").await.unwrap(), None);

    // A family outside the scope's slot: refused before anything is sent,
    // on one server too (the keyspace is sharded, so it would be on a
    // cluster).
    let total = Chat::total(&chat).unwrap();
    let out = store.step(None, &message("m-8", c, "cy"), &Effects::new().incr(&total, 1)).await;
    assert!(matches!(&out, Err(Error::InvalidArgument(m)) if m.contains("slot")), "{out:?}");
    assert_eq!(store.get_in(c, "m-8").await.unwrap(), None);
    assert_eq!(total.get().await.unwrap(), 0);

    plain_writes(&chat, &mut raw).await;
}

/// A type without an outbox writes with family effects through
/// `Store::write`, the guide's idiom: exactly once by operation id, an
/// update from a read, `write_in_place`, and no work entries or event.
async fn plain_writes(chat: &KeyspaceHandle<Chat>, raw: &mut microdcs_valkey::client::Connection) {
    let receipts = chat.store::<Receipt>();
    let c = "conv-2";
    let unread = Chat::unread(chat, c).unwrap();
    let _: () = raw.hset(unread.key(), "ann", 5).await.unwrap();
    let seen = Chat::seq(chat, c).unwrap();
    let r = Receipt { id: "ann".into(), scope: c.into(), reader: "ann".into(), upto: 5 };
    // ann read up to 5: her unread count drops by 5 with the receipt.
    let effects = Effects::new().hincr(&unread, "ann", -5).incr(&seen, 1).op("op-rcpt-00001");
    let out = receipts.write(None, &r, &effects).await.unwrap();
    assert_eq!(out, StepOutcome::Written { version: 1, values: vec![0, 1] });
    // The same write again (its reply lost): recognised, nothing applied.
    let again = receipts.write(None, &r, &effects).await.unwrap();
    assert!(matches!(again, StepOutcome::Written { version: 1, ref values } if values.is_empty()), "{again:?}");
    assert_eq!(unread.get("ann").await.unwrap().as_deref(), Some("0"));
    assert_eq!(seen.get().await.unwrap(), 1);
    // An update from a read, and one in place: each applies its effects.
    let read = receipts.get_in(c, "ann").await.unwrap().expect("written");
    let next = Receipt { upto: 7, ..r.clone() };
    let out = receipts.write(Some(&read), &next, &Effects::new().incr(&seen, 1)).await.unwrap();
    assert_eq!(out, StepOutcome::Written { version: 2, values: vec![2] });
    // The read is stale now: a conflict, and the effect is not applied.
    let out = receipts.write(Some(&read), &next, &Effects::new().incr(&seen, 1)).await.unwrap();
    assert_eq!(out, StepOutcome::Conflict { current: 2 });
    assert_eq!(seen.get().await.unwrap(), 2);
    let mut read = receipts.get_in(c, "ann").await.unwrap().expect("written");
    let out = receipts.write_in_place(&mut read, Receipt { upto: 9, ..r.clone() }, &Effects::new()).await.unwrap();
    assert_eq!(out, StepOutcome::Written { version: 3, values: vec![] });
    assert_eq!((read.version, read.doc.upto), (3, 9));
    // No outbox: work entries and events are refused before anything is sent.
    let work = Effects::new().incr(&seen, 1).work(microdcs_valkey::store::WorkEntry::new().field("a", 1));
    let e = receipts.write(Some(&read), &Receipt { upto: 10, ..r.clone() }, &work).await.unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("no outbox")), "{e:?}");
    let event = Effects::new().event(microdcs_valkey::store::Event::id("e-1"));
    let e = receipts.write(Some(&read), &Receipt { upto: 10, ..r.clone() }, &event).await.unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(_)), "{e:?}");
    assert_eq!(seen.get().await.unwrap(), 2);
    assert_eq!(receipts.get_in(c, "ann").await.unwrap().unwrap().version, 3);
    // A corrupt counter: refused in the script, nothing written.
    let _: () = raw.set(seen.key(), "x").await.unwrap();
    let e = receipts.write(Some(&read), &Receipt { upto: 11, ..r }, &Effects::new().incr(&seen, 1)).await;
    assert!(matches!(&e, Err(Error::Corrupt { key, .. }) if key == seen.key()), "{e:?}");
    assert_eq!(receipts.get_in(c, "ann").await.unwrap().unwrap().doc.upto, 9);
}

fn config(connection_string: String, prefix: &str) -> ValkeyConfig {
    ValkeyConfig {
        connection_string: Secret::new(connection_string),
        key_prefix: prefix.to_owned(),
        placement: Placement::Sharded,
        ..MicroDcsConfig::default().valkey
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_effects_on_one_server_and_a_cluster_node() {
    let one = server();
    everything(one.host_port(), "fx-one").await;
    let node = ValkeyCluster::start_local(1, 0).unwrap_or_else(|e| panic!("{e}"));
    everything(node.connection_string(), "fx-node").await;
}
