use microdcs_valkey::keyspace;

// `value` needs the type of its values.
keyspace! {
    Limits {
        limit: value("limit:{scope}"),
    }
}

// A set takes no type.
keyspace! {
    Refs {
        refs: set<u32>("ref:{scope}"),
    }
}

// A hash takes both types or none; a channel one or none.
keyspace! {
    Tallies {
        tallies: hash<String>("tally:{scope}"),
    }
}

keyspace! {
    Ticks {
        ticks: channel<u64, u64>("tick:{scope}"),
    }
}

fn main() {}
