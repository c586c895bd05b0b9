microdcs_valkey::keyspace! {
    Plant {
        dedupe: string("ce:dedupe:{hash}"),
        dedupe_all: set("ce:{what}:{hash}"),
    }
}

fn main() {}
