//! A delete has no `Create` expectation: there is nothing to delete that
//! must not exist. Deletes take `DeleteExpect`, puts take `Expect`.
use microdcs_valkey::{Document, Expect, Valkey, keyspace};

#[derive(Debug, serde::Serialize, serde::Deserialize, Document)]
struct Job {
    id: String,
    scope: String,
}

keyspace! { Jobs { documents: [Job] } }

fn use_it(valkey: Valkey) {
    let jobs = Jobs::open(valkey).store::<Job>();
    drop(jobs.delete_id("j-1", Expect::Create));
}

fn main() {}
