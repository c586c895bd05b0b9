//! A small SFC recipe run through the poller: three steps (`mix` with a
//! timer, `qc` waiting for an event, `pack`), then `done`.
//!
//! - Every state change is one [`Store::step`]: the state with its due,
//!   active and waits indexes, the work entries, and the event marker, in
//!   one script.
//! - A stream consumer takes the work entries (and finishes `pack`).
//! - The due sweep fires the `mix` timer.
//! - A delivered event ends the `qc` wait; delivered again, it is ignored.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use microdcs_valkey::{
    Document, Page, Store, Valkey, poller::BoxError, poller::BoxFuture, poller::Poller, poller::StreamConsumer,
    schema::Feed, store::DeleteExpect, store::Effects, store::Event, store::StepOutcome, store::WorkEntry,
    streams::StreamEntry, sweep::DueSweep,
};

use crate::plant::{Plant, SfcState};

/// The recipe, stored by its SHA-256 and named by it in the first work entry.
pub const RECIPE: &str = "mix (timer 300 ms) -> qc (wait for event `qc`) -> pack -> done";

/// The job the demo runs.
pub const JOB: &str = "j-recipe-1";

/// The scope it runs in.
pub const SCOPE: &str = "line-1";

/// The event that ends the `qc` wait: its source and id.
pub const EVENT: (&str, &str) = ("urn:line-1:qc", "qc-1");

type Log = Arc<Mutex<Vec<String>>>;

fn note(log: &Log, line: String) {
    log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(line);
}

/// One line of the log: what happened, and its outcome.
fn line(what: impl std::fmt::Display, result: impl std::fmt::Display) -> String {
    format!("{:<46} -> {result}", what.to_string())
}

fn state(step: &str, deadline: Option<i64>, running: bool, wait: Option<(&str, i64)>) -> SfcState {
    SfcState {
        job_id: JOB.into(),
        scope: SCOPE.into(),
        step: step.into(),
        deadline,
        running,
        wait_type: wait.map(|(t, _)| t.to_owned()),
        wait_start: wait.map(|(_, s)| s),
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn outcome(out: &StepOutcome) -> String {
    match out {
        StepOutcome::Written { version, .. } => format!("written, version {version}"),
        StepOutcome::EventApplied { job } => format!("already applied by {job}: nothing written"),
        other => format!("{other:?}"),
    }
}

/// Takes the work entries; finishing `pack` is this worker's job.
struct Worker {
    states: Store<SfcState>,
    log: Log,
}

impl StreamConsumer for Worker {
    fn feed(&self) -> Feed<'_> {
        let outbox = SfcState::SPEC.outbox.expect("SfcState has an outbox");
        Feed::new(SfcState::SPEC.kind, outbox.stream)
    }

    fn group(&self) -> &str {
        "recipe-worker"
    }

    fn handle<'a>(&'a self, scope: &'a str, entries: &'a [StreamEntry]) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            for e in entries {
                let (job, v) = (e.field("job").unwrap_or("?"), e.field("v").unwrap_or("?"));
                let (action, step) = (e.field("action").unwrap_or("?"), e.field("step").unwrap_or("-"));
                note(&self.log, format!("worker took work of {job} v{v} in {scope}: {action} {step}"));
                if action == "start" && step == "pack" && job == JOB {
                    let mut read = self.states.get(JOB).await?.ok_or("the job is gone")?;
                    let done = state("done", None, false, None);
                    let effects = Effects::new()
                        .work(WorkEntry::new().field("action", "finished").field("step", "done"))
                        .op(format!("{JOB}:pack-done"));
                    let out = self.states.step_in_place(&mut read, done, &effects).await?;
                    note(&self.log, line("step pack -> done (worker)", outcome(&out)));
                }
            }
            Ok(())
        })
    }
}

/// Waits (bounded) until the job reaches `step`.
async fn reach(states: &Store<SfcState>, step: &str) -> Result<(), BoxError> {
    let start = Instant::now();
    loop {
        if states.get(JOB).await?.is_some_and(|s| s.doc.step == step) {
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(10) {
            return Err(format!("the job did not reach `{step}` within 10 s").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs the recipe end to end; returns what happened, line by line.
///
/// # Errors
/// Any store, stream or poller error, or a step that did not happen within
/// 10 s.
pub async fn run(valkey: &Valkey) -> Result<Vec<String>, BoxError> {
    let plant = Plant::open(valkey.clone());
    let states = plant.store::<SfcState>();
    let log: Log = Arc::default();
    // Start clean so the demo can run again against the same server.
    let _ = states.delete_id(JOB, DeleteExpect::Any).await?;
    let _ = Plant::sfc_event(&plant, SCOPE, EVENT.0, EVENT.1)?.delete().await?;

    let digest = Plant::sfc_recipes(&plant)?.put(RECIPE).await?;
    note(&log, format!("recipe stored by digest {}...", &digest[..16]));
    let start = state("mix", Some(now_ms() + 300), true, None);
    let effects =
        Effects::new().work(WorkEntry::new().field("action", "start").field("step", "mix").field("recipe", &digest));
    let out = states.step(None, &start, &effects).await?;
    note(&log, line("step start -> mix, timer in 300 ms", outcome(&out)));

    // The sweep fires the timer: `mix` is over, the job waits for `qc`.
    let fire_states = states.clone();
    let fire_log = log.clone();
    let fire = move |scope: String, due: microdcs_valkey::sweep::Due| {
        let (states, log) = (fire_states.clone(), fire_log.clone());
        async move {
            for job in due.into_iter().map(|d| d.member) {
                let Some(mut read) = states.get(&job).await? else { continue };
                if read.doc.step != "mix" {
                    continue;
                }
                let next = state("qc", None, true, Some(("qc", now_ms())));
                let effects = Effects::new()
                    .work(WorkEntry::new().field("action", "await").field("step", "qc"))
                    .op(format!("{job}:mix-timer"));
                let out = states.step_in_place(&mut read, next, &effects).await?;
                note(&log, line(format!("timer fired in {scope}: mix -> qc (sweep)"), outcome(&out)));
            }
            Ok::<(), BoxError>(())
        }
    };
    let sweep = DueSweep::new(states.clone(), SfcState::due, fire, Duration::from_millis(100))
        .heartbeat(Plant::sfc_heartbeat(&plant)?);
    let poller = Poller::new(valkey.clone(), "recipe-demo")
        .consumer(Worker { states: states.clone(), log: log.clone() })
        .task(sweep)
        .start()
        .await?;

    let run = async {
        reach(&states, "qc").await?;
        // The event ends the wait: on to `pack`, whose work the worker takes.
        let event = Event::new(EVENT.0, EVENT.1);
        let mut read = states.get(JOB).await?.ok_or("the job is gone")?;
        let effects =
            Effects::new().work(WorkEntry::new().field("action", "start").field("step", "pack")).event(event.clone());
        let out = states.step_in_place(&mut read, state("pack", None, true, None), &effects).await?;
        note(&log, line(format!("event {} delivered: qc -> pack", EVENT.1), outcome(&out)));
        reach(&states, "done").await?;
        // Delivered again (a redelivery): the marker says it was applied.
        let read = states.get(JOB).await?.ok_or("the job is gone")?;
        let effects = Effects::new().work(WorkEntry::new().field("action", "start").field("step", "pack")).event(event);
        let out = states.step(Some(&read), &state("pack", None, true, None), &effects).await?;
        note(&log, line(format!("event {} redelivered", EVENT.1), outcome(&out)));
        Ok::<(), BoxError>(())
    };
    let result = run.await;
    // Let the worker take the last entry before the poller stops.
    tokio::time::sleep(Duration::from_millis(200)).await;
    poller.shutdown().await;
    result?;

    let due = states.range(SfcState::due(SCOPE), f64::NEG_INFINITY, f64::INFINITY, false, 10).await?;
    let active = states.ids(SfcState::active(SCOPE), Page::first(10)).await?.ids;
    let waiting = states.ids(SfcState::waits(SCOPE, "qc"), Page::first(10)).await?.ids;
    let job_in = |ids: &[String]| ids.iter().any(|id| id == JOB);
    note(
        &log,
        format!(
            "job {JOB} finished: in due {}, active {}, waits {}",
            due.iter().any(|d| d.member == JOB),
            job_in(&active),
            job_in(&waiting)
        ),
    );
    let text = Plant::sfc_recipes(&plant)?.get(&digest).await?;
    note(&log, line("recipe read back by digest, verified", text.as_deref() == Some(RECIPE)));
    let lines = log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    Ok(lines)
}
