//! `when` bound to a field that is not a `bool`, and to an `Option<bool>`:
//! the error says to bind a `&self` method returning `bool`.
use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(member(key = "job:running:{scope}", when = status, name = "running"))]
struct Job {
    id: String,
    scope: String,
    status: String,
}

#[derive(Document)]
#[microdcs(member(key = "task:open:{scope}", when = open, name = "open"))]
struct Task {
    id: String,
    scope: String,
    open: Option<bool>,
}

fn main() {}
