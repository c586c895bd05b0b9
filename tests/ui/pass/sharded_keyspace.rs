use microdcs_valkey::{Document, KeyPrefix, keyspace};

// A keyspace sharded by scope: every key of every script carries the
// scope as its tag; the change stream and tombstones follow by default.
#[derive(Debug, serde::Serialize, serde::Deserialize, Document)]
#[microdcs(
    kind = "ticket",
    key = "ticket:{#scope}:{id}",
    list(key = "ticket:list:{#scope}", score = opened),
    unique(key = "ticket:byref:{#scope}:{reference}"),
    group(key = "ticket:bystatus:{#scope}:{status}"),
)]
struct Ticket {
    id: String,
    scope: String,
    reference: String,
    status: String,
    opened: i64,
}

keyspace! {
    Desk {
        shard: scope,
        documents: [Ticket],
        // A family named `shard` is still a family.
        shard: string("shard:{#scope}"),
    }
}

fn main() {
    let p = KeyPrefix::default();
    assert_eq!(Ticket::key(&p, "acme", "t-1").unwrap(), "microdcs:ticket:{acme}:t-1");
    assert_eq!(Desk::shard_key(&p, "acme").unwrap(), "microdcs:shard:{acme}");
    assert!(Ticket::SPEC.is_sharded());
    assert_eq!(Desk::SPEC.shard, Some("scope"));
}
