//! Every public future of the runtime is `Send`, so any of them can be
//! `tokio::spawn`ed. Checked at compile time: a future that is not `Send`
//! fails to build this file.

use std::time::Duration;

use microdcs_tests::fixtures::{JobResponse, PlantHandle, WorkMaster};
use microdcs_valkey::{
    Expect, Page, Valkey, config::ValkeyConfig, dedupe::DedupeStore, dedupe::MemoryDedupe, dedupe::ValkeyDedupe,
    lease::LeaseBackend, lease::LeaseStore, lease::MemoryLeases, poller::Poller, start_lease::StartLease,
    start_lease::ValkeyStartLease, store::DeleteExpect, store::MaintenanceOptions, streams::Streams,
};

fn send<T: Send>(_: T) {}

#[allow(dead_code, clippy::needless_pass_by_value)]
fn every_public_future(valkey: Valkey, plant: PlantHandle, config: ValkeyConfig) {
    send(Valkey::connect(&config));
    send(Valkey::connect_url("redis://127.0.0.1/", microdcs_valkey::KeyPrefix::default(), Default::default()));
    send(valkey.ping());
    send(valkey.health());

    let responses = plant.store::<JobResponse>();
    let masters = plant.store::<WorkMaster>();
    let r = JobResponse::new("r-1", "s1", "o-1", &[]);
    send(responses.get("r-1"));
    send(responses.create(&r));
    send(responses.put(&r, Expect::Any));
    send(responses.put(&r, Expect::Any).op("op"));
    send(responses.find(JobResponse::by_order("o-1")));
    send(responses.ids(JobResponse::by_state("s1", "Running"), Page::first(10)));
    send(responses.list("s1", Page::first(10)));
    send(masters.list("s1", Page::first(10)));
    send(responses.delete_id("r-1", DeleteExpect::Any));
    send(responses.verify(&MaintenanceOptions::default()));
    send(responses.rebuild(&MaintenanceOptions::default()));
    send(responses.needs_rebuild());
    send(responses.accept_layouts(&MaintenanceOptions::default()));
    send(microdcs_valkey::admin::run::<microdcs_tests::fixtures::Plant>(&valkey, ["migrate", "apply"]));
    send(microdcs_valkey::admin::main::<microdcs_tests::fixtures::Plant>());
    send(responses.announce());
    send(responses.writers());
    send(responses.index_states());
    send(responses.backfill(&microdcs_valkey::store::BackfillOptions::default()));
    send(responses.copy_from(&responses, |d: JobResponse| Some(d), 100));
    send(responses.get_many(&["r-1"]));
    send(responses.put_many(std::slice::from_ref(&r), Expect::Create));
    let states = plant.store::<microdcs_tests::fixtures::SfcState>();
    let job = microdcs_tests::fixtures::SfcState {
        job_id: "j-1".into(),
        scope: "s1".into(),
        step: "mix".into(),
        deadline: None,
        running: true,
        wait_type: None,
        wait_start: None,
    };
    let effects = microdcs_valkey::store::Effects::new().event(microdcs_valkey::store::Event::new("line", "e-1"));
    send(states.step(None, &job, &effects));
    send(async move {
        if let Ok(Some(mut read)) = states.get("j-1").await {
            let _ = states.step_in_place(&mut read, job, &effects).await;
        }
    });
    send(responses.claim(JobResponse::by_state("s1", "Queued"), |d| Some(d.clone())));
    send(responses.docs(JobResponse::by_state("s1", "Running"), Page::first(10)));
    send(responses.scopes(Page::first(10)));
    send(responses.scan(0, 10));
    send(responses.delete_id("r-1", DeleteExpect::Any).op("op"));
    let families = plant.clone();
    send(async move {
        use microdcs_tests::fixtures::Plant;
        let p = &families;
        let _ = Plant::reference(p, "k", "s1").expect("compile-time only").add(&["m"]).await;
        let _ = Plant::reference(p, "k", "s1").expect("compile-time only").members(Page::first(1)).await;
        let _ = Plant::job_acceptance(p, "s1").expect("compile-time only").set_if_absent(&1, None).await;
        let _ = Plant::pubseq(p, "s1").expect("compile-time only").increment(1).await;
        let _ = Plant::publisher_cursors(p).expect("compile-time only").entries(0, 10).await;
        let runs = Extras::open(p.valkey().clone());
        let _ = Extras::canary_runs(&runs, "s1", "web").expect("compile-time only").add_bounded("m", 1.0, 5).await;
        let _ = Plant::nudge(p, "jobresponse").expect("compile-time only").publish("s1").await;
        use microdcs_tests::fixtures::Extras;
        let x = Extras::open(p.valkey().clone());
        let _ = Extras::overflow(&x, "s1").expect("compile-time only").push_bounded("v", 3).await;
        let _ = Extras::overflow(&x, "s1").expect("compile-time only").push_bounded(&b"v"[..], 3).await;
        let _ = Extras::overflow(&x, "s1").expect("compile-time only").pop_oldest().await;
        let _ = Extras::overflow(&x, "s1").expect("compile-time only").range_raw(0, 1).await;
        let _ = Plant::publisher_cursors(p).expect("compile-time only").set_many(&[("f", "v")]).await;
        let _ = Extras::tallies(&x, "s1").expect("compile-time only").set_many(&[("f".to_owned(), 1)]).await;
        let limit = Extras::logins(&x, "s1", "u").expect("compile-time only");
        let _ = limit.reset().await;
        let _ = limit.attempt(3, Duration::from_secs(1)).await;
        let _ = limit.fail(Duration::from_secs(1), Duration::from_secs(2)).await;
        let sweep = microdcs_valkey::sweep::DueSweep::new(
            Plant::open(p.valkey().clone()).store::<microdcs_tests::fixtures::SfcState>(),
            |scope: &str| microdcs_tests::fixtures::SfcState::due(scope),
            |_scope: String, _due: microdcs_valkey::sweep::Due| async { Ok(()) },
            Duration::from_secs(1),
        );
        let _ = sweep.sweep().await;
        if let Ok(mut sub) = Extras::revocations(&x, "s1").expect("compile-time only").subscribe().await {
            let _ = sub.next(Duration::from_secs(1)).await;
        }
    });
    // The operations added with effects, expiry, rank reads and the
    // compact codec.
    let more = plant.clone();
    send(async move {
        use microdcs_tests::fixtures::{Extras, Plant, SfcState};
        let p = &more;
        let receipts = p.store::<JobResponse>();
        let r = JobResponse::new("r-1", "s1", "o-1", &[]);
        let effects = microdcs_valkey::store::Effects::new();
        let _ = receipts.write(None, &r, &effects).await;
        if let Ok(Some(mut read)) = receipts.get("r-1").await {
            let _ = receipts.write_in_place(&mut read, r.clone(), &effects).await;
        }
        let compact = p.store_with::<JobResponse, _>(microdcs_valkey::store::CompactJson);
        let _ = compact.get("r-1").await;
        let _ = compact.put(&r, Expect::Any).await;
        let states = p.store::<SfcState>();
        let _ = states.range(SfcState::due("s1"), 0.0, 1.0, false, 10).await;
        let expiry = microdcs_valkey::sweep::ExpirySweep::new(
            states,
            |scope: &str| SfcState::due(scope),
            Duration::from_secs(1),
        );
        let _ = expiry.sweep().await;
        let _ = microdcs_valkey::inspect::Inspector::new(p).document("jobresponse", "r-1").await;
        let x = Extras::open(p.valkey().clone());
        let runs = Extras::canary_runs(&x, "s1", "web").expect("compile-time only");
        let _ = runs.remove_by_rank(0, 1).await;
        let _ = runs.remove_by_score(0.0, 1.0).await;
        let _ = runs.range_by_rank(0, 1, false).await;
        let list = Extras::overflow(&x, "s1").expect("compile-time only");
        let _ = list.range(0, 1).await;
        let _ = list.range_from_oldest(0, 1).await;
        let limit = Extras::logins(&x, "s1", "u").expect("compile-time only");
        let _ = limit.peek(3, Duration::from_secs(1)).await;
        let _ = limit.succeed().await;
        let seq = Plant::pubseq(p, "s1").expect("compile-time only");
        let _ = seq.set(1).await;
        let _ = seq.reset().await;
        let _ = seq.get().await;
        let _ = Plant::publisher_cursors(p).expect("compile-time only").increment("f", 1).await;
        let tallies = Extras::tallies(&x, "s1").expect("compile-time only");
        let _ = tallies.set(&"a".to_owned(), &1).await;
        let _ = tallies.entries(0, 10).await;
    });
    send(async move {
        let mut read = responses.get("r-1").await.ok().flatten().expect("compile-time only");
        let _ = responses.update(&read, &r).await;
        let _ = responses.update(&read, &r).op("op").await;
        let _ = responses.delete(&read).await;
        let _ = responses.update_in_place(&mut read, r.clone()).await;
    });

    let streams = Streams::new(valkey.clone());
    send(streams.create_group("k", "g"));
    send(streams.append("k", &[]));
    send(streams.append_capped("k", 10, &[]));
    send(streams.read("k", "g", "c", 1));
    send(streams.read_from("k", "g", "c", 1, "0"));
    send(streams.read_or_gap("k", "g", "c", 1, None));
    let resyncing = microdcs_valkey::changes::Changes::new(
        plant.store::<JobResponse>(),
        "g",
        |_: String, _: Vec<microdcs_valkey::changes::Change<JobResponse>>| async { Ok(()) },
    );
    send(async move {
        let _ = resyncing.resync("s1").await;
    });
    send(streams.ack("k", "g", &[]));
    send(streams.trim_acknowledged("k"));
    send(streams.autoclaim("k", "g", "c", Duration::from_secs(1), 1));
    send(async move {
        if let Ok(handle) = Poller::new(valkey.clone(), "c").start().await {
            handle.shutdown().await;
        }
    });

    let dedupe = ValkeyDedupe::new(plant.valkey().clone(), Duration::from_secs(1), Duration::from_secs(1));
    send(dedupe.claim("s", "i", "t"));
    send(dedupe.mark_done("s", "i"));
    send(dedupe.lease_remaining("s", "i"));
    let memory = MemoryDedupe::new(Duration::from_secs(1), Duration::from_secs(1));
    send(memory.claim("s", "i", "t"));
    let start = ValkeyStartLease::new(plant.valkey().clone());
    send(start.acquire("cfg", Duration::from_secs(1)));
    let leases = LeaseStore::new(plant.valkey().clone());
    send(leases.acquire("n", "o", Duration::from_secs(1), "q"));
    send(leases.fence("n"));
    send(leases.read_protected("n"));
    send(leases.fenced_write("n", 1, b"v"));
    let memory_leases = MemoryLeases::default();
    send(memory_leases.acquire("n", "o", Duration::from_secs(1), "q"));
}

#[test]
fn every_public_future_is_send() {
    // The check is that `every_public_future` compiles; this names it so
    // the test binary states what it proves.
    let _ = every_public_future;
}
