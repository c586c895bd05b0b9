//! `#[derive(KeySegment)]`: an enum without fields is an index value like a
//! `String` field (also inside an `Option`), an id or a query argument.
use microdcs_valkey::{Document, KeyPrefix, KeySegment, keyspace};

#[derive(Debug, Clone, Copy, PartialEq, Eq, KeySegment)]
#[microdcs(rename_all = "snake_case")]
pub enum TaskStatus {
    NotStarted,
    Running,
    #[microdcs(rename = "held")]
    OnHold,
}

#[derive(Debug, Clone, Copy, KeySegment)]
pub enum Priority {
    Low,
    High,
}

/// Every rule, on one variant each.
#[derive(KeySegment)]
#[microdcs(rename_all = "SCREAMING-KEBAB-CASE")]
enum Shouting {
    OnHoldNow,
}

#[derive(Document)]
#[microdcs(
    group(key = "task:bystatus:{scope}:{status}"),
    group(key = "task:bypriority:{scope}:{priority}"),
)]
pub struct Task {
    pub id: String,
    pub scope: String,
    pub status: TaskStatus,
    pub priority: Option<Priority>,
}

keyspace! {
    Tasks {
        documents: [Task],
        scopes: set("scopes"),
        changes: stream("changes:{scope}"),
        nudge: channel("nudge:{kind}"),
    }
}

fn main() {
    let p = KeyPrefix::default();
    assert_eq!(TaskStatus::NotStarted.key_segment(), "not_started");
    assert_eq!(TaskStatus::OnHold.key_segment(), "held");
    assert_eq!(Priority::High.key_segment(), "High");
    assert_eq!(Shouting::OnHoldNow.key_segment(), "ON-HOLD-NOW");
    assert_eq!(Task::by_status_key(&p, "s1", &TaskStatus::Running).unwrap(), "microdcs:task:bystatus:s1:running");

    let task = Task { id: "t-1".into(), scope: "s1".into(), status: TaskStatus::OnHold, priority: None };
    let entries = task.index_entries(&p).unwrap();
    let by_status = entries.groups[0].as_ref().expect("every task has a status");
    assert_eq!(by_status.key, "microdcs:task:bystatus:s1:held");
    assert_eq!(by_status.fields, [("status", "held".to_owned())]);
    assert!(entries.groups[1].is_none(), "no priority: in no priority group");

    let query = Task::by_status("s1", &TaskStatus::Running);
    assert_eq!(query.values(), ["s1", "running"]);
    assert_eq!(Task::by_priority("s1", &Priority::Low).values(), ["s1", "Low"]);
    assert_eq!(Tasks::SPEC.documents.len(), 1);
}
