//! # microdcs-valkey
//!
//! The runtime of microdcs. Document types declared with
//! `#[derive(Document)]` get typed key builders with compile-time key
//! checks, and a [`Store`] that writes each document, its indexes, its change
//! entry, the scope registry and a nudge in one generated Lua script.
//!
//! ```no_run
//! use microdcs_valkey::{Document, Expect, KeyPrefix, PutOutcome, Valkey, WriteOptions};
//!
//! #[derive(Debug, serde::Serialize, serde::Deserialize, Document)]
//! #[microdcs(list(key = "joborder:list:{scope}", score = priority))]
//! struct JobOrder {
//!     id: String,
//!     scope: String,
//!     priority: i64,
//! }
//!
//! # async fn demo() -> Result<(), microdcs_valkey::Error> {
//! let valkey = Valkey::connect_url("redis://127.0.0.1:6379/", KeyPrefix::default(), WriteOptions::default()).await?;
//! let orders = valkey.store::<JobOrder>();
//! let order = JobOrder { id: "o-1".into(), scope: "s1".into(), priority: 5 };
//! assert_eq!(orders.create(&order).await?, PutOutcome::Written { version: 1 });
//! let read = orders.get("o-1").await?.expect("just written");
//! let changed = JobOrder { priority: 7, ..read.doc };
//! # let read = orders.get("o-1").await?.unwrap();
//! orders.update(&read, &changed).await?;
//! # Ok(()) }
//! ```
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
mod retry;
mod store;
pub mod streams;

pub use client::{PollOptions, Valkey, WriteOptions};
pub use codec::{Codec, Json};
pub use config::{ConfigError, MicroDcsConfig, ValkeyConfig};
pub use connect::{ConnectError, Health, read_password_file};
pub use coord::{Claim, DedupeStore, MemoryDedupe, MemoryStartLease, StartLease, ValkeyDedupe, ValkeyStartLease};
pub use error::{Error, Result};
pub use lease::{Acquire, Lease, LeaseBackend, LeaseStore, MemoryLeases};
pub use metrics::Metrics;
pub use microdcs_derive::{Document, keyspace};
pub use microdcs_schema as schema;
pub use microdcs_schema::{
    Document, GroupQuery, IndexEntries, IndexEntry, IndexError, IndexValue, KeyError, KeyPrefix, KeySegment, KeyType,
    ListEntry, PrefixError, Score, UniqueQuery,
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
