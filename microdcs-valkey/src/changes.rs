//! Typed change consumers: the change stream of a document type read as
//! [`Change`] values, with the stream, nudge channel and scope registry
//! taken from the type's spec, so nothing about the feed is repeated by hand.
//!
//! Every write of the [`store`](crate::store) appends a change entry (id,
//! version, kind, operation id) to its type's change stream in the same
//! script. [`Changes::new`] turns a [`Store`] into a
//! [`StreamConsumer`] of that stream for one
//! consumer group; add it to the [`Poller`](crate::poller::Poller). It hands
//! each scope's changes, in stream order, to a [`ChangeHandler`]: any
//! `Fn(String, Vec<Change<D>>)` closure returning a `Send` future, or your
//! own type when it also wants to hear of gaps ([`ChangeHandler::gap`]).
//! Options: [`Changes::batch`] (entries per read), [`Changes::fetching`]
//! (each change carries the document as stored when the batch was read),
//! [`Changes::resyncing`] (after a gap, every document of the scope is
//! handed over as [`ChangeKind::Resynced`]; needs the type's list).
//!
//! ```no_run
//! use microdcs_valkey::changes::{Change, ChangeKind, Changes};
//! use microdcs_valkey::poller::{BoxError, Poller};
//! use microdcs_valkey::{Document, Valkey, keyspace};
//!
//! #[derive(Debug, Clone, serde::Serialize, serde::Deserialize, Document)]
//! #[microdcs(list(key = "job:list:{scope}", score = at))]
//! struct Job { id: String, scope: String, at: i64 }
//!
//! keyspace! { Jobs { documents: [Job] } }
//!
//! # async fn demo(valkey: Valkey) -> Result<(), microdcs_valkey::Error> {
//! let jobs = Jobs::open(valkey.clone()).store::<Job>();
//! let index = |scope: String, changes: Vec<Change<Job>>| async move {
//!     for c in changes {
//!         match (c.kind, &c.document) {
//!             (ChangeKind::Deleted, _) => println!("{scope}: {} gone", c.id),
//!             (_, Some(doc)) => println!("{scope}: {} now v{}", c.id, doc.version),
//!             (_, None) => {} // deleted since the change was written
//!         }
//!     }
//!     Ok::<(), BoxError>(()) // acknowledged only on Ok
//! };
//! let consumer = Changes::new(jobs, "indexer", index).fetching().resyncing();
//! let poller = Poller::new(valkey, "instance-1").consumer(consumer).start().await?;
//! # poller.shutdown().await; Ok(()) }
//! ```
//!
//! # Guarantees
//!
//! Changes are delivered at least once and in stream order per scope: a
//! batch is acknowledged only when the handler returns `Ok`, else it comes
//! again. A change carries the version its write produced, and a fetched
//! document may be newer than that, never older; compare versions or
//! operation ids to make a handler idempotent. Entries of other document
//! types on a shared stream are passed over and acknowledged for this
//! group, so give each typed consumer its own group. An entry that cannot
//! be read as a change, or whose document cannot be read when fetching
//! (damaged data, not a lost connection), is logged, counted in
//! `microdcs.valkey.stream.entries_corrupt` and acknowledged, never handed
//! out, so one bad entry cannot hold back its scope. Changes trimmed by
//! `ChangeStreamMaxLength` before the group read them are a gap: the
//! handler hears of it first, and a resyncing consumer makes up for it.
//! Reads are bounded as the [`poller`](crate::poller) says.
//!
//! Retention, gaps and resyncs are in the guide: [Streams, consumers and
//! retention](https://github.com/microdcs/microdcs/blob/main/docs/guide/07-streams-and-consumers.md);
//! a search indexer on the change feed is in the
//! [cookbook](https://github.com/microdcs/microdcs/blob/main/docs/guide/cookbook.md).

use std::fmt;
use std::future::Future;

use microdcs_schema::{Document, Feed};

use crate::codec::Codec;
use crate::poller::{BoxError, BoxFuture, GapOutcome, StreamConsumer};
use crate::store::Json;
use crate::store::{Page, Store};
use crate::streams::{Gap, StreamEntry};

/// What a write did to a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChangeKind {
    /// The document was created (its version is 1).
    Created,
    /// The document was overwritten or updated.
    Updated,
    /// The document was deleted (the version is its last one).
    Deleted,
    /// The document as it is stored now, handed over by a resync
    /// ([`Changes::resync`]) after a gap; its `entry_id` is empty.
    Resynced,
}

/// One entry of a document type's change stream.
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub struct Change<D> {
    /// The stream entry id (`ms-seq`).
    pub entry_id: String,
    /// The scope whose stream held the entry.
    pub scope: String,
    /// The document id.
    pub id: String,
    /// The version the write produced (the last version, for a delete).
    pub version: u64,
    /// Created, updated or deleted.
    pub kind: ChangeKind,
    /// The operation id of the write as stored: a generated id as is; for
    /// an id you passed (`.op(id)` on the write), its fixed-length digest
    /// [`stored_op_id`](crate::schema::lua::stored_op_id)`(yours)`.
    pub op: String,
    /// The document as stored when the batch was read, when the consumer
    /// fetches documents ([`Changes::fetching`]); `None` otherwise, after a
    /// delete, or when it was deleted since (or re-created in another
    /// scope). It may be newer than `version`, never older.
    pub document: Option<crate::Stored<D>>,
}

impl<D: fmt::Debug> fmt::Debug for Change<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Change")
            .field("entry_id", &self.entry_id)
            .field("scope", &self.scope)
            .field("id", &self.id)
            .field("version", &self.version)
            .field("kind", &self.kind)
            .field("op", &self.op)
            .field("document", &self.document)
            .finish()
    }
}

/// Handles batches of [`Change`]s of `D`. Implemented for every
/// `Fn(String, Vec<Change<D>>) -> Future<Output = Result<(), BoxError>>`
/// closure (the scope comes owned, so the future may keep it).
pub trait ChangeHandler<D>: Send + Sync + 'static {
    /// Handles the changes of one scope, in stream order; they are
    /// acknowledged only when this returns `Ok` (else they come again).
    fn handle<'a>(&'a self, scope: &'a str, changes: Vec<Change<D>>) -> BoxFuture<'a, Result<(), BoxError>>;

    /// Told of a gap: changes of the scope were trimmed before this
    /// consumer's group read them (see [`StreamConsumer::gap`]). Runs before
    /// the resync of a [`Changes::resyncing`] consumer. The default does
    /// nothing and says [`GapOutcome::NotRecovered`] (a resync, when set,
    /// recovers).
    fn gap<'a>(&'a self, scope: &'a str, gap: &'a Gap) -> BoxFuture<'a, Result<GapOutcome, BoxError>> {
        let _ = (scope, gap);
        Box::pin(async { Ok(GapOutcome::NotRecovered) })
    }
}

impl<D, F, Fut> ChangeHandler<D> for F
where
    D: Send + 'static,
    F: Fn(String, Vec<Change<D>>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
{
    fn handle<'a>(&'a self, scope: &'a str, changes: Vec<Change<D>>) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(self(scope.to_owned(), changes))
    }
}

/// A [`StreamConsumer`] of `D`'s change stream that hands [`Change`]s to a
/// [`ChangeHandler`]. Add it to a [`crate::poller::Poller`] like any consumer.
///
/// The change stream may be shared by several document types (the default
/// `changes:{scope}` is); entries of other kinds are passed over and
/// acknowledged for this consumer's group (counted as `skipped`), so give
/// each typed consumer its own group. Changes trimmed before this consumer
/// read them are a gap ([`StreamConsumer::gap`]): told to the handler
/// ([`ChangeHandler::gap`]) and, with [`Changes::resyncing`], made up for by
/// a resync of the scope. An entry that cannot be read as a change (a field missing or
/// malformed), or whose document cannot be read when fetching (damaged
/// data, not a lost connection), is never handed out: it is logged, counted
/// in `microdcs.valkey.stream.entries_corrupt` and acknowledged, so one bad
/// entry cannot hold back its scope forever.
pub struct Changes<D: Document, H, C = Json> {
    group: String,
    batch: usize,
    handler: H,
    store: Store<D, C>,
    fetch: bool,
    resync: Option<Resync<D, H, C>>,
}

/// The resync of a [`Changes::resyncing`] consumer: [`Changes::resync`],
/// kept as a function so the consumer needs no list where it does not resync.
type Resync<D, H, C> = for<'a> fn(&'a Changes<D, H, C>, &'a str) -> BoxFuture<'a, Result<usize, BoxError>>;

impl<D: microdcs_schema::HasChanges, H, C> Changes<D, H, C> {
    /// Reads the changes of `store`'s document type in consumer group `group`.
    pub fn new(store: Store<D, C>, group: impl Into<String>, handler: H) -> Self {
        Changes { group: group.into(), batch: 100, handler, store, fetch: false, resync: None }
    }

    /// Entries per read (default 100; 1 to 10,000).
    #[must_use]
    pub fn batch(mut self, batch: usize) -> Self {
        self.batch = batch.clamp(1, 10_000);
        self
    }

    /// Fetches each changed document before the handler runs (one read per
    /// change; see [`Change::document`]).
    #[must_use]
    pub fn fetching(mut self) -> Self {
        self.fetch = true;
        self
    }
}

impl<D, H, C> Changes<D, H, C>
where
    D: microdcs_schema::HasList + Send + Sync + 'static,
    H: ChangeHandler<D>,
    C: Codec<D> + Send + Sync + 'static,
{
    /// After a gap (changes trimmed before this consumer read them),
    /// resyncs the scope ([`Changes::resync`]) before any later change is
    /// handed over, and reports the gap recovered. Needs the type's list.
    #[must_use]
    pub fn resyncing(mut self) -> Self {
        self.resync = Some(|c, scope| Box::pin(c.resync(scope)));
        self
    }

    /// Hands every document of `scope` as stored now to the handler, in
    /// batches of [`Changes::batch`], as changes of kind
    /// [`ChangeKind::Resynced`] with the document and an empty entry id: the
    /// way to make up for a gap. Walks the type's list of the scope, so a
    /// document written meanwhile may come once more as a change. The
    /// number of documents handed over.
    ///
    /// A document that cannot be read (damaged data, a list member that
    /// names no document) is logged, counted in
    /// `microdcs.valkey.stream.entries_corrupt` and stepped over: one bad
    /// document cannot stop the resync, and with it every later change of
    /// the scope.
    ///
    /// # Errors
    /// Reading the list or the documents failed (the connection), or the
    /// handler failed (the documents handed over so far stay handed over).
    pub async fn resync(&self, scope: &str) -> Result<usize, BoxError> {
        let mut page = Page::first(self.batch);
        let mut count = 0;
        loop {
            let ids = self.store.list(scope, page).await?;
            let (docs, damaged) = self.store.each_in(scope, &ids.ids).await?;
            for e in &damaged {
                tracing::warn!(kind = D::SPEC.kind, scope, error = %e, "resync: a document that cannot be read is stepped over");
            }
            if !damaged.is_empty() {
                self.store.valkey().metrics().add_entries_corrupt(damaged.len() as u64);
            }
            let changes: Vec<Change<D>> = docs
                .into_iter()
                .map(|d| Change {
                    entry_id: String::new(),
                    scope: scope.to_owned(),
                    id: d.id.clone(),
                    version: d.version,
                    kind: ChangeKind::Resynced,
                    op: d.revision().op().unwrap_or_default().to_owned(),
                    document: Some(d),
                })
                .collect();
            if !changes.is_empty() {
                count += changes.len();
                self.handler.handle(scope, changes).await?;
            }
            match ids.next {
                Some(next) => page = next,
                None => return Ok(count),
            }
        }
    }
}

impl<D: Document, H, C> fmt::Debug for Changes<D, H, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Changes")
            .field("kind", &D::SPEC.kind)
            .field("group", &self.group)
            .field("batch", &self.batch)
            .field("fetching", &self.fetch)
            .field("resyncing", &self.resync.is_some())
            .finish_non_exhaustive()
    }
}

/// Reads one stream entry as a change of `kind`: `Ok(None)` for another
/// kind's entry, `Err` with the reason for a malformed one.
pub(crate) fn parse_change<D>(kind: &str, scope: &str, e: &StreamEntry) -> Result<Option<Change<D>>, String> {
    let field = |name: &str| e.field(name).ok_or_else(|| format!("field `{name}` is missing or not UTF-8"));
    if field("kind")? != kind {
        return Ok(None);
    }
    let v = field("v")?;
    let version =
        crate::store::parse_version(Some(v)).ok_or_else(|| format!("version `{v}` is not a valid version"))?;
    let change = match field("change")? {
        "created" => ChangeKind::Created,
        "updated" => ChangeKind::Updated,
        "deleted" => ChangeKind::Deleted,
        other => return Err(format!("change `{other}` is none of created, updated, deleted")),
    };
    let id = field("id")?;
    if id.is_empty() || id.len() > microdcs_schema::MAX_VALUE_LEN {
        return Err(format!("id of {} bytes is no document id", id.len()));
    }
    Ok(Some(Change {
        entry_id: e.id.clone(),
        scope: scope.to_owned(),
        id: id.to_owned(),
        version,
        kind: change,
        op: field("op")?.to_owned(),
        document: None,
    }))
}

impl<D, H, C> StreamConsumer for Changes<D, H, C>
where
    D: Document + Send + Sync + 'static,
    H: ChangeHandler<D>,
    C: Codec<D> + Send + Sync + 'static,
{
    fn feed(&self) -> Feed<'_> {
        // `Changes::new` takes only types with a change stream; were one
        // to slip through, the empty template fails `Poller::start`.
        D::SPEC.feed().unwrap_or(Feed::new(D::SPEC.kind, ""))
    }

    fn group(&self) -> &str {
        &self.group
    }

    fn batch(&self) -> usize {
        self.batch
    }

    /// Entries of this type, and entries whose kind cannot be read (the
    /// handler's parse reports them as corrupt).
    fn wants(&self, entry: &StreamEntry) -> bool {
        entry.field("kind").is_none_or(|k| k == D::SPEC.kind)
    }

    fn gap<'a>(&'a self, scope: &'a str, gap: &'a Gap) -> BoxFuture<'a, Result<GapOutcome, BoxError>> {
        Box::pin(async move {
            let told = self.handler.gap(scope, gap).await?;
            match self.resync {
                Some(resync) => {
                    let n = resync(self, scope).await?;
                    tracing::info!(kind = D::SPEC.kind, scope, documents = n, "resynced after a gap");
                    Ok(GapOutcome::Recovered)
                }
                None => Ok(told),
            }
        })
    }

    fn handle<'a>(&'a self, scope: &'a str, entries: &'a [StreamEntry]) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            let mut changes = Vec::with_capacity(entries.len());
            for e in entries {
                match parse_change::<D>(D::SPEC.kind, scope, e) {
                    Ok(Some(c)) => changes.push(c),
                    Ok(None) => {}
                    Err(why) => {
                        tracing::error!(kind = D::SPEC.kind, scope, entry = %e.id, reason = %why, "corrupt change entry passed over");
                        self.store.valkey().metrics().add_entries_corrupt(1);
                    }
                }
            }
            if self.fetch {
                let mut fetched = Vec::with_capacity(changes.len());
                for mut c in changes {
                    if c.kind != ChangeKind::Deleted {
                        // In the change's scope: for ids unique per scope
                        // the only way to name the document.
                        match self.store.get_in(&c.scope, &c.id).await {
                            // Only the document this change is about: one
                            // re-created since in another scope, or older
                            // than the change, is not it.
                            Ok(doc) => c.document = doc.filter(|d| d.scope == c.scope && d.version >= c.version),
                            // A document that cannot be read (damage, or an
                            // id no key can name) would fail the batch
                            // forever: the change is passed over and counted
                            // like a corrupt entry.
                            Err(e) if e.is_corrupt() || e.is_invalid_input() => {
                                tracing::error!(kind = D::SPEC.kind, scope, id = %c.id, error = %e, "change passed over: its document cannot be read");
                                self.store.valkey().metrics().add_entries_corrupt(1);
                                continue;
                            }
                            // Anything else (a lost connection, a cluster in
                            // failover, a busy or refusing server): the batch
                            // comes again once the server answers.
                            Err(e) => return Err(e.into()),
                        }
                    }
                    fetched.push(c);
                }
                changes = fetched;
            }
            if changes.is_empty() {
                return Ok(());
            }
            self.handler.handle(scope, changes).await
        })
    }
}
