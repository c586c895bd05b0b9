#![doc = include_str!("../../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The connection speaks TLS through a backend chosen by feature; without
// one, `rediss://` could not work, so say so at build time.
#[cfg(not(feature = "tls-native-tls"))]
compile_error!("microdcs-valkey needs a TLS backend: enable the `tls-native-tls` feature (on by default)");

// Modules are private; every public item has one path, at the root (the
// layout deadpool-redis uses), except the feature-gated test helpers.
mod acl;
mod changes;
mod client;
mod codec;
mod config;
mod dedupe;
mod error;
mod family;
mod handle;
mod inspect;
mod keyspace_doc;
mod lease;
mod limits;
mod metrics;
mod op_id;
mod page;
mod poller;
mod retry;
mod start_lease;
mod store;
mod streams;
mod sweep;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
mod typed;

pub use acl::AclRole;
pub use changes::{Change, ChangeHandler, ChangeKind, Changes};
pub use client::Valkey;
pub use client::connect::{ConnectError, Health, read_password_file};
pub use codec::{Codec, Json};
pub use config::{
    ConfigError, ConfigProblem, Endpoint, MicroDcsConfig, PollOptions, Secret, ValkeyConfig, WriteOptions, defaults,
    parse_connection_string, parse_duration, redact_connection_string,
};
pub use dedupe::{Claim, DedupeStore, MemoryDedupe, ValkeyDedupe, dedupe_hash};
pub use error::{Error, Result};
pub use handle::KeyspaceHandle;
pub use inspect::{
    DedupeView, DocumentView, EntryState, EntryView, FamilyInfo, GroupView, IdsPage, Inspector, KindInfo, LeaseView,
    StreamView, ValueView,
};
pub use keyspace_doc::keyspace_markdown;
pub use lease::{Acquire, Lease, LeaseBackend, LeaseFamilies, LeaseStore, MemoryLeases};
pub use metrics::Metrics;
pub use microdcs_derive::{Document, KeySegment, keyspace};
pub use microdcs_schema::builtin;
pub use microdcs_schema::lua::stored_op_id;
pub use microdcs_schema::{
    Document, DocumentSpec, Family, FamilyKind, FamilySpec, Feed, GroupQuery, HasChanges, HasList, HasOutbox,
    InKeyspace, IndexEntries, IndexEntry, IndexError, IndexValue, KeyError, KeyPrefix, KeySegment, KeyTemplate,
    KeyType, Keyspace, KeyspaceSpec, ListEntry, PrefixError, Role, SchemaError, Score, UNSCOPED, UniqueQuery,
    check_keyspace,
};
pub use poller::{BoxError, BoxFuture, Poller, PollerHandle, PollerTask, StreamConsumer};
pub use redis;
pub use start_lease::{MemoryStartLease, StartLease, ValkeyStartLease};
pub use store::{
    DeleteExpect, DeleteOutcome, DiffKind, Difference, DocPage, Effects, Event, Expect, IdPage, MAX_ENTRY_FIELDS,
    MAX_STEP_FIELDS, MAX_WORK_ENTRIES, MaintenanceOptions, Page, PutOutcome, Report, StepOutcome, Store, Stored,
    WORK_ENTRY_FIELDS, WorkEntry, fingerprints, new_op_id,
};
pub use streams::{Entry, Streams};
pub use sweep::{Due, DueSweep};
pub use typed::{
    ChannelKey, ContentFamily, CounterKey, HashEntries, HashKey, ListKey, RateDecision, RateLimitKey, Scored, SetKey,
    SortedSetKey, Subscription, TypedChannel, TypedHash, TypedHashEntries, TypedSubscription, TypedValue, ValueKey,
    content_digest,
};

#[doc(hidden)]
pub mod __private {
    pub use crate::typed::FromKey;
    pub use microdcs_schema::encode::push_segment;
    pub use microdcs_schema::{
        Binding, ConstMessage, Document, DocumentSpec, FamilyKind, FamilySpec, GroupQuery, IndexEntries, IndexEntry,
        IndexError, IndexScore, IndexSpec, IndexValue, KeyError, KeyPrefix, KeySegment, KeyType, KeyspaceSpec,
        ListEntry, ListSpec, OutboxSpec, Score, Source, UNSCOPED, UniqueQuery, keyspace_problem,
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
