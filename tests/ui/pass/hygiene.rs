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

#[derive(microdcs_valkey::KeySegment)]
#[microdcs(rename_all = "kebab-case")]
enum HygienicStatus {
    NotStarted,
    Running,
}

#[derive(microdcs_valkey::Document)]
#[microdcs(group(key = "hs:bystatus:{scope}:{status}"))]
struct WithStatus {
    id: ::std::string::String,
    scope: ::std::string::String,
    status: HygienicStatus,
}

microdcs_valkey::keyspace! {
    Space {
        documents: [Hygienic, WithStatus],
        scopes: set("scopes"),
        changes: stream("changes:{scope}"),
        nudge: channel("nudge:{kind}"),
        other: hash("other:{id}"),
        // A family named like the constant the overlap check is evaluated in.
        keyspace_check: string("check:{x}"),
    }
}

fn main() {}
