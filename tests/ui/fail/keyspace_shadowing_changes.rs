//! A declared change stream meant as a rename, while every type still
//! writes the default `changes:{scope}`: refused, saying what to write.
use microdcs_valkey::{Document, keyspace};

#[derive(Document)]
struct Job {
    id: String,
    scope: String,
}

keyspace! {
    Jobs {
        documents: [Job],
        changes: stream("events:{scope}"),
    }
}

fn main() {}
