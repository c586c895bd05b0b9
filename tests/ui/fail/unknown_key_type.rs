microdcs_valkey::keyspace! {
    Plant {
        dedupe: strng("ce:dedupe:{hash}"),
    }
}

fn main() {}
