use microdcs_valkey::{Document, keyspace};

#[derive(Document)]
struct JobOrder {
    id: String,
    scope: String,
}

keyspace! {
    Plant {
        documents: [JobOrder],
        scopes: set("scopes"),
        nudge: channel("nudge:{kind}"),
    }
}

fn main() {}
