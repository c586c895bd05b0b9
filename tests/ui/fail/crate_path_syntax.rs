// `crate = "..."` holds a path; anything else is refused at the literal.
use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(crate = "not a path", kind = "other")]
struct Other {
    id: String,
    scope: String,
}

fn main() {}
