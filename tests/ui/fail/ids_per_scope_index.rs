use microdcs_valkey::Document;

// Ids unique per scope (`{scope}` in the key): every index key needs
// `{scope}` too, since an entry holds an id that names a document only in
// its scope. An unscoped type cannot put `{scope}` in its key.
#[derive(Document)]
#[microdcs(
    key = "ticket:{scope}:{id}",
    unique(key = "ticket_ref:{reference}"),
    group(key = "ticket_status:{status}"),
)]
struct Ticket {
    id: String,
    scope: String,
    reference: String,
    status: String,
}

#[derive(Document)]
#[microdcs(unscoped, key = "task:{scope}:{id}")]
struct Task {
    id: String,
}

fn main() {}
