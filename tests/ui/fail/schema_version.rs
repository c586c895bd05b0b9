//! A schema version is a whole number from 1: 0 names no release.
use microdcs_valkey::Document;

#[derive(Document)]
#[microdcs(schema = 0)]
struct Order {
    id: String,
    scope: String,
}

fn main() {}
