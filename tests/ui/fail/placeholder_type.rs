use microdcs_valkey::Document;

struct Order {
    number: u32,
}

#[derive(Document)]
#[microdcs(unique(key = "jobresponse:byorder:{order}"))]
struct JobResponse {
    id: String,
    scope: String,
    order: Order,
}

fn main() {}
