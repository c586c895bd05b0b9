#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The happy path is at the root (about a dozen items); each area of the
// runtime is a public module whose documentation says how it works, and
// every other item is reached at its module path only.
// Each subsystem beyond the core is a feature (see the README).
// The ACL rules are computed from the schema alone, so they live beside it.
pub use microdcs_schema::acl;
#[cfg(feature = "admin")]
#[cfg_attr(docsrs, doc(cfg(feature = "admin")))]
pub mod admin;
#[cfg(feature = "consumers")]
#[cfg_attr(docsrs, doc(cfg(feature = "consumers")))]
pub mod changes;
pub mod client;
mod codec;
pub mod config;
#[cfg(feature = "coordination")]
#[cfg_attr(docsrs, doc(cfg(feature = "coordination")))]
pub mod dedupe;
mod each;
mod error;
pub mod families;
#[cfg(any(feature = "coordination", feature = "maintenance"))]
mod family;
mod handle;
#[cfg(feature = "inspect")]
#[cfg_attr(docsrs, doc(cfg(feature = "inspect")))]
pub mod inspect;
#[cfg(feature = "coordination")]
#[cfg_attr(docsrs, doc(cfg(feature = "coordination")))]
pub mod lease;
mod limits;
pub mod lock;
mod metrics;
pub mod observe;
mod op_id;
mod page;
#[cfg(feature = "consumers")]
#[cfg_attr(docsrs, doc(cfg(feature = "consumers")))]
pub mod poller;
mod retry;
#[cfg(feature = "coordination")]
#[cfg_attr(docsrs, doc(cfg(feature = "coordination")))]
pub mod start_lease;
pub mod store;
#[cfg(feature = "consumers")]
#[cfg_attr(docsrs, doc(cfg(feature = "consumers")))]
pub mod streams;
#[cfg(feature = "consumers")]
#[cfg_attr(docsrs, doc(cfg(feature = "consumers")))]
pub mod sweep;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

/// The schema model: key templates, prefixes, specs and the traits the
/// derive implements (the `microdcs-schema` crate).
pub use microdcs_schema as schema;

pub use client::Valkey;
pub use config::MicroDcsConfig;
pub use error::{Error, Result};
pub use handle::KeyspaceHandle;
pub use microdcs_derive::{Document, KeySegment, keyspace};
pub use microdcs_schema::{Document, KeyPrefix, KeySegment};
pub use redis;
pub use store::{Expect, Page, PutOutcome, Revision, RevisionParseError, Store, Stored};

#[doc(hidden)]
pub mod __private {
    pub use crate::each::{DocumentVisitor, EachDocument, Probe, VisitJson, VisitOther};
    pub use crate::families::{
        ChannelKey, ContentFamily, CounterKey, FromKey, HashKey, ListKey, RateLimitKey, SetKey, SortedSetKey,
        StringKey, TypedChannel, TypedHash, TypedValue,
    };
    pub use crate::{Error, KeyspaceHandle, Valkey};
    pub use microdcs_schema::encode::push_segment;
    pub use microdcs_schema::{
        Binding, ConstMessage, Document, DocumentSpec, FamilyKind, FamilySpec, GroupQuery, IndexEntries, IndexEntry,
        IndexError, IndexScore, IndexSpec, IndexValue, IndexValues, KeyError, KeyPrefix, KeySegment, KeyType,
        KeyspaceSpec, ListEntry, ListSpec, OutboxSpec, Score, Source, UNSCOPED, UniqueQuery, keyspace_problem,
    };
    pub use microdcs_schema::{HasChanges, HasList, HasOutbox, InKeyspace, Keyspace};
    pub use std::borrow::Cow;

    /// What the `open` function of a keyspace returns.
    pub fn open_keyspace<K: Keyspace>(valkey: Valkey) -> KeyspaceHandle<K> {
        KeyspaceHandle::new(valkey)
    }

    /// The spec emitted for a document type whose attributes did not check.
    pub const fn invalid_spec(type_name: &'static str) -> DocumentSpec<'static> {
        DocumentSpec::refused(type_name)
    }
}
