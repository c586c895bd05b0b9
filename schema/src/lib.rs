//! # microdcs-schema
//!
//! The schema model of microdcs: key templates and their value encoding, the
//! key prefix, document and keyspace specs, the checks that make key shapes
//! safe (syntax, bindings, and no two families rendering the same key), and
//! the traits `#[derive(Document)]` implements.
//!
//! Pure: no syn, no redis, no I/O, so every rule is unit-testable and has one
//! implementation shared by the derive (at compile time) and the runtime.
//!
//! ```
//! use microdcs_schema::{KeyPrefix, KeyTemplate};
//!
//! let t = KeyTemplate::parse("jobresponse:bystate:{scope}:{state}").unwrap();
//! let key = t.render(&KeyPrefix::default(), &["s1", "Running_Held"]).unwrap();
//! assert_eq!(key, "microdcs:jobresponse:bystate:s1:Running_Held");
//! assert_eq!(t.parse_key(&KeyPrefix::default(), &key).unwrap(), ["s1", "Running_Held"]);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

// The pure reports computed from a keyspace's spec: least-privilege ACL
// rules per role and the key table.
pub mod acl;
pub mod builtin;
mod check;
mod document;
pub mod duration;
#[doc(hidden)]
pub mod encode;
mod entry;
mod family;
#[cfg(test)]
mod fixtures;
pub mod lock;
// The script generator and its KEYS/ARGV layouts are the contract between
// the derive and the runtime, not an API: they change with the generator.
mod keyspace_table;
#[doc(hidden)]
pub mod lua;
mod prefix;
pub mod slot;
mod spec;
mod template;

pub use check::{Attr, Origin, SchemaError, SchemaErrorKind, check_document, check_keyspace};
// For the code `keyspace!` generates (the compile-time keyspace check).
#[doc(hidden)]
pub use check::{ConstMessage, keyspace_problem};
pub use document::{
    Document, GroupQuery, HasChanges, HasList, HasOutbox, InKeyspace, IndexEntries, IndexEntry, IndexError, IndexScore,
    IndexValue, IndexValues, KeySegment, Keyspace, ListEntry, MAX_EACH_VALUES, Score, UniqueQuery, suggest,
};
pub use encode::{MAX_VALUE_LEN, ValueError};
pub use entry::{stored_entry_key, stored_entry_keys};
pub use keyspace_table::keyspace_markdown;
pub use prefix::{KeyPrefix, MAX_PREFIX_LEN, PrefixError};
pub use spec::{
    Binding, DEFAULT_EVENT_TTL_MS, DocumentSpec, Family, FamilyKind, FamilySpec, Feed, GroupKind, IndexLayout,
    IndexSpec, KeyType, KeyspaceSpec, ListSpec, MAX_SCHEMA, OutboxSpec, Role, SCOPE_TAG, STAMP_FIELD, Source, UNSCOPED,
    parse_stamp, stamp_text,
};
pub use template::{Atom, KeyError, KeyTemplate, RenderError, TemplateError, TemplateErrorKind, templates_overlap};
