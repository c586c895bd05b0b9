use microdcs_valkey::Document;

// A lifetime with a group index and a list: their entries would outlive the
// documents.
#[derive(Document)]
#[microdcs(
    ttl = "30m",
    list(key = "session:list:{scope}"),
    unique(key = "session:bytoken:{token}"),
    group(key = "session:byuser:{scope}:{user}")
)]
struct Session {
    id: String,
    scope: String,
    token: String,
    user: String,
}

fn main() {}
