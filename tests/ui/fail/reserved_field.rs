use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(unique(key = "joborder:byversion:{v}"))]
struct JobOrder {
    id: String,
    scope: String,
    v: String,
}

fn main() {}
