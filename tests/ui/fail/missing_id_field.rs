use microdcs_valkey::Document;

#[derive(Document)]
struct JobOrder {
    order_id: String,
    scope: String,
}

fn main() {}
