use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(kidn = "joborder")]
struct JobOrder {
    id: String,
    scope: String,
}

fn main() {}
