//! # microdcs-valkey
//!
//! The runtime of microdcs: document types declared with
//! `#[derive(Document)]` and a [`keyspace!`] get typed key builders with
//! compile-time key checks.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use microdcs_derive::{Document, keyspace};
pub use microdcs_schema as schema;
pub use microdcs_schema::{
    Document, IndexEntries, IndexEntry, IndexError, IndexValue, KeyError, KeyPrefix, KeySegment, KeyType, ListEntry,
    PrefixError, Score,
};
pub use redis;

#[doc(hidden)]
pub mod __private {
    pub use microdcs_schema::encode::push_segment;
    pub use microdcs_schema::{
        Binding, ConstMessage, Document, DocumentSpec, FamilySpec, IndexEntries, IndexEntry, IndexError, IndexSpec,
        IndexValue, KeyError, KeyPrefix, KeySegment, KeyType, KeyspaceSpec, ListEntry, ListSpec, Score, Source,
        keyspace_problem,
    };
    pub use std::borrow::Cow;

    /// The spec emitted for a document type whose attributes did not check.
    pub const fn invalid_spec(type_name: &'static str) -> DocumentSpec<'static> {
        DocumentSpec {
            type_name,
            kind: "invalid",
            key: "invalid:{id}",
            id_field: "id",
            scope_field: "scope",
            list: None,
            unique: &[],
            groups: &[],
            changes: "changes:{scope}",
            nudge: "nudge:{kind}",
            registry: "scopes",
        }
    }
}
