//! Ids unique per scope (`{scope}` in the document key): two tenants may
//! hold the same id, reads name the scope, and every index, tombstone and
//! maintenance pass keeps the two apart. Against a real Valkey.

use microdcs_tests::fixtures::{Extras, Ticket};
use microdcs_tests::{ValkeyServer, server, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{
    Error, Expect, Page, PutOutcome, Store, Valkey, config::WriteOptions, store::DeleteExpect, store::DeleteOutcome,
    store::DiffKind, store::MaintenanceOptions,
};

fn ticket(scope: &str, id: &str, reference: &str, status: &str, opened: i64) -> Ticket {
    Ticket { id: id.into(), scope: scope.into(), reference: reference.into(), status: status.into(), opened }
}

struct Env {
    _server: ValkeyServer,
    valkey: Valkey,
    store: Store<Ticket>,
    raw: ConnectionManager,
}

async fn env(name: &str) -> Env {
    let server = server();
    let valkey = Valkey::connect_url(server.url(), unique_prefix(name), WriteOptions::default())
        .await
        .unwrap_or_else(|e| server.fail("connect", &e));
    let raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let store = Extras::open(valkey.clone()).store::<Ticket>();
    Env { _server: server, valkey, store, raw }
}

#[tokio::test]
async fn two_tenants_hold_the_same_id_apart() {
    let e = env("tenants-basic").await;
    let s = &e.store;
    let a = ticket("acme", "t-1", "A-100", "open", 10);
    let b = ticket("blue", "t-1", "B-7", "open", 20);
    assert_eq!(s.create(&a).await.unwrap(), PutOutcome::Written { version: 1 });
    assert_eq!(s.create(&b).await.unwrap(), PutOutcome::Written { version: 1 }, "another tenant's t-1");
    assert_eq!(s.get_in("acme", "t-1").await.unwrap().unwrap().doc, a);
    assert_eq!(s.get_in("blue", "t-1").await.unwrap().unwrap().doc, b);
    assert!(s.get_in("cyan", "t-1").await.unwrap().is_none());
    // An id alone names no document.
    assert!(matches!(s.get("t-1").await, Err(Error::InvalidArgument(_))));
    assert!(matches!(s.key("t-1"), Err(Error::InvalidArgument(_))));
    assert!(matches!(s.get_many(&["t-1"]).await, Err(Error::InvalidArgument(_))));
    assert_ne!(s.key_in("acme", "t-1").unwrap(), s.key_in("blue", "t-1").unwrap());
    let many = s.get_many_in("blue", &["t-1", "t-2"]).await.unwrap();
    assert_eq!(many.len(), 2);
    assert_eq!(many[0].as_ref().unwrap().doc, b);
    assert!(many[1].is_none());

    // Every index is the tenant's.
    assert_eq!(s.find(Ticket::by_reference("acme", "A-100")).await.unwrap().unwrap().doc, a);
    assert_eq!(s.find(Ticket::by_reference("blue", "B-7")).await.unwrap().unwrap().doc, b);
    assert!(s.find(Ticket::by_reference("blue", "A-100")).await.unwrap().is_none());
    assert_eq!(s.list("acme", Page::first(10)).await.unwrap().ids, ["t-1"]);
    let docs = s.docs(Ticket::by_status("blue", "open"), Page::first(10)).await.unwrap();
    assert_eq!(docs.documents.len(), 1);
    assert_eq!(docs.documents[0].doc, b);

    // An update and a claim stay in their tenant.
    let mut read = s.get_in("acme", "t-1").await.unwrap().unwrap();
    let closed = Ticket { status: "closed".into(), ..read.doc.clone() };
    assert_eq!(s.update_in_place(&mut read, closed).await.unwrap(), PutOutcome::Written { version: 2 });
    assert_eq!(s.get_in("blue", "t-1").await.unwrap().unwrap().doc.status, "open");
    let claimed = s
        .claim(Ticket::by_status("blue", "open"), |t| Some(Ticket { status: "taken".into(), ..t.clone() }))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((claimed.scope.as_str(), claimed.doc.status.as_str()), ("blue", "taken"));
    assert_eq!(s.get_in("acme", "t-1").await.unwrap().unwrap().doc.status, "closed");

    // A scan walks both.
    // A page may hold none of ours on a shared server: walk to the end.
    let (mut seen, mut cursor) = (Vec::new(), 0);
    loop {
        let page = s.scan(cursor, 100).await.unwrap();
        seen.extend(page.documents.iter().map(|d| (d.scope.clone(), d.id.clone())));
        match page.next {
            Some(next) => cursor = next,
            None => break,
        }
    }
    seen.sort();
    assert_eq!(seen, [("acme".to_owned(), "t-1".to_owned()), ("blue".to_owned(), "t-1".to_owned())]);
}

#[tokio::test]
async fn deletes_and_tombstones_are_per_tenant() {
    let e = env("tenants-delete").await;
    let s = &e.store;
    let a = ticket("acme", "t-1", "A-100", "open", 10);
    let b = ticket("blue", "t-1", "B-7", "open", 20);
    let _ = s.put(&a, Expect::Create).op("load-a").await.unwrap();
    let _ = s.put(&b, Expect::Create).op("load-b").await.unwrap();
    assert_eq!(
        s.delete_id("t-1", DeleteExpect::Any).in_scope("acme").await.unwrap(),
        DeleteOutcome::Deleted { version: 1 }
    );
    assert!(s.get_in("acme", "t-1").await.unwrap().is_none());
    assert_eq!(s.get_in("blue", "t-1").await.unwrap().unwrap().doc, b, "the other tenant's t-1 stays");
    assert!(s.find(Ticket::by_reference("acme", "A-100")).await.unwrap().is_none());
    assert!(s.list("acme", Page::first(10)).await.unwrap().ids.is_empty());
    // Each tenant's tombstone has its own key, which the accessor names.
    let (tomb_a, tomb_b) = (s.tombstone_key_in("acme", "t-1").unwrap(), s.tombstone_key_in("blue", "t-1").unwrap());
    assert_ne!(tomb_a, tomb_b);
    let mut raw = e.raw.clone();
    let there: (i64, i64) =
        redis::pipe().cmd("EXISTS").arg(&tomb_a).cmd("EXISTS").arg(&tomb_b).query_async(&mut raw).await.unwrap();
    assert_eq!(there, (1, 0), "acme's delete left acme's tombstone only");
    assert!(matches!(s.tombstone_key("t-1"), Err(Error::InvalidArgument(_))), "ids per scope need the scope");
    // acme's tombstone recognises acme's create; blue's delete is blue's.
    assert_eq!(s.put(&a, Expect::Create).op("load-a").await.unwrap(), PutOutcome::Written { version: 1 });
    assert!(s.get_in("acme", "t-1").await.unwrap().is_none(), "a retried create after the delete");
    let read = s.get_in("blue", "t-1").await.unwrap().unwrap();
    assert_eq!(s.delete(&read).await.unwrap(), DeleteOutcome::Deleted { version: 1 });
    assert_eq!(s.delete_id("t-1", DeleteExpect::Any).in_scope("blue").await.unwrap(), DeleteOutcome::NotFound);
    // Created again, each goes on from its own deleted version.
    assert_eq!(s.create(&a).await.unwrap(), PutOutcome::Written { version: 2 });
    assert!(matches!(s.delete_id("t-1", DeleteExpect::Any).await, Err(Error::InvalidArgument(_))));
}

#[tokio::test]
async fn verify_and_rebuild_keep_tenants_apart() {
    let mut e = env("tenants-verify").await;
    let s = &e.store;
    for scope in ["acme", "blue"] {
        for i in 0..20 {
            let t = ticket(scope, &format!("t-{i}"), &format!("{scope}-{i}"), "open", i);
            let _ = s.create(&t).await.unwrap();
        }
    }
    let opts = MaintenanceOptions::default();
    assert!(s.verify(&opts).await.unwrap().is_clean());
    // Damage: blue's t-3 leaves its status group; a ghost joins acme's list.
    let p = e.valkey.prefix().clone();
    let status = Ticket::by_status_key(&p, "blue", "open").unwrap();
    let () = redis::cmd("SREM").arg(&status).arg("t-3").query_async(&mut e.raw).await.unwrap();
    let list = Ticket::list_key(&p, "acme").unwrap();
    let () = redis::cmd("ZADD").arg(&list).arg(1).arg("ghost").query_async(&mut e.raw).await.unwrap();
    let report = s.verify(&opts).await.unwrap();
    let mut found: Vec<(String, String, String)> =
        report.differences.iter().map(|d| (d.key.clone(), d.id.clone(), format!("{:?}", d.kind))).collect();
    found.sort();
    assert_eq!(
        found,
        [
            (status.clone(), "t-3".to_owned(), format!("{:?}", DiffKind::Missing)),
            (list.clone(), "ghost".to_owned(), format!("{:?}", DiffKind::Orphan)),
        ],
        "{report:?}"
    );
    let _ = s.rebuild(&opts).await.unwrap();
    assert!(s.verify(&opts).await.unwrap().is_clean());
    let members: Vec<String> = redis::cmd("SMEMBERS").arg(&status).query_async(&mut e.raw).await.unwrap();
    assert!(members.contains(&"t-3".to_owned()));
    // A document deleted behind the store's back leaves its entries orphaned
    // in its own tenant only.
    let doc = s.key_in("acme", "t-7").unwrap();
    let () = redis::cmd("DEL").arg(&doc).query_async(&mut e.raw).await.unwrap();
    let report = s.verify(&opts).await.unwrap();
    assert!(!report.differences.is_empty());
    assert!(report.differences.iter().all(|d| d.id == "t-7" && !d.key.contains("blue")), "{report:?}");
    let _ = s.rebuild(&opts).await.unwrap();
    assert!(s.verify(&opts).await.unwrap().is_clean());
    assert!(s.get_in("blue", "t-7").await.unwrap().is_some());

    // The same id in both tenants, in one batch: acme's missing list entry
    // is put back with acme's score, not blue's.
    let mut t9 = s.get_in("acme", "t-9").await.unwrap().unwrap();
    let moved = Ticket { opened: 900, ..t9.doc.clone() };
    let _ = s.update_in_place(&mut t9, moved).await.unwrap();
    let () = redis::cmd("ZREM").arg(&list).arg("t-9").query_async(&mut e.raw).await.unwrap();
    let _ = s.rebuild(&opts).await.unwrap();
    let acme: Option<f64> = redis::cmd("ZSCORE").arg(&list).arg("t-9").query_async(&mut e.raw).await.unwrap();
    let blue_list = Ticket::list_key(&p, "blue").unwrap();
    let blue: Option<f64> = redis::cmd("ZSCORE").arg(&blue_list).arg("t-9").query_async(&mut e.raw).await.unwrap();
    assert_eq!((acme, blue), (Some(900.0), Some(9.0)));
    assert!(s.verify(&opts).await.unwrap().is_clean());

    // A hash under acme's key that says it is blue's: damage, named, never
    // "not there" (a write of it would go to blue's key).
    let acme_t5 = s.key_in("acme", "t-5").unwrap();
    let () = redis::cmd("DEL").arg(&acme_t5).query_async(&mut e.raw).await.unwrap();
    let copied: i64 =
        redis::cmd("COPY").arg(s.key_in("blue", "t-5").unwrap()).arg(&acme_t5).query_async(&mut e.raw).await.unwrap();
    assert_eq!(copied, 1);
    let err = s.get_in("acme", "t-5").await.unwrap_err();
    assert!(err.is_corrupt(), "{err:?}");
    let many = s.get_many_in("acme", &["t-5", "t-6"]).await;
    assert!(matches!(&many, Err(e) if e.is_corrupt()), "{many:?}");
    let report = s.verify(&opts).await.unwrap();
    assert!(
        report.differences.iter().any(|d| d.key == acme_t5 && d.kind.name() == "corrupt"),
        "{:#?}",
        report.differences
    );
    assert!(s.get_in("blue", "t-5").await.unwrap().is_some());
}
