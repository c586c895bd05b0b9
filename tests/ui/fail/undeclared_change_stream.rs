use microdcs_valkey::{Document, keyspace};

// Its own change stream: unlike the default `changes:{scope}`, which belongs
// to every keyspace whose documents use it, it must be declared.
#[derive(Document)]
#[microdcs(changes = "orders:changes:{scope}")]
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
