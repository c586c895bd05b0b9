use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(key = "joborder:{id}", list(key = "joborder:{scope}"))]
struct JobOrder {
    id: String,
    scope: String,
}

fn main() {}
