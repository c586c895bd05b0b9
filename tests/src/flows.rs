//! Whole flows through the public API, for tests that need "everything the
//! application does" at once (the ACL tests run them as a restricted user).

use std::time::Duration;

use microdcs_valkey::{
    Error, Expect, Page, Valkey, changes::Changes, dedupe::DedupeStore, dedupe::ValkeyDedupe, lease::Acquire,
    lease::LeaseBackend, lease::LeaseStore, poller::Poller, start_lease::StartLease, start_lease::ValkeyStartLease,
    store::DeleteExpect, store::MaintenanceOptions, streams::Streams,
};

use crate::change_channel;
use crate::fixtures::{JobOrder, JobResponse, Plant, WorkMaster};

/// What the application side of the runtime does: every store operation,
/// every typed family, streams, the poller with a change consumer, dedupe,
/// the start lease and the fencing lease store. Returns the first error.
///
/// # Errors
/// The first error any call returns (a `NOPERM` under a too narrow ACL).
///
/// # Panics
/// When an outcome differs from a fresh keyspace's.
pub async fn app_flow(valkey: &Valkey) -> Result<(), Error> {
    let plant = Plant::open(valkey.clone());
    let responses = plant.store::<JobResponse>();
    let masters = plant.store::<WorkMaster>();

    // Changes are consumed from the start.
    let (handler, mut rx) = change_channel::<JobResponse>();
    let poller = Poller::new(valkey.clone(), "flow")
        .consumer(Changes::new(responses.clone(), "flow", handler).fetching())
        .start()
        .await?;

    // Documents.
    let r = JobResponse::new("r-1", "s1", "o-1", &["Queued"]);
    let _ = responses.create(&r).await?;
    let mut read = responses.get("r-1").await?.expect("written");
    let _ = responses.update_in_place(&mut read, JobResponse { state: vec!["Running".into()], ..r.clone() }).await?;
    let _ = responses.put(&JobResponse { state: vec!["Held".into()], ..r.clone() }, Expect::Any).await?;
    let _ = responses.put(&r, Expect::Any).op("flow-op-1").await?;
    let _ = responses.find(JobResponse::by_order("o-1")).await?;
    let _ = responses.ids(JobResponse::by_state("s1", "Queued"), Page::first(10)).await?;
    let _ = responses.list("s1", Page::first(10)).await?;
    let more: Vec<JobResponse> =
        (2..6).map(|i| JobResponse::new(&format!("r-{i}"), "s1", &format!("o-{i}"), &["Queued"])).collect();
    for out in responses.put_many(&more, Expect::Create).await {
        let _ = out?;
    }
    let _ = responses.get_many(&["r-1", "r-2", "nope"]).await?;
    // A second page of a sorted list (the anchor script: ZSCORE, ZRANK,
    // ZCOUNT); the anchor moved away to reach its binary search.
    let first = responses.list("s1", Page::first(2)).await?;
    let _ = responses.list("s1", first.next.clone().expect("more than two")).await?;
    if let Some(anchor) = first.ids.last() {
        let moved = responses.get(anchor).await?.expect("listed");
        let _ = responses
            .put(&JobResponse { start_time: moved.doc.start_time + 1, ..moved.doc.clone() }, Expect::Any)
            .await?;
        let _ = responses.list("s1", first.next.expect("more than two")).await?;
    }
    // Newest first, second page (the anchor's rank from the top: ZREVRANK),
    // and a set's second page (its token's ids checked: SMISMEMBER).
    let newest = responses.list("s1", Page::first_descending(2)).await?;
    let _ = responses.list("s1", newest.next.expect("more than two")).await?;
    let queued = responses.ids(JobResponse::by_state("s1", "Queued"), Page::first(1)).await?;
    // Handed over as a token (to another process, say), its ids are checked.
    let token = queued.next.expect("more than one").to_token();
    let _ = responses.ids(JobResponse::by_state("s1", "Queued"), Page::from_token(&token)?).await?;
    let _ = responses.docs(JobResponse::by_state("s1", "Queued"), Page::first(10)).await?;
    let _ = responses
        .claim(JobResponse::by_state("s1", "Queued"), |d| {
            Some(JobResponse { state: vec!["Running".into()], ..d.clone() })
        })
        .await?;
    let _ = responses.scopes(Page::first(10)).await?;
    let _ = responses.scan(0, 100).await?;
    let read = responses.get("r-2").await?.expect("written");
    let _ = responses.delete(&read).await?;
    let _ = responses.delete_id("r-3", DeleteExpect::Any).await?;
    let _ = responses.delete_id("r-4", DeleteExpect::Any).op("flow-del-1").await?;
    let wm = WorkMaster { id: "w-1".into(), scope: "s1".into(), name: "mix".into() };
    let _ = masters.create(&wm).await?;
    let _ = masters.list("s1", Page::first(10)).await?;

    // Typed families.
    let refs = Plant::reference(&plant, "jobresponse", "s1")?;
    let _ = refs.add(&["r-1"]).await?;
    let _ = refs.contains("r-1").await?;
    let _ = refs.count().await?;
    let _ = refs.members(Page::first(10)).await?;
    let _ = refs.remove(&["r-1"]).await?;
    let limit = Plant::job_acceptance(&plant, "s1")?;
    limit.set(&5, Some(Duration::from_secs(60))).await?;
    let _ = limit.set_if_absent(&6, None).await?;
    let _ = limit.get().await?;
    let _ = limit.ttl().await?;
    let _ = limit.delete().await?;
    let recipes = Plant::sfc_recipes(&plant)?;
    let digest = recipes.put("mix 5 min; hold; fill").await?;
    let _ = recipes.get(&digest).await?;
    let beat = Plant::sfc_heartbeat(&plant)?;
    let _ = beat.set_now(None).await?;
    let _ = beat.age().await?;
    let seq = Plant::pubseq(&plant, "s1")?;
    let _ = seq.increment(1).await?;
    let _ = seq.get().await?;
    let cursors = Plant::publisher_cursors(&plant)?;
    let _ = cursors.set("s1", "1-0").await?;
    let _ = cursors.get("s1").await?;
    let _ = cursors.count().await?;
    let _ = cursors.entries(0, 10).await?;
    let _ = cursors.delete("s1").await?;
    let due = crate::fixtures::Extras::canary_runs(&crate::fixtures::Extras::open(valkey.clone()), "s1", "web")?;
    let _ = due.add("j-1", 1.0).await?;
    let _ = due.add_bounded("j-2", 2.0, 10).await?;
    let _ = due.add_bounded("j-3", 3.0, 2).await?;
    let _ = due.score("j-1").await?;
    let _ = due.count().await?;
    let _ = due.range_by_score(0.0, 10.0, false, 10).await?;
    let _ = due.range_by_rank(0, -1, true).await?;
    let _ = due.remove("j-1").await?;
    let _ = due.remove_by_score(0.0, 1.5).await?;
    let _ = Plant::nudge(&plant, "flow")?.publish("s1").await?;
    let extras = crate::fixtures::Extras::open(valkey.clone());
    let overflow = crate::fixtures::Extras::overflow(&extras, "s1")?;
    let _ = overflow.push_bounded("e-1", 10).await?;
    let _ = overflow.range(0, -1).await?;
    let _ = overflow.len().await?;
    let logins = crate::fixtures::Extras::logins(&extras, "s1", "ada")?;
    let _ = logins.attempt(5, Duration::from_secs(60)).await?;
    let _ = logins.fail(Duration::from_millis(100), Duration::from_secs(10)).await?;
    logins.succeed().await?;
    let revocations = crate::fixtures::Extras::revocations(&extras, "s1")?;
    let mut sub = revocations.subscribe().await?;
    let _ = revocations.publish("session-1").await?;
    assert_eq!(sub.next(Duration::from_secs(5)).await.as_deref(), Some("session-1"));

    // The workflow step: state, work entries and an event marker.
    let states = plant.store::<crate::fixtures::SfcState>();
    let job = crate::fixtures::SfcState {
        job_id: "j-1".into(),
        scope: "s1".into(),
        step: "mix".into(),
        deadline: Some(10),
        running: true,
        wait_type: None,
        wait_start: None,
    };
    // With an effect of every kind on the keyspace's families, each a
    // command the role must allow inside the script.
    let effects = microdcs_valkey::store::Effects::new()
        .work(microdcs_valkey::store::WorkEntry::new().field("step", "mix"))
        .event(microdcs_valkey::store::Event::new("urn:line-1", "e-1"))
        .incr(&Plant::pubseq(&plant, "s1")?, 1)
        .hincr(&Plant::publisher_cursors(&plant)?, "s1", 1)
        .add(&Plant::reference(&plant, "sfc", "s1")?, "j-1")
        .remove(&Plant::reference(&plant, "sfc", "s1")?, "j-0")
        .zadd(&crate::fixtures::Extras::recent(&extras, "s1")?, "j-1", 1.5)
        .zrem(&crate::fixtures::Extras::recent(&extras, "s1")?, "j-0");
    let out = states.step(None, &job, &effects).await?;
    assert!(
        matches!(&out, microdcs_valkey::store::StepOutcome::Written { values, .. } if values.len() == 6),
        "{out:?}"
    );

    // Streams.
    let streams = Streams::new(valkey.clone());
    let work = Plant::sfc_work_key(valkey.prefix(), "s1")?;
    streams.create_group(&work, "g").await?;
    let _ = streams.append(&work, &[("job", &b"j-1"[..])]).await?;
    let _ = streams.append_capped(&work, 100, &[("job", &b"j-2"[..])]).await?;
    let got = streams.read(&work, "g", "c", 10).await?;
    let ids: Vec<String> = got.iter().map(|e| e.id.clone()).collect();
    let _ = streams.read_from(&work, "g", "c", 10, "0").await?;
    let _ = streams.autoclaim(&work, "g", "c2", Duration::from_millis(0), 10).await?;
    let _ = streams.ack(&work, "g", &ids).await?;
    let _ = streams.trim_acknowledged(&work).await?;

    // The consumer saw the changes.
    let first = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
    assert!(matches!(first, Ok(Some(_))), "a change reached the consumer");
    poller.shutdown().await;

    // A sharded type's nudges per scope: `SPUBLISH` from its scripts,
    // `SSUBSCRIBE` by the poller for each scope it finds. On a cluster
    // island (a tagged prefix) the type is refused instead: the tag would
    // put every scope in one slot.
    let sharded = microdcs_examples::plant::sharded::ShardedPlant::open(valkey.clone());
    let per_scope = sharded.store::<microdcs_examples::plant::sharded::JobResponse>();
    let doc = microdcs_examples::plant::sharded::JobResponse::new("r-1", "s1", "o-1", &[]);
    if valkey.is_cluster() && valkey.prefix().slot().is_some() {
        let e = per_scope.create(&doc).await.expect_err("a sharded type on a cluster island");
        assert!(matches!(e, Error::Placement { .. }), "{e:?}");
    } else {
        let (handler, mut rx) = change_channel::<microdcs_examples::plant::sharded::JobResponse>();
        let _ = per_scope.create(&doc).await?;
        let poller = Poller::new(valkey.clone(), "flow")
            .consumer(Changes::new(per_scope.clone(), "flow", handler).fetching())
            .start()
            .await?;
        let first = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
        assert!(matches!(first, Ok(Some(_))), "a change of a sharded type reached the consumer");
        poller.shutdown().await;
    }

    // Dedupe, start lease, fencing leases.
    let dedupe = ValkeyDedupe::new(valkey.clone(), Duration::from_secs(30), Duration::from_secs(60));
    let _ = dedupe.claim("urn:line-1", "e-1", "t-1").await?;
    let _ = dedupe.lease_remaining("urn:line-1", "e-1").await?;
    dedupe.mark_done("urn:line-1", "e-1").await?;
    let start = ValkeyStartLease::new(valkey.clone());
    let _ = start.acquire("cfg-1", Duration::from_secs(30)).await?;
    let leases = LeaseStore::new(valkey.clone());
    if let Acquire::Acquired(lease) = leases.acquire("leader", "node-1", Duration::from_secs(30), "q-1").await? {
        let _ = leases.renew(&lease, Duration::from_secs(30), "q-2").await?;
        leases.fenced_write("leader", lease.token, b"state").await?;
        let _ = leases.read_protected("leader").await?;
        let _ = leases.fence("leader").await?;
        leases.release(&lease, "q-3").await?;
    } else {
        panic!("a fresh lease is free");
    }
    let _ = valkey.ping().await?;
    let _ = valkey.health().await;
    Ok(())
}

/// What maintenance does: verify, rebuild and the layout fingerprints of
/// every plant document type.
///
/// # Errors
/// The first error (a `NOPERM` under a too narrow ACL).
pub async fn maintenance_flow(valkey: &Valkey) -> Result<(), Error> {
    let plant = Plant::open(valkey.clone());
    let responses = plant.store::<JobResponse>();
    let opts = MaintenanceOptions::default();
    let _ = responses.verify(&opts).await?;
    let _ = responses.rebuild(&opts).await?;
    let _ = responses.needs_rebuild().await?;
    let masters = plant.store::<WorkMaster>();
    let _ = masters.verify(&opts).await?;
    let _ = masters.rebuild(&opts).await?;
    // A kind with no document and no recorded layout: the first deploy's
    // baseline is written (`HSETNX`).
    let _ = plant.store::<JobOrder>().needs_rebuild().await?;
    Ok(())
}
