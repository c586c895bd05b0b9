use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(list(key = "joborder:list:{scope}:"))]
struct JobOrder {
    id: String,
    scope: String,
}

fn main() {}
