//! A store comes from a keyspace handle, and only for a document type the
//! keyspace lists: a type outside it never had its keys checked against the
//! others.
use microdcs_valkey::{Document, Valkey, keyspace};

#[derive(Debug, serde::Serialize, serde::Deserialize, Document)]
struct Job {
    id: String,
    scope: String,
}

#[derive(Debug, serde::Serialize, serde::Deserialize, Document)]
#[microdcs(key = "job:{id}")]
struct Stray {
    id: String,
    scope: String,
}

keyspace! { Jobs { documents: [Job] } }

fn use_it(valkey: Valkey) {
    let _jobs = Jobs::open(valkey.clone()).store::<Job>();
    let _strays = Jobs::open(valkey).store::<Stray>();
}

fn main() {}
