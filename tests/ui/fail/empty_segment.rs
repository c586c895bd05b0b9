use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(key = "joborder::{id}")]
struct JobOrder {
    id: String,
    scope: String,
}

fn main() {}
