//! Types whose attributes are refused report their own errors only: the
//! keyspace listing them adds nothing about their stand-in specs.
use microdcs_valkey::{Document, keyspace};

#[derive(Document)]
#[microdcs(key = "a:{nope}")]
struct A {
    id: String,
    scope: String,
}

#[derive(Document)]
#[microdcs(key = "b:{nope}")]
struct B {
    id: String,
    scope: String,
}

keyspace! {
    Both {
        documents: [A, B],
    }
}

fn main() {}
