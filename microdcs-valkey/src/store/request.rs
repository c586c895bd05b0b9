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

use microdcs_schema::Document;

use super::Store;
use super::step::{Effects, StepOutcome};
use super::types::{DeleteExpect, DeleteOutcome, Expect, PutOutcome, Stored};
use super::write::stored_op;
use crate::codec::Codec;
use crate::config::Durability;
use crate::error::Result;
use crate::observe::observed;

/// The future a request runs as.
pub type WriteFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

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
            match what {
                PutWhat::Put(doc, expect) => store.put_inner(doc, expect, None, None, op, &d, keep).await,
                PutWhat::Update(read, doc) => {
                    let expect = Expect::Revision(read.revision());
                    store.put_inner(doc, expect, Some(read.state.clone()), Some(read.identity()), op, &d, keep).await
                }
                PutWhat::InPlace(read, doc) => {
                    let expect = Expect::Revision(read.revision());
                    let state = Some(read.state.clone());
                    let out = store.put_inner(&doc, expect, state, Some(read.identity()), op, &d, keep).await?;
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
                        return Err(crate::Error::InvalidArgument(format!(
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
fn polled_again() -> crate::Error {
    crate::Error::InvalidArgument("a write request was polled after it completed".into())
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
