use microdcs_valkey::{changes::Change, changes::Changes, Document, Store};

#[derive(Debug, serde::Serialize, serde::Deserialize, Document)]
#[microdcs(changes = none)]
struct Mark {
    id: String,
    scope: String,
}

async fn handle(_scope: String, _changes: Vec<Change<Mark>>) -> Result<(), microdcs_valkey::poller::BoxError> {
    Ok(())
}

fn consume(store: Store<Mark>) {
    // A type without change entries has nothing to consume.
    let _ = Changes::new(store, "audit", handle);
}

fn main() {}
