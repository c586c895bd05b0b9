use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(group(key = "jobresponse:bystate:{scope}:{state}", state = normalized(1)))]
struct JobResponse {
    id: String,
    scope: String,
}

fn main() {}
