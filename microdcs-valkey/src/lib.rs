#![doc = include_str!("../../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod client;
mod codec;
pub mod config;
mod connect;
pub mod coord;
mod error;
pub mod lease;
mod metrics;
pub mod poller;
mod store;
pub mod streams;
#[cfg(feature = "testing")]
pub mod testing;

pub use client::{PollOptions, Valkey, WriteOptions};
pub use codec::{Codec, Json};
pub use config::{ConfigError, MicroDcsConfig, ValkeyConfig};
pub use connect::{ConnectError, Health, read_password_file};
pub use coord::{Claim, DedupeStore, MemoryDedupe, MemoryStartLease, StartLease, ValkeyDedupe, ValkeyStartLease};
pub use error::{Error, Result};
pub use lease::{Acquire, Lease, LeaseBackend, LeaseStore, MemoryLeases};
pub use metrics::Metrics;
pub use microdcs_derive::{Document, KeySegment, keyspace};
pub use microdcs_schema as schema;
pub use microdcs_schema::{
    Document, Feed, GroupQuery, IndexEntries, IndexEntry, IndexError, IndexValue, KeyError, KeyPrefix, KeySegment,
    KeyType, ListEntry, PrefixError, Score, UniqueQuery,
};
pub use poller::{BoxError, BoxFuture, Poller, PollerHandle, PollerTask, StreamConsumer};
pub use redis;
pub use store::{
    DeleteOutcome, DiffKind, Difference, Expect, IdPage, MaintenanceOptions, Page, PutOutcome, Report, Store, Stored,
    fingerprints, new_op_id,
};
pub use streams::{Entry, Streams};

#[doc(hidden)]
pub mod __private {
    pub use microdcs_schema::encode::push_segment;
    pub use microdcs_schema::{
        Binding, ConstMessage, Document, DocumentSpec, FamilySpec, GroupQuery, IndexEntries, IndexEntry, IndexError,
        IndexSpec, IndexValue, KeyError, KeyPrefix, KeySegment, KeyType, KeyspaceSpec, ListEntry, ListSpec, Score,
        Source, UniqueQuery, keyspace_problem,
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
