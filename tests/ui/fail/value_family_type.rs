use microdcs_valkey::keyspace;

// `value` needs the type of its values.
keyspace! {
    Limits {
        limit: value("limit:{scope}"),
    }
}

// Only `value` takes a type.
keyspace! {
    Refs {
        refs: set<u32>("ref:{scope}"),
    }
}

fn main() {}
