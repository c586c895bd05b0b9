use microdcs_valkey::{Document, keyspace};

// The work stream and the event markers are shared families, like the
// change stream: the keyspace must declare them, with their types.
#[derive(Document)]
#[microdcs(outbox(stream = "work:{scope}", events = "ev:{scope}:{source}|{id}"))]
struct Job {
    id: String,
    scope: String,
}

keyspace! {
    Plant {
        documents: [Job],
        work: set("work:{scope}"),
    }
}

fn main() {}
