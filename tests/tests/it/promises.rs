//! Documented promises probed from the outside, each through the guide's
//! own idiom: claims hand a document to one worker (also on a sorted index
//! and under connection cuts), and a read of one tenant never writes over
//! another. Against a real Valkey.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use microdcs_tests::fixtures::{Extras, Job, Ticket};
use microdcs_tests::{server, unique_prefix};
use microdcs_valkey::testing::FaultProxy;
use microdcs_valkey::{
    Error, Page, PutOutcome, Store, Valkey, config::WriteOptions, families::RateDecision, store::DeleteExpect,
};

fn job(id: &str, status: &str, due: Option<i64>) -> Job {
    Job { id: id.into(), scope: "s1".into(), status: status.into(), created: 1_700_000_000_000, due }
}

/// 50 workers claim queued jobs with exactly the guide's closure (which
/// never looks at the state) until none is left; returns every id claimed.
async fn claim_all(store: &Store<Job>, workers: usize) -> Vec<String> {
    let tasks: Vec<_> = (0..workers)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let claimed = store
                        .claim(Job::by_status("s1", "queued"), |d| Some(Job { status: "running".into(), ..d.clone() }))
                        .await;
                    // A claim that could not reach the server wrote nothing
                    // the store could not account for: a worker tries again.
                    let claimed = match claimed {
                        Err(e) if e.is_connection() && !matches!(e, Error::UnknownOutcome { .. }) => {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            continue;
                        }
                        other => other.unwrap(),
                    };
                    match claimed {
                        Some(s) => {
                            assert_eq!(s.doc.status, "running");
                            mine.push(s.id);
                        }
                        None => break mine,
                    }
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

async fn queue(store: &Store<Job>, n: usize) {
    let jobs: Vec<Job> = (0..n).map(|i| job(&format!("j-{i}"), "queued", None)).collect();
    assert!(store.put_many(&jobs, microdcs_valkey::Expect::Create).await.iter().all(Result::is_ok));
}

/// Every job claimed once, none lost: each is running at version 2.
async fn assert_each_once(store: &Store<Job>, mut all: Vec<String>, n: usize, how: &str) {
    let claimed = all.len();
    all.sort();
    all.dedup();
    println!("{how}: {claimed} claims of {n} jobs, {} doubled, {} lost", claimed - all.len(), n - all.len());
    assert_eq!((claimed, all.len()), (n, n), "{how}: every job claimed, none twice");
    let left = store.ids(Job::by_status("s1", "queued"), Page::first(10)).await.unwrap();
    assert!(left.ids.is_empty(), "{how}: none left queued");
    let running = store.docs(Job::by_status("s1", "running"), Page::first(Page::MAX)).await.unwrap();
    assert!(running.documents.iter().all(|s| s.version == 2), "{how}: no job written twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_claim_idiom_claims_each_job_once() {
    let server = server();
    let valkey =
        Valkey::connect_url(server.url(), unique_prefix("claim-idiom"), WriteOptions::default()).await.unwrap();
    let store = Extras::open(valkey).store::<Job>();
    queue(&store, 1000).await;
    let all = claim_all(&store, 50).await;
    assert_each_once(&store, all, 1000, "50 workers").await;
}

#[tokio::test]
async fn a_sorted_index_is_claimed_oldest_first_and_up_to_a_bound() {
    let server = server();
    let valkey = Valkey::connect_url(server.url(), unique_prefix("claim-due"), WriteOptions::default()).await.unwrap();
    let store = Extras::open(valkey).store::<Job>();
    for (id, due) in [("late", 300), ("first", 100), ("second", 200)] {
        let _ = store.create(&job(id, "queued", Some(due))).await.unwrap();
    }
    // Taken: no longer due (the claim clears the deadline).
    let take = |d: &Job| Some(Job { status: "running".into(), due: None, ..d.clone() });
    let got = store.claim(Job::due("s1"), take).await.unwrap().unwrap();
    assert_eq!((got.id.as_str(), got.version), ("first", 2), "lowest score first");
    let got = store.claim_due(Job::due("s1"), 250.0, take).await.unwrap().unwrap();
    assert_eq!(got.id, "second");
    assert!(store.claim_due(Job::due("s1"), 250.0, take).await.unwrap().is_none(), "`late` is not due by 250");
    // A closure that keeps the score keeps the document due: claimed
    // once, then the write moved it, so it is claimed again only while due.
    let got = store.claim_due(Job::due("s1"), 1000.0, take).await.unwrap().unwrap();
    assert_eq!(got.id, "late");
    assert!(store.claim(Job::due("s1"), take).await.unwrap().is_none());
    assert!(matches!(store.claim_due(Job::by_status("s1", "queued"), 1.0, take).await, Err(Error::InvalidArgument(_))));
    assert!(matches!(store.claim_due(Job::due("s1"), f64::NAN, take).await, Err(Error::InvalidArgument(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_workers_on_a_sorted_index_claim_each_due_job_once() {
    let server = server();
    let valkey =
        Valkey::connect_url(server.url(), unique_prefix("claim-due-many"), WriteOptions::default()).await.unwrap();
    let store = Extras::open(valkey).store::<Job>();
    let jobs: Vec<Job> = (0..200).map(|i| job(&format!("j-{i}"), "queued", Some(i))).collect();
    assert!(store.put_many(&jobs, microdcs_valkey::Expect::Create).await.iter().all(Result::is_ok));
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                // The guide's idiom: the closure keeps the deadline, so the
                // store alone must keep a claimed job from a second worker.
                while let Some(s) = store
                    .claim_due(Job::due("s1"), 1e12, |d| Some(Job { status: "running".into(), due: None, ..d.clone() }))
                    .await
                    .unwrap()
                {
                    mine.push(s.id);
                }
                mine
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!((n, all.len()), (200, 200), "every due job claimed once");
}

#[tokio::test]
async fn a_claim_refuses_what_the_stored_fields_put_elsewhere() {
    // A stale entry (left in the queued set by hand) names a running job:
    // the claim passes over it instead of handing the running job out.
    let server = server();
    let prefix = unique_prefix("claim-stale");
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let mut raw = microdcs_valkey::redis::aio::ConnectionManager::new(
        microdcs_valkey::redis::Client::open(server.url()).unwrap(),
    )
    .await
    .unwrap();
    let store = Extras::open(valkey).store::<Job>();
    let _ = store.create(&job("j-1", "running", None)).await.unwrap();
    let key = format!("{}:job:bystatus:s1:queued", prefix.as_str());
    let () = microdcs_valkey::redis::cmd("SADD").arg(&key).arg("j-1").query_async(&mut raw).await.unwrap();
    let got =
        store.claim(Job::by_status("s1", "queued"), |d| Some(Job { status: "running".into(), ..d.clone() })).await;
    assert!(got.unwrap().is_none(), "a running job is not queued, whatever the set says");
    assert_eq!(store.get("j-1").await.unwrap().unwrap().version, 1, "nothing written");
}

fn ticket(scope: &str, id: &str, reference: &str, status: &str) -> Ticket {
    Ticket { id: id.into(), scope: scope.into(), reference: reference.into(), status: status.into(), opened: 1 }
}

#[tokio::test]
async fn a_read_of_one_tenant_never_writes_over_another() {
    let server = server();
    let valkey =
        Valkey::connect_url(server.url(), unique_prefix("tenant-read"), WriteOptions::default()).await.unwrap();
    let store = Extras::open(valkey).store::<Ticket>();
    let _ = store.create(&ticket("acme", "t5", "A-5", "open")).await.unwrap();
    let _ = store.create(&ticket("bolt", "t5", "B-5", "open")).await.unwrap();
    let bolt = store.get_in("bolt", "t5").await.unwrap().unwrap();
    let acme_doc = ticket("acme", "t5", "A-6", "closed");
    let refused = |r: Result<PutOutcome, Error>, what: &str| {
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{what}: {r:?}");
    };
    refused(store.update(&bolt, &acme_doc).await, "update");
    refused(store.update(&bolt, &acme_doc).op("op-1").await, "update(..).op(..)");
    let mut b = bolt.clone();
    refused(store.update_in_place(&mut b, acme_doc.clone()).await, "update_in_place");
    assert_eq!(b.version, bolt.version, "the read is unchanged");
    // A read whose public scope was changed by hand is refused too.
    let mut forged = bolt.clone();
    forged.scope = "acme".into();
    refused(store.update(&forged, &acme_doc).await, "update with a forged scope");
    assert!(matches!(store.delete(&forged).await, Err(Error::InvalidArgument(_))), "delete with a forged scope");
    // Nothing written: both tenants as they were, every index clean.
    assert_eq!(store.get_in("acme", "t5").await.unwrap().unwrap().version, 1);
    assert_eq!(store.get_in("bolt", "t5").await.unwrap().unwrap().doc, ticket("bolt", "t5", "B-5", "open"));
    let report = store.verify(&Default::default()).await.unwrap();
    assert!(report.is_clean(), "{:?}", report.differences);
    // The same read in its own scope still writes.
    assert!(matches!(store.update(&bolt, &ticket("bolt", "t5", "B-6", "open")).await, Ok(PutOutcome::Written { .. })));
    // A per-scope delete with the caller's op id is idempotent.
    let d1 = store.delete_id("t5", DeleteExpect::Any).in_scope("acme").op("del-1").await.unwrap();
    let d2 = store.delete_id("t5", DeleteExpect::Any).in_scope("acme").op("del-1").await.unwrap();
    assert_eq!(d1, d2, "the repeat reports the same delete");
    assert!(store.get_in("bolt", "t5").await.unwrap().is_some(), "the other tenant's t5 stays");
}

#[tokio::test]
async fn a_patient_client_that_waits_out_every_block_still_escalates() {
    let server = server();
    let valkey =
        Valkey::connect_url(server.url(), unique_prefix("rate-patient"), WriteOptions::default()).await.unwrap();
    let extras = Extras::open(valkey);
    let limit = Extras::logins(&extras, "s1", "ada").unwrap();
    let (base, max) = (Duration::from_millis(60), Duration::from_millis(400));
    let mut blocks = Vec::new();
    for _ in 0..5 {
        let block = limit.fail(base, max).await.unwrap();
        blocks.push(block.as_millis());
        // Wait the whole block out, then some: the failures are remembered.
        tokio::time::sleep(block + Duration::from_millis(20)).await;
        assert!(
            matches!(limit.attempt(100, Duration::from_secs(1)).await.unwrap(), RateDecision::Allowed { .. }),
            "the block is over"
        );
    }
    println!("block sequence (ms): {blocks:?}");
    assert_eq!(blocks, [60, 120, 240, 400, 400], "doubling to the longest block");
    // A client that stays away for the longest block starts again at base.
    tokio::time::sleep(max + Duration::from_millis(50)).await;
    assert_eq!(limit.fail(base, max).await.unwrap(), base);
    // A success forgets the failures at once.
    assert_eq!(limit.fail(base, max).await.unwrap(), base * 2);
    limit.succeed().await.unwrap();
    assert_eq!(limit.fail(base, max).await.unwrap(), base);
}

#[tokio::test]
async fn the_inspector_agrees_with_the_store_on_member_and_sorted_entries() {
    use microdcs_valkey::{inspect::EntryState, inspect::Inspector};
    let server = server();
    let valkey =
        Valkey::connect_url(server.url(), unique_prefix("inspect-gated"), WriteOptions::default()).await.unwrap();
    let extras = Extras::open(valkey);
    let store = extras.store::<Job>();
    // Not running, no deadline: neither in `running` nor in `due`.
    let _ = store.create(&job("idle", "queued", None)).await.unwrap();
    // Running with a deadline: in both.
    let _ = store.create(&job("busy", "running", Some(500))).await.unwrap();
    let inspector = Inspector::new(&extras);
    let state = |view: &microdcs_valkey::inspect::DocumentView, index: &str| {
        view.entries.iter().find(|e| e.index == index).map(|e| e.state.clone()).unwrap()
    };
    let idle = inspector.document("job", "idle").await.unwrap().unwrap();
    assert_eq!(state(&idle, "running"), EntryState::NotIndexed, "when = false: correctly absent");
    assert_eq!(state(&idle, "due"), EntryState::NotIndexed, "no score: correctly absent");
    assert!(idle.entries.iter().all(|e| !matches!(e.state, EntryState::Missing)), "{:?}", idle.entries);
    let busy = inspector.document("job", "busy").await.unwrap().unwrap();
    assert_eq!(state(&busy, "running"), EntryState::Present);
    assert_eq!(state(&busy, "due"), EntryState::Present);
    // The store's verify says the same: nothing missing.
    assert!(store.verify(&Default::default()).await.unwrap().is_clean());
}

#[test]
fn persisted_digests_are_pinned_by_literals() {
    use microdcs_tests::fixtures::JobResponse;
    use microdcs_valkey::Document;
    // Layout fingerprints recorded on servers by a rebuild: a change would
    // flag every index of every deployment as needing a rebuild.
    let fps = microdcs_valkey::store::fingerprints(&JobResponse::SPEC);
    assert_eq!(fps, FINGERPRINTS.map(|(f, d)| (f.to_owned(), d.to_owned())).to_vec());
    // The stored form of a caller's operation id: a change would make a
    // retry across an upgrade unrecognised, and apply an `Expect::Any`
    // write twice.
    assert_eq!(microdcs_schema::lua::stored_op_id("order-7/attempt-1"), STORED_OP_ID);
    assert_eq!(microdcs_schema::lua::stored_op_id("x"), STORED_OP_ID_X);
}

const FINGERPRINTS: [(&str, &str); 3] = [
    ("jobresponse:list", "a77e47f3cef04aef"),
    ("jobresponse:by_order", "2d60ff61dbe84a11"),
    ("jobresponse:by_state", "38e3a2ba46a124ee"),
];
const STORED_OP_ID: &str = "19vC08h5qtSJ";
const STORED_OP_ID_X: &str = "yNNnc5IT1P2r";

#[tokio::test]
async fn a_page_belongs_to_its_walk_and_resumes_from_its_token() {
    let server = server();
    let prefix = unique_prefix("page-walk");
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let store = Extras::open(valkey).store::<Job>();
    for i in 0..30 {
        let status = if i % 2 == 0 { "queued" } else { "done" };
        let _ = store.create(&job(&format!("j-{i:02}"), status, None)).await.unwrap();
    }
    let queued = || Job::by_status("s1", "queued");
    let page = store.ids(queued(), Page::first(4)).await.unwrap().next.expect("more queued");
    // Another group, a list, another scope: refused, nothing walked.
    let refused = |r: Result<microdcs_valkey::store::IdPage, Error>, what: &str| {
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{what}: {r:?}");
    };
    refused(store.ids(Job::by_status("s1", "done"), page.clone()).await, "another group");
    refused(store.ids(Job::by_status("s2", "queued"), page.clone()).await, "another scope");
    refused(store.list("s1", page.clone()).await, "a list");
    let list_page = store.list("s1", Page::first(4)).await.unwrap().next.unwrap();
    refused(store.ids(queued(), list_page.clone()).await, "a list page to a group");
    refused(store.ids(Job::due("s1"), list_page).await, "a list page to a sorted index");

    // The walk resumes from the token, in this process or another.
    let mut all: Vec<String> = Vec::new();
    let mut next = Some(Page::first(4));
    while let Some(p) = next {
        let token = p.to_token();
        let got = store.ids(queued(), Page::from_token(&token).unwrap()).await.unwrap();
        all.extend(got.ids);
        next = got.next;
    }
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 15, "every queued job once through tokens: {all:?}");
    // A sorted walk by token too.
    let mut listed = Vec::new();
    let mut p = Some(Page::first(7));
    while let Some(page) = p {
        let got = store.list("s1", page.to_token().parse().unwrap()).await.unwrap();
        listed.extend(got.ids);
        p = got.next;
    }
    assert_eq!(listed.len(), 30);
    // A damaged token is a typed error.
    let token = store.ids(queued(), Page::first(4)).await.unwrap().next.unwrap().to_token();
    let damaged = format!("{}0", &token[..token.len() - 1]);
    assert!(matches!(Page::from_token(&damaged), Err(Error::InvalidArgument(_))));
}

/// `put(Any)` racing `update` on one document whose unique and group
/// indexes move with every write: an overwrite has no expectation to fail,
/// so it converges. Prints the fraction that gave up (`Contention`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_any_converges_under_contention() {
    use microdcs_tests::fixtures::{JobResponse, Plant};
    let server = server();
    let valkey = Valkey::connect_url(server.url(), unique_prefix("put-any"), WriteOptions::default()).await.unwrap();
    let store = Plant::open(valkey).store::<JobResponse>();
    let doc = |w: usize, i: usize| {
        let state = ["Queued", "Running", "Held", "Done"][(w + i) % 4];
        JobResponse::new("r-1", "s1", &format!("o-{w}-{i}"), &[state])
    };
    let _ = store.create(&doc(0, 0)).await.unwrap();
    const EACH: usize = 150;
    let tasks: Vec<_> = (0..20)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                let (mut gave_up, mut puts) = (0u32, 0u32);
                for i in 0..EACH {
                    if w % 2 == 0 {
                        puts += 1;
                        match store.put(&doc(w, i), microdcs_valkey::Expect::Any).await {
                            Ok(PutOutcome::Written { .. }) => {}
                            Err(Error::Contention { .. }) => gave_up += 1,
                            other => panic!("put(Any): {other:?}"),
                        }
                    } else {
                        let read = store.get("r-1").await.unwrap().unwrap();
                        match store.update(&read, &doc(w, i)).await {
                            Ok(PutOutcome::Written { .. } | PutOutcome::Conflict { .. }) => {}
                            Err(Error::Contention { .. }) => {}
                            other => panic!("update: {other:?}"),
                        }
                    }
                }
                (gave_up, puts)
            })
        })
        .collect();
    let (mut gave_up, mut puts) = (0, 0);
    for t in tasks {
        let (g, p) = t.await.unwrap();
        gave_up += g;
        puts += p;
    }
    let fraction = f64::from(gave_up) / f64::from(puts);
    println!("put(Any) under contention: {gave_up} of {puts} gave up ({:.3}%)", fraction * 100.0);
    // About 0.01% give up on a quiet machine; the bound leaves room for a
    // busy one (other test processes widen the window between a read and
    // its write) while still failing if put(Any) stopped retrying at all.
    assert!(fraction <= 0.01, "{gave_up} of {puts} put(Any) calls gave up");
    let report = store.verify(&Default::default()).await.unwrap();
    assert!(report.is_clean(), "{:?}", report.differences);
}

#[test]
fn the_key_table_says_what_each_declared_family_is() {
    let table = microdcs_valkey::inspect::keyspace_markdown(&Extras::SPEC);
    let row = |family: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("| `{family}` |")))
            .unwrap_or_else(|| panic!("{table}"))
            .to_owned()
    };
    assert!(row("seen").contains("30000 ms from each write (`ttl`)"), "{}", row("seen"));
    assert!(row("logins").contains("`RateLimitKey`") && row("logins").contains("failures `max` past the block"));
    assert!(row("tallies").contains("`HashKey` / `TypedHash`"), "{}", row("tallies"));
    assert!(!row("logins").contains("`HashKey`"), "a rate limit is not a plain hash: {}", row("logins"));
}

#[tokio::test]
async fn a_claim_walks_past_refused_ids_and_refuses_a_change_that_stays() {
    let server = server();
    let valkey = Valkey::connect_url(server.url(), unique_prefix("claim-walk"), WriteOptions::default()).await.unwrap();
    let store = Extras::open(valkey).store::<Job>();
    // 40 due jobs, the 39 lowest held back by the closure: the claim must
    // walk past them (more than a round of 16) to the last one.
    let jobs: Vec<Job> = (0..40).map(|i| job(&format!("j-{i:02}"), "queued", Some(i))).collect();
    assert!(store.put_many(&jobs, microdcs_valkey::Expect::Create).await.iter().all(Result::is_ok));
    let got = store
        .claim_due(Job::due("s1"), 1e12, |d| (d.id == "j-39").then(|| Job { due: None, ..d.clone() }))
        .await
        .unwrap();
    assert_eq!(got.map(|s| s.id).as_deref(), Some("j-39"));
    // A `change` that keeps the document where it was claimed would let
    // the next worker claim it again: refused, nothing written.
    let stays = store.claim(Job::by_status("s1", "queued"), |d| Some(Job { created: 7, ..d.clone() })).await;
    assert!(matches!(stays, Err(Error::InvalidArgument(_))), "{stays:?}");
    let still_due = store.claim_due(Job::due("s1"), 1e12, |d| Some(Job { due: Some(5), ..d.clone() })).await;
    assert!(matches!(still_due, Err(Error::InvalidArgument(_))), "{still_due:?}");
    // Moved past the bound is a claim (a retry queue pushing a job later).
    let later = store.claim_due(Job::due("s1"), 10.0, |d| Some(Job { due: Some(1_000), ..d.clone() })).await.unwrap();
    assert_eq!(later.map(|s| s.doc.due), Some(Some(1_000)));
    let versions: Vec<u64> =
        store.get_many(&["j-00", "j-01", "j-38"]).await.unwrap().into_iter().map(|s| s.unwrap().version).collect();
    assert_eq!(versions, [2, 1, 1], "only the claimed job was written");
}

#[tokio::test]
async fn every_write_takes_its_options_by_name() {
    let server = server();
    let valkey =
        Valkey::connect_url(server.url(), unique_prefix("write-shape"), WriteOptions::default()).await.unwrap();
    let store = Extras::open(valkey).store::<Ticket>();
    let _ = store.create(&ticket("acme", "t1", "A-1", "open")).op("create-t1").await.unwrap();
    // The same create again, by its op id: recognised, not a conflict.
    assert_eq!(
        store.create(&ticket("acme", "t1", "A-1", "open")).op("create-t1").await.unwrap(),
        PutOutcome::Written { version: 1 }
    );
    let mut read = store.get_in("acme", "t1").await.unwrap().unwrap();
    let first = store.update(&read, &ticket("acme", "t1", "A-2", "open")).op("u-1").await.unwrap();
    let again = store.update(&read, &ticket("acme", "t1", "A-2", "open")).op("u-1").await.unwrap();
    assert_eq!((first, again), (PutOutcome::Written { version: 2 }, PutOutcome::Written { version: 2 }));
    read = store.get_in("acme", "t1").await.unwrap().unwrap();
    let out = store.update_in_place(&mut read, ticket("acme", "t1", "A-3", "held")).op("u-2").await.unwrap();
    assert_eq!((out, read.version), (PutOutcome::Written { version: 3 }, 3));
    // A request is a future like any other: it goes into a timeout.
    let timed = tokio::time::timeout(Duration::from_secs(5), store.put(&read.doc, microdcs_valkey::Expect::Any)).await;
    assert!(matches!(timed, Ok(Ok(PutOutcome::Written { version: 4 }))), "{timed:?}");
    // Delete by id in a scope with an op id: repeated, the same outcome.
    let d1 = store.delete_id("t1", DeleteExpect::Any).in_scope("acme").op("d-1").await.unwrap();
    let d2 = store.delete_id("t1", DeleteExpect::Any).in_scope("acme").op("d-1").await.unwrap();
    assert_eq!(d1, d2);
    assert!(matches!(store.delete_id("t1", DeleteExpect::Any).op("bad op!").await, Err(Error::InvalidOpId(_))));
    // A read's delete in another scope is refused.
    let _ = store.create(&ticket("bolt", "t2", "B-1", "open")).await.unwrap();
    let bolt = store.get_in("bolt", "t2").await.unwrap().unwrap();
    assert!(matches!(store.delete(&bolt).in_scope("acme").await, Err(Error::InvalidArgument(_))));
    assert!(matches!(store.delete(&bolt).op("d-2").await, Ok(microdcs_valkey::store::DeleteOutcome::Deleted { .. })));
}

#[tokio::test]
async fn a_request_polled_after_it_completed_is_an_error_and_a_requeue_is_a_claim() {
    let server = server();
    let valkey =
        Valkey::connect_url(server.url(), unique_prefix("request-twice"), WriteOptions::default()).await.unwrap();
    let store = Extras::open(valkey).store::<Job>();
    let doc = job("j-1", "queued", Some(10));
    let mut call = store.create(&doc);
    assert_eq!((&mut call).await.unwrap(), PutOutcome::Written { version: 1 });
    assert!(matches!((&mut call).await, Err(Error::InvalidArgument(_))), "a finished request starts nothing");
    assert_eq!(store.get("j-1").await.unwrap().unwrap().version, 1);
    // A plain claim on a sorted index that pushes the job later (a retry
    // queue) moves it: a claim, not a refusal.
    let got = store.claim(Job::due("s1"), |d| Some(Job { due: d.due.map(|t| t + 1_000), ..d.clone() })).await;
    assert_eq!(got.unwrap().map(|s| s.doc.due), Some(Some(1_010)));
}

/// Damage in an index is refused or passed over, never claimed past or
/// allowed to stop a walk: a corrupt stored score (even without a bound),
/// a group member that is no valid id.
#[tokio::test]
async fn damage_in_an_index_is_refused_or_passed_over() {
    use microdcs_valkey::redis::{self, AsyncCommands};
    let server = server();
    let valkey =
        Valkey::connect_url(server.url(), unique_prefix("claim-damage"), WriteOptions::default()).await.unwrap();
    let mut raw = redis::aio::ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let store = Extras::open(valkey.clone()).store::<Job>();
    let _ = store.create(&job("bad", "queued", Some(100))).await.unwrap();
    let key = store.key("bad").unwrap();
    let fields: std::collections::HashMap<String, String> = raw.hgetall(&key).await.unwrap();
    let (score_field, _) =
        fields.iter().find(|(f, v)| *v == "100" && f.as_str() != "doc").expect("the due score is stored");
    let _: () = raw.hset(&key, score_field, "soon").await.unwrap();
    let before: std::collections::HashMap<String, String> = raw.hgetall(&key).await.unwrap();
    let take = |d: &Job| Some(Job { status: "running".into(), due: None, ..d.clone() });
    let err = store.claim(Job::due("s1"), take).await.unwrap_err();
    assert!(err.is_corrupt(), "{err:?}");
    let after: std::collections::HashMap<String, String> = raw.hgetall(&key).await.unwrap();
    assert_eq!(after, before, "nothing written");

    // A group member that is no valid id: a page lists it as damage and
    // goes on; a claim passes it over and takes a real job.
    let _ = store.create(&job("good", "queued", None)).await.unwrap();
    let group = Job::by_status_key(valkey.prefix(), "s1", "queued").unwrap();
    let _: () = raw.sadd(&group, "").await.unwrap();
    let page = store.docs(Job::by_status("s1", "queued"), Page::first(10)).await.unwrap();
    assert_eq!(page.damaged.len(), 1, "{:?}", page.damaged);
    assert!(page.damaged.iter().all(Error::is_corrupt), "{:?}", page.damaged);
    let mut ids: Vec<&str> = page.documents.iter().map(|d| d.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["bad", "good"]);
    for _ in 0..10 {
        let got = store.claim(Job::by_status("s1", "queued"), |d| {
            (d.id == "good").then(|| Job { status: "running".into(), ..d.clone() })
        });
        if let Some(got) = got.await.unwrap() {
            assert_eq!(got.id, "good");
            return;
        }
    }
    panic!("the claim never reached the real job past the damaged member");
}

/// Tests that stop, restart or cut their server, kill its clients or count
/// its commands: each starts a server of its own (the cluster suite leaves
/// this module out).
mod standalone {
    use super::*;

    use microdcs_tests::own_server as server;

    /// The connect timeout covers the whole start: a server that drops its
    /// clients while a handle starts (`CLIENT KILL`, as an operator or a
    /// restart does) costs a retry, not the start. Before, a connection
    /// lost between the probe and the first `PING` failed the connect at
    /// once ("cannot connect ... within 5s: broken pipe" after 0.7 s).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connect_survives_its_server_killing_its_clients() {
        let server = server();
        let url = server.url().to_owned();
        let stop = Arc::new(AtomicBool::new(false));
        let killer = {
            let (url, stop) = (url.clone(), stop.clone());
            tokio::spawn(async move {
                let client = microdcs_valkey::redis::Client::open(url).unwrap();
                let mut con = client.get_multiplexed_async_connection().await.unwrap();
                let mut kills = 0i64;
                while !stop.load(Ordering::SeqCst) {
                    let n: i64 = microdcs_valkey::redis::cmd("CLIENT")
                        .arg("KILL")
                        .arg("TYPE")
                        .arg("normal")
                        .arg("SKIPME")
                        .arg("yes")
                        .query_async(&mut con)
                        .await
                        .unwrap();
                    kills += n;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                kills
            })
        };
        // A generous connect timeout: a loaded machine may need several
        // attempts between two kills.
        let config = microdcs_valkey::config::ValkeyConfig {
            connection_string: microdcs_valkey::config::Secret::new(url.clone()),
            key_prefix: unique_prefix("connect-kills").as_str().to_owned(),
            connect_timeout: Duration::from_secs(60),
            ..microdcs_valkey::MicroDcsConfig::default().valkey
        };
        let mut failed = Vec::new();
        for i in 0..40 {
            if let Err(e) = Valkey::connect(&config).await {
                failed.push(format!("connect {i}: {e}"));
            }
        }
        stop.store(true, Ordering::SeqCst);
        let kills = killer.await.unwrap();
        assert!(kills > 0, "the server killed no client: the test proves nothing");
        assert!(failed.is_empty(), "{kills} clients killed; failed starts: {failed:#?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_readme_claim_idiom_claims_each_job_once_under_connection_cuts() {
        let server = server();
        let proxy = Arc::new(FaultProxy::start(server.host_port()).await);
        let valkey =
            Valkey::connect_url(&proxy.url(), unique_prefix("claim-cuts"), WriteOptions::default()).await.unwrap();
        let store = Extras::open(valkey).store::<Job>();
        queue(&store, 1000).await;
        // A cut after a claim's write reached the server: its reply is lost, so
        // the store must find out it applied instead of claiming again. Spaced
        // so that a write's four attempts (100 ms apart) are not all cut, as a flaky network
        // would be, so each write has an attempt that gets through.
        let stop = Arc::new(AtomicBool::new(false));
        let cutter = {
            let (proxy, stop) = (proxy.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    proxy.cut_after_request_containing(b"EVALSHA").await;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            })
        };
        let all = claim_all(&store, 50).await;
        stop.store(true, Ordering::SeqCst);
        cutter.await.unwrap();
        assert!(proxy.cuts() >= 4, "the run met connection cuts: {}", proxy.cuts());
        println!("connection cuts: {}", proxy.cuts());
        assert_each_once(&store, all, 1000, "50 workers, cuts").await;
    }
}
