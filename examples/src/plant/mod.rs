//! The plant keyspace, our reference keyspace (its key table is the one a
//! plant data layer of this kind has always used, checked key by key in
//! `examples/tests/it/reference_keys.rs`): job
//! orders, job responses, work masters and SFC states, plus every
//! non-document family (dedupe, locks, reference lists, streams, counters,
//! cursors, heartbeat, the nudge channel).

pub mod sharded;

use microdcs_valkey::{Document, keyspace};
use serde::{Deserialize, Serialize};

/// A job order: a hash document listed per scope by priority.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(
    kind = "joborder",
    key = "joborder:{id}",
    list(key = "joborder:list:{scope}", score = priority)
)]
pub struct JobOrder {
    /// Job order id.
    pub id: String,
    /// Scope (the equipment or area the order belongs to).
    pub scope: String,
    /// Dispatch priority; the list is ordered by it.
    pub priority: i64,
    /// Work master the order runs.
    pub work_master: String,
}

/// A job response: listed by start time, found by its job order (unique) and
/// by scope plus normalized state (group; an empty state is not indexed, so
/// a response that has not reported a state yet is in no state group).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(
    kind = "jobresponse",
    key = "jobresponse:{id}",
    list(key = "jobresponse:list:{scope}", score = start_time),
    unique(key = "jobresponse:byorder:{order}", order = job_order_id),
    group(key = "jobresponse:bystate:{scope}:{state}", state = normalized_state())
)]
pub struct JobResponse {
    /// Response id.
    pub id: String,
    /// Scope.
    pub scope: String,
    /// The job order this responds to.
    pub job_order_id: String,
    /// Start time, milliseconds since the epoch.
    pub start_time: i64,
    /// State texts, e.g. `["Running", "Held"]`.
    pub state: Vec<String>,
    /// Response data reported by the equipment (parameters, results); part
    /// of the document only, never indexed.
    #[serde(default)]
    pub data: String,
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
            data: String::new(),
        }
    }
}

/// A work master: listed per scope in a plain set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "workmaster", key = "workmaster:{id}", list(key = "workmaster:list:{scope}"))]
pub struct WorkMaster {
    /// Work master id.
    pub id: String,
    /// Scope.
    pub scope: String,
    /// Name.
    pub name: String,
}

/// The state of one SFC execution, keyed by job id. Its indexes are the
/// engine's: `due` by the next deadline (none: not due), `active` while the
/// job runs, `waits` by the start of the wait of each wait type; every write
/// of the state keeps all three, in the same script. Its step
/// (`Store::step`) also appends work to `sfc:work:{scope}` and applies each
/// event once, by its marker `sfc:event:{scope}:{source}|{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(
    kind = "sfc",
    key = "sfc:state:{id}",
    sorted(key = "sfc:due:{scope}", score = deadline, name = "due"),
    member(key = "sfc:active:{scope}", when = running, name = "active"),
    sorted(key = "sfc:waits:{scope}:{type_id}", type_id = wait_type, score = wait_start, name = "waits"),
    outbox(stream = "sfc:work:{scope}", events = "sfc:event:{scope}:{source}|{id}"),
)]
pub struct SfcState {
    /// The job id.
    #[microdcs(id)]
    pub job_id: String,
    /// Scope.
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

/// What a reference list (`ref:{kind}:{scope}`) holds: the kinds of the
/// reference key table, written as their key segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, microdcs_valkey::KeySegment)]
#[microdcs(rename_all = "lowercase")]
pub enum RefKind {
    /// `equipment`
    Equipment,
    /// `materialclass`
    MaterialClass,
    /// `personnel`
    Personnel,
    /// `physicalasset`
    PhysicalAsset,
    /// `materialdefinition`
    MaterialDefinition,
}

impl RefKind {
    /// The kind's key segment, for the family builders (which take text).
    pub fn segment(self) -> String {
        microdcs_valkey::KeySegment::key_segment(&self).into_owned()
    }
}

keyspace! {
    /// The plant keyspace: every family of the reference key table.
    pub Plant {
        documents: [JobOrder, JobResponse, WorkMaster, SfcState],
        dedupe: string("ce:dedupe:{hash}"),
        start_lock: string("lock:poststart:{config_id}"),
        reference: set("ref:{kind}:{scope}"),
        job_acceptance: value<u32>("jobacceptance:{scope}"),
        scopes: set("scopes"),
        changes: stream("changes:{scope}"),
        pubseq: counter("pubseq:{scope}"),
        publisher_cursors: hash("publisher:cursors"),
        sfc_work: stream("sfc:work:{scope}"),
        sfc_heartbeat: string("sfc:heartbeat"),
        sfc_event: string("sfc:event:{scope}:{source}|{id}"),
        nudge: channel("nudge:{kind}"),
        // Ours, beyond the reference table: index layout fingerprints (verify/rebuild).
        fingerprints: hash("schema:fingerprints"),
        // Ours: the live writers of each kind and its index states (schema evolution).
        writers: zset("schema:writers:{#kind}"),
        index_states: hash("schema:indexes:{#kind}"),
        // Ours: what a delete leaves so retries across it are recognised.
        tombstones: string("tomb:{kind}:{id}"),
        // Ours: SFC recipe texts, stored and read by their SHA-256.
        sfc_recipes: content("sfc:recipe:{hash}"),
    }
}

/// Sample values for every family and the key each renders to.
pub struct KeyRow {
    /// Family (document type and role, or declared family name).
    pub family: String,
    /// Valkey type.
    pub key_type: &'static str,
    /// Template.
    pub template: &'static str,
    /// Rendered key with sample values.
    pub key: String,
}

/// Renders every family of [`Plant`] with sample values through the
/// generated key builders.
///
/// # Errors
/// A sample value rejected by the encoding (never, for these samples).
pub fn key_table(prefix: &microdcs_valkey::KeyPrefix) -> Result<Vec<KeyRow>, microdcs_valkey::schema::KeyError> {
    use microdcs_valkey::schema::Role;
    let p = prefix;
    let mut rows = Vec::new();
    for f in Plant::SPEC.all_families() {
        let key = match (f.owner, f.role, f.name) {
            ("JobOrder", Role::Document, _) => JobOrder::key(p, "o-1")?,
            ("JobOrder", Role::List, _) => JobOrder::list_key(p, "s1")?,
            ("JobResponse", Role::Document, _) => JobResponse::key(p, "r-1")?,
            ("JobResponse", Role::List, _) => JobResponse::list_key(p, "s1")?,
            ("JobResponse", _, "by_order") => JobResponse::by_order_key(p, "o-1")?,
            ("JobResponse", _, "by_state") => JobResponse::by_state_key(p, "s1", "Running_Held")?,
            ("WorkMaster", Role::Document, _) => WorkMaster::key(p, "wm-1")?,
            ("WorkMaster", Role::List, _) => WorkMaster::list_key(p, "s1")?,
            ("SfcState", Role::Document, _) => SfcState::key(p, "j-1")?,
            ("SfcState", _, "due") => SfcState::due_key(p, "s1")?,
            ("SfcState", _, "active") => SfcState::active_key(p, "s1")?,
            ("SfcState", _, "waits") => SfcState::waits_key(p, "s1", "t-1")?,
            (_, _, "dedupe") => Plant::dedupe_key(p, "0123456789abcdef0123456789abcdef")?,
            (_, _, "start_lock") => Plant::start_lock_key(p, "cfg-1")?,
            (_, _, "reference") => Plant::reference_key(p, &RefKind::Equipment.segment(), "s1")?,
            (_, _, "job_acceptance") => Plant::job_acceptance_key(p, "s1")?,
            (_, _, "scopes") => Plant::scopes_key(p)?,
            (_, _, "changes") => Plant::changes_key(p, "s1")?,
            (_, _, "pubseq") => Plant::pubseq_key(p, "s1")?,
            (_, _, "publisher_cursors") => Plant::publisher_cursors_key(p)?,
            (_, _, "sfc_work") => Plant::sfc_work_key(p, "s1")?,
            (_, _, "sfc_heartbeat") => Plant::sfc_heartbeat_key(p)?,
            (_, _, "sfc_event") => Plant::sfc_event_key(p, "s1", "urn:line-1", "e-1")?,
            (_, _, "nudge") => Plant::nudge_channel(p, "jobresponse")?,
            (_, _, "fingerprints") => Plant::fingerprints_key(p)?,
            (_, _, "writers") => Plant::writers_key(p, "jobresponse")?,
            (_, _, "index_states") => Plant::index_states_key(p, "jobresponse")?,
            (_, _, "tombstones") => Plant::tombstones_key(p, "jobresponse", "r-1")?,
            (_, _, "sfc_recipes") => Plant::sfc_recipes_key(p, "e3b0c442")?,
            (owner, role, name) => unreachable!("family {owner} {role:?} {name} has no sample"),
        };
        let family = match f.role {
            Role::Declared(n) => n.to_owned(),
            Role::Document => format!("{} document", f.owner),
            Role::List => format!("{} list", f.owner),
            Role::Unique(_) | Role::Group(_) => format!("{} {}", f.owner, f.name),
        };
        rows.push(KeyRow { family, key_type: f.key_type.type_name(), template: f.key, key });
    }
    Ok(rows)
}
