use microdcs_valkey::Document;

#[derive(Document)]
struct Reading {
    id: f64,
    scope: String,
}

fn main() {}
