//! `list` exists only for a type that declares a list.
use microdcs_valkey::{Document, Page, Valkey, keyspace};

#[derive(Debug, serde::Serialize, serde::Deserialize, Document)]
struct Worker {
    id: String,
    scope: String,
}

keyspace! { Plant { documents: [Worker] } }

fn use_it(valkey: Valkey) {
    let workers = Plant::open(valkey).store::<Worker>();
    drop(workers.list("s1", Page::first(10)));
}

fn main() {}
