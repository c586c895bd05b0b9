// `#[microdcs(crate = "...")]`: generated code names the runtime through
// the path given, here a re-export inside the application.
mod infra {
    pub use microdcs_valkey as store;
}

use infra::store::{Document, KeyPrefix, KeySegment};

#[derive(Clone, Copy, KeySegment)]
#[microdcs(crate = "crate::infra::store", rename_all = "snake_case")]
enum Status {
    NotStarted,
}

#[derive(Document)]
#[microdcs(crate = "crate::infra::store", kind = "task", group(key = "task:bystatus:{scope}:{status}"))]
struct Task {
    id: String,
    scope: String,
    status: Status,
}

infra::store::keyspace! {
    #[microdcs(crate = "crate::infra::store")]
    /// The tasks of the application.
    Tasks { documents: [Task], seen: counter("seen:{scope}") }
}

fn main() {
    let prefix = KeyPrefix::new("m").unwrap();
    let t = Task { id: "t-1".into(), scope: "s".into(), status: Status::NotStarted };
    let e = t.index_entries(&prefix).unwrap();
    assert_eq!(e.groups[0].as_ref().unwrap().key, "m:task:bystatus:s:not_started");
    assert_eq!(Tasks::SPEC.documents.len(), 1);
}
