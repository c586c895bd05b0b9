use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(key = "job*order:{id}")]
struct JobOrder {
    id: String,
    scope: String,
}

fn main() {}
