//! Nothing but a home for the trybuild cases of `#[derive(Document)]` and
//! `keyspace!` (`pass/`, `fail/`, run by `tests/ui.rs`).
