//! The typed document store: one generated script per write, one command per read.
//!
//! A [`Store<D>`](Store) is made by
//! [`KeyspaceHandle::store`](crate::KeyspaceHandle::store) for a document
//! type of the keyspace (`store_with` for another [`Codec`] than [`Json`],
//! such as [`CompactJson`]). It is cheap to clone and every future it
//! returns is `Send`.
//!
//! - **Writes** ([`Store::create`], [`Store::update`], [`Store::put`] with
//!   an [`Expect`], [`Store::delete`], [`Store::delete_id`] with a
//!   [`DeleteExpect`]) return a request ([`PutCall`], [`DeleteCall`]) to
//!   `.await`, after optionally setting `.op(id)` (your operation id),
//!   `.durability(..)` ([`Durability`](crate::config::Durability)) or
//!   `.keep_lifetime()`. Each is one atomic script that checks the
//!   expectation and writes the document, its index entries, its change
//!   entry and nudge. The expected outcomes are values ([`PutOutcome`],
//!   [`DeleteOutcome`]: `Written`, `Conflict { current }`, `NotFound`);
//!   errors are for what went wrong.
//! - **Reads**: [`Store::get`] and [`Store::get_many`] by id, returning
//!   [`Stored`] (the document with its [`Revision`], the token of the next
//!   compare-and-set); [`Store::find`] through a unique index;
//!   [`Store::ids`], [`Store::docs`], [`Store::list`] and [`Store::range`]
//!   through the other indexes, a [`Page`] at a time ([`IdPage`],
//!   [`DocPage`]); `count`, `count_ids`, `scopes` and `scan`.
//! - **Claims** ([`Store::claim`], [`Store::claim_due`]): take one
//!   document out of a group or sorted index with a version check, each
//!   document once however many workers ask.
//! - **Steps** ([`Store::step`], [`Store::write`]): a document write plus
//!   [`Effects`] (work entries on its outbox stream, an [`Event`] applied
//!   once, counter, hash and set changes) in the same script
//!   ([`StepCall`], [`StepOutcome`]).
//! - **Maintenance** (feature `maintenance`): `verify`, `rebuild` and
//!   `needs_rebuild` compare the indexes with the documents and repair
//!   them, reporting a `Report`; `Store::copy_from` copies a type's
//!   documents from an older layout (another key template, field order or
//!   field type) into a new one.
//!
//! ```no_run
//! use microdcs_valkey::{Document, Expect, Page, PutOutcome, Valkey, keyspace};
//!
//! #[derive(Debug, Clone, serde::Serialize, serde::Deserialize, Document)]
//! #[microdcs(
//!     unique(key = "job:byorder:{order}", order = order),
//!     group(key = "job:bystate:{scope}:{state}", state = state),
//! )]
//! struct Job { id: String, scope: String, order: String, state: String }
//!
//! keyspace! { Jobs { documents: [Job] } }
//!
//! # async fn demo(valkey: Valkey) -> Result<(), microdcs_valkey::Error> {
//! let jobs = Jobs::open(valkey).store::<Job>();
//! let job = Job { id: "j-1".into(), scope: "s1".into(), order: "o-1".into(), state: "new".into() };
//! assert_eq!(jobs.create(&job).await?, PutOutcome::Written { version: 1 });
//!
//! let read = jobs.get("j-1").await?.expect("just written");
//! let running = Job { state: "running".into(), ..read.doc.clone() };
//! match jobs.update(&read, &running).op("j-1:start").await? {
//!     PutOutcome::Written { version } => assert_eq!(version, 2),
//!     PutOutcome::Conflict { current } => println!("someone else wrote v{current}"),
//!     PutOutcome::NotFound => println!("deleted meanwhile"),
//! }
//! let by_order = jobs.find(Job::by_order("o-1")).await?;
//! let page = jobs.ids(Job::by_state("s1", "running"), Page::first(100)).await?;
//! jobs.put(&job, Expect::Any).await?; // overwrite, whatever is stored
//! # let _ = (by_order, page); Ok(()) }
//! ```
//!
//! # Guarantees and bounds
//!
//! A write never leaves a document without its index entries or an entry
//! without its document, and a write repeated with the same operation id
//! (after a lost reply, or by you) is recognised and answered as the first
//! one was while the document keeps the id (setting `OpHistoryLength`; a
//! delete's tombstone keeps them for `TombstoneRetention`). A write waits
//! at most `WriteAttempts x (ResponseTimeout + WriteRetryDelay)` (after a
//! read bound for `put(Expect::Any)` and `delete_id`), plus
//! `WriteReplicaTimeout` per attempt when it waits for replicas; when no
//! attempt got an answer it ends with [`Error::UnknownOutcome`]. A read
//! waits at most `ResponseTimeout` plus one quick retry after a lost
//! connection. A stored value that does not read back is
//! [`Error::Corrupt`] (or [`Error::Codec`]), never skipped or overwritten;
//! a document of another scope is [`Error::WrongScope`], a held unique key
//! [`Error::UniqueViolation`], with nothing written. A write future
//! dropped midway may or may not have written: see [`Store`]'s cancel
//! safety.
//!
//! The concepts (revisions and tombstones, pages, claims, the cost of a
//! document) are in the guide: [Read and write
//! documents](https://github.com/microdcs/microdcs/blob/main/docs/guide/02-reading-writing.md)
//! and [Workflow steps and
//! effects](https://github.com/microdcs/microdcs/blob/main/docs/guide/08-steps-and-effects.md).
//!
//! A type changes under live traffic through its schema version
//! (`#[microdcs(schema = N)]`): writes stamp documents and refuse to
//! overwrite a newer release's ([`crate::Error::SchemaBehind`]), stores
//! announce themselves as live writers ([`Store::announce`],
//! [`Store::writers`]), an index a release adds is building until
//! [`Store::backfill`] completes it ([`Store::index_states`],
//! [`crate::Error::IndexBuilding`]). The guide's "Evolving a type" has the
//! recipe.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use microdcs_schema::Document;

mod batch;
mod call;
#[cfg(feature = "maintenance")]
mod copy;
mod effects;
mod evolution;
#[cfg(feature = "maintenance")]
mod maintenance;
#[cfg(any(feature = "maintenance", feature = "inspect"))]
mod pipe;
mod plan;
mod read;
mod request;
mod step;
mod types;
mod write;

pub use crate::codec::{Codec, CompactJson, Json};
pub use crate::each::{DocumentVisitor, EachDocument};
pub use crate::op_id::new_op_id;
pub use batch::DocPage;
#[cfg(feature = "maintenance")]
#[cfg_attr(docsrs, doc(cfg(feature = "maintenance")))]
pub use copy::CopyReport;
#[cfg(feature = "maintenance")]
pub(crate) use evolution::layout_digest;
pub use evolution::{BackfillOptions, BackfillReport, IndexState, LiveWriters};
#[cfg(feature = "maintenance")]
#[cfg_attr(docsrs, doc(cfg(feature = "maintenance")))]
pub use maintenance::{DiffKind, Difference, MaintenanceOptions, Report, fingerprints};
#[cfg(feature = "inspect")]
pub(crate) use pipe::{Answer, answer, read_pipe};
pub use request::{DeleteCall, PutCall, StepCall, WriteFuture};
pub use step::{
    Effects, Event, MAX_ENTRY_FIELDS, MAX_STEP_FIELDS, MAX_WORK_ENTRIES, StepOutcome, WORK_ENTRY_FIELDS, WorkEntry,
};
#[cfg(any(feature = "consumers", feature = "maintenance"))]
pub(crate) use types::parse_version;
pub use types::{DeleteExpect, DeleteOutcome, Expect, IdPage, Page, PutOutcome, Revision, RevisionParseError, Stored};

// Reached as `super::...` by the maintenance module.
use plan::Plan;
#[cfg(feature = "maintenance")]
use types::ReadState;

use crate::client::Valkey;
use crate::error::{Error, Result};

/// The typed store of document type `D`, made by
/// [`KeyspaceHandle::store`](crate::KeyspaceHandle::store).
///
/// Every single-document operation is one round trip in the steady state:
/// `get` is one `HGETALL`, `create`/`update`/`delete` one `EVALSHA` of the
/// generated script, `find` one `EVALSHA` of the lookup script. Only `put`
/// with `Expect::Any` or `Expect::Version` (without a prior read) of a type
/// with indexes reads the index fields first.
///
/// # Cancel safety
///
/// Every write is one script, atomic on the server, so a write future
/// dropped before it completes leaves the document either unchanged or
/// fully written, with every index entry; but which is unknown, and the
/// operation id the future made for its retries is gone with it. To be
/// able to repeat such a write safely, pass your own id with the request's
/// `.op(id)` ([`PutCall::op`], [`DeleteCall::op`], [`StepCall::op`]):
/// `store.update(&read, &doc).op("order-7:accept").await`, the same call
/// again after the drop. The repeat is then recognised while the
/// document's history holds the id (a delete's: while its tombstone lasts).
/// Reads are safe to drop.
pub struct Store<D, C = Json> {
    valkey: Valkey,
    plan: Arc<Plan>,
    codec: Arc<C>,
    /// The lifetime writes give documents, when set by [`Store::with_ttl`];
    /// else the type's `ttl`.
    ttl: Option<std::time::Duration>,
    _doc: PhantomData<fn() -> D>,
}

impl<D, C> Clone for Store<D, C> {
    fn clone(&self) -> Self {
        Store {
            valkey: self.valkey.clone(),
            plan: self.plan.clone(),
            codec: self.codec.clone(),
            ttl: self.ttl,
            _doc: PhantomData,
        }
    }
}

impl<D, C> fmt::Debug for Store<D, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store").field("type", &std::any::type_name::<D>()).finish_non_exhaustive()
    }
}

/// How many times a write re-reads after the script saw index fields change.
const MAX_REREADS: u32 = 8;

/// How many attempts an overwrite (`Expect::Any`, `DeleteExpect::Any`)
/// makes when other writers keep moving the document's index fields: it has
/// no expectation that can fail, so it keeps trying, backing off (see
/// [`contention_pause`]) so that writers racing on one document take turns.
const MAX_OVERWRITE_ATTEMPTS: u32 = 64;

/// The longest single pause between attempts of a write sent back by
/// contention: with [`MAX_OVERWRITE_ATTEMPTS`] it bounds an overwrite's
/// total pauses to a few seconds whatever the settings.
const MAX_CONTENTION_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// The pause before attempt `attempt` (1-based) of a write the script sent
/// back because the index fields moved: none for the first two, then a
/// random pause below `2^(attempt - 2)` ms, capped by 100 ms and the write
/// retry delay. Random, so writers that lost together do not come back
/// together.
fn contention_pause(attempt: u32, retry_delay: std::time::Duration) -> std::time::Duration {
    use std::hash::{BuildHasher, Hasher};
    if attempt <= 2 {
        return std::time::Duration::ZERO;
    }
    let ceiling =
        std::time::Duration::from_millis(1 << (attempt - 2).min(16)).min(retry_delay).min(MAX_CONTENTION_PAUSE);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(attempt);
    let micros = u64::try_from(ceiling.as_micros()).unwrap_or(u64::MAX).max(1);
    std::time::Duration::from_micros(h.finish() % micros)
}

/// Writers of this process that keep losing on one document take turns:
/// from its third attempt a write waits (at most `wait`) for the turn of
/// its document's stripe and holds it for its remaining attempts, so it
/// races only first attempts, not every other loser. Writers of other
/// processes are spread by the random pauses alone. `None`: the turn did
/// not come within `wait`, and the write goes on without it.
/// How many turns there are: documents whose keys share a stripe share a
/// turn, so enough that unrelated documents seldom do.
const STRIPES_N: u64 = 1024;

async fn contention_turn(key: &str, wait: std::time::Duration) -> Option<tokio::sync::MutexGuard<'static, ()>> {
    use std::hash::{BuildHasher, Hasher};
    static STRIPES: std::sync::LazyLock<Vec<tokio::sync::Mutex<()>>> =
        std::sync::LazyLock::new(|| (0..STRIPES_N).map(|_| tokio::sync::Mutex::new(())).collect());
    static SEED: std::sync::LazyLock<std::collections::hash_map::RandomState> =
        std::sync::LazyLock::new(std::collections::hash_map::RandomState::new);
    let mut h = SEED.build_hasher();
    h.write(key.as_bytes());
    let stripe = &STRIPES[(h.finish() % STRIPES_N) as usize];
    tokio::time::timeout(wait, stripe.lock()).await.ok()
}

/// What tells one document type from another for the plan cache: its
/// generated scripts and its key templates (a plan is derived from them).
struct Identity<D>(PhantomData<D>);

impl<D: Document> Identity<D> {
    const TEXTS: [&'static str; 6] =
        [D::PUT_SCRIPT, D::DELETE_SCRIPT, D::FIND_SCRIPT, D::STEP_SCRIPT, D::SPEC.key, D::SPEC.kind];
}

/// What a write does before attempt `attempt` (1-based) after the script
/// sent it back: the contention pause, then, from the third attempt, its
/// turn on the document (held in `turn` for the attempts left).
async fn before_attempt(
    valkey: &Valkey,
    kind: &'static str,
    key: &str,
    attempt: u32,
    turn: &mut Option<tokio::sync::MutexGuard<'static, ()>>,
) {
    if attempt <= 1 {
        return;
    }
    metrics::counter!(crate::observe::CONTENTION_RETRIES, "microdcs.target" => kind).increment(1);
    let delay = valkey.write_options().retry_delay;
    tokio::time::sleep(contention_pause(attempt, delay)).await;
    if turn.is_none() && attempt > 2 {
        *turn = contention_turn(key, delay).await;
    }
}

impl<D: Document, C: Codec<D>> Store<D, C> {
    pub(crate) fn new(valkey: Valkey, codec: C) -> Self {
        let texts: &'static [&'static str] = &Identity::<D>::TEXTS;
        let plan = valkey.derived(std::any::type_name::<D>(), texts, || Plan::new::<D>(&valkey));
        Store { valkey, plan, codec: Arc::new(codec), ttl: None, _doc: PhantomData }
    }

    /// This store, writing documents with lifetime `ttl` instead of the
    /// type's `ttl = "..."` (each write sets it again, for the document and
    /// its unique keys, in the same script).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the type declares no `ttl` (its lists
    /// and group entries would outlive expiring documents), or `ttl` is
    /// under 1 ms or over 100 years.
    pub fn with_ttl(&self, ttl: std::time::Duration) -> Result<Self> {
        if D::SPEC.ttl_ms.is_none() {
            return Err(Error::InvalidArgument(format!(
                "`{}` declares no `ttl`, so its documents cannot expire; add `#[microdcs(ttl = \"...\")]`",
                D::SPEC.type_name
            )));
        }
        if ttl.as_millis() == 0 || ttl > crate::config::defaults::MAX_DURATION {
            return Err(Error::InvalidArgument(format!("a ttl must be between 1ms and 100 years, not {ttl:?}")));
        }
        Ok(Store { ttl: Some(ttl), ..self.clone() })
    }

    /// The lifetime a write gives its document, in milliseconds, for a
    /// type with a `ttl`.
    fn ttl_ms(&self) -> Option<u64> {
        let spec = D::SPEC.ttl_ms?;
        Some(self.ttl.map_or(spec, |t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)))
    }

    /// The connection this store uses.
    pub fn valkey(&self) -> &Valkey {
        &self.valkey
    }

    /// The document key of `id`.
    ///
    /// # Errors
    /// An empty or over-long id; [`Error::InvalidArgument`] for a type whose
    /// ids are unique per scope ([`Store::key_in`]).
    pub fn key(&self, id: &str) -> Result<String> {
        self.plan.doc_key(self.valkey.prefix(), None, id)
    }

    /// The document key of `id` in `scope`: for a type whose ids are
    /// unique per scope (its key holds `{scope}`), the only way to name a
    /// document; for other types the same as [`Store::key`].
    ///
    /// # Errors
    /// An empty or over-long scope or id.
    pub fn key_in(&self, scope: &str, id: &str) -> Result<String> {
        self.plan.doc_key(self.valkey.prefix(), Some(scope), id)
    }

    /// The tombstone key of `id` (`tomb:{kind}:{id}`): the value a delete
    /// leaves for the tombstone retention, with the last version, the
    /// delete's operation id and the document's history. For inspection and
    /// your own expiry or access rules; the store alone writes it.
    ///
    /// # Errors
    /// An empty or over-long id; [`Error::InvalidArgument`] for a type whose
    /// ids are unique per scope ([`Store::tombstone_key_in`]).
    pub fn tombstone_key(&self, id: &str) -> Result<String> {
        // The document key's rules decide which form a type takes.
        self.key(id)?;
        self.plan.tomb_key(self.valkey.prefix(), D::SPEC.kind, "", id)
    }

    /// The tombstone key of `id` in `scope`: for a type whose ids are
    /// unique per scope the id is qualified by its scope; for other types
    /// the same as [`Store::tombstone_key`].
    ///
    /// # Errors
    /// An empty or over-long scope or id.
    pub fn tombstone_key_in(&self, scope: &str, id: &str) -> Result<String> {
        self.key_in(scope, id)?;
        self.plan.tomb_key(self.valkey.prefix(), D::SPEC.kind, scope, id)
    }
}

/// A list key of `scope`: an unscoped type's list has no placeholder, so
/// the scope is not part of it.
pub(crate) fn render_list(
    t: &microdcs_schema::KeyTemplate,
    prefix: &microdcs_schema::KeyPrefix,
    scope: &str,
) -> std::result::Result<String, microdcs_schema::RenderError> {
    let values: &[&str] = if t.placeholders().next().is_some() { &[scope] } else { &[] };
    t.render(prefix, values)
}

pub(crate) use crate::error::render_err;
