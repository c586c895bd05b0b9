//! Two document types of one kind in one keyspace: their change entries
//! would mix and a new document of one would start from the other's
//! tombstone. Refused, naming both.
use microdcs_valkey::{Document, keyspace};

#[derive(Document)]
#[microdcs(kind = "message")]
struct Message {
    id: String,
    scope: String,
}

#[derive(Document)]
#[microdcs(kind = "message", key = "note:{id}")]
struct Note {
    id: String,
    scope: String,
}

keyspace! {
    Chat {
        documents: [Message, Note],
    }
}

fn main() {}
