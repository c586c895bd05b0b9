//! Mistakes a first-time user made, each answered in our words at the
//! attribute: `:` separates segments; an `Option` score on a list wants
//! `sorted(...)`.
use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(key = "msg/{id}")]
struct Message {
    id: String,
    scope: String,
}

#[derive(Document)]
#[microdcs(list(key = "job:list:{scope}", score = due))]
struct Job {
    id: String,
    scope: String,
    due: Option<i64>,
}

fn main() {}
