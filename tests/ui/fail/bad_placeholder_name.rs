use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(unique(key = "joborder:byorder:{order-id}"))]
struct JobOrder {
    id: String,
    scope: String,
}

fn main() {}
