use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(ttl = "thirty minutes")]
struct Session {
    id: String,
    scope: String,
}

#[derive(Document)]
#[microdcs(ttl = "0s")]
struct Token {
    id: String,
    scope: String,
}

fn main() {}
