//! What a port of a real task store had to reach past the store for: how
//! many ids a list or an index holds, without reading them, and a write
//! that keeps a document's remaining lifetime instead of giving it the
//! type's again. Against a real Valkey.

use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use microdcs_tests::fixtures::{Extras, Job, Plant, Session, WorkMaster};
use microdcs_tests::{created, server, unique_prefix};
use microdcs_valkey::observe::OPERATIONS;
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{Document, Error, Expect, Page, PutOutcome, Valkey, config::WriteOptions, store::DeleteExpect};
use serde::{Deserialize, Serialize};

/// An entry of one list for the whole keyspace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(unscoped, kind = "entry", key = "entry:{id}", list(key = "entries"))]
pub struct Entry {
    /// Entry id.
    pub id: String,
}

microdcs_valkey::keyspace! {
    /// The unscoped list.
    pub Entries {
        documents: [Entry],
    }
}

/// Operations counted, each as its operation and target.
type Counted = Mutex<Vec<(String, String)>>;

/// The operations counted by this binary's recorder.
static COUNTED: LazyLock<Arc<Counted>> = LazyLock::new(Arc::default);

struct Capture;

struct Noop;

impl metrics::CounterFn for Noop {
    fn increment(&self, _: u64) {}
    fn absolute(&self, _: u64) {}
}

impl metrics::HistogramFn for Noop {
    fn record(&self, _: f64) {}
}

impl metrics::GaugeFn for Noop {
    fn increment(&self, _: f64) {}
    fn decrement(&self, _: f64) {}
    fn set(&self, _: f64) {}
}

/// One operation counted, named by its labels.
struct Op(String, String);

impl metrics::CounterFn for Op {
    fn increment(&self, _: u64) {
        COUNTED.lock().unwrap().push((self.0.clone(), self.1.clone()));
    }
    fn absolute(&self, _: u64) {}
}

impl Recorder for Capture {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        if key.name() != OPERATIONS {
            return Counter::from_arc(Arc::new(Noop));
        }
        let label =
            |name: &str| key.labels().find(|l| l.key() == name).map(|l| l.value().to_owned()).unwrap_or_default();
        Counter::from_arc(Arc::new(Op(label("db.operation.name"), label("microdcs.target"))))
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(Arc::new(Noop))
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(Arc::new(Noop))
    }
}

fn counted(op: &str, target: &str) -> usize {
    COUNTED.lock().unwrap().iter().filter(|(o, t)| o == op && t == target).count()
}

fn job(id: &str, scope: &str, status: &str, due: Option<i64>) -> Job {
    Job { id: id.into(), scope: scope.into(), status: status.into(), created: 1_700_000_000_000, due }
}

async fn setup(name: &str) -> (microdcs_valkey::testing::ValkeyServer, Valkey, ConnectionManager) {
    let s = server();
    let valkey = Valkey::connect_url(s.url(), unique_prefix(name), WriteOptions::default()).await.unwrap();
    let raw = ConnectionManager::new(redis::Client::open(s.url()).unwrap()).await.unwrap();
    (s, valkey, raw)
}

#[tokio::test]
async fn a_count_says_how_many_ids_a_list_or_index_holds_without_reading_them() {
    let _ = metrics::set_global_recorder(Capture);
    let (_s, valkey, mut raw) = setup("count").await;
    let jobs = Extras::open(valkey.clone()).store::<Job>();
    for (i, (status, due)) in
        [("queued", Some(5)), ("queued", None), ("queued", Some(9)), ("running", None), ("done", None)]
            .into_iter()
            .enumerate()
    {
        created(&jobs, &Job { created: 1_700_000_000_000 + i as i64, ..job(&format!("j-{i}"), "s1", status, due) })
            .await;
    }
    created(&jobs, &job("j-9", "s2", "queued", None)).await;

    // The per-scope list (a sorted set), one scope at a time.
    assert_eq!(jobs.count("s1").await.unwrap(), 5);
    assert_eq!(jobs.count("s2").await.unwrap(), 1);
    assert_eq!(jobs.count("nobody").await.unwrap(), 0);
    // Each kind of index: a group, a conditional member set, a sorted
    // index, a bounded sorted index (at most 3 kept).
    assert_eq!(jobs.count_ids(Job::by_status("s1", "queued")).await.unwrap(), 3);
    assert_eq!(jobs.count_ids(Job::by_status("s1", "paused")).await.unwrap(), 0);
    assert_eq!(jobs.count_ids(Job::running("s1")).await.unwrap(), 1);
    assert_eq!(jobs.count_ids(Job::due("s1")).await.unwrap(), 2);
    assert_eq!(jobs.count_ids(Job::recent("s1")).await.unwrap(), 3);
    // What a walk of the same ids finds.
    let walked = jobs.ids(Job::by_status("s1", "queued"), Page::first(100)).await.unwrap().ids.len() as u64;
    assert_eq!(jobs.count_ids(Job::by_status("s1", "queued")).await.unwrap(), walked);

    // A write and a delete move the counts as they move the ids.
    let read = jobs.get("j-0").await.unwrap().unwrap();
    let out = jobs.update(&read, &Job { status: "running".into(), ..read.doc.clone() }).await.unwrap();
    assert!(matches!(out, PutOutcome::Written { .. }), "{out:?}");
    assert!(jobs.delete_id("j-1", DeleteExpect::Any).await.is_ok());
    assert_eq!(jobs.count("s1").await.unwrap(), 4);
    assert_eq!(jobs.count_ids(Job::by_status("s1", "queued")).await.unwrap(), 1);
    assert_eq!(jobs.count_ids(Job::running("s1")).await.unwrap(), 2);

    // A plain-set list, and the one list of an unscoped type.
    let masters = Plant::open(valkey.clone()).store::<WorkMaster>();
    for i in 0..3 {
        created(&masters, &WorkMaster { id: format!("w-{i}"), scope: "s1".into(), name: "m".into() }).await;
    }
    assert_eq!(masters.count("s1").await.unwrap(), 3);
    let entries = Entries::open(valkey.clone()).store::<Entry>();
    for i in 0..2 {
        created(&entries, &Entry { id: format!("e-{i}") }).await;
    }
    assert_eq!(entries.count_all().await.unwrap(), 2);
    // The scope forms of the unscoped list, as `list` and `list_all` refuse them.
    assert!(matches!(entries.count("s1").await, Err(Error::InvalidArgument(_))));
    assert!(matches!(masters.count_all().await, Err(Error::InvalidArgument(_))));

    // A key of another type is that error, not a count.
    let list_key = format!("{}:job:list:s3", valkey.prefix().as_str());
    let _: () = redis::cmd("SET").arg(&list_key).arg("x").query_async(&mut raw).await.unwrap();
    assert!(matches!(jobs.count("s3").await, Err(Error::WrongType { .. })), "{:?}", jobs.count("s3").await);

    // Reported as operations, as every read is.
    assert!(counted("count", "job") >= 4, "{:?}", COUNTED.lock().unwrap());
    assert!(counted("count_ids", "job") >= 6, "{:?}", COUNTED.lock().unwrap());
}

async fn pttl(raw: &mut ConnectionManager, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(raw).await.unwrap()
}

fn session(token: &str, user: &str) -> Session {
    Session { id: "sess-1".into(), scope: "s1".into(), token: token.into(), user: user.into() }
}

#[tokio::test]
async fn a_write_can_keep_the_remaining_lifetime() {
    let (_s, valkey, mut raw) = setup("keep-lifetime").await;
    let sessions = Extras::open(valkey.clone()).store::<Session>();
    let short = sessions.with_ttl(Duration::from_secs(60)).unwrap();
    let (doc_key, token_key) =
        (sessions.key("sess-1").unwrap(), Session::by_token_key(valkey.prefix(), "t-1").unwrap());
    let minute = 60_000;

    // Created with a minute to live; the type's own lifetime is 30 minutes.
    created(&short, &session("t-1", "ann")).await;
    let left = pttl(&mut raw, &doc_key).await;
    assert!(left > 0 && left <= minute, "{left}");

    // A write that keeps the lifetime: the document and its unique key
    // still end within the minute, whatever lifetime the store gives.
    let read = sessions.get("sess-1").await.unwrap().unwrap();
    let out = sessions.update(&read, &session("t-1", "bob")).keep_lifetime().await.unwrap();
    assert_eq!(out, PutOutcome::Written { version: 2 });
    for key in [&doc_key, &token_key] {
        let left = pttl(&mut raw, key).await;
        assert!(left > 0 && left <= minute, "{key}: {left}");
    }
    // Every form of a write takes it; a unique key that changes gets the
    // kept lifetime too.
    let out = sessions.put(&session("t-2", "bob"), Expect::Any).keep_lifetime().await.unwrap();
    assert_eq!(out, PutOutcome::Written { version: 3 });
    let moved = Session::by_token_key(valkey.prefix(), "t-2").unwrap();
    for key in [&doc_key, &moved] {
        let left = pttl(&mut raw, key).await;
        assert!(left > 0 && left <= minute, "{key}: {left}");
    }
    let mut read = sessions.get("sess-1").await.unwrap().unwrap();
    let out = sessions.update_in_place(&mut read, session("t-2", "cy")).keep_lifetime().await.unwrap();
    assert_eq!(out, PutOutcome::Written { version: 4 });
    let left = pttl(&mut raw, &doc_key).await;
    assert!(left > 0 && left <= minute, "{left}");
    assert_eq!(sessions.get("sess-1").await.unwrap().unwrap().doc.user, "cy");

    // Without the option a write gives the store's lifetime again.
    let out = sessions.update(&read, &session("t-2", "dee")).await.unwrap();
    assert_eq!(out, PutOutcome::Written { version: 5 });
    let left = pttl(&mut raw, &doc_key).await;
    assert!(left > minute, "the type's 30 minutes again: {left}");

    // A document without a lifetime (written by hand, or before the type
    // had one) is given the store's: keeping never makes one unbounded.
    let _: () = redis::cmd("PERSIST").arg(&doc_key).query_async(&mut raw).await.unwrap();
    let out = short.put(&session("t-2", "eve"), Expect::Version(5)).keep_lifetime().await.unwrap();
    assert_eq!(out, PutOutcome::Written { version: 6 });
    let left = pttl(&mut raw, &doc_key).await;
    assert!(left > 0 && left <= minute, "{left}");

    // A create has no lifetime to keep: it gets the store's.
    let other = Session { id: "sess-2".into(), ..session("t-9", "fay") };
    assert_eq!(sessions.create(&other).keep_lifetime().await.unwrap(), PutOutcome::Written { version: 1 });
    let left = pttl(&mut raw, &sessions.key("sess-2").unwrap()).await;
    assert!(left > minute, "{left}");
}
