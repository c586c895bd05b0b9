use microdcs_valkey::{Document, keyspace};

// `{#scope}` on a key of a type whose document key has no tag: the type is
// not sharded, so that key would live in another slot than the document.
#[derive(Document)]
#[microdcs(kind = "order", list(key = "order:list:{#scope}"))]
struct Order {
    id: String,
    scope: String,
}

// Only the scope may be a document's tag.
#[derive(Document)]
#[microdcs(kind = "part", key = "part:{#scope}:{id}", unique(key = "part:{#scope}:bycode:{#code}"))]
struct Part {
    id: String,
    scope: String,
    code: String,
}

// A nudge per scope is a shard channel, in the slot of the scope's
// documents: only a sharded type has one.
#[derive(Document)]
#[microdcs(kind = "bin", nudge = "nudge:{kind}:{#scope}")]
struct Bin {
    id: String,
    scope: String,
}

// A nudge channel per scope without the tag would not be in the script's
// slot (and `SPUBLISH` needs it there).
#[derive(Document)]
#[microdcs(kind = "shelf", key = "shelf:{#scope}:{id}", nudge = "nudge:{kind}:{scope}")]
struct Shelf {
    id: String,
    scope: String,
}

// A keyspace is sharded by scope only.
keyspace! {
    Shop {
        shard: tenant,
        documents: [Part],
    }
}

fn main() {}
