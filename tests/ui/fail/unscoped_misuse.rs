use microdcs_valkey::Document;

// An unscoped type has no scope: its list is one global set, no index uses
// `{scope}`, no field is marked as the scope, and the word takes no value.
#[derive(Document)]
#[microdcs(unscoped, list(key = "task:list:{scope}"), group(key = "task:bystatus:{scope}:{status}"))]
struct Task {
    id: String,
    status: String,
}

#[derive(Document)]
#[microdcs(unscoped)]
struct Marked {
    id: String,
    #[microdcs(scope)]
    tenant: String,
}

#[derive(Document)]
#[microdcs(unscoped = true)]
struct Valued {
    id: String,
}

fn main() {}
