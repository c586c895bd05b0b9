//! Checks on document and keyspace specs.
//!
//! Each rule is one function; every problem is collected (not only the
//! first) and carries its [`Origin`] so the derive can point at the
//! attribute. The cross-family rules of a keyspace exist once, as constant
//! functions, so the compile-time check of `keyspace!` and [`check_keyspace`]
//! cannot disagree.

mod buckets;
mod document;
mod error;
mod keyspace;
mod message;

pub use document::check_document;
pub use error::{Attr, Origin, SchemaError, SchemaErrorKind};
pub use keyspace::{check_keyspace, keyspace_problem};
pub use message::ConstMessage;

#[cfg(test)]
mod tests;
