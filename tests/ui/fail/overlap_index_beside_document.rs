use microdcs_valkey::{Document, keyspace};

// The list key has the document key's shape, `x:{#scope}:` then one
// segment: a document with id `name` would have the list's key. One error,
// naming the rewrite, and none at the uses of the type's items below
// (before, each use was an error of its own, most pointing into the
// library's source).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, Document)]
#[microdcs(
    kind = "x",
    key = "x:{#scope}:{id}",
    unique(key = "x:{#scope}:name:{name}", name = "by_name"),
    list(key = "x:{#scope}:name", score = rank)
)]
struct X {
    id: String,
    scope: String,
    name: String,
    rank: i64,
}

keyspace! {
    Shop {
        shard: scope,
        documents: [X],
        counter: counter("cnt:{#scope}"),
    }
}

async fn use_it(valkey: microdcs_valkey::Valkey) {
    let shop = Shop::open(valkey);
    let xs = shop.store::<X>();
    let _ = xs.get_in("s1", "x-1").await;
    let _ = xs.create(&X { id: "x-1".into(), scope: "s1".into(), name: "n".into(), rank: 1 }).await;
    let _ = xs.find(X::by_name("s1", "n")).await;
    let _ = xs.list("s1", microdcs_valkey::Page::first(10)).await;
    let _ = X::key(shop.valkey().prefix(), "s1", "x-1");
    let _ = Shop::counter(&shop, "s1");
}

fn main() {
    let _ = use_it;
}
