#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The connection speaks TLS through a backend chosen by feature; without
// one, `rediss://` could not work, so say so at build time.
#[cfg(not(feature = "tls-native-tls"))]
compile_error!("microdcs-valkey needs a TLS backend: enable the `tls-native-tls` feature (on by default)");

// The happy path is at the root (about a dozen items); each area of the
// runtime is a public module whose documentation says how it works. The
// older root paths of every other item still compile, hidden from the
// docs, so code written against them keeps building.
pub mod acl;
pub mod changes;
pub mod client;
mod codec;
pub mod config;
pub mod dedupe;
mod error;
pub mod families;
mod family;
mod handle;
pub mod inspect;
mod keyspace_doc;
pub mod lease;
mod limits;
mod metrics;
pub mod observe;
mod op_id;
mod page;
pub mod poller;
mod retry;
pub mod start_lease;
pub mod store;
pub mod streams;
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

// Every other item at its module path, and (hidden) at the root as before.
#[doc(hidden)]
pub use acl::AclRole;
#[doc(hidden)]
pub use changes::{Change, ChangeHandler, ChangeKind, Changes};
#[doc(hidden)]
pub use client::{ConnectError, Health, Metrics, read_password_file};
#[doc(hidden)]
pub use config::{
    ConfigError, ConfigProblem, Durability, Endpoint, Placement, PollOptions, Secret, ValkeyConfig, WriteOptions,
    defaults, parse_connection_string, parse_duration, redact_connection_string,
};
#[doc(hidden)]
pub use dedupe::{Claim, DedupeStore, MemoryDedupe, ValkeyDedupe, dedupe_hash};
#[doc(hidden)]
pub use families::{
    ChannelKey, ContentFamily, CounterKey, HashEntries, HashKey, ListKey, RateDecision, RateLimitKey, Scored, SetKey,
    SortedSetKey, StringKey, Subscription, TypedChannel, TypedHash, TypedHashEntries, TypedSubscription, TypedValue,
    ValueKey, content_digest,
};
#[doc(hidden)]
pub use inspect::{
    DedupeView, DocumentView, EntryState, EntryView, FamilyInfo, GroupView, IdsPage, Inspector, InspectorPage,
    KindInfo, LeaseView, StreamView, ValueView, keyspace_markdown,
};
#[doc(hidden)]
pub use lease::{Acquire, Lease, LeaseBackend, LeaseFamilies, LeaseStore, MemoryLeases};
#[doc(hidden)]
pub use microdcs_schema::builtin;
#[doc(hidden)]
pub use microdcs_schema::lua::stored_op_id;
#[doc(hidden)]
pub use microdcs_schema::{
    DocumentSpec, Family, FamilyKind, FamilySpec, Feed, GroupQuery, HasChanges, HasList, HasOutbox, InKeyspace,
    IndexEntries, IndexEntry, IndexError, IndexValue, IndexValues, KeyError, KeyTemplate, KeyType, Keyspace,
    KeyspaceSpec, ListEntry, MAX_EACH_VALUES, PrefixError, Role, SchemaError, Score, UNSCOPED, UniqueQuery,
    check_keyspace,
};
#[doc(hidden)]
pub use poller::{
    Backlog, BoxError, BoxFuture, Poller, PollerHandle, PollerHealth, PollerTask, ReadHealth, StreamConsumer,
};
#[doc(hidden)]
pub use start_lease::{MemoryStartLease, StartLease, ValkeyStartLease};
#[doc(hidden)]
pub use store::{Codec, CompactJson, Json};
#[doc(hidden)]
pub use store::{
    DeleteExpect, DeleteOutcome, DiffKind, Difference, DocPage, Effects, Event, IdPage, MAX_ENTRY_FIELDS,
    MAX_STEP_FIELDS, MAX_WORK_ENTRIES, MaintenanceOptions, Report, StepOutcome, WORK_ENTRY_FIELDS, WorkEntry,
    fingerprints, new_op_id,
};
#[doc(hidden)]
pub use streams::{Entry, StreamEntry, Streams};
#[doc(hidden)]
pub use sweep::{Due, DueSweep, Expired, ExpirySweep};

#[doc(hidden)]
pub mod __private {
    pub use crate::families::FromKey;
    pub use microdcs_schema::encode::push_segment;
    pub use microdcs_schema::{
        Binding, ConstMessage, Document, DocumentSpec, FamilyKind, FamilySpec, GroupQuery, IndexEntries, IndexEntry,
        IndexError, IndexScore, IndexSpec, IndexValue, IndexValues, KeyError, KeyPrefix, KeySegment, KeyType,
        KeyspaceSpec, ListEntry, ListSpec, OutboxSpec, Score, Source, UNSCOPED, UniqueQuery, keyspace_problem,
    };
    pub use microdcs_schema::{HasChanges, HasList, HasOutbox, InKeyspace, Keyspace};
    pub use std::borrow::Cow;

    /// What the `open` function of a keyspace returns.
    pub fn open_keyspace<K: Keyspace>(valkey: crate::Valkey) -> crate::KeyspaceHandle<K> {
        crate::KeyspaceHandle::new(valkey)
    }

    /// The spec emitted for a document type whose attributes did not check.
    pub const fn invalid_spec(type_name: &'static str) -> DocumentSpec<'static> {
        DocumentSpec::refused(type_name)
    }
}
