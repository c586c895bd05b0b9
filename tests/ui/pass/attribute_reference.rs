//! Every example of the attribute reference (the rustdoc of
//! `#[derive(Document)]`, `#[derive(KeySegment)]` and `keyspace!` in
//! `microdcs-derive/src/lib.rs`), verbatim. A unit test of microdcs-derive
//! checks that each example there appears here, so none can rot.
use std::error::Error;

use microdcs_valkey::{Document, KeyPrefix, KeySegment};

// --- #[derive(Document)]: overview ---
#[derive(Debug, Clone, Copy, PartialEq, Eq, KeySegment)]
#[microdcs(rename_all = "snake_case")]
pub enum TaskStatus {
    NotStarted,
    Running,
    #[microdcs(rename = "held")]
    OnHold,
}

#[derive(Document)]
#[microdcs(
    kind = "task",                                           // default: the type name in lower case
    key = "task:{id}",                                       // default: "{kind}:{id}"
    list(key = "task:list:{scope}", score = due),            // per-scope sorted set, ordered by `due`
    unique(key = "task:bycode:{code}", code = external_code),  // `{code}` from field `external_code`
    group(key = "task:bystatus:{scope}:{status}"),           // `{status}` from field `status`
    group(key = "task:bytag:{scope}:{tag}", tag = tag_text()), // `{tag}` from a method
)]
pub struct Task {
    pub id: String,
    pub scope: String,
    pub external_code: Option<String>,
    pub status: TaskStatus,
    pub due: i64,
    pub tags: Vec<String>,
}

impl Task {
    /// The tags joined with `,`; no tags is empty text: in no tag group.
    pub fn tag_text(&self) -> String {
        self.tags.join(",")
    }
}

fn generated() -> Result<(), Box<dyn Error>> {
    // --- #[derive(Document)]: what is generated ---
    let prefix = KeyPrefix::default();
    assert_eq!(Task::key(&prefix, "t-1")?, "microdcs:task:t-1");
    assert_eq!(Task::list_key(&prefix, "s1")?, "microdcs:task:list:s1");
    assert_eq!(Task::by_code_key(&prefix, "c:7")?, "microdcs:task:bycode:c%3A7");
    assert_eq!(Task::by_status_key(&prefix, "s1", &TaskStatus::Running)?, "microdcs:task:bystatus:s1:running");
    let find = Task::by_code("c-7"); // UniqueQuery<Task>: run it with Store::find
    let ids = Task::by_status("s1", &TaskStatus::OnHold); // GroupQuery<Task>: run it with Store::ids
    assert_eq!(ids.values(), ["s1", "held"]);

    let task = Task {
        id: "t-1".into(),
        scope: "s1".into(),
        external_code: None,
        status: TaskStatus::Running,
        due: 1_700_000_000,
        tags: vec![],
    };
    let entries = task.index_entries(&prefix)?;
    assert_eq!(entries.key, "microdcs:task:t-1");
    assert_eq!(entries.list.map(|l| l.score), Some(Some(1_700_000_000.0)));
    assert!(entries.unique[0].is_none(), "no code (None): not in by_code");
    assert_eq!(entries.groups[0].as_ref().map(|e| e.key.as_str()), Some("microdcs:task:bystatus:s1:running"));
    assert!(entries.groups[1].is_none(), "no tags (empty text): in no tag group");
    // --- end ---
    let _ = find;
    Ok(())
}

// --- kind and key ---
#[derive(Document)]
#[microdcs(kind = "workorder", key = "wo:{id}")]
pub struct WorkOrder {
    pub id: String,
    pub scope: String,
}

#[derive(Document)]
#[microdcs(
    kind = "ticket",
    key = "ticket:{scope}:{id}",
    unique(key = "ticket_ref:{scope}:{reference}"),
)]
pub struct Ticket {
    pub id: String,
    pub scope: String,
    pub reference: String,
}

// --- list ---
#[derive(Document)]
#[microdcs(list(key = "alarm:list:{scope}"))] // no score: a plain set
pub struct Alarm {
    pub id: String,
    pub scope: String,
}

#[derive(Document)]
#[microdcs(list(key = "batch:list:{scope}", score = rank()))]
pub struct Batch {
    pub id: String,
    pub scope: String,
    pub priority: u8,
}

impl Batch {
    pub fn rank(&self) -> f64 {
        f64::from(self.priority) * 10.0
    }
}

// --- unique and group ---
#[derive(Document)]
#[microdcs(
    unique(key = "machine:byserial:{serial}"),                     // index `by_serial`, field `serial`
    unique(key = "machine:byasset:{asset}", asset = asset_number), // index `by_asset`, field `asset_number`
    group(key = "machine:byline:{scope}:{line}", line = line_name()), // index `by_line`, a method
    group(name = "in_hall", key = "machine:hall:{scope}:{hall}"),  // named explicitly
)]
pub struct Machine {
    pub id: String,
    pub scope: String,
    pub serial: String,
    pub asset_number: Option<u32>,
    pub hall: u16,
    pub line: Option<String>,
}

impl Machine {
    /// Empty when the machine is on no line: then it is in no line group.
    pub fn line_name(&self) -> &str {
        self.line.as_deref().unwrap_or("")
    }
}

// --- id and scope ---
#[derive(Document)]
#[microdcs(list(key = "reading:list:{scope}", score = seq))]
pub struct Reading {
    #[microdcs(id)]
    pub seq: u64,
    #[microdcs(scope)]
    pub station: String,
}

// --- changes, nudge, registry ---
#[derive(Document)]
#[microdcs(changes = "audit:changes:{scope}", nudge = "audit:nudge:{kind}", registry = "audit:scopes")]
pub struct AuditEntry {
    pub id: String,
    pub scope: String,
}

#[derive(Document)]
#[microdcs(
    key = "sfc:state:{id}",
    outbox(stream = "sfc:work:{scope}", events = "sfc:event:{scope}:{source}|{id}"),
)]
pub struct SfcState {
    pub id: String,
    pub scope: String,
    pub step: String,
}

// --- keyspace! ---
microdcs_valkey::keyspace! {
    /// Every key of the task service.
    pub Tasks {
        documents: [Task, WorkOrder, Alarm, Batch, Machine, Reading, AuditEntry],
        scopes: set("scopes"),                        // shared by all types but AuditEntry
        changes: stream("changes:{scope}"),
        nudge: channel("nudge:{kind}"),
        audit_scopes: set("audit:scopes"),            // AuditEntry's own
        audit_changes: stream("audit:changes:{scope}"),
        audit_nudge: channel("audit:nudge:{kind}"),
        dedupe: string("ce:dedupe:{hash}"),           // not documents
        settings: hash("settings:{scope}"),
        ranking: zset("ranking:{scope}:{board}"),
        lease: string("lease:{#resource}:owner"),     // hash tag: one cluster slot per resource
    }
}

fn keyspace_builders() -> Result<(), Box<dyn Error>> {
    // --- keyspace!: what is generated ---
    let prefix = KeyPrefix::default();
    assert_eq!(Tasks::dedupe_key(&prefix, "9f2c")?, "microdcs:ce:dedupe:9f2c");
    assert_eq!(Tasks::ranking_key(&prefix, "s1", "weekly")?, "microdcs:ranking:s1:weekly");
    assert_eq!(Tasks::nudge_channel(&prefix, "task")?, "microdcs:nudge:task");
    assert_eq!(Tasks::lease_key(&prefix, "press-7")?, "microdcs:lease:{press-7}:owner");
    assert_eq!(Tasks::SPEC.documents.len(), 7);
    // --- end ---
    Ok(())
}

fn attribute_examples() -> Result<(), Box<dyn Error>> {
    let prefix = KeyPrefix::default();
    assert_eq!(WorkOrder::key(&prefix, "w-1")?, "microdcs:wo:w-1");
    assert_eq!(WorkOrder::SPEC.kind, "workorder");
    assert_eq!(Ticket::key(&prefix, "acme", "t-1")?, "microdcs:ticket:acme:t-1");
    let t = Ticket { id: "t-1".into(), scope: "acme".into(), reference: "R-1".into() };
    assert_eq!(t.index_entries(&prefix)?.key, "microdcs:ticket:acme:t-1");
    assert!(Ticket::SPEC.ids_per_scope() && !WorkOrder::SPEC.ids_per_scope());
    let alarm = Alarm { id: "a-1".into(), scope: "s1".into() };
    assert_eq!(alarm.index_entries(&prefix)?.list.and_then(|l| l.score), None);
    let batch = Batch { id: "b-1".into(), scope: "s1".into(), priority: 3 };
    assert_eq!(batch.index_entries(&prefix)?.list.and_then(|l| l.score), Some(30.0));
    assert_eq!(Machine::by_asset_key(&prefix, &42_u32)?, "microdcs:machine:byasset:42");
    assert_eq!(Machine::in_hall_key(&prefix, "s1", &3_u16)?, "microdcs:machine:hall:s1:3");
    let m = Machine {
        id: "m-1".into(),
        scope: "s1".into(),
        serial: "SN-1".into(),
        asset_number: None,
        hall: 3,
        line: None,
    };
    let e = m.index_entries(&prefix)?;
    assert_eq!(e.unique[0].as_ref().map(|x| x.key.as_str()), Some("microdcs:machine:byserial:SN-1"));
    assert!(e.unique[1].is_none() && e.groups[0].is_none());
    let _ = Machine::by_line("s1", "line-2");
    assert_eq!(Reading::key(&prefix, &7_u64)?, "microdcs:reading:7");
    assert_eq!(Reading { seq: 7, station: "st".into() }.scope(), "st");
    assert_eq!(AuditEntry::SPEC.changes, Some("audit:changes:{scope}"));
    let outbox = SfcState::SPEC.outbox.expect("an outbox");
    assert_eq!((outbox.stream, outbox.events, outbox.event_ttl_ms), ("sfc:work:{scope}", Some("sfc:event:{scope}:{source}|{id}"), 3_600_000));
    assert!(SfcState::STEP_SCRIPT.starts_with("-- microdcs step script"));
    Ok(())
}

// --- #[derive(Document)]: schema = N ---
mod schema_version {
    use microdcs_valkey::Document;

    #[derive(serde::Serialize, serde::Deserialize, Document)]
    #[microdcs(kind = "order", schema = 2, sorted(key = "order:bytotal:{scope}", score = total, name = "by_total"))]
    struct Order {
        id: String,
        scope: String,
        total: i64,
        // New in schema 2: documents written before read it as `None`.
        #[serde(default)]
        gift_note: Option<String>,
    }

    pub fn check() {
        assert_eq!(Order::SPEC.schema, 2);
        let _ = Order { id: "o-1".into(), scope: "s1".into(), total: 1, gift_note: None };
    }
}

fn main() {
    schema_version::check();
    generated().unwrap();
    keyspace_builders().unwrap();
    attribute_examples().unwrap();
}
