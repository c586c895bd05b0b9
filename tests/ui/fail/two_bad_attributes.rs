use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(key = "job order:{id}", lsit(key = "joborder:list:{scope}"))]
struct JobOrder {
    id: String,
    scope: String,
}

fn main() {}
