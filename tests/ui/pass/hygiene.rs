//! The expansion uses absolute paths only: it compiles with look-alike types
//! in scope and under `deny(unused_qualifications)`.
#![deny(unused_qualifications)]
#![allow(dead_code)]

struct Result;
struct Option;
struct Ok;
struct Err;
struct Some;
struct None;
struct String;
struct Vec;
struct Cow;
mod core {}
mod std {}

#[derive(microdcs_valkey::Document)]
#[microdcs(
    list(key = "h:list:{scope}", score = n),
    unique(key = "h:byname:{name}"),
    group(key = "h:bystate:{scope}:{state}", state = state_text())
)]
struct Hygienic {
    id: ::std::string::String,
    scope: ::std::string::String,
    name: ::std::string::String,
    n: i32,
}

impl Hygienic {
    fn state_text(&self) -> &'static str {
        "x"
    }
}

microdcs_valkey::keyspace! {
    Space {
        documents: [Hygienic],
        scopes: set("scopes"),
        changes: stream("changes:{scope}"),
        nudge: channel("nudge:{kind}"),
        other: hash("other:{id}"),
    }
}

fn main() {}
