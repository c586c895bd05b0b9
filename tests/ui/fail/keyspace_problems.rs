//! Every problem of a keyspace is reported in one build, one a line: here an
//! overlap and a change stream of their own that two document types use but
//! the keyspace does not declare.
use microdcs_valkey::{Document, keyspace};

#[derive(Document)]
#[microdcs(key = "joborder:{id}", changes = "events:{scope}")]
struct JobOrder {
    id: String,
    scope: String,
}

#[derive(Document)]
#[microdcs(key = "archive:{id}", list(key = "joborder:{scope}"), changes = "events:{scope}")]
struct Archive {
    id: String,
    scope: String,
}

keyspace! {
    Plant {
        documents: [JobOrder, Archive],
        scopes: set("scopes"),
        nudge: channel("nudge:{kind}"),
    }
}

fn main() {}
