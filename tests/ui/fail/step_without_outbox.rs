use microdcs_valkey::{Document, store::Effects, Store};

#[derive(Debug, serde::Serialize, serde::Deserialize, Document)]
struct Order {
    id: String,
    scope: String,
}

async fn advance(store: Store<Order>, order: Order) {
    // A type without an outbox has no step.
    let _ = store.step(None, &order, &Effects::new()).await;
}

fn main() {}
