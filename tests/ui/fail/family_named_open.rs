// A family named like the keyspace's own items would clash with them.
microdcs_valkey::keyspace! {
    Plant {
        open: set("open:{scope}"),
    }
}

fn main() {}
