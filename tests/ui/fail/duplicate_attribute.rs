use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(kind = "joborder")]
#[microdcs(kind = "order")]
struct JobOrder {
    id: String,
    scope: String,
}

fn main() {}
