//! A step's family effects take the family's own handle: an increment of
//! a set, or an add to a counter, does not compile.
use microdcs_valkey::{store::Effects, keyspace};

keyspace! {
    Chat {
        seq: counter("chat:seq:{scope}"),
        members: set("chat:members:{scope}"),
    }
}

fn effects(chat: &microdcs_valkey::KeyspaceHandle<Chat>) -> Effects {
    let members = Chat::members(chat, "c-1").unwrap();
    let seq = Chat::seq(chat, "c-1").unwrap();
    Effects::new().incr(&members, 1).add(&seq, "ann")
}

fn main() {}
