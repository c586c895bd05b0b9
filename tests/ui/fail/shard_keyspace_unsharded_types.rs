use microdcs_valkey::{Document, keyspace};

// A keyspace sharded by scope refuses types whose keys are not tagged by
// their scope, naming every key of each and its per-scope form.
#[derive(Document)]
#[microdcs(
    kind = "jobresponse",
    list(key = "jobresponse:list:{scope}", score = start_time),
    unique(key = "jobresponse:byorder:{order}", order = job_order_id),
)]
struct JobResponse {
    id: String,
    scope: String,
    job_order_id: String,
    start_time: i64,
}

#[derive(Document)]
#[microdcs(kind = "setting", unscoped)]
struct Setting {
    id: String,
}

#[derive(Document)]
#[microdcs(kind = "ticket", key = "ticket:{#scope}:{id}")]
struct Ticket {
    id: String,
    scope: String,
}

keyspace! {
    Plant {
        shard: scope,
        documents: [JobResponse, Setting, Ticket],
    }
}

fn main() {}
