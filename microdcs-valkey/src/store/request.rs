//! One call shape for every write: a write method returns a request that
//! takes its options by name and runs when awaited, so every combination
//! exists without a method per combination:
//!
//! ```text
//! store.update(&read, &doc).await?;                      // plain
//! store.update(&read, &doc).op("order-7:accept").await?; // your own op id
//! store.delete_id("t-1", DeleteExpect::Any).in_scope("acme").op("del-1").await?;
//! store.step(Some(&read), &next, &effects).op("job-3:step-2").await?;
//! ```
//!
//! - `.op(id)`: your own operation id, so a repeat in a later call (after
//!   [`Error::UnknownOutcome`](crate::Error::UnknownOutcome), or a dropped
//!   future) is recognised as the same write while the document's history
//!   holds it.
//! - `.in_scope(scope)` (deletes by id): the scope, for ids unique per scope.
//! - `.durability(d)`: wait for replicas after the write (overrides the
//!   handle's [`WriteOptions::durability`](crate::config::WriteOptions)); see
//!   [`Durability`].
//! - `.keep_lifetime()` (puts): the document keeps the lifetime it has
//!   left instead of getting its type's again.
//!
//! The future is `Send` (for a `Send + Sync` document type); nothing is sent
//! before it is awaited.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use microdcs_schema::{Document, HasOutbox};

use super::Store;
use super::step::{Effects, StepOutcome};
use super::types::{DeleteExpect, DeleteOutcome, Expect, PutOutcome, Stored};
use super::write::{DocWrite, stored_op};
use crate::codec::Codec;
use crate::config::Durability;
use crate::error::{Error, Result};
use crate::observe::observed;

/// The future a request runs as.
pub type WriteFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

impl<D: Document, C: Codec<D>> Store<D, C> {
    /// Creates a document that must not exist yet (one round trip).
    ///
    /// # Errors
    /// See [`Store::put`].
    pub fn create<'a>(&'a self, doc: &'a D) -> PutCall<'a, D, C> {
        PutCall::new(self, PutWhat::Put(doc, Expect::Create))
    }

    /// Updates a document you read, expecting its version unchanged (one
    /// round trip: the read tells which index entries to replace).
    ///
    /// # Errors
    /// See [`Store::put`].
    pub fn update<'a>(&'a self, read: &'a Stored<D>, doc: &'a D) -> PutCall<'a, D, C> {
        PutCall::new(self, PutWhat::Update(read, doc))
    }

    /// Updates a document you read and, when written, moves `read` to the
    /// new version and document, so a loop of updates needs no re-read (one
    /// round trip each).
    ///
    /// # Errors
    /// See [`Store::put`]; on an error or a conflict `read` is unchanged.
    pub fn update_in_place<'a>(&'a self, read: &'a mut Stored<D>, doc: D) -> PutCall<'a, D, C> {
        PutCall::new(self, PutWhat::InPlace(read, doc))
    }

    /// Writes a document with any expectation. `Expect::Create` is one round
    /// trip; `Expect::Version` and `Expect::Any` read the index fields first
    /// when the type has indexes (prefer [`Store::update`] after a read).
    ///
    /// # Errors
    /// [`Error::WrongScope`] and [`Error::UniqueViolation`] (nothing written),
    /// [`Error::Corrupt`] or [`Error::WrongType`] for a damaged hash,
    /// [`Error::Codec`], [`Error::Index`] for an invalid id or index value,
    /// [`Error::UnknownOutcome`] when every attempt lost the connection.
    pub fn put<'a>(&'a self, doc: &'a D, expect: Expect) -> PutCall<'a, D, C> {
        PutCall::new(self, PutWhat::Put(doc, expect))
    }

    /// Deletes a document you read, expecting its version unchanged (one round trip).
    ///
    /// The delete leaves a tombstone for `TombstoneRetention`: a retry
    /// after a lost reply reports this delete (`Deleted`) only if it made
    /// it, and a write of the document retried after the delete is
    /// recognised rather than creating it again.
    ///
    /// # Errors
    /// See [`Store::delete_id`].
    pub fn delete<'a>(&'a self, read: &'a Stored<D>) -> DeleteCall<'a, D, C> {
        DeleteCall::new(self, DeleteWhat::Read(read))
    }

    /// Deletes by id (`DeleteExpect::Any` or `DeleteExpect::Version`); reads the document's
    /// scope and index fields first.
    ///
    /// # Errors
    /// Invalid id, [`Error::Corrupt`], [`Error::WrongType`], connection errors.
    pub fn delete_id<'a>(&'a self, id: &'a str, expect: DeleteExpect) -> DeleteCall<'a, D, C> {
        DeleteCall::new(self, DeleteWhat::Id(id, expect))
    }
}

impl<D: HasOutbox, C: Codec<D>> Store<D, C> {
    /// One workflow step, one round trip: compares the version `read` has
    /// (`None`: the document must not exist yet, the first step of a job),
    /// stores `next` with its indexes, appends `effects`' work entries to
    /// the outbox stream (each opened by the `job` id and new version `v`),
    /// and sets the marker of `effects`' event, all in one script. An event
    /// whose marker is set already makes the step write nothing
    /// ([`StepOutcome::EventApplied`]).
    ///
    /// A step whose reply was lost is run again with the same operation id
    /// and recognised: it reports [`StepOutcome::Written`], and its entries
    /// and marker are not written twice. The id is recognised while the
    /// document's op history (`OpHistoryLength` writes) holds it: a step
    /// retried after that many later writes, or retried by you after
    /// [`Error::UnknownOutcome`] without your own [`Effects::op`], finds its
    /// own marker instead and reports `EventApplied` naming this very job.
    ///
    /// # Errors
    /// As [`Store::put`]; [`Error::InvalidArgument`] for a malformed work
    /// entry, too many entries, or an event that does not fit the marker
    /// template (a `source` given or missing); [`Error::Key`] for an event
    /// id that cannot be a key value; [`Error::InvalidOpId`].
    pub fn step<'a>(&'a self, read: Option<&'a Stored<D>>, next: &'a D, effects: &'a Effects) -> StepCall<'a, D, C> {
        StepCall::new(self, StepWhat::Step(read, next), effects)
    }

    /// Like [`Store::step`] from a document you read, moving `read` to the
    /// new version and document when written, so an engine's loop of steps
    /// needs no read between them (one round trip each).
    ///
    /// # Errors
    /// See [`Store::step`]; on an error or any other outcome `read` is
    /// unchanged.
    pub fn step_in_place<'a>(&'a self, read: &'a mut Stored<D>, next: D, effects: &'a Effects) -> StepCall<'a, D, C> {
        StepCall::new(self, StepWhat::InPlace(read, next), effects)
    }
}

impl<D: Document, C: Codec<D>> Store<D, C> {
    /// A write with family effects, one round trip: compares the version
    /// `read` has (`None`: the document must not exist yet), stores `next`
    /// with its indexes and applies `effects`' family effects (counter and
    /// hash increments, set and sorted-set adds and removes), all in one
    /// script, so they happen exactly when the document is written: a write
    /// retried by its operation id applies none of them again. What the
    /// effects returned comes back in [`StepOutcome::Written`].
    ///
    /// Any document type has it; on a type with an outbox it is
    /// [`Store::step`]. A type without an outbox refuses work entries and
    /// an event ([`Error::InvalidArgument`], nothing sent).
    ///
    /// ```no_run
    /// # use microdcs_valkey::{Document, store::Effects, Store, store::StepOutcome, families::CounterKey};
    /// # async fn demo<D>(messages: &Store<D>, msg: &D, seq: &CounterKey) -> microdcs_valkey::Result<()>
    /// # where D: Document + serde::Serialize + serde::de::DeserializeOwned {
    /// let out = messages.write(None, msg, &Effects::new().incr(seq, 1)).await?;
    /// if let StepOutcome::Written { values, .. } = out {
    ///     // Empty when a retry found the write applied already (the store
    ///     // retries on its own after a lost reply): read the counter then.
    ///     match values.first() {
    ///         Some(n) => println!("message number {n}"),
    ///         None => println!("message number {}", seq.get().await?),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Store::step`].
    pub fn write<'a>(&'a self, read: Option<&'a Stored<D>>, next: &'a D, effects: &'a Effects) -> StepCall<'a, D, C> {
        StepCall::new(self, StepWhat::Step(read, next), effects)
    }

    /// Like [`Store::write`] from a document you read, moving `read` to the
    /// new version and document when written.
    ///
    /// # Errors
    /// See [`Store::write`]; on an error or any other outcome `read` is
    /// unchanged.
    pub fn write_in_place<'a>(&'a self, read: &'a mut Stored<D>, next: D, effects: &'a Effects) -> StepCall<'a, D, C> {
        StepCall::new(self, StepWhat::InPlace(read, next), effects)
    }
}

/// What a put-shaped request writes.
pub(super) enum PutWhat<'a, D> {
    /// `put(doc, expect)` and `create(doc)`.
    Put(&'a D, Expect),
    /// `update(read, doc)`.
    Update(&'a Stored<D>, &'a D),
    /// `update_in_place(read, doc)`: `read` moves to what was written.
    InPlace(&'a mut Stored<D>, D),
}

/// A write of one document ([`Store::create`], [`Store::put`],
/// [`Store::update`], [`Store::update_in_place`]): await it, after
/// [`PutCall::op`] if you give your own operation id.
#[must_use = "a write does nothing until it is awaited"]
pub struct PutCall<'a, D, C> {
    store: &'a Store<D, C>,
    what: Option<PutWhat<'a, D>>,
    op: Option<String>,
    durability: Option<Durability>,
    keep_lifetime: bool,
    running: Option<WriteFuture<'a, PutOutcome>>,
}

impl<'a, D, C> PutCall<'a, D, C> {
    pub(super) fn new(store: &'a Store<D, C>, what: PutWhat<'a, D>) -> Self {
        PutCall { store, what: Some(what), op: None, durability: None, keep_lifetime: false, running: None }
    }

    /// Keeps the lifetime the document has left instead of giving it the
    /// store's again (the type's `ttl`, or [`Store::with_ttl`]'s): an edit
    /// that must not extend how long the document lives. Its unique index
    /// keys get the same lifetime. A document without one (a create, or
    /// one stored before the type had a lifetime) gets the store's, so a
    /// document never ends up without a lifetime. For a type without `ttl`
    /// it changes nothing.
    pub fn keep_lifetime(mut self) -> Self {
        debug_assert!(self.running.is_none(), "an option given after the request started");
        self.keep_lifetime = true;
        self
    }

    /// Your own operation id (at most 64 characters of letters, digits and
    /// `_ . : -`), so a repeat of this write in a later call is recognised;
    /// a malformed one is [`Error::InvalidOpId`](crate::Error::InvalidOpId).
    pub fn op(mut self, op: impl Into<String>) -> Self {
        debug_assert!(self.running.is_none(), "an option given after the request started");
        self.op = Some(op.into());
        self
    }

    /// What this write waits for once applied (overrides the handle's
    /// [`WriteOptions::durability`](crate::config::WriteOptions)): with replicas,
    /// a shortfall is [`Error::NotReplicated`](crate::Error::NotReplicated),
    /// which carries the version written.
    pub fn durability(mut self, durability: Durability) -> Self {
        debug_assert!(self.running.is_none(), "an option given after the request started");
        self.durability = Some(durability);
        self
    }
}

impl<'a, D: Document + 'a, C: Codec<D> + 'a> PutCall<'a, D, C> {
    fn start(&mut self) -> WriteFuture<'a, PutOutcome> {
        let (store, what, op, keep) = (self.store, self.what.take(), self.op.take(), self.keep_lifetime);
        let d = self.durability.unwrap_or(store.valkey.write_options().durability);
        let name = match &what {
            Some(PutWhat::Put(_, Expect::Create)) => "create",
            Some(PutWhat::Put(..)) | None => "put",
            Some(PutWhat::Update(..) | PutWhat::InPlace(..)) => "update",
        };
        Box::pin(observed(name, D::SPEC.kind, async move {
            let Some(what) = what else { return Err(polled_again()) };
            let d = store.valkey.durability_for(d).await?;
            let op = &stored_op(op.as_deref())?;
            let durability = &d;
            match what {
                PutWhat::Put(doc, expect) => {
                    let read = None;
                    store.put_doc(DocWrite { doc, expect, read, op, step: None, durability, keep_lifetime: keep }).await
                }
                PutWhat::Update(read, doc) => {
                    let (expect, read) = (Expect::Revision(read.revision()), Some(read));
                    store.put_doc(DocWrite { doc, expect, read, op, step: None, durability, keep_lifetime: keep }).await
                }
                PutWhat::InPlace(read, doc) => {
                    let expect = Expect::Revision(read.revision());
                    let w = DocWrite {
                        doc: &doc,
                        expect,
                        read: Some(&*read),
                        op,
                        step: None,
                        durability,
                        keep_lifetime: keep,
                    };
                    let out = store.put_doc(w).await?;
                    if let PutOutcome::Written { version } = out {
                        store.advance(read, doc, version, op)?;
                    }
                    Ok(out)
                }
            }
        }))
    }
}

/// What a delete request removes.
pub(super) enum DeleteWhat<'a, D> {
    /// `delete(read)`.
    Read(&'a Stored<D>),
    /// `delete_id(id, expect)`.
    Id(&'a str, DeleteExpect),
}

/// A delete of one document ([`Store::delete`], [`Store::delete_id`]):
/// await it, after [`DeleteCall::op`] and (by id) [`DeleteCall::in_scope`].
#[must_use = "a delete does nothing until it is awaited"]
pub struct DeleteCall<'a, D, C> {
    store: &'a Store<D, C>,
    what: Option<DeleteWhat<'a, D>>,
    op: Option<String>,
    scope: Option<String>,
    durability: Option<Durability>,
    running: Option<WriteFuture<'a, DeleteOutcome>>,
}

impl<'a, D, C> DeleteCall<'a, D, C> {
    pub(super) fn new(store: &'a Store<D, C>, what: DeleteWhat<'a, D>) -> Self {
        DeleteCall { store, what: Some(what), op: None, scope: None, durability: None, running: None }
    }

    /// Your own operation id: repeated while the tombstone lasts
    /// (`TombstoneRetention`), the delete reports `Deleted` with the
    /// version it deleted, and never deletes a document created again.
    pub fn op(mut self, op: impl Into<String>) -> Self {
        debug_assert!(self.running.is_none(), "an option given after the request started");
        self.op = Some(op.into());
        self
    }

    /// The scope of the document named by id: required for ids unique per
    /// scope; for other types a document of another scope is refused
    /// ([`Error::WrongScope`](crate::Error::WrongScope), nothing deleted).
    /// A delete of a read takes the read's scope; a different one here is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub fn in_scope(mut self, scope: impl Into<String>) -> Self {
        debug_assert!(self.running.is_none(), "an option given after the request started");
        self.scope = Some(scope.into());
        self
    }

    /// What this write waits for once applied (overrides the handle's
    /// [`WriteOptions::durability`](crate::config::WriteOptions)): with replicas,
    /// a shortfall is [`Error::NotReplicated`](crate::Error::NotReplicated),
    /// which carries the version written.
    pub fn durability(mut self, durability: Durability) -> Self {
        debug_assert!(self.running.is_none(), "an option given after the request started");
        self.durability = Some(durability);
        self
    }
}

impl<'a, D: Document + 'a, C: Codec<D> + 'a> DeleteCall<'a, D, C> {
    fn start(&mut self) -> WriteFuture<'a, DeleteOutcome> {
        let (store, what, op, scope) = (self.store, self.what.take(), self.op.take(), self.scope.take());
        let d = self.durability.unwrap_or(store.valkey.write_options().durability);
        Box::pin(observed("delete", D::SPEC.kind, async move {
            let Some(what) = what else { return Err(polled_again()) };
            let d = store.valkey.durability_for(d).await?;
            match what {
                DeleteWhat::Read(read) => {
                    if let Some(s) = scope.filter(|s| *s != read.scope) {
                        return Err(Error::InvalidArgument(format!(
                            "the read of `{}` is of scope `{}`, not `{s}`",
                            read.id, read.scope
                        )));
                    }
                    store.delete_read(read, op.as_deref(), &d).await
                }
                DeleteWhat::Id(id, expect) => {
                    store.delete_inner(scope.as_deref(), id, expect, None, op.as_deref(), &d).await
                }
            }
        }))
    }
}

/// What a step request stores.
pub(super) enum StepWhat<'a, D> {
    /// `step(read, next, effects)`.
    Step(Option<&'a Stored<D>>, &'a D),
    /// `step_in_place(read, next, effects)`: `read` moves to what was written.
    InPlace(&'a mut Stored<D>, D),
}

/// A workflow step ([`Store::step`], [`Store::step_in_place`]): await it,
/// after [`StepCall::op`] if you give your own operation id (the same as
/// [`Effects::op`], which it overrides).
#[must_use = "a step does nothing until it is awaited"]
pub struct StepCall<'a, D, C> {
    store: &'a Store<D, C>,
    what: Option<StepWhat<'a, D>>,
    effects: &'a Effects,
    op: Option<String>,
    durability: Option<Durability>,
    running: Option<WriteFuture<'a, StepOutcome>>,
}

impl<'a, D, C> StepCall<'a, D, C> {
    pub(super) fn new(store: &'a Store<D, C>, what: StepWhat<'a, D>, effects: &'a Effects) -> Self {
        StepCall { store, what: Some(what), effects, op: None, durability: None, running: None }
    }

    /// Your own operation id for this step (overrides [`Effects::op`]).
    pub fn op(mut self, op: impl Into<String>) -> Self {
        debug_assert!(self.running.is_none(), "an option given after the request started");
        self.op = Some(op.into());
        self
    }

    /// What this write waits for once applied (overrides the handle's
    /// [`WriteOptions::durability`](crate::config::WriteOptions)): with replicas,
    /// a shortfall is [`Error::NotReplicated`](crate::Error::NotReplicated),
    /// which carries the version written.
    pub fn durability(mut self, durability: Durability) -> Self {
        debug_assert!(self.running.is_none(), "an option given after the request started");
        self.durability = Some(durability);
        self
    }
}

impl<'a, D: Document + 'a, C: Codec<D> + 'a> StepCall<'a, D, C> {
    fn start(&mut self) -> WriteFuture<'a, StepOutcome> {
        let (store, what, effects, op) = (self.store, self.what.take(), self.effects, self.op.take());
        let d = self.durability.unwrap_or(store.valkey.write_options().durability);
        // A type without an outbox has no steps, only writes with effects.
        let name = if D::SPEC.outbox.is_some() { "step" } else { "write" };
        Box::pin(observed(name, D::SPEC.kind, async move {
            let Some(what) = what else { return Err(polled_again()) };
            let d = store.valkey.durability_for(d).await?;
            // The call's own id overrides the effects' id.
            let op = &stored_op(op.as_deref().or(effects.op.as_deref()))?;
            match what {
                StepWhat::Step(read, next) => store.step_inner(read, next, effects, op, &d).await,
                StepWhat::InPlace(read, next) => {
                    let out = store.step_inner(Some(&*read), &next, effects, op, &d).await?;
                    if let StepOutcome::Written { version, .. } = out {
                        store.advance(read, next, version, op)?;
                    }
                    Ok(out)
                }
            }
        }))
    }
}

/// A request polled after it completed (a caller's misuse of `poll`).
fn polled_again() -> Error {
    Error::InvalidArgument("a write request was polled after it completed".into())
}

// Each request is a future itself (so it goes wherever a future goes:
// `tokio::time::timeout`, `join!`, a `Vec` of futures), started on its
// first poll; its options are taken before. It never pins a field in
// place: the work runs in a boxed future of its own, so the request is
// `Unpin` whatever the document type.
macro_rules! request_future {
    ($call:ident, $bound:path, $out:ty) => {
        impl<'a, D, C> Unpin for $call<'a, D, C> {}

        impl<'a, D: $bound + 'a, C: Codec<D> + 'a> Future for $call<'a, D, C> {
            type Output = Result<$out>;

            fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
                let this = self.get_mut();
                if this.running.is_none() {
                    this.running = Some(this.start());
                }
                let Some(f) = this.running.as_mut() else { return Poll::Ready(Err(polled_again())) };
                let out = f.as_mut().poll(cx);
                if out.is_ready() {
                    // Done: a further poll starts nothing (its parts were
                    // taken) and answers `polled_again`.
                    this.running = None;
                }
                out
            }
        }
    };
}

request_future!(PutCall, Document, PutOutcome);
request_future!(DeleteCall, Document, DeleteOutcome);
request_future!(StepCall, Document, StepOutcome);
