use microdcs_valkey::{Document, keyspace};

#[derive(Document)]
#[microdcs(key = "joborder:{id}")]
struct JobOrder {
    id: String,
    scope: String,
}

#[derive(Document)]
#[microdcs(key = "archive:{id}", list(key = "joborder:{scope}"))]
struct Archive {
    id: String,
    scope: String,
}

keyspace! {
    Plant {
        documents: [JobOrder, Archive],
        scopes: set("scopes"),
        changes: stream("changes:{scope}"),
        nudge: channel("nudge:{kind}"),
    }
}

fn main() {}
