//! Every malformed entry of a `keyspace!` is reported in one build, each
//! at its own tokens.
use microdcs_valkey::keyspace;

keyspace! {
    Broken {
        tallies: hash<String>("tally:{scope}"),
        seen: set("seen:{scope}", lifetime = "30s"),
        ok: counter("ok:{scope}"),
        runs: zset(),
    }
}

fn main() {}
