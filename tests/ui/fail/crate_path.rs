// The path of `crate = "..."` is the one generated code uses: a path that
// names nothing fails there, not silently at `::microdcs_valkey`.
use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(crate = "crate::nowhere", kind = "task")]
struct Task {
    id: String,
    scope: String,
}

fn main() {}
