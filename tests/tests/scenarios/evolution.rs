//! Live schema evolution: two releases of one document type (the same kind,
//! the same keys) writing at once, as in a rolling deploy. Release 2 adds a
//! field (`#[serde(default)] gift_note`) and a sorted index (`by_total`)
//! and declares `#[microdcs(schema = 2)]`.
//!
//! - A document remembers which schema last wrote it (its stamp); a write
//!   of release 1 to a document release 2 wrote is refused, nothing
//!   written, so no value release 1 does not know is ever erased.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use microdcs_tests::{created, server, snapshot, unique_prefix};
use microdcs_valkey::store::DeleteExpect;
use microdcs_valkey::{Error, Expect, KeyPrefix, PutOutcome, Valkey, redis};

/// Release 1 of the order type.
mod v1 {
    use microdcs_valkey::Document;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
    #[microdcs(kind = "order", list(key = "order:list:{scope}"))]
    pub struct Order {
        pub id: String,
        pub scope: String,
        pub total: i64,
    }

    microdcs_valkey::keyspace! {
        pub ShopV1 {
            documents: [Order],
        }
    }
}

/// Release 2: a new field, a new sorted index, schema 2.
mod v2 {
    use microdcs_valkey::Document;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
    #[microdcs(
        kind = "order",
        schema = 2,
        list(key = "order:list:{scope}"),
        sorted(key = "order:bytotal:{scope}", score = total, name = "by_total")
    )]
    pub struct Order {
        pub id: String,
        pub scope: String,
        pub total: i64,
        #[serde(default)]
        pub gift_note: Option<String>,
    }

    microdcs_valkey::keyspace! {
        pub ShopV2 {
            documents: [Order],
        }
    }
}

/// Release 3: release 2's index unchanged, schema 3.
mod v3 {
    use microdcs_valkey::Document;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
    #[microdcs(
        kind = "order",
        schema = 3,
        list(key = "order:list:{scope}"),
        sorted(key = "order:bytotal:{scope}", score = total, name = "by_total")
    )]
    pub struct Order {
        pub id: String,
        pub scope: String,
        pub total: i64,
        #[serde(default)]
        pub gift_note: Option<String>,
        #[serde(default)]
        pub rush: bool,
    }

    microdcs_valkey::keyspace! {
        pub ShopV3 {
            documents: [Order],
        }
    }
}

/// Release 3, changing the layout of release 2's index.
mod v3changed {
    use microdcs_valkey::Document;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
    #[microdcs(
        kind = "order",
        schema = 3,
        list(key = "order:list:{scope}"),
        sorted(key = "order:bytotal:v3:{scope}", score = total, name = "by_total")
    )]
    pub struct Order {
        pub id: String,
        pub scope: String,
        pub total: i64,
        #[serde(default)]
        pub gift_note: Option<String>,
    }

    microdcs_valkey::keyspace! {
        pub ShopV3Changed {
            documents: [Order],
        }
    }
}

/// Release 2 with a unique index on a field release 1 did not check.
mod v2unique {
    use microdcs_valkey::Document;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
    #[microdcs(
        kind = "order",
        schema = 2,
        list(key = "order:list:{scope}"),
        unique(key = "order:bytotal:{scope}:{total}", name = "by_total_unique")
    )]
    pub struct Order {
        pub id: String,
        pub scope: String,
        pub total: i64,
        #[serde(default)]
        pub gift_note: Option<String>,
    }

    microdcs_valkey::keyspace! {
        pub ShopV2Unique {
            documents: [Order],
        }
    }
}

async fn connect(prefix: &KeyPrefix, url: &str) -> Valkey {
    Valkey::connect_url(url, prefix.clone(), Default::default()).await.unwrap()
}

async fn hget(valkey: &Valkey, key: &str, field: &str) -> Option<String> {
    redis::cmd("HGET").arg(key).arg(field).query_async(&mut valkey.connection()).await.unwrap()
}

fn behind<T: std::fmt::Debug>(r: Result<T, Error>) -> Result<(), String> {
    match r {
        Err(Error::SchemaBehind { kind: "order", stored: 2, ours: 1 }) => Ok(()),
        other => Err(format!("{other:?}")),
    }
}

#[test]
fn the_schema_version_is_on_the_spec() {
    use microdcs_valkey::Document;
    assert_eq!(v1::Order::SPEC.schema, 1, "the default");
    assert_eq!(v2::Order::SPEC.schema, 2);
}

/// The stamp is persisted: its field and text are pinned by literals, so a
/// later release reads what this one wrote.
#[tokio::test]
async fn the_stamp_is_written_by_the_script_and_pinned() {
    let s = server();
    let prefix = unique_prefix("evo-stamp");
    let valkey = connect(&prefix, s.url()).await;
    let old = v1::ShopV1::open(valkey.clone()).store::<v1::Order>();
    let new = v2::ShopV2::open(valkey.clone()).store::<v2::Order>();
    created(&old, &v1::Order { id: "a".into(), scope: "s".into(), total: 1 }).await;
    let key = old.key("a").unwrap();
    assert_eq!(hget(&valkey, &key, "sv").await, None, "schema 1 writes no stamp");
    created(&new, &v2::Order { id: "b".into(), scope: "s".into(), total: 2, gift_note: None }).await;
    assert_eq!(hget(&valkey, &new.key("b").unwrap(), "sv").await.as_deref(), Some("2"));
    // Release 2 updates a release-1 document: the stamp appears.
    let read = new.get("a").await.unwrap().unwrap();
    let changed = v2::Order { gift_note: Some("hi".into()), ..read.doc.clone() };
    assert!(matches!(new.update(&read, &changed).await.unwrap(), PutOutcome::Written { version: 2 }));
    assert_eq!(hget(&valkey, &key, "sv").await.as_deref(), Some("2"));
    assert_eq!(microdcs_valkey::schema::STAMP_FIELD, "sv");
    assert_eq!(microdcs_valkey::schema::stamp_text(1), None);
    assert_eq!(microdcs_valkey::schema::stamp_text(2).as_deref(), Some("2"));
    assert_eq!(microdcs_valkey::schema::stamp_text(17).as_deref(), Some("17"));
    assert_eq!(microdcs_valkey::schema::parse_stamp(None), Ok(1));
    assert_eq!(microdcs_valkey::schema::parse_stamp(Some("2")), Ok(2));
    for bad in ["", "02", "-1", "0", "2.0", "x", "99999999"] {
        assert!(microdcs_valkey::schema::parse_stamp(Some(bad)).is_err(), "{bad:?}");
    }
}

/// Every kind of release-1 write to a document release 2 wrote is refused
/// with `SchemaBehind`, and nothing under the prefix changes; reads still
/// work (release 1 reads what it knows).
#[tokio::test]
async fn an_older_writer_is_refused_on_a_document_a_newer_one_wrote() {
    let s = server();
    let prefix = unique_prefix("evo-refuse");
    let valkey = connect(&prefix, s.url()).await;
    let old = v1::ShopV1::open(valkey.clone()).store::<v1::Order>();
    let new = v2::ShopV2::open(valkey.clone()).store::<v2::Order>();
    created(&new, &v2::Order { id: "o-1".into(), scope: "s".into(), total: 10, gift_note: Some("wrap it".into()) })
        .await;
    let read = old.get("o-1").await.unwrap().expect("release 1 reads a release-2 document");
    assert_eq!(read.doc.total, 10);
    let before = snapshot(&mut valkey.connection(), &prefix).await;
    let changed = v1::Order { total: 11, ..read.doc.clone() };
    let mut problems = Vec::new();
    for (what, r) in [
        ("update", behind(old.update(&read, &changed).await)),
        ("put(Any)", behind(old.put(&changed, Expect::Any).await)),
        ("put(Version)", behind(old.put(&changed, Expect::Version(read.version)).await)),
        ("delete", behind(old.delete(&read).await)),
        ("delete_id(Any)", behind(old.delete_id("o-1", DeleteExpect::Any).await)),
    ] {
        if let Err(got) = r {
            problems.push(format!("{what}: {got}"));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(before, snapshot(&mut valkey.connection(), &prefix).await, "a refused write changed something");
    let kept = new.get("o-1").await.unwrap().unwrap();
    assert_eq!(kept.doc.gift_note.as_deref(), Some("wrap it"));
    // A document no release-2 writer touched stays release 1's to write.
    created(&old, &v1::Order { id: "o-2".into(), scope: "s".into(), total: 1 }).await;
    let r = old.get("o-2").await.unwrap().unwrap();
    assert!(matches!(old.update(&r, &v1::Order { total: 2, ..r.doc.clone() }).await, Ok(PutOutcome::Written { .. })));
}

/// Three release-1 and three release-2 writers update the same documents
/// at once; release 2 sets gift notes. No gift note release 2 wrote is
/// erased: every release-1 write that reached a release-2 document was
/// refused, and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_releases_erase_no_value() {
    let s = server();
    let prefix = unique_prefix("evo-race");
    let valkey = connect(&prefix, s.url()).await;
    let old = v1::ShopV1::open(valkey.clone()).store::<v1::Order>();
    let new = v2::ShopV2::open(valkey.clone()).store::<v2::Order>();
    const DOCS: usize = 30;
    for i in 0..DOCS {
        created(&old, &v1::Order { id: format!("o-{i}"), scope: "s".into(), total: i as i64 }).await;
    }
    let refused = Arc::new(AtomicU64::new(0));
    // The last gift note release 2 wrote to each document, by the version
    // its write produced (tasks record in any order).
    let notes: Arc<std::sync::Mutex<BTreeMap<String, (u64, String)>>> = Arc::default();
    let mut tasks = Vec::new();
    for w in 0..3u64 {
        let old = old.clone();
        let refused = refused.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..40u64 {
                let id = format!("o-{}", (round * 7 + w * 3) as usize % DOCS);
                let Some(read) = old.get(&id).await.unwrap() else { continue };
                let changed = v1::Order { total: read.doc.total + 1, ..read.doc.clone() };
                match old.update(&read, &changed).await {
                    Ok(_) => {}
                    Err(Error::SchemaBehind { .. }) => {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => panic!("release 1 on {id}: {e}"),
                }
            }
        }));
    }
    for w in 0..3u64 {
        let new = new.clone();
        let notes = notes.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..40u64 {
                let id = format!("o-{}", (round * 5 + w * 11) as usize % DOCS);
                let read = new.get(&id).await.unwrap().unwrap();
                let note = format!("note-{w}-{round}");
                let changed =
                    v2::Order { total: read.doc.total + 1, gift_note: Some(note.clone()), ..read.doc.clone() };
                if let PutOutcome::Written { version } = new.update(&read, &changed).await.unwrap() {
                    let mut notes = notes.lock().unwrap();
                    let e = notes.entry(id).or_default();
                    if version > e.0 {
                        *e = (version, note);
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let notes = notes.lock().unwrap().clone();
    assert!(!notes.is_empty());
    let mut erased = Vec::new();
    for (id, (_, note)) in &notes {
        let got = new.get(id).await.unwrap().unwrap();
        if got.doc.gift_note.as_deref() != Some(note) {
            erased.push(format!("{id}: wrote {note:?}, stored {:?}", got.doc.gift_note));
        }
    }
    assert_eq!(erased, Vec::<String>::new(), "erased gift notes");
    assert!(refused.load(Ordering::Relaxed) > 0, "no release-1 write met a release-2 document");
}

/// A stamp that is not a schema version is damage: every write refuses it
/// as corrupt (never reads it as "old enough"), nothing written.
#[tokio::test]
async fn a_damaged_stamp_is_corrupt_for_every_writer() {
    let s = server();
    let prefix = unique_prefix("evo-badstamp");
    let valkey = connect(&prefix, s.url()).await;
    let old = v1::ShopV1::open(valkey.clone()).store::<v1::Order>();
    let new = v2::ShopV2::open(valkey.clone()).store::<v2::Order>();
    created(&new, &v2::Order { id: "o-1".into(), scope: "s".into(), total: 1, gift_note: None }).await;
    let key = new.key("o-1").unwrap();
    for bad in ["x", "02", "-3", "", "12345678"] {
        let _: i64 =
            redis::cmd("HSET").arg(&key).arg("sv").arg(bad).query_async(&mut valkey.connection()).await.unwrap();
        let before = snapshot(&mut valkey.connection(), &prefix).await;
        let a = old.put(&v1::Order { id: "o-1".into(), scope: "s".into(), total: 5 }, Expect::Any).await;
        let b =
            new.put(&v2::Order { id: "o-1".into(), scope: "s".into(), total: 5, gift_note: None }, Expect::Any).await;
        let c = new.delete_id("o-1", DeleteExpect::Any).await;
        for (what, r) in [("v1 put", a.map(|_| ())), ("v2 put", b.map(|_| ())), ("v2 delete", c.map(|_| ()))] {
            assert!(matches!(&r, Err(Error::Corrupt { key: k, .. }) if *k == key), "sv={bad:?} {what}: {r:?}");
        }
        assert_eq!(before, snapshot(&mut valkey.connection(), &prefix).await, "sv={bad:?}: a refused write wrote");
    }
}

/// Options with a fast heartbeat, so a writer that stops lapses quickly.
fn fast_heartbeat() -> microdcs_valkey::config::WriteOptions {
    microdcs_valkey::config::WriteOptions {
        writer_heartbeat: std::time::Duration::from_millis(100),
        writer_lifetime: std::time::Duration::from_millis(300),
        ..Default::default()
    }
}

/// Writers announce their schema: the registry lists each live writer's
/// schema, says whether an older one remains, and forgets a writer that
/// stopped once its lifetime has passed.
#[tokio::test]
async fn writers_announce_their_schema_and_lapse_when_they_stop() {
    let s = server();
    let prefix = unique_prefix("evo-writers");
    let a = Valkey::connect_url(s.url(), prefix.clone(), fast_heartbeat()).await.unwrap();
    let b = Valkey::connect_url(s.url(), prefix.clone(), fast_heartbeat()).await.unwrap();
    let old = v1::ShopV1::open(a).store::<v1::Order>();
    let new = v2::ShopV2::open(b).store::<v2::Order>();
    created(&old, &v1::Order { id: "o-1".into(), scope: "s".into(), total: 1 }).await;
    created(&new, &v2::Order { id: "o-2".into(), scope: "s".into(), total: 2, gift_note: None }).await;
    let seen = new.writers().await.unwrap();
    assert_eq!(seen.schemas, BTreeMap::from([(1, 1), (2, 1)]), "{seen:?}");
    assert!(seen.older_remain(), "release 1 is live");
    assert_eq!(seen.newest(), Some(2));
    let from_old = old.writers().await.unwrap();
    assert!(!from_old.older_remain(), "nothing is older than release 1: {from_old:?}");
    // Release 1 stops writing; release 2 goes on. Past release 1's
    // lifetime (server time) its entry is gone.
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    new.announce().await.unwrap();
    let later = new.writers().await.unwrap();
    assert_eq!(later.schemas, BTreeMap::from([(2, 1)]), "{later:?}");
    assert!(!later.older_remain());
}

#[test]
fn writer_settings_are_bounded() {
    let mut c = microdcs_valkey::MicroDcsConfig::default();
    c.set("Valkey:WriterHeartbeat", "10s").unwrap();
    c.set("Valkey:WriterLifetime", "15s").unwrap();
    c.set("Valkey:BackfillRate", "0").unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("WriterLifetime") && e.contains("BackfillRate"), "{e}");
    let mut c = microdcs_valkey::MicroDcsConfig::default();
    c.set("Valkey:WriterHeartbeat", "10ms").unwrap();
    assert!(c.validate().unwrap_err().to_string().contains("WriterHeartbeat"));
    let ok = microdcs_valkey::MicroDcsConfig::default();
    assert!(ok.validate().is_ok());
    assert_eq!(ok.valkey.write_options().writer_heartbeat, std::time::Duration::from_secs(5));
    assert_eq!(ok.valkey.write_options().writer_lifetime, std::time::Duration::from_secs(30));
    assert_eq!(ok.valkey.write_options().backfill_rate, 1000);
}

/// Write options built in code are not checked by a configuration: a
/// handle takes each to its nearest bound, so a writer's entry never
/// lapses between two of its renewals (the guards that wait for older
/// writers would not see it).
#[tokio::test]
async fn write_options_out_of_bounds_are_taken_to_the_nearest_bound() {
    use std::time::Duration;
    let s = server();
    let write = microdcs_valkey::config::WriteOptions {
        writer_heartbeat: Duration::from_millis(1),
        writer_lifetime: Duration::ZERO,
        backfill_rate: 0,
        op_history: 1000,
        change_stream_max_len: 0,
        ..Default::default()
    };
    let valkey = Valkey::connect_url(s.url(), unique_prefix("evo-bounds"), write).await.unwrap();
    let got = valkey.write_options();
    assert_eq!(got.writer_heartbeat, Duration::from_millis(100));
    assert_eq!(got.writer_lifetime, Duration::from_millis(200), "at least twice the heartbeat");
    assert_eq!(got.backfill_rate, 1);
    assert_eq!(got.op_history, 64);
    assert_eq!(got.change_stream_max_len, 1);
    let long = microdcs_valkey::config::WriteOptions {
        writer_heartbeat: Duration::from_secs(5),
        writer_lifetime: Duration::from_secs(86_400),
        ..Default::default()
    };
    let valkey = Valkey::connect_url(s.url(), unique_prefix("evo-bounds"), long).await.unwrap();
    assert_eq!(valkey.write_options().writer_lifetime, Duration::from_secs(3600));
}

fn building<T: std::fmt::Debug>(r: Result<T, Error>) -> Result<(), String> {
    match r {
        Err(Error::IndexBuilding { kind: "order", index }) if index == "by_total" => Ok(()),
        other => Err(format!("{other:?}")),
    }
}

/// What the new index holds, as `(id, score)`, and what it should hold.
async fn by_total(
    valkey: &Valkey,
    new: &microdcs_valkey::Store<v2::Order>,
) -> (BTreeMap<String, i64>, BTreeMap<String, i64>) {
    let key = format!("{}:order:bytotal:s", valkey.prefix().as_str());
    let held: Vec<(String, f64)> = redis::cmd("ZRANGE")
        .arg(&key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(&mut valkey.connection())
        .await
        .unwrap();
    let held = held.into_iter().map(|(id, s)| (id, s as i64)).collect();
    let mut want = BTreeMap::new();
    let mut cursor = 0;
    loop {
        let page = new.scan(cursor, 100).await.unwrap();
        assert!(page.damaged.is_empty(), "{:?}", page.damaged);
        for d in page.documents {
            want.insert(d.id.clone(), d.doc.total);
        }
        match page.next {
            Some(c) => cursor = c,
            None => break,
        }
    }
    (held, want)
}

/// Release 2 adds a sorted index over documents release 1 wrote. Until a
/// backfill completes it, every query through it is refused (never a
/// partial answer); a backfill while release-1 writers run does not make
/// it ready; once they are gone, a backfill does, the index holds every
/// document with its score, and verify is clean. Release 1 and release 2
/// write throughout: no gift note is erased.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_index_is_building_until_a_backfill_with_no_older_writer_left() {
    use microdcs_valkey::Page;
    use microdcs_valkey::store::{BackfillOptions, IndexState, MaintenanceOptions};
    let s = server();
    let prefix = unique_prefix("evo-index");
    let a = Valkey::connect_url(s.url(), prefix.clone(), fast_heartbeat()).await.unwrap();
    let b = Valkey::connect_url(s.url(), prefix.clone(), fast_heartbeat()).await.unwrap();
    let old = v1::ShopV1::open(a).store::<v1::Order>();
    let new = v2::ShopV2::open(b.clone()).store::<v2::Order>();
    const DOCS: usize = 60;
    for i in 0..DOCS {
        created(&old, &v1::Order { id: format!("o-{i}"), scope: "s".into(), total: i as i64 }).await;
    }
    // Before any backfill: refused, through every way of reading it.
    let q = || v2::Order::by_total("s");
    let mut problems = Vec::new();
    for (what, r) in [
        ("ids", building(new.ids(q(), Page::first(10)).await)),
        ("count_ids", building(new.count_ids(q()).await)),
        ("range", building(new.range(q(), f64::MIN, f64::MAX, false, 10).await)),
        ("docs", building(new.docs(q(), Page::first(10)).await)),
    ] {
        if let Err(got) = r {
            problems.push(format!("{what}: {got}"));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(new.index_states().await.unwrap(), vec![("by_total", IndexState::Building)]);

    // Both releases write while a backfill runs: release 1 is live, so
    // the index stays building.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let notes: Arc<std::sync::Mutex<BTreeMap<String, (u64, String)>>> = Arc::default();
    let mut tasks = Vec::new();
    {
        let (old, stop) = (old.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let id = format!("o-{}", n * 7 % DOCS);
                n += 1;
                let read = old.get(&id).await.unwrap().unwrap();
                match old.update(&read, &v1::Order { total: read.doc.total + 1, ..read.doc.clone() }).await {
                    Ok(_) | Err(Error::SchemaBehind { .. }) => {}
                    Err(e) => panic!("release 1: {e}"),
                }
            }
        }));
    }
    {
        let (new, stop, notes) = (new.clone(), stop.clone(), notes.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let id = format!("o-{}", n * 5 % DOCS);
                n += 1;
                let read = new.get(&id).await.unwrap().unwrap();
                let note = format!("note-{n}");
                let changed =
                    v2::Order { total: read.doc.total + 2, gift_note: Some(note.clone()), ..read.doc.clone() };
                if let PutOutcome::Written { version } = new.update(&read, &changed).await.unwrap() {
                    let mut notes = notes.lock().unwrap();
                    let e = notes.entry(id).or_default();
                    if version > e.0 {
                        *e = (version, note);
                    }
                }
            }
        }));
    }
    let during = new.backfill(&BackfillOptions { page: 10, ..Default::default() }).await.unwrap();
    assert!(during.older_writers, "{during:?}");
    assert_eq!(during.building, vec!["by_total".to_owned()], "{during:?}");
    assert!(during.ready.is_empty(), "{during:?}");
    assert!(building(new.ids(q(), Page::first(10)).await).is_ok(), "still refused while release 1 writes");

    // Release 1 stops (the deploy finishes); release 2 goes on writing.
    stop.store(true, Ordering::Relaxed);
    for t in tasks.drain(..) {
        t.await.unwrap();
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let (new, stop, notes) = (new.clone(), stop.clone(), notes.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 1000usize;
            while !stop.load(Ordering::Relaxed) {
                let id = format!("o-{}", n * 3 % DOCS);
                n += 1;
                let read = new.get(&id).await.unwrap().unwrap();
                let note = format!("note-{n}");
                let changed =
                    v2::Order { total: read.doc.total + 2, gift_note: Some(note.clone()), ..read.doc.clone() };
                if let PutOutcome::Written { version } = new.update(&read, &changed).await.unwrap() {
                    let mut notes = notes.lock().unwrap();
                    let e = notes.entry(id).or_default();
                    if version > e.0 {
                        *e = (version, note);
                    }
                }
            }
        }));
    }
    // Past release 1's lifetime its entry is gone.
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let after = new.backfill(&BackfillOptions { page: 10, ..Default::default() }).await.unwrap();
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    assert!(!after.older_writers, "{after:?}");
    assert_eq!(after.ready, vec!["by_total".to_owned()], "{after:?}");
    assert!(after.building.is_empty(), "{after:?}");
    assert_eq!(new.index_states().await.unwrap(), vec![("by_total", IndexState::Ready)]);

    // Complete: every document, with its score; reads through it work.
    let (held, want) = by_total(&b, &new).await;
    assert_eq!(held, want, "the index differs from the documents");
    assert_eq!(want.len(), DOCS);
    assert_eq!(new.count_ids(q()).await.unwrap(), DOCS as u64);
    let report = new.verify(&MaintenanceOptions::default()).await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    // No gift note erased.
    let notes = notes.lock().unwrap().clone();
    assert!(!notes.is_empty());
    for (id, (_, note)) in &notes {
        let got = new.get(id).await.unwrap().unwrap();
        assert_eq!(got.doc.gift_note.as_deref(), Some(note.as_str()), "{id}");
    }
}

/// A rollback after the index was ready: a release-1 instance that starts
/// writing again does not keep the index, so its announcement (before its
/// first write) records the index building again; a release-2 reader
/// refuses queries through it within one `WriterHeartbeat`, never answers
/// without the documents release 1 creates. Once release 1 is gone again,
/// a backfill makes it ready and complete.
#[tokio::test]
async fn an_older_writer_back_after_ready_sends_the_index_back_to_building() {
    use microdcs_valkey::Page;
    use microdcs_valkey::store::{BackfillOptions, IndexState, MaintenanceOptions};
    let s = server();
    let prefix = unique_prefix("evo-rollback");
    let b = Valkey::connect_url(s.url(), prefix.clone(), fast_heartbeat()).await.unwrap();
    let new = v2::ShopV2::open(b.clone()).store::<v2::Order>();
    for i in 0..10 {
        created(&new, &v2::Order { id: format!("o-{i}"), scope: "s".into(), total: i, gift_note: None }).await;
    }
    let ready = new.backfill(&BackfillOptions::default()).await.unwrap();
    assert_eq!(ready.ready, vec!["by_total".to_owned()], "{ready:?}");
    let q = || v2::Order::by_total("s");
    assert_eq!(new.count_ids(q()).await.unwrap(), 10, "ready: answered");

    // Release 1 comes back (a rollback, or an old instance restarted).
    let a = Valkey::connect_url(s.url(), prefix.clone(), fast_heartbeat()).await.unwrap();
    let old = v1::ShopV1::open(a).store::<v1::Order>();
    created(&old, &v1::Order { id: "o-old".into(), scope: "s".into(), total: 99 }).await;
    assert_eq!(new.index_states().await.unwrap(), vec![("by_total", IndexState::Building)]);
    // The reader's last look is at most one heartbeat old.
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    assert!(building(new.ids(q(), Page::first(10)).await).is_ok(), "a query answered without release 1's create");
    assert!(building(new.count_ids(q()).await).is_ok());

    // Release 1 stops again; past its lifetime a backfill completes the
    // index, release 1's create included.
    drop(old);
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let again = new.backfill(&BackfillOptions::default()).await.unwrap();
    assert_eq!(again.ready, vec!["by_total".to_owned()], "{again:?}");
    assert!(again.rewritten >= 1, "release 1's create is rewritten: {again:?}");
    let (held, want) = by_total(&b, &new).await;
    assert_eq!(held, want);
    assert_eq!(held.get("o-old"), Some(&99));
    assert_eq!(new.count_ids(q()).await.unwrap(), 11);
    assert!(new.verify(&MaintenanceOptions::default()).await.unwrap().is_clean());
}

/// Release 3 ships, keeping release 2's new index as it is, before
/// release 2's backfill ran: release 3's backfill finishes the index
/// release 2 recorded, and both releases answer from it.
#[tokio::test]
async fn a_later_release_with_the_same_index_finishes_the_backfill() {
    use microdcs_valkey::store::{BackfillOptions, IndexState};
    let s = server();
    let prefix = unique_prefix("evo-v3");
    let a = Valkey::connect_url(s.url(), prefix.clone(), fast_heartbeat()).await.unwrap();
    let old = v1::ShopV1::open(a.clone()).store::<v1::Order>();
    created(&old, &v1::Order { id: "o-1".into(), scope: "s".into(), total: 1 }).await;
    let b = Valkey::connect_url(s.url(), prefix.clone(), fast_heartbeat()).await.unwrap();
    let two = v2::ShopV2::open(b.clone()).store::<v2::Order>();
    created(&two, &v2::Order { id: "o-2".into(), scope: "s".into(), total: 2, gift_note: None }).await;
    assert_eq!(two.index_states().await.unwrap(), vec![("by_total", IndexState::Building)]);
    // Releases 1 and 2 stop; release 3 keeps the index as release 2 laid it out.
    drop((old, two));
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let c = Valkey::connect_url(s.url(), prefix.clone(), fast_heartbeat()).await.unwrap();
    let three = v3::ShopV3::open(c.clone()).store::<v3::Order>();
    let report = three.backfill(&BackfillOptions::default()).await.unwrap();
    assert_eq!(report.ready, vec!["by_total".to_owned()], "{report:?}");
    assert_eq!(three.count_ids(v3::Order::by_total("s")).await.unwrap(), 2);
    // Release 2 (a rollback) keeps the same layout: it answers from it too.
    let two = v2::ShopV2::open(b).store::<v2::Order>();
    assert_eq!(two.index_states().await.unwrap(), vec![("by_total", IndexState::Ready)]);
    assert_eq!(two.count_ids(v2::Order::by_total("s")).await.unwrap(), 2);
}

/// A writer of the older release that announces, writes behind the
/// backfill's walk and stops again before the pass ends (its entry lapsed,
/// so no look at the live writers sees it) keeps the index building: the
/// pass cannot have seen its write. The next backfill makes it ready with
/// that write.
#[tokio::test]
async fn an_older_writer_that_came_and_went_during_the_pass_keeps_the_index_building() {
    use microdcs_valkey::store::{BackfillOptions, IndexState};
    let s = microdcs_tests::own_server();
    let prefix = unique_prefix("evo-came-went");
    // 40 documents at 20 a second: the walk reads them at once, then the
    // pass lasts 2 s for the rate.
    let slow = microdcs_valkey::config::WriteOptions { backfill_rate: 20, ..fast_heartbeat() };
    let b = Valkey::connect_url(s.url(), prefix.clone(), slow).await.unwrap();
    let new = v2::ShopV2::open(b.clone()).store::<v2::Order>();
    for i in 0..40 {
        created(&new, &v2::Order { id: format!("o-{i}"), scope: "s".into(), total: i, gift_note: None }).await;
    }
    let a = Valkey::connect_url(s.url(), prefix.clone(), fast_heartbeat()).await.unwrap();
    let behind = async {
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        let old = v1::ShopV1::open(a).store::<v1::Order>();
        created(&old, &v1::Order { id: "o-old".into(), scope: "s".into(), total: 99 }).await;
        // Stops: its entry lapses 300 ms later, long before the pass ends.
    };
    let once = BackfillOptions { max_passes: 1, ..Default::default() };
    let (report, ()) = tokio::join!(new.backfill(&once), behind);
    let report = report.unwrap();
    assert!(report.ready.is_empty(), "ready without the older writer's create: {report:?}");
    assert_eq!(new.index_states().await.unwrap(), vec![("by_total", IndexState::Building)]);
    let again = new.backfill(&BackfillOptions::default()).await.unwrap();
    assert_eq!(again.ready, vec!["by_total".to_owned()], "{again:?}");
    let (held, _) = by_total(&b, &new).await;
    assert_eq!(held.get("o-old"), Some(&99), "the older writer's create is in the index");
}

/// Release 3 changes the layout of release 2's index; rolled back to
/// release 2, a query must not answer from it: release 3 recorded it
/// building under its own layout. Release 2 cannot write what release 3
/// wrote, so its backfill leaves the index building; a rebuild with every
/// writer stopped makes release 2's layout exact and ready.
#[tokio::test]
async fn a_rollback_over_a_changed_index_is_completed_by_an_offline_rebuild() {
    use microdcs_valkey::store::{BackfillOptions, IndexState};
    let s = server();
    let prefix = unique_prefix("evo-changed");
    let b = Valkey::connect_url(s.url(), prefix.clone(), fast_heartbeat()).await.unwrap();
    let two = v2::ShopV2::open(b.clone()).store::<v2::Order>();
    for i in 0..5 {
        created(&two, &v2::Order { id: format!("o-{i}"), scope: "s".into(), total: i, gift_note: None }).await;
    }
    assert_eq!(two.backfill(&BackfillOptions::default()).await.unwrap().ready, vec!["by_total".to_owned()]);
    let c = Valkey::connect_url(s.url(), prefix.clone(), fast_heartbeat()).await.unwrap();
    let three = v3changed::ShopV3Changed::open(c).store::<v3changed::Order>();
    created(&three, &v3changed::Order { id: "o-new".into(), scope: "s".into(), total: 33, gift_note: None }).await;
    // Rolled back: release 2 does not answer from an index release 3 laid out anew.
    assert_eq!(two.index_states().await.unwrap(), vec![("by_total", IndexState::Building)]);
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    assert!(building(two.count_ids(v2::Order::by_total("s")).await).is_ok());
    drop(three);
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let again = two.backfill(&BackfillOptions::default()).await.unwrap();
    assert!(again.ready.is_empty(), "{again:?}");
    assert_eq!(again.newer, 1, "{again:?}");
    // With every writer stopped, a rebuild makes it exact and ready.
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let rebuilt = two.rebuild(&microdcs_valkey::store::MaintenanceOptions::default()).await.unwrap();
    assert!(rebuilt.fixed >= 1, "{rebuilt:?}");
    assert_eq!(two.index_states().await.unwrap(), vec![("by_total", IndexState::Ready)]);
    assert_eq!(two.count_ids(v2::Order::by_total("s")).await.unwrap(), 6, "release 3's create included");
}

/// Release 2 adds a unique index over values release 1 never checked, and
/// two documents share one: the backfill steps over the one the index
/// refuses (logged, counted), completes the rest, and leaves the index
/// building instead of stopping at that document for good.
#[tokio::test]
async fn a_duplicate_under_a_new_unique_index_is_stepped_over_and_keeps_it_building() {
    use microdcs_valkey::store::{BackfillOptions, IndexState};
    let s = server();
    let prefix = unique_prefix("evo-unique");
    let a = Valkey::connect_url(s.url(), prefix.clone(), fast_heartbeat()).await.unwrap();
    let old = v1::ShopV1::open(a).store::<v1::Order>();
    for (id, total) in [("o-1", 7), ("o-2", 7), ("o-3", 8)] {
        created(&old, &v1::Order { id: id.into(), scope: "s".into(), total }).await;
    }
    drop(old);
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let b = Valkey::connect_url(s.url(), prefix.clone(), fast_heartbeat()).await.unwrap();
    let new = v2unique::ShopV2Unique::open(b).store::<v2unique::Order>();
    let report = new.backfill(&BackfillOptions::default()).await.unwrap();
    assert_eq!((report.unique_held, report.rewritten), (report.passes as u64, 2), "{report:?}");
    assert!(report.ready.is_empty(), "{report:?}");
    assert_eq!(new.index_states().await.unwrap(), vec![("by_total_unique", IndexState::Building)]);
}

/// A backfill keeps its progress after every page: one stopped midway (as
/// by a crash) resumes from where it was, and still ends ready.
#[tokio::test]
async fn a_stopped_backfill_resumes_from_its_progress() {
    use microdcs_valkey::store::BackfillOptions;
    let s = server();
    let prefix = unique_prefix("evo-resume");
    // A slow backfill, so it is stopped midway.
    let slow = microdcs_valkey::config::WriteOptions { backfill_rate: 40, ..fast_heartbeat() };
    let a = Valkey::connect_url(s.url(), prefix.clone(), slow).await.unwrap();
    let old = v1::ShopV1::open(a.clone()).store::<v1::Order>();
    let new = v2::ShopV2::open(a.clone()).store::<v2::Order>();
    for i in 0..80 {
        created(&old, &v1::Order { id: format!("o-{i}"), scope: "s".into(), total: i }).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let states = format!("{}:schema:indexes:{{order}}", prefix.as_str());
    let cursor = || async {
        let c: Option<String> =
            redis::cmd("HGET").arg(&states).arg("@cursor").query_async(&mut a.connection()).await.unwrap();
        c.unwrap_or_default()
    };
    {
        let opts = BackfillOptions { page: 5, ..Default::default() };
        let run = new.backfill(&opts);
        tokio::pin!(run);
        // Stopped once it has kept a cursor past the start.
        loop {
            tokio::select! {
                r = &mut run => panic!("the backfill ended before it was stopped: {r:?}"),
                () = tokio::time::sleep(std::time::Duration::from_millis(20)) => {}
            }
            let c = cursor().await;
            if !c.is_empty() && c != "0" {
                break;
            }
        }
    }
    let kept: u64 = cursor().await.parse().unwrap();
    assert_ne!(kept, 0);
    let fast = v2::ShopV2::open(Valkey::connect_url(s.url(), prefix.clone(), fast_heartbeat()).await.unwrap())
        .store::<v2::Order>();
    let report = fast.backfill(&BackfillOptions { page: 5, ..Default::default() }).await.unwrap();
    assert_eq!(report.resumed_from, Some(kept), "{report:?}");
    assert_eq!(report.ready, vec!["by_total".to_owned()], "{report:?}");
    let (held, want) = by_total(&a, &fast).await;
    assert_eq!(held, want);
}

/// The acceptance history on a primary, a replica and three Sentinels:
/// release 1 and release 2 write through a rolling deploy that adds a
/// field and an index, with a requested failover while the backfill runs.
/// Reads of the index while it builds are refused; at the end no gift note
/// release 2 wrote is erased, the index is complete and ready, and verify
/// is clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolling_deploy_with_a_failover_during_the_backfill() {
    use microdcs_valkey::store::{BackfillOptions, MaintenanceOptions};
    use microdcs_valkey::testing::Sentinel;
    use microdcs_valkey::{MicroDcsConfig, Page};
    let s = Sentinel::start().unwrap_or_else(|e| panic!("{e}"));
    let prefix = unique_prefix("evo-failover");
    let config = || {
        let mut c = MicroDcsConfig::default();
        c.set("Valkey:ConnectionString", &s.connection_string()).unwrap();
        c.set("Valkey:KeyPrefix", prefix.as_str()).unwrap();
        c.set("Valkey:WriteRetryDelay", "50ms").unwrap();
        c.set("Valkey:WriterHeartbeat", "100ms").unwrap();
        c.set("Valkey:WriterLifetime", "300ms").unwrap();
        // Slow enough that the failover comes while it runs.
        c.set("Valkey:BackfillRate", "20").unwrap();
        // An acknowledged write survives a Sentinel failover only once
        // every replica has it (chapter 5); the history checks erasure by
        // an older release, not writes a failover may drop.
        c.set("Valkey:WriteReplicas", "all").unwrap();
        c.valkey
    };
    let a = Valkey::connect(&config()).await.unwrap();
    let b = Valkey::connect(&config()).await.unwrap();
    let old = v1::ShopV1::open(a).store::<v1::Order>();
    let new = v2::ShopV2::open(b.clone()).store::<v2::Order>();
    const DOCS: usize = 40;
    for i in 0..DOCS {
        created(&old, &v1::Order { id: format!("o-{i}"), scope: "s".into(), total: i as i64 }).await;
    }
    // Both releases write; errors while the primary changes are transient.
    let stop_old = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop_new = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let notes: Arc<std::sync::Mutex<BTreeMap<String, (u64, String)>>> = Arc::default();
    // Notes of writes whose outcome stayed unknown: each may be stored.
    let maybe: Arc<std::sync::Mutex<BTreeMap<String, Vec<String>>>> = Arc::default();
    let old_task = {
        let (old, stop) = (old.clone(), stop_old.clone());
        tokio::spawn(async move {
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let id = format!("o-{}", n * 7 % DOCS);
                n += 1;
                let Ok(Some(read)) = old.get(&id).await else { continue };
                match old.update(&read, &v1::Order { total: read.doc.total + 1, ..read.doc.clone() }).await {
                    Err(e) if !(transient(&e) || matches!(e, Error::SchemaBehind { .. })) => panic!("release 1: {e}"),
                    _ => {}
                }
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
    };
    let new_task = {
        let (new, stop, notes, maybe) = (new.clone(), stop_new.clone(), notes.clone(), maybe.clone());
        tokio::spawn(async move {
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let id = format!("o-{}", n * 5 % DOCS);
                n += 1;
                let Ok(Some(read)) = new.get(&id).await else { continue };
                let note = format!("note-{n}");
                let changed =
                    v2::Order { total: read.doc.total + 2, gift_note: Some(note.clone()), ..read.doc.clone() };
                match new.update(&read, &changed).await {
                    Ok(PutOutcome::Written { version }) => {
                        let mut notes = notes.lock().unwrap();
                        let e = notes.entry(id).or_default();
                        if version > e.0 {
                            *e = (version, note);
                        }
                    }
                    Ok(_) => {}
                    Err(e) if transient(&e) => {
                        maybe.lock().unwrap().entry(id).or_default().push(note);
                    }
                    Err(e) => panic!("release 2: {e}"),
                }
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
    };
    assert!(building(new.ids(v2::Order::by_total("s"), Page::first(10)).await).is_ok(), "refused while building");
    // Release 1 stops; a backfill runs while the primary changes. A run the
    // failover interrupts is run again: it resumes from its cursor.
    stop_old.store(true, Ordering::Relaxed);
    old_task.await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let backfill = {
        let new = new.clone();
        tokio::spawn(async move {
            let opts = BackfillOptions { page: 5, ..Default::default() };
            let mut runs = Vec::new();
            for _ in 0..20 {
                match new.backfill(&opts).await {
                    Ok(r) if r.building.is_empty() => {
                        runs.push(format!("{r:?}"));
                        return runs;
                    }
                    Ok(r) => runs.push(format!("{r:?}")),
                    Err(e) if transient(&e) => runs.push(format!("{e}")),
                    Err(e) => panic!("backfill: {e}"),
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            panic!("the index never became ready: {runs:#?}")
        })
    };
    // Once the backfill has kept some progress.
    let states = format!("{}:schema:indexes:{{order}}", prefix.as_str());
    loop {
        let c: Option<String> =
            redis::cmd("HGET").arg(&states).arg("@cursor").query_async(&mut b.connection()).await.unwrap();
        if c.is_some_and(|c| c != "0") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let promoted = s.failover().unwrap_or_else(|e| panic!("{e}"));
    println!("failover to node {promoted}");
    let runs = backfill.await.unwrap();
    println!("backfill runs: {runs:#?}");
    stop_new.store(true, Ordering::Relaxed);
    new_task.await.unwrap();

    let (held, want) = by_total(&b, &new).await;
    assert_eq!(held, want, "the index differs from the documents");
    assert_eq!(want.len(), DOCS);
    assert_eq!(new.count_ids(v2::Order::by_total("s")).await.unwrap(), DOCS as u64);
    let report = new.verify(&MaintenanceOptions::default()).await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    let notes = notes.lock().unwrap().clone();
    let maybe = maybe.lock().unwrap().clone();
    assert!(!notes.is_empty());
    // Erased: the stored note is not the last acknowledged one nor one of a
    // write with an unknown outcome (which may have applied after it).
    let mut erased = Vec::new();
    for (id, (version, note)) in &notes {
        let got = new.get(id).await.unwrap().unwrap();
        let stored = got.doc.gift_note.clone().unwrap_or_default();
        let known = stored == *note || maybe.get(id).is_some_and(|m| m.contains(&stored));
        if got.version < *version || !known {
            erased.push(format!("{id}: wrote {note:?} at v{version}, stored {stored:?} at v{}", got.version));
        }
    }
    assert_eq!(erased, Vec::<String>::new(), "erased gift notes");
}

/// An error a caller may see while the primary changes: the call may or
/// may not have applied (or applied without every replica's copy).
fn transient(e: &Error) -> bool {
    e.is_connection() || e.is_unknown_outcome() || matches!(e, Error::NotReplicated { .. })
}

/// The new layout of a note for the copy: another document key template,
/// and `words` now a number where the old layout had a text.
mod copy_layouts {
    use microdcs_valkey::Document;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
    #[microdcs(kind = "note", key = "note:{id}", list(key = "note:list:{scope}"))]
    pub struct NoteV1 {
        pub id: String,
        pub scope: String,
        pub words: String,
    }
    microdcs_valkey::keyspace! { pub NotesV1 { documents: [NoteV1] } }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
    #[microdcs(kind = "note", key = "notes:v2:{id}", list(key = "notes:v2:list:{scope}"))]
    pub struct NoteV2 {
        pub id: String,
        pub scope: String,
        pub words: u32,
    }
    microdcs_valkey::keyspace! { pub NotesV2 { documents: [NoteV2] } }
}

/// What cannot change online (the document key template, a field's type)
/// is a copy: every readable old document is created in the new layout,
/// converted; a damaged one is counted and stepped over, one the
/// conversion declines is counted, and a second run creates nothing and
/// overwrites nothing.
#[tokio::test]
async fn a_copy_moves_a_type_to_a_new_template_and_field_type() {
    use copy_layouts::{NoteV1, NoteV2, NotesV1, NotesV2};
    use microdcs_valkey::store::{CopyReport, MaintenanceOptions};
    let s = server();
    let prefix = unique_prefix("evo-copy");
    let valkey = Valkey::connect_url(s.url(), prefix.clone(), Default::default()).await.unwrap();
    let old = NotesV1::open(valkey.clone()).store::<NoteV1>();
    let new = NotesV2::open(valkey.clone()).store::<NoteV2>();
    for i in 0..20 {
        let words = if i == 7 { "many".to_owned() } else { i.to_string() };
        created(&old, &NoteV1 { id: format!("n-{i}"), scope: "s".into(), words }).await;
    }
    // One old document damaged; one already copied by hand, differently.
    let _: () = redis::cmd("HSET")
        .arg(format!("{}:note:n-3", prefix.as_str()))
        .arg("v")
        .arg("seven")
        .query_async(&mut valkey.connection())
        .await
        .unwrap();
    created(&new, &NoteV2 { id: "n-5".into(), scope: "s".into(), words: 500 }).await;

    let convert = |o: NoteV1| o.words.parse().ok().map(|words| NoteV2 { id: o.id, scope: o.scope, words });
    let first = new.copy_from(&old, convert, 6).await.unwrap();
    assert_eq!(first, CopyReport { seen: 19, copied: 17, present: 1, declined: 1, damaged: 1 }, "{first:?}");
    let again = new.copy_from(&old, convert, 6).await.unwrap();
    assert_eq!(again, CopyReport { seen: 19, copied: 0, present: 18, declined: 1, damaged: 1 }, "{again:?}");

    assert_eq!(new.get("n-12").await.unwrap().unwrap().doc.words, 12);
    assert_eq!(new.get("n-5").await.unwrap().unwrap().doc.words, 500, "never overwritten");
    assert!(new.get("n-7").await.unwrap().is_none(), "declined");
    // Onto the same keys: refused before anything is read.
    let same = old.copy_from(&old, Some, 6).await;
    assert!(matches!(same, Err(Error::InvalidArgument(_))), "{same:?}");
    assert!(new.get("n-3").await.unwrap().is_none(), "damaged: not copied");
    let report = new.verify(&MaintenanceOptions::default()).await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.documents, 18);
    assert_eq!(old.get("n-12").await.unwrap().unwrap().doc.words, "12", "the old layout is untouched");
}
