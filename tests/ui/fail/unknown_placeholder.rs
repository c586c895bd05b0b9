use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(group(key = "jobresponse:bystate:{scope}:{stat}"))]
struct JobResponse {
    id: String,
    scope: String,
    state: String,
}

fn main() {}
