use microdcs_valkey::{Document, KeyPrefix, schema::UNSCOPED};

// An unscoped type: no scope field, a global list, indexes without `{scope}`.
#[derive(Document)]
#[microdcs(unscoped, key = "tasks:{id}", list(key = "index:tasks"), group(key = "tasks:bystatus:{status}"))]
struct Task {
    id: String,
    status: String,
    // An ordinary field, not the scope.
    scope: String,
}

fn main() {
    let prefix = KeyPrefix::new("m").unwrap();
    let t = Task { id: "t-1".into(), status: "queued".into(), scope: "ignored".into() };
    assert_eq!(t.scope(), UNSCOPED);
    assert_eq!(Task::list_key(&prefix).unwrap(), "m:index:tasks");
    let e = t.index_entries(&prefix).unwrap();
    assert_eq!(e.list.unwrap().key, "m:index:tasks");
    assert_eq!(e.groups[0].as_ref().unwrap().key, "m:tasks:bystatus:queued");
    assert!(Task::SPEC.unscoped);
}
