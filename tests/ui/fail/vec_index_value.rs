use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(group(key = "jobresponse:bystate:{scope}:{state}"))]
struct JobResponse {
    id: String,
    scope: String,
    state: Vec<String>,
}

fn main() {}
