//! The workflow step: one script stores the SFC state with its indexes,
//! appends work entries and applies an event once. Against a real Valkey,
//! through a fault proxy for lost requests and replies.

use std::collections::BTreeMap;
use std::time::Duration;

use microdcs_tests::fixtures::{Plant, SfcState};
use microdcs_tests::{FaultProxy, ValkeyServer, server, stream_entries, unique_prefix};
use microdcs_valkey::Document as _;
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{
    Error, Page, Store, Valkey, config::WriteOptions, store::Effects, store::Event, store::MaintenanceOptions,
    store::StepOutcome, store::WorkEntry,
};

fn state(job: &str, step: &str, deadline: Option<i64>, running: bool, wait: Option<(&str, i64)>) -> SfcState {
    SfcState {
        job_id: job.into(),
        scope: "s1".into(),
        step: step.into(),
        deadline,
        running,
        wait_type: wait.map(|(t, _)| t.to_owned()),
        wait_start: wait.map(|(_, s)| s),
    }
}

struct Env {
    server: ValkeyServer,
    valkey: Valkey,
    store: Store<SfcState>,
    raw: ConnectionManager,
}

async fn env(name: &str) -> Env {
    let server = server();
    let valkey = Valkey::connect_url(server.url(), unique_prefix(name), WriteOptions::default())
        .await
        .unwrap_or_else(|e| server.fail("connect", &e));
    let raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let store = Plant::open(valkey.clone()).store::<SfcState>();
    Env { server, valkey, store, raw }
}

impl Env {
    async fn work(&mut self, scope: &str) -> Vec<BTreeMap<String, String>> {
        let key = Plant::sfc_work_key(self.valkey.prefix(), scope).unwrap();
        stream_entries(&mut self.raw, &key).await
    }

    async fn marker(&mut self, source: &str, id: &str) -> (Option<String>, i64) {
        let key = Plant::sfc_event_key(self.valkey.prefix(), "s1", source, id).unwrap();
        let v: Option<String> = redis::cmd("GET").arg(&key).query_async(&mut self.raw).await.unwrap();
        let ttl: i64 = redis::cmd("PTTL").arg(&key).query_async(&mut self.raw).await.unwrap();
        (v, ttl)
    }
}

fn work(step: &str) -> WorkEntry {
    WorkEntry::new().field("step", step).field("action", "start")
}

#[tokio::test]
async fn a_step_stores_the_state_appends_its_work_and_applies_its_event_once() {
    let mut e = env("step-basic").await;
    let first = state("j-1", "mix", Some(500), true, None);
    let effects = Effects::new().work(work("mix")).work(WorkEntry::new().field("notify", "line-1"));
    assert_eq!(
        e.store.step(None, &first, &effects).await.unwrap(),
        StepOutcome::Written { version: 1, values: vec![] }
    );
    let entries = e.work("s1").await;
    assert_eq!(entries.len(), 2);
    assert_eq!(
        entries[0],
        BTreeMap::from(
            [("job", "j-1"), ("v", "1"), ("step", "mix"), ("action", "start")].map(|(a, b)| (a.into(), b.into()))
        )
    );
    assert_eq!(entries[1]["notify"], "line-1");
    assert_eq!(e.store.ids(SfcState::active("s1"), Page::first(10)).await.unwrap().ids, ["j-1"]);

    // A step that waits for an event, then the event arrives.
    let read = e.store.get("j-1").await.unwrap().unwrap();
    let waiting = state("j-1", "wait", None, true, Some(("qc", 700)));
    assert_eq!(
        e.store.step(Some(&read), &waiting, &Effects::new()).await.unwrap(),
        StepOutcome::Written { version: 2, values: vec![] }
    );
    assert_eq!(e.store.ids(SfcState::waits("s1", "qc"), Page::first(10)).await.unwrap().ids, ["j-1"]);
    let read = e.store.get("j-1").await.unwrap().unwrap();
    let stale = e.store.get("j-1").await.unwrap().unwrap();
    let next = state("j-1", "pack", Some(900), true, None);
    let event = Event::new("urn:line-1", "qc-42");
    let effects = Effects::new().work(work("pack")).event(event.clone());
    assert_eq!(
        e.store.step(Some(&read), &next, &effects).await.unwrap(),
        StepOutcome::Written { version: 3, values: vec![] }
    );
    let (holder, ttl) = e.marker("urn:line-1", "qc-42").await;
    assert_eq!(holder.as_deref(), Some("j-1"), "the marker holds the job id");
    assert!(ttl > 3_500_000 && ttl <= 3_600_000, "the marker lasts an hour: {ttl} ms");
    assert!(e.store.ids(SfcState::waits("s1", "qc"), Page::first(10)).await.unwrap().ids.is_empty());

    // Redelivered: nothing written, the job that applied it named.
    let read = e.store.get("j-1").await.unwrap().unwrap();
    let again = state("j-1", "wrong", None, false, None);
    let out = e.store.step(Some(&read), &again, &Effects::new().work(work("x")).event(event)).await.unwrap();
    assert_eq!(out, StepOutcome::EventApplied { job: "j-1".into() });
    assert_eq!(e.store.get("j-1").await.unwrap().unwrap().version, 3);
    assert_eq!(e.store.get("j-1").await.unwrap().unwrap().doc.step, "pack");
    assert_eq!(e.work("s1").await.len(), 3, "no work from the redelivery");

    // A stale read is a conflict, with nothing appended.
    let (late, effects) = (state("j-1", "late", None, false, None), Effects::new().work(work("late")));
    assert_eq!(e.store.step(Some(&stale), &late, &effects).await.unwrap(), StepOutcome::Conflict { current: 3 });
    assert_eq!(e.work("s1").await.len(), 3);
    // A first step of a job that exists is a conflict too.
    let out = e.store.step(None, &first, &Effects::new().work(work("mix"))).await.unwrap();
    assert_eq!(out, StepOutcome::Conflict { current: 3 });
    assert_eq!(e.work("s1").await.len(), 3);
}

#[tokio::test]
async fn work_entries_are_never_trimmed_by_length() {
    let mut e = env("step-nocap").await;
    // The change stream of the same write is capped by this setting; the
    // work stream must not be.
    let valkey = Valkey::connect_url(
        e.server.url(),
        e.valkey.prefix().clone(),
        WriteOptions { change_stream_max_len: 1, ..WriteOptions::default() },
    )
    .await
    .unwrap();
    let store = Plant::open(valkey).store::<SfcState>();
    let doc = state("j-1", "mix", None, true, None);
    let mut effects = Effects::new();
    for i in 0..300 {
        effects = effects.work(WorkEntry::new().field("n", i));
    }
    assert_eq!(store.step(None, &doc, &effects).await.unwrap(), StepOutcome::Written { version: 1, values: vec![] });
    let mut read = store.get("j-1").await.unwrap().unwrap();
    for v in 2..=5 {
        assert_eq!(
            store.step(Some(&read), &doc, &effects).await.unwrap(),
            StepOutcome::Written { version: v, values: vec![] }
        );
        read = store.get("j-1").await.unwrap().unwrap();
    }
    let entries = e.work("s1").await;
    assert_eq!(entries.len(), 1500, "every entry of every step");
    assert_eq!(entries[1499]["v"], "5");
    assert_eq!(entries[1499]["n"], "299");
}

#[tokio::test]
async fn finishing_a_job_leaves_due_active_and_waits_in_the_same_step() {
    let mut e = env("step-finish").await;
    let running = state("j-1", "wait", Some(100), true, Some(("qc", 50)));
    let _ = e.store.step(None, &running, &Effects::new()).await.unwrap();
    let read = e.store.get("j-1").await.unwrap().unwrap();
    let done = state("j-1", "done", None, false, None);
    let effects = Effects::new().work(WorkEntry::new().field("finished", true)).event(Event::new("line", "end-1"));
    assert_eq!(
        e.store.step(Some(&read), &done, &effects).await.unwrap(),
        StepOutcome::Written { version: 2, values: vec![] }
    );
    let due = e.store.range(SfcState::due("s1"), f64::NEG_INFINITY, f64::INFINITY, false, 10).await.unwrap();
    assert!(due.is_empty(), "{due:?}");
    assert!(e.store.ids(SfcState::active("s1"), Page::first(10)).await.unwrap().ids.is_empty());
    assert!(e.store.ids(SfcState::waits("s1", "qc"), Page::first(10)).await.unwrap().ids.is_empty());
    assert_eq!(e.work("s1").await.last().unwrap()["finished"], "true");
    assert!(e.store.verify(&MaintenanceOptions::default()).await.unwrap().is_clean());
}

#[tokio::test]
async fn the_same_event_from_two_clients_at_once_is_applied_once() {
    let e = env("step-race").await;
    let other = Valkey::connect_url(e.server.url(), e.valkey.prefix().clone(), WriteOptions::default()).await.unwrap();
    let other = Plant::open(other).store::<SfcState>();
    for round in 0..40 {
        let job = format!("j-{round}");
        let _ = e.store.step(None, &state(&job, "wait", None, true, Some(("qc", 1))), &Effects::new()).await.unwrap();
        let event = Event::new("urn:line-1", format!("qc-{round}"));
        let deliver = |store: Store<SfcState>, job: String, event: Event, who: &'static str| async move {
            let read = store.get(&job).await.unwrap().unwrap();
            let next = state(&job, who, Some(5), true, None);
            store.step(Some(&read), &next, &Effects::new().work(work(who)).event(event)).await.unwrap()
        };
        let (a, b) = tokio::join!(
            deliver(e.store.clone(), job.clone(), event.clone(), "a"),
            deliver(other.clone(), job.clone(), event.clone(), "b"),
        );
        let written = [&a, &b].iter().filter(|o| matches!(o, StepOutcome::Written { version: 2, .. })).count();
        assert_eq!(written, 1, "round {round}: {a:?} / {b:?}");
        let applied = StepOutcome::EventApplied { job: job.clone() };
        assert!(a == applied || b == applied, "round {round}: the other is told who applied it: {a:?} / {b:?}");
        assert_eq!(e.store.get(&job).await.unwrap().unwrap().version, 2);
    }
    let mut raw = e.raw.clone();
    let key = Plant::sfc_work_key(e.valkey.prefix(), "s1").unwrap();
    assert_eq!(stream_entries(&mut raw, &key).await.len(), 40, "one entry per applied event");
}

/// A step whose request or reply the connection loses is applied once:
/// the retry carries the same operation id, which the script recognises.
async fn cut_step(before: bool) {
    let server = server();
    let proxy = FaultProxy::start(server.host_port()).await;
    let prefix = unique_prefix(if before { "step-cut-before" } else { "step-cut-after" });
    let write = WriteOptions { retry_delay: Duration::from_millis(100), ..WriteOptions::default() };
    let valkey = Valkey::connect_url(&proxy.url(), prefix.clone(), write).await.unwrap();
    let store = Plant::open(valkey.clone()).store::<SfcState>();
    let mut raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    // Loads the script, so the cut request is the step itself.
    let _ = store.step(None, &state("j-0", "mix", None, true, None), &Effects::new()).await.unwrap();
    let _ = store.step(None, &state("j-1", "wait", None, true, Some(("qc", 1))), &Effects::new()).await.unwrap();
    let read = store.get("j-1").await.unwrap().unwrap();

    if before {
        proxy.cut_before_request_containing(b"EVALSHA").await;
    } else {
        proxy.cut_after_request_containing(b"EVALSHA").await;
    }
    let next = state("j-1", "pack", Some(10), true, None);
    let effects = Effects::new().work(work("pack")).work(work("label")).event(Event::new("line", "qc-1"));
    let out = store.step(Some(&read), &next, &effects).await.unwrap();
    assert_eq!(proxy.cuts(), 1);
    assert_eq!(out, StepOutcome::Written { version: 2, values: vec![] }, "reported as written, not as its own event");
    assert_eq!(valkey.metrics().write_already_applied(), u64::from(!before), "recognised by its op id");
    let key = Plant::sfc_work_key(&prefix, "s1").unwrap();
    let entries: Vec<_> = stream_entries(&mut raw, &key).await.into_iter().filter(|e| e["job"] == "j-1").collect();
    assert_eq!(entries.len(), 2, "its entries once: {entries:?}");
    let marker = Plant::sfc_event_key(&prefix, "s1", "line", "qc-1").unwrap();
    let holder: Option<String> = redis::cmd("GET").arg(&marker).query_async(&mut raw).await.unwrap();
    assert_eq!(holder.as_deref(), Some("j-1"), "its marker once");
    let changes = Plant::changes_key(&prefix, "s1").unwrap();
    let versions: Vec<String> = stream_entries(&mut raw, &changes)
        .await
        .into_iter()
        .filter(|e| e["id"] == "j-1")
        .map(|e| e["v"].clone())
        .collect();
    assert_eq!(versions, ["1", "2"], "one write");
    // The same step again, by its own op id, later: still once.
    let op = "line:qc-1:pack";
    let read = store.get("j-1").await.unwrap().unwrap();
    let effects = Effects::new().work(work("seal")).event(Event::new("line", "qc-2")).op(op);
    let next = state("j-1", "seal", None, false, None);
    assert_eq!(
        store.step(Some(&read), &next, &effects).await.unwrap(),
        StepOutcome::Written { version: 3, values: vec![] }
    );
    assert_eq!(
        store.step(Some(&read), &next, &effects).await.unwrap(),
        StepOutcome::Written { version: 3, values: vec![] }
    );
    let entries = stream_entries(&mut raw, &key).await.into_iter().filter(|e| e["job"] == "j-1").count();
    assert_eq!(entries, 3);
}

#[tokio::test]
async fn bad_effects_and_a_damaged_work_stream_write_nothing() {
    let mut e = env("step-bad").await;
    let doc = state("j-1", "mix", Some(10), true, None);
    let _ = e.store.step(None, &doc, &Effects::new()).await.unwrap();
    let read = e.store.get("j-1").await.unwrap().unwrap();
    let next = state("j-1", "pack", None, false, None);
    let refused = [
        Effects::new().work(WorkEntry::new().field("job", "j-9")),
        Effects::new().work(WorkEntry::new().field("", "x")),
        Effects::new().work(WorkEntry::new().field("a", 1).field("a", 2)),
        Effects::new().event(Event::id("no-source")),
        Effects::new().op("not an op id"),
    ];
    for effects in &refused {
        let err = e.store.step(Some(&read), &next, effects).await.unwrap_err();
        assert!(err.is_invalid_input(), "{effects:?}: {err}");
    }
    let bad_id = e.store.step(Some(&read), &next, &Effects::new().event(Event::new("line", ""))).await;
    assert!(bad_id.unwrap_err().is_invalid_input());

    // The work stream of the wrong type: refused before any write.
    let key = Plant::sfc_work_key(e.valkey.prefix(), "s1").unwrap();
    let () = redis::cmd("SET").arg(&key).arg("oops").query_async(&mut e.raw).await.unwrap();
    let effects = Effects::new().work(work("pack")).event(Event::new("line", "qc-9"));
    let err = e.store.step(Some(&read), &next, &effects).await.unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err}");
    let stored = e.store.get("j-1").await.unwrap().unwrap();
    assert_eq!((stored.version, stored.doc.step.as_str()), (1, "mix"), "nothing written");
    assert_eq!(e.store.ids(SfcState::active("s1"), Page::first(10)).await.unwrap().ids, ["j-1"]);
    assert_eq!(e.marker("line", "qc-9").await.0, None, "no marker");
    // A marker key of the wrong type: refused before any write too.
    let () = redis::cmd("DEL").arg(&key).query_async(&mut e.raw).await.unwrap();
    let marker = Plant::sfc_event_key(e.valkey.prefix(), "s1", "line", "qc-8").unwrap();
    let () = redis::cmd("RPUSH").arg(&marker).arg("x").query_async(&mut e.raw).await.unwrap();
    let effects = Effects::new().work(work("pack")).event(Event::new("line", "qc-8"));
    let err = e.store.step(Some(&read), &next, &effects).await.unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err}");
    assert_eq!(e.store.get("j-1").await.unwrap().unwrap().version, 1);
    assert!(e.work("s1").await.is_empty(), "no work appended");
    // Too many entries, or too many fields in all: refused.
    let many =
        (0..=microdcs_valkey::store::MAX_WORK_ENTRIES).fold(Effects::new(), |ef, i| ef.work(work(&i.to_string())));
    assert!(e.store.step(Some(&read), &next, &many).await.unwrap_err().is_invalid_input());
    let wide = (0..11)
        .fold(Effects::new(), |ef, i| ef.work((0..1000).fold(WorkEntry::new(), |w, f| w.field(format!("f{f}"), i))));
    assert!(e.store.step(Some(&read), &next, &wide).await.unwrap_err().is_invalid_input());
    // Nothing refused above left a change entry: only the first step's.
    let changes = Plant::changes_key(e.valkey.prefix(), "s1").unwrap();
    assert_eq!(stream_entries(&mut e.raw, &changes).await.len(), 1);
    // A step without entries does not touch the stream.
    assert_eq!(
        e.store.step(Some(&read), &next, &Effects::new()).await.unwrap(),
        StepOutcome::Written { version: 2, values: vec![] }
    );
}

#[tokio::test]
async fn a_malformed_call_of_the_step_script_writes_nothing() {
    // The script does not trust its arguments: counts that are not whole
    // numbers within their bounds are refused before the first write.
    let mut e = env("step-malformed").await;
    // In no index, so the call needs no index entries to pass its checks.
    let doc = state("j-1", "mix", None, false, None);
    let _ = e.store.step(None, &doc, &Effects::new()).await.unwrap();
    let l = microdcs_schema::lua::StepLayout::new(&<SfcState as microdcs_valkey::Document>::SPEC);
    let o = l.outbox.expect("the SFC state has an outbox");
    let p = e.valkey.prefix().clone();
    let doc_key = SfcState::key(&p, "j-1").unwrap();
    for (count, entries) in [("1", vec!["0.5", "x"]), ("-1", vec![]), ("1", vec!["1001"]), ("1001", vec![])] {
        let mut keys = vec![doc_key.clone(); l.num_keys];
        keys[o.work_key - 1] = Plant::sfc_work_key(&p, "s1").unwrap();
        let mut args = vec![String::new(); l.num_args];
        args[l.put.common.expect - 1] = "1".into();
        args[l.put.common.op - 1] = microdcs_valkey::store::new_op_id();
        args[l.put.common.id - 1] = "j-1".into();
        args[l.put.common.scope - 1] = "s1".into();
        args[l.put.history - 1] = "8".into();
        args[o.marker_flag - 1] = "0".into();
        args[o.entries - 1] = count.into();
        args.extend(entries.iter().map(|s| (*s).to_owned()));
        let script = redis::Script::new(SfcState::STEP_SCRIPT);
        let mut inv = script.prepare_invoke();
        for k in &keys {
            inv.key(k);
        }
        for a in &args {
            inv.arg(a);
        }
        let err = inv.invoke_async::<redis::Value>(&mut e.raw).await.unwrap_err();
        assert!(err.to_string().contains("malformed work entries"), "{count} {entries:?}: {err}");
    }
    assert_eq!(e.store.get("j-1").await.unwrap().unwrap().version, 1, "nothing written");
    assert!(e.work("s1").await.is_empty());
}

#[tokio::test]
async fn typed_work_entries_carry_a_struct_s_fields() {
    #[derive(serde::Serialize)]
    struct Start<'a> {
        step: &'a str,
        attempt: u32,
        params: [u8; 2],
    }
    let mut e = env("step-typed").await;
    let entry = WorkEntry::from_fields(&Start { step: "mix", attempt: 2, params: [1, 2] }).unwrap();
    let doc = state("j-1", "mix", None, true, None);
    let _ = e.store.step(None, &doc, &Effects::new().work(entry)).await.unwrap();
    let got = &e.work("s1").await[0];
    assert_eq!((got["step"].as_str(), got["attempt"].as_str(), got["params"].as_str()), ("mix", "2", "[1,2]"));
}

#[tokio::test]
async fn steps_in_place_need_no_read_between_them() {
    let mut e = env("step-in-place").await;
    let _ = e.store.step(None, &state("j-1", "s0", Some(1), true, None), &Effects::new()).await.unwrap();
    let mut read = e.store.get("j-1").await.unwrap().unwrap();
    for i in 1..=5_i64 {
        let next = state("j-1", &format!("s{i}"), Some(i * 10), i < 5, (i == 3).then_some(("qc", i)));
        let out = e.store.step_in_place(&mut read, next, &Effects::new().work(work("go"))).await.unwrap();
        assert_eq!(out, StepOutcome::Written { version: 1 + i as u64, values: vec![] });
        assert_eq!((read.version, read.doc.step.clone()), (1 + i as u64, format!("s{i}")));
    }
    // A stale in-place step leaves `read` as it was.
    let mut stale = e.store.get("j-1").await.unwrap().unwrap();
    let _ = e.store.step(Some(&stale), &state("j-1", "other", None, false, None), &Effects::new()).await.unwrap();
    let before = stale.version;
    let out = e.store.step_in_place(&mut stale, state("j-1", "late", None, false, None), &Effects::new()).await;
    assert_eq!(out.unwrap(), StepOutcome::Conflict { current: 7 });
    assert_eq!(stale.version, before);
    assert_eq!(e.work("s1").await.len(), 5);
    assert!(e.store.verify(&MaintenanceOptions::default()).await.unwrap().is_clean());
}

#[tokio::test]
async fn a_step_takes_its_op_id_like_every_write() {
    // The guide's form: `store.step(Some(&read), &next, &effects).op(id)`.
    let mut e = env("step-op").await;
    let first = state("j-9", "start", None, true, None);
    assert_eq!(
        e.store.step(None, &first, &Effects::new().work(work("start"))).op("job-9:step-1").await.unwrap(),
        StepOutcome::Written { version: 1, values: vec![] }
    );
    let read = e.store.get("j-9").await.unwrap().unwrap();
    let next = state("j-9", "mix", None, true, None);
    let effects = Effects::new().work(work("mix"));
    let a = e.store.step(Some(&read), &next, &effects).op("job-9:step-2").await.unwrap();
    // Repeated with the same id (a retry after a lost reply): recognised,
    // no second work entry.
    let b = e.store.step(Some(&read), &next, &effects).op("job-9:step-2").await.unwrap();
    assert_eq!(
        (a.clone(), b),
        (StepOutcome::Written { version: 2, values: vec![] }, StepOutcome::Written { version: 2, values: vec![] })
    );
    assert_eq!(e.work("s1").await.len(), 2, "one entry per step");
    // The op given here wins over `Effects::op`.
    let read = e.store.get("j-9").await.unwrap().unwrap();
    let last = state("j-9", "done", None, false, None);
    let fx = Effects::new().op("from-effects");
    let _ = e.store.step(Some(&read), &last, &fx).op("from-call").await.unwrap();
    let again = e.store.step(Some(&read), &last, &Effects::new()).op("from-call").await.unwrap();
    assert_eq!(again, StepOutcome::Written { version: 3, values: vec![] }, "the call's op id was the one stored");
}

/// Tests that stop, restart or cut their server, kill its clients or count
/// its commands: each starts a server of its own (the cluster suite leaves
/// this module out).
mod standalone {
    use super::*;

    #[tokio::test]
    async fn a_step_cut_before_the_server_runs_it_is_applied_once() {
        cut_step(true).await;
    }

    #[tokio::test]
    async fn a_step_whose_reply_is_lost_is_applied_once() {
        cut_step(false).await;
    }
}
