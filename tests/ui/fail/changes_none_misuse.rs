use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(changes = none, nudge = "wake:{kind}")]
struct Mark {
    id: String,
    scope: String,
}

#[derive(Document)]
#[microdcs(changes = never)]
struct Other {
    id: String,
    scope: String,
}

fn main() {}
