use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(list(key = "joborder:list:{area}"))]
struct JobOrder {
    id: String,
    scope: String,
    area: String,
}

fn main() {}
