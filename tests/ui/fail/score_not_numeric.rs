use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(list(key = "joborder:list:{scope}", score = priority))]
struct JobOrder {
    id: String,
    scope: String,
    priority: String,
}

fn main() {}
