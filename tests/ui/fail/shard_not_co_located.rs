use microdcs_valkey::Document;

// A type sharded by scope (`{#scope}` in its document key): every key its
// scripts touch must carry the same tag, or a cluster may place it on
// another primary. One error per key without it, each naming its place in
// the script and the fix.
#[derive(Document)]
#[microdcs(
    kind = "jobresponse",
    key = "jobresponse:{#scope}:{id}",
    list(key = "jobresponse:list:{scope}", score = start_time),
    unique(key = "jobresponse:byorder:{order}", order = job_order_id),
    group(key = "jobresponse:bystate:{#scope}:{state}"),
    changes = "changes:{scope}",
    outbox(stream = "work:{scope}", events = "event:{source}|{id}"),
)]
struct JobResponse {
    id: String,
    scope: String,
    job_order_id: String,
    start_time: i64,
    state: String,
}

fn main() {}
