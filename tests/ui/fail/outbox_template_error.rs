//! A template error inside `outbox(...)` names which template it is in.
use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(outbox(stream = "work:{scope}", events = "done:{scope}:{id"))]
struct Step {
    id: String,
    scope: String,
}

fn main() {}
