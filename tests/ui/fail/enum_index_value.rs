//! A unit enum is an index value once it derives `KeySegment`; without the
//! derive the error says so.
use microdcs_valkey::Document;

enum TaskStatus {
    Queued,
    Running,
}

#[derive(Document)]
#[microdcs(group(key = "task:bystatus:{scope}:{status}"))]
struct Task {
    id: String,
    scope: String,
    status: TaskStatus,
}

fn main() {}
