use microdcs_valkey::Document;

#[derive(Document)]
struct JobOrder(String, String);

fn main() {}
