//! Pages mean what they say: at most the count asked for, and a walk that
//! returns every id present throughout exactly once, for sets and sorted
//! sets, even while others insert.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

use microdcs_tests::fixtures::{JobResponse, Plant, WorkMaster};
use microdcs_tests::{created, server, unique_prefix};
use microdcs_valkey::{Page, Result, Valkey, config::WriteOptions, store::IdPage};

async fn plant(name: &str) -> (microdcs_tests::fixtures::PlantHandle, microdcs_valkey::testing::ValkeyServer) {
    let s = server();
    let valkey = Valkey::connect_url(s.url(), unique_prefix(name), WriteOptions::default()).await.unwrap();
    (Plant::open(valkey), s)
}

/// Walks every page from a first page of `count`, checking each holds at
/// most `count` ids.
async fn walk<F, Fut>(count: usize, read: F) -> Vec<String>
where
    F: FnMut(Page) -> Fut,
    Fut: Future<Output = Result<IdPage>>,
{
    walk_from(Page::first(count), read).await
}

/// Walks every page from `first`, checking each holds at most its count.
async fn walk_from<F, Fut>(first: Page, mut read: F) -> Vec<String>
where
    F: FnMut(Page) -> Fut,
    Fut: Future<Output = Result<IdPage>>,
{
    let count = first.count();
    let mut all = Vec::new();
    let mut page = Some(first);
    let mut pages = 0;
    while let Some(p) = page {
        let got = read(p).await.unwrap();
        assert!(got.ids.len() <= count, "a page of {} ids for a count of {count}", got.ids.len());
        all.extend(got.ids);
        page = got.next;
        pages += 1;
        assert!(pages < 100_000, "the walk never ends");
    }
    all
}

fn exactly_once(got: &[String], want: &BTreeSet<String>) {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for id in got {
        *seen.entry(id.as_str()).or_default() += 1;
    }
    let repeated: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(repeated.is_empty(), "repeated: {repeated:?}");
    let missing: Vec<_> = want.iter().filter(|id| !seen.contains_key(id.as_str())).collect();
    assert!(missing.is_empty(), "missing {} of {}: {:?}", missing.len(), want.len(), &missing[..missing.len().min(5)]);
}

#[tokio::test]
async fn a_set_of_1000_in_pages_of_7_holds_at_most_7_and_every_member_once() {
    let (plant, _s) = plant("pages-set").await;
    let masters = plant.store::<WorkMaster>();
    let responses = plant.store::<JobResponse>();
    let mut want = BTreeSet::new();
    for i in 0..1000 {
        let id = format!("wm-{i}");
        created(&masters, &WorkMaster { id: id.clone(), scope: "s1".into(), name: "n".into() }).await;
        created(&responses, &JobResponse::new(&format!("r-{i}"), "s1", &format!("o-{i}"), &["Running"])).await;
        want.insert(id);
    }
    // The plain-set list.
    let got = walk(7, |p| masters.list("s1", p)).await;
    assert_eq!(got.len(), 1000);
    exactly_once(&got, &want);
    // A group index.
    let got = walk(7, |p| responses.ids(JobResponse::by_state("s1", "Running"), p)).await;
    let want: BTreeSet<String> = (0..1000).map(|i| format!("r-{i}")).collect();
    assert_eq!(got.len(), 1000);
    exactly_once(&got, &want);
}

#[tokio::test]
async fn a_sorted_list_read_while_100_are_inserted_never_repeats_or_skips() {
    let (plant, _s) = plant("pages-sorted").await;
    let responses = plant.store::<JobResponse>();
    let mut want = BTreeSet::new();
    // 300 responses, many sharing a start time (ties ordered by id).
    for i in 0..300 {
        let id = format!("r-{i:03}");
        let r = JobResponse { start_time: (i / 7) as i64 * 10, ..JobResponse::new(&id, "s1", &id, &["Running"]) };
        created(&responses, &r).await;
        want.insert(id);
    }
    let writer = {
        let responses = responses.clone();
        tokio::spawn(async move {
            // Inserted while the walk runs, before and after its position,
            // and on the very scores the walk stands on.
            for i in 0..100u32 {
                let id = format!("n-{i:03}");
                let start = i64::from((i * 37) % 450);
                let r = JobResponse { start_time: start, ..JobResponse::new(&id, "s1", &id, &["Running"]) };
                created(&responses, &r).await;
                tokio::task::yield_now().await;
            }
        })
    };
    let got = walk(10, |p| responses.list("s1", p)).await;
    writer.await.unwrap();
    let before: Vec<String> = got.iter().filter(|id| id.starts_with("r-")).cloned().collect();
    exactly_once(&got, &want);
    assert_eq!(before.len(), 300);
    let total = walk(1000, |p| responses.list("s1", p)).await;
    assert_eq!(total.len(), 400, "every response once when nothing moves");
}

#[tokio::test]
async fn a_page_continues_after_its_anchor_even_when_the_anchor_moved() {
    let (plant, _s) = plant("pages-anchor").await;
    let responses = plant.store::<JobResponse>();
    // 60 responses on three scores (20 ties each), ordered by id within a score.
    for i in 0..60 {
        let id = format!("r-{i:02}");
        let r = JobResponse { start_time: (i % 3) as i64, ..JobResponse::new(&id, "s1", &id, &[]) };
        created(&responses, &r).await;
    }
    let first = responses.list("s1", Page::first(25)).await.unwrap();
    assert_eq!(first.ids.len(), 25);
    // The anchor (the last id of the page) moves to the end, then leaves.
    let anchor = first.ids.last().unwrap().clone();
    let read = responses.get(&anchor).await.unwrap().unwrap();
    let moved = JobResponse { start_time: 99, ..read.doc.clone() };
    assert!(matches!(responses.update(&read, &moved).await.unwrap(), microdcs_valkey::PutOutcome::Written { .. }));
    let mut rest = Vec::new();
    let mut page = first.next.clone();
    while let Some(p) = page {
        let got = responses.list("s1", p).await.unwrap();
        rest.extend(got.ids);
        page = got.next;
    }
    let mut all: Vec<String> = first.ids.clone();
    all.extend(rest.iter().cloned());
    let others: BTreeSet<String> = (0..60).map(|i| format!("r-{i:02}")).filter(|id| *id != anchor).collect();
    let seen: Vec<&String> = all.iter().filter(|id| **id != anchor).collect();
    assert_eq!(seen.len(), others.len(), "no repeat, no skip: {all:?}");
    assert_eq!(seen.into_iter().cloned().collect::<BTreeSet<_>>(), others);
}

#[tokio::test]
async fn a_descending_walk_is_the_ascending_one_reversed_and_keeps_its_direction() {
    let (plant, _s) = plant("pages-down").await;
    let responses = plant.store::<JobResponse>();
    let masters = plant.store::<WorkMaster>();
    // 60 responses on three scores (20 ties each).
    for i in 0..60 {
        let id = format!("r-{i:02}");
        let r = JobResponse { start_time: (i % 3) as i64, ..JobResponse::new(&id, "s1", &id, &[]) };
        created(&responses, &r).await;
    }
    let up = walk(1000, |p| responses.list("s1", p)).await;
    assert_eq!(up.len(), 60);
    let mut want = up.clone();
    want.reverse();
    let down = walk_from(Page::first_descending(7), |p| responses.list("s1", p)).await;
    assert_eq!(down, want, "highest score first, ties in reverse byte order");
    assert_eq!(&down[..2], ["r-59", "r-56"], "start time 2, the highest ids first");

    // A continuation keeps the direction, through its token too.
    let first = responses.list("s1", Page::first_descending(10)).await.unwrap();
    let next = first.next.expect("more than one page");
    assert!(next.is_descending());
    let again = Page::from_token(&next.to_token()).unwrap();
    assert!(again.is_descending());
    assert_eq!(responses.list("s1", again).await.unwrap().ids, want[10..20]);

    // The anchor moves to the far end (the lowest score) and the walk goes
    // on after its old place: every other id exactly once.
    let anchor = first.ids.last().unwrap().clone();
    let read = responses.get(&anchor).await.unwrap().unwrap();
    let moved = JobResponse { start_time: -5, ..read.doc.clone() };
    assert!(matches!(responses.update(&read, &moved).await.unwrap(), microdcs_valkey::PutOutcome::Written { .. }));
    let mut all = first.ids.clone();
    let mut page = Some(next);
    while let Some(p) = page {
        let got = responses.list("s1", p).await.unwrap();
        all.extend(got.ids);
        page = got.next;
    }
    let seen: Vec<&String> = all.iter().filter(|id| **id != anchor).collect();
    assert_eq!(seen.len(), 59, "no repeat, no skip: {all:?}");
    assert_eq!(
        seen.into_iter().cloned().collect::<Vec<_>>(),
        want.iter().filter(|id| **id != anchor).cloned().collect::<Vec<_>>()
    );

    // A set has no order: a descending page is refused, not read upwards.
    created(&masters, &WorkMaster { id: "wm-1".into(), scope: "s1".into(), name: "n".into() }).await;
    assert!(matches!(
        masters.list("s1", Page::first_descending(5)).await,
        Err(microdcs_valkey::Error::InvalidArgument(_))
    ));
}
