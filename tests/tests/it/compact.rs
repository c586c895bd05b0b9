//! What a document's hash holds: the id stays in the key (not repeated in
//! the stored JSON), an unscoped type's hash has no `scope` field, a small
//! document stays in the server's compact hash; hashes written the earlier
//! way are read and written as before, and damage is still refused.

use microdcs_examples::miroir::{Idempotency, Miroir, TaskStore};
use microdcs_tests::fixtures::{JobResponse, Plant};
use microdcs_tests::{created, server, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{Error, Expect, PutOutcome, Valkey, config::WriteOptions, inspect::Inspector};

async fn setup(name: &str) -> (microdcs_valkey::testing::ValkeyServer, Valkey, ConnectionManager) {
    let s = server();
    let valkey = Valkey::connect_url(s.url(), unique_prefix(name), WriteOptions::default()).await.unwrap();
    let raw = ConnectionManager::new(redis::Client::open(s.url()).unwrap()).await.unwrap();
    (s, valkey, raw)
}

async fn fields(raw: &mut ConnectionManager, key: &str) -> Vec<(String, String)> {
    let mut h: Vec<(String, String)> = redis::cmd("HGETALL").arg(key).query_async(raw).await.unwrap();
    h.sort();
    h
}

fn entry(id: &str) -> Idempotency {
    Idempotency { id: id.into(), status: 200, body: "{\"ok\":true,\"task\":42}".into() }
}

#[tokio::test]
async fn a_small_unscoped_document_is_a_compact_hash_of_three_fields() {
    let (_s, valkey, mut raw) = setup("compact-small").await;
    let store = TaskStore::new(valkey.clone()).unwrap().table::<Idempotency>();
    let doc = entry("req-00000001-7f3c9a2e");
    assert_eq!(created(&store, &doc).await, 1);
    let key = store.key(&doc.id).unwrap();
    let h = fields(&mut raw, &key).await;
    let names: Vec<&str> = h.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(names, ["doc", "ops", "v"], "{h:?}");
    // The stored text, pinned: it crosses releases. The id is the key's.
    assert_eq!(h[0].1, r#" {"status":200,"body":"{\"ok\":true,\"task\":42}"}"#);
    let encoding: String = redis::cmd("OBJECT").arg("ENCODING").arg(&key).query_async(&mut raw).await.unwrap();
    assert_eq!(encoding, "listpack", "a small document stays a compact hash on a default server");

    let got = store.get(&doc.id).await.unwrap().expect("stored");
    assert_eq!((got.doc.clone(), got.version, got.scope.as_str()), (doc.clone(), 1, "_"));
    // Written back from its read, and overwritten: still no scope, no id.
    let next = Idempotency { status: 201, ..doc.clone() };
    assert!(matches!(store.put(&next, Expect::Version(1)).await, Ok(PutOutcome::Written { version: 2 })));
    let h = fields(&mut raw, &key).await;
    assert_eq!(h.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>(), ["doc", "ops", "v"]);
    assert_eq!(store.get(&doc.id).await.unwrap().unwrap().doc, next);

    // The inspector shows the whole document, its id included.
    let ks = Miroir::open(valkey.clone());
    let view = Inspector::new(&ks).document("idemp", &doc.id).await.unwrap().expect("seen");
    assert_eq!(view.scope.as_deref(), Some("_"));
    let json = view.document.expect("decoded");
    assert_eq!(json["id"], doc.id.as_str(), "{json}");
    assert_eq!(json["status"], 201, "{json}");
}

#[tokio::test]
async fn ids_that_need_escaping_leave_the_text_and_come_back() {
    let (_s, valkey, mut raw) = setup("compact-escaping").await;
    let store = TaskStore::new(valkey.clone()).unwrap().table::<Idempotency>();
    for id in ["a:b \"q\" \\ ü", "tab\there", "{\"id\":\"x\"}", "\u{2028}line"] {
        let doc = entry(id);
        assert_eq!(created(&store, &doc).await, 1, "{id:?}");
        let text: String =
            redis::cmd("HGET").arg(store.key(id).unwrap()).arg("doc").query_async(&mut raw).await.unwrap();
        assert!(text.starts_with(" {\"status\":200,"), "{id:?}: {text}");
        let back = store.get(id).await.unwrap().expect("stored");
        assert_eq!((back.doc, back.id.as_str()), (doc, id));
    }
}

#[tokio::test]
async fn hashes_written_the_earlier_way_read_and_write_as_before() {
    let (_s, valkey, mut raw) = setup("compact-earlier").await;
    let store = TaskStore::new(valkey.clone()).unwrap().table::<Idempotency>();
    let doc = entry("req-old");
    let key = store.key(&doc.id).unwrap();
    // As an earlier release stored it: the scope `_` and the whole text.
    let () = redis::cmd("HSET")
        .arg(&key)
        .arg("v")
        .arg("1")
        .arg("scope")
        .arg("_")
        .arg("ops")
        .arg("aaaaaaaaaaaa")
        .arg("doc")
        .arg(serde_json::to_string(&doc).unwrap())
        .query_async(&mut raw)
        .await
        .unwrap();
    let got = store.get(&doc.id).await.unwrap().expect("read");
    assert_eq!((got.doc.clone(), got.version), (doc.clone(), 1));
    let next = Idempotency { body: "later".into(), ..doc.clone() };
    assert!(matches!(store.put(&next, Expect::Version(1)).await, Ok(PutOutcome::Written { version: 2 })));
    let h = fields(&mut raw, &key).await;
    assert!(h.contains(&("scope".into(), "_".into())), "{h:?}");
    assert!(h.contains(&("doc".into(), r#" {"status":200,"body":"later"}"#.into())), "{h:?}");
    assert_eq!(store.get(&doc.id).await.unwrap().unwrap().doc, next);

    // A scoped type keeps its scope field; its text leaves the id out too.
    let responses = Plant::open(valkey.clone()).store::<JobResponse>();
    let r = JobResponse::new("r-1", "s1", "o-1", &["Running"]);
    created(&responses, &r).await;
    let h = fields(&mut raw, &responses.key("r-1").unwrap()).await;
    assert!(h.contains(&("scope".into(), "s1".into())), "{h:?}");
    let text = &h.iter().find(|(f, _)| f == "doc").unwrap().1;
    assert!(text.starts_with(r#" {"scope":"s1","#) && !text.contains("r-1"), "{text}");
    assert_eq!(responses.get("r-1").await.unwrap().unwrap().doc, r);
}

#[tokio::test]
async fn damage_is_still_refused_and_left_alone() {
    let (_s, valkey, mut raw) = setup("compact-damage").await;
    let store = TaskStore::new(valkey.clone()).unwrap().table::<Idempotency>();
    let doc = entry("req-1");
    created(&store, &doc).await;
    let key = store.key(&doc.id).unwrap();

    // A scope no unscoped document has.
    let () = redis::cmd("HSET").arg(&key).arg("scope").arg("tenant-a").query_async(&mut raw).await.unwrap();
    let before = fields(&mut raw, &key).await;
    let err = store.get(&doc.id).await.unwrap_err();
    assert!(err.is_corrupt(), "{err:?}");
    let err = store.put(&doc, Expect::Any).await.unwrap_err();
    assert!(matches!(err, Error::WrongScope { .. }), "{err:?}");
    assert_eq!(fields(&mut raw, &key).await, before, "nothing written");
    let () = redis::cmd("HDEL").arg(&key).arg("scope").query_async(&mut raw).await.unwrap();

    // A text marked as stored without its id that holds one anyway.
    let () = redis::cmd("HSET")
        .arg(&key)
        .arg("doc")
        .arg(r#" {"id":"req-1","status":200,"body":""}"#)
        .query_async(&mut raw)
        .await
        .unwrap();
    let err = store.get(&doc.id).await.unwrap_err();
    assert!(matches!(err, Error::Codec { action: "decode", .. }) && err.is_corrupt(), "{err:?}");

    // A text stored without its id is the document its key names: a hash
    // copied to another key reads as that key's (a whole text would be
    // refused: see the store's identity test).
    let () = redis::cmd("HSET")
        .arg(&key)
        .arg("doc")
        .arg(r#" {"status":200,"body":""}"#)
        .query_async(&mut raw)
        .await
        .unwrap();
    let other = store.key("req-2").unwrap();
    let _: i64 = redis::cmd("COPY").arg(&key).arg(&other).query_async(&mut raw).await.unwrap();
    assert_eq!(store.get("req-2").await.unwrap().expect("copied").doc.id, "req-2");

    // No version and no scope, only a text: not a document, refused.
    let () = redis::cmd("HDEL").arg(&key).arg("v").arg("ops").query_async(&mut raw).await.unwrap();
    let before = fields(&mut raw, &key).await;
    let err = store.put(&doc, Expect::Any).await.unwrap_err();
    assert!(err.is_corrupt(), "{err:?}");
    assert_eq!(fields(&mut raw, &key).await, before, "nothing written");
}
