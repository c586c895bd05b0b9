//! The plant keyspace sharded by scope: the same four document types and
//! the per-scope families, with every key a script touches carrying the
//! scope as its hash tag (`{#scope}`). On a Valkey Cluster one scope's keys
//! share a slot, so every generated script stays in one slot, and the
//! scopes of one island spread over all the primaries. `keyspace!` with
//! `shard: scope` proves at compile time that no script of these types
//! spans slots.
//!
//! What changes against [`crate::plant`]: documents are named by scope and
//! id (`get_in(scope, id)`), the by-order index is unique per scope (a
//! cluster cannot check uniqueness across slots), tombstones and change
//! entries live in the scope's slot, and the scope registry is written
//! before a scope's first write instead of inside the script.
//!
//! Job orders and job responses send their nudges per scope
//! (`nudge = "nudge:{kind}:{#scope}"`, with `SPUBLISH`), which stay on the
//! scope's primary and its replicas; work masters and SFC states keep the
//! one channel per kind (`PUBLISH`), which crosses the whole cluster bus.
//! The poller takes both.

use microdcs_valkey::{Document, keyspace};
use serde::{Deserialize, Serialize};

/// A job order, per scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(
    kind = "joborder",
    key = "joborder:{#scope}:{id}",
    nudge = "nudge:{kind}:{#scope}",
    list(key = "joborder:list:{#scope}", score = priority)
)]
pub struct JobOrder {
    /// Job order id (unique within its scope).
    pub id: String,
    /// Scope: the shard.
    pub scope: String,
    /// Dispatch priority; the list is ordered by it.
    pub priority: i64,
    /// Work master the order runs.
    pub work_master: String,
}

/// A job response, per scope: found by its job order within the scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(
    kind = "jobresponse",
    key = "jobresponse:{#scope}:{id}",
    nudge = "nudge:{kind}:{#scope}",
    list(key = "jobresponse:list:{#scope}", score = start_time),
    unique(key = "jobresponse:byorder:{#scope}:{order}", order = job_order_id),
    group(key = "jobresponse:bystate:{#scope}:{state}", state = normalized_state())
)]
pub struct JobResponse {
    /// Response id (unique within its scope).
    pub id: String,
    /// Scope: the shard.
    pub scope: String,
    /// The job order this responds to.
    pub job_order_id: String,
    /// Start time, milliseconds since the epoch.
    pub start_time: i64,
    /// State texts, e.g. `["Running", "Held"]`.
    pub state: Vec<String>,
}

impl JobResponse {
    /// The state texts joined with `_`; empty means not indexed.
    pub fn normalized_state(&self) -> String {
        self.state.join("_")
    }

    /// A response to `order` in `scope`, started at 1000, in `state`.
    pub fn new(id: &str, scope: &str, order: &str, state: &[&str]) -> Self {
        JobResponse {
            id: id.into(),
            scope: scope.into(),
            job_order_id: order.into(),
            start_time: 1000,
            state: state.iter().map(|s| (*s).to_owned()).collect(),
        }
    }
}

/// A work master, per scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "workmaster", key = "workmaster:{#scope}:{id}", list(key = "workmaster:list:{#scope}"))]
pub struct WorkMaster {
    /// Work master id (unique within its scope).
    pub id: String,
    /// Scope: the shard.
    pub scope: String,
    /// Name.
    pub name: String,
}

/// The state of one SFC execution, per scope: its timers, activity and
/// waits, its work stream and its event markers all in the scope's slot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(
    kind = "sfc",
    key = "sfc:state:{#scope}:{id}",
    sorted(key = "sfc:due:{#scope}", score = deadline, name = "due"),
    member(key = "sfc:active:{#scope}", when = running, name = "active"),
    sorted(key = "sfc:waits:{#scope}:{type_id}", type_id = wait_type, score = wait_start, name = "waits"),
    outbox(stream = "sfc:work:{#scope}", events = "sfc:event:{#scope}:{source}|{id}"),
)]
pub struct SfcState {
    /// The job id (unique within its scope).
    #[microdcs(id)]
    pub job_id: String,
    /// Scope: the shard.
    pub scope: String,
    /// Current step.
    pub step: String,
    /// The next deadline, Unix ms (`None`: no timer).
    #[serde(default)]
    pub deadline: Option<i64>,
    /// Whether the job runs.
    #[serde(default)]
    pub running: bool,
    /// The wait type the job waits on (`None`: not waiting).
    #[serde(default)]
    pub wait_type: Option<String>,
    /// When the wait started, Unix ms.
    #[serde(default)]
    pub wait_start: Option<i64>,
}

keyspace! {
    /// The plant keyspace sharded by scope: one island over many primaries.
    pub ShardedPlant {
        shard: scope,
        documents: [JobOrder, JobResponse, WorkMaster, SfcState],
        dedupe: string("ce:dedupe:{hash}"),
        reference: set("ref:{kind}:{#scope}"),
        job_acceptance: value<u32>("jobacceptance:{#scope}"),
        scopes: set("scopes"),
        changes: stream("changes:{#scope}"),
        pubseq: counter("pubseq:{#scope}"),
        sfc_work: stream("sfc:work:{#scope}"),
        sfc_event: string("sfc:event:{#scope}:{source}|{id}"),
        nudge: channel("nudge:{kind}"),
        scope_nudge: channel("nudge:{kind}:{#scope}"),
        fingerprints: hash("schema:fingerprints"),
        tombstones: string("tomb:{kind}:{#scope}:{id}"),
    }
}

/// A short run of the sharded plant, what `plant sharded` prints: job
/// responses in six scopes, each scope's slot, a lookup by order, a step
/// (with its family effects: the line's sequence number and a reference)
/// with its work entry, every scope from the registry and a clean verify.
/// On a cluster the handle needs `Placement=sharded` (an untagged prefix).
///
/// # Errors
/// Any error of the store.
pub async fn demo(valkey: &microdcs_valkey::Valkey) -> Result<Vec<String>, microdcs_valkey::Error> {
    use microdcs_valkey::{Page, store::Effects, store::MaintenanceOptions, store::WorkEntry};
    let plant = ShardedPlant::open(valkey.clone());
    let responses = plant.store::<JobResponse>();
    let states = plant.store::<SfcState>();
    let prefix = valkey.prefix().clone();
    let mut out = Vec::new();
    for i in 0..6 {
        let scope = format!("line-{i}");
        let r = JobResponse::new("r-1", &scope, "o-1", &["Running"]);
        let outcome = responses.put(&r, microdcs_valkey::Expect::Any).await?;
        let key = JobResponse::key(&prefix, &scope, "r-1")?;
        let slot = microdcs_valkey::schema::slot::key_slot(key.as_bytes());
        out.push(format!("{scope}: {key} in slot {slot} ({outcome:?})"));
    }
    let found = responses.find(JobResponse::by_order("line-3", "o-1")).await?;
    out.push(format!("by order o-1 in line-3: {:?}", found.map(|f| (f.scope, f.id))));
    let job = SfcState {
        job_id: "j-1".into(),
        scope: "line-2".into(),
        step: "mix".into(),
        deadline: Some(1_000),
        running: true,
        wait_type: None,
        wait_start: None,
    };
    // The step numbers the job in its line with the line's `pubseq`
    // counter and marks the line as referenced by SFC work, both in the
    // step's own script (same slot: the families carry `{#scope}`).
    let effects = Effects::new()
        .work(WorkEntry::new().field("step", "mix"))
        .incr(&ShardedPlant::pubseq(&plant, "line-2")?, 1)
        .add(&ShardedPlant::reference(&plant, "sfc", "line-2")?, "j-1");
    let step = states.step(None, &job, &effects).await?;
    out.push(format!("step j-1 in line-2: {step:?}"));
    let scopes = responses.scopes(Page::first(100)).await?;
    out.push(format!("scopes in the registry: {}", scopes.ids.len()));
    let report = responses.verify(&MaintenanceOptions::default()).await?;
    out.push(format!("verify: {} documents, {} differences", report.documents, report.differences.len()));
    Ok(out)
}
