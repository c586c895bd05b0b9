//! How a write runs: every put-shaped request (create, update, put) and
//! every step (or write with effects) comes here as one [`DocWrite`],
//! planned into one generated script call ([`Call`]) and answered through
//! the one reply decoder ([`decode`]); a delete the same way with its own
//! script. One call each in the steady state.

use microdcs_schema::Document;
use microdcs_schema::lua;

use super::call::{Arg, Call, PutBody, Reply, WriteTarget, check_wait, decode};
use super::step::{Effects, StepArgs, StepOutcome};
use super::types::{DeleteExpect, DeleteOutcome, Expect, PutOutcome, ReadState, Revision, Stored};
use super::{MAX_OVERWRITE_ATTEMPTS, MAX_REREADS, Store};
use crate::codec::{Codec, NotReadBack};
use crate::config::Durability;
use crate::error::{Error, Result, short};
use crate::op_id::new_op_id;

/// The version `op` produced, from an `ops` history (ids of consecutive
/// versions ending at `v`, oldest first, [`lua::OP_ID_LEN`] bytes each).
pub(super) fn applied_version(ops: &str, v: u64, op: &str) -> Option<u64> {
    let n = lua::OP_ID_LEN;
    if op.len() != n || !ops.len().is_multiple_of(n) {
        return None;
    }
    let at = (0..ops.len() / n).find(|i| ops.get(i * n..(i + 1) * n) == Some(op))?;
    v.checked_sub((ops.len() / n - 1 - at) as u64).filter(|v| *v > 0)
}

/// The operation id a write stores: the digest of the caller's id (a
/// fixed length, so the history holds ids of one size), or a new one.
///
/// # Errors
/// [`Error::InvalidOpId`] for a malformed caller's id.
pub(super) fn stored_op(op: Option<&str>) -> Result<String> {
    match op {
        Some(op) if !lua::valid_op_id(op) => Err(Error::InvalidOpId(op.to_owned())),
        Some(op) => Ok(lua::stored_op_id(op)),
        None => Ok(new_op_id()),
    }
}

/// What a write script did: a put's outcome, or (a step only) the
/// document whose step applied the event already.
pub(super) enum Applied {
    Put(PutOutcome),
    /// A step the script applied now, with what its family effects returned.
    Stepped {
        version: u64,
        values: Vec<i64>,
    },
    Event(String),
}

/// One write of a document: what every put-shaped request and every step
/// (or write with effects) hands [`Store::write_doc`].
pub(super) struct DocWrite<'a, D> {
    /// The document to store.
    pub(super) doc: &'a D,
    /// What the stored version must be.
    pub(super) expect: Expect,
    /// The caller's read of the document: its index entries are the ones
    /// replaced (`None`: read them first when the type has indexes).
    pub(super) read: Option<&'a Stored<D>>,
    /// The stored operation id ([`stored_op`]).
    pub(super) op: &'a str,
    /// A step's arguments: the step's script instead of the put's.
    pub(super) step: Option<StepArgs<'a>>,
    /// What the write waits for once applied.
    pub(super) durability: &'a Durability,
    /// A document that has a lifetime keeps what it has left.
    pub(super) keep_lifetime: bool,
}

impl<D: Document, C: Codec<D>> Store<D, C> {
    /// Moves `read` to `doc` at `version`, as written: the index fields the
    /// write stored, so the next write needs no read.
    /// `op` is the stored id of the write, which makes the new revision.
    pub(super) fn advance(&self, read: &mut Stored<D>, doc: D, version: u64, op: &str) -> Result<()> {
        let entries = doc.index_entries(self.valkey.prefix())?;
        let mut fields = vec![None; self.plan.fields.len()];
        for e in entries.unique.iter().chain(&entries.groups).flatten() {
            for (name, value) in &e.fields {
                if let Some(i) = self.plan.fields.iter().position(|f| f == name) {
                    fields[i] = Some(value.clone());
                }
            }
        }
        read.state = ReadState {
            exists: true,
            version,
            scope: Some(entries.scope.clone()),
            fields,
            ops: op.to_owned(),
            stamp: microdcs_schema::stamp_text(D::SPEC.schema),
        };
        read.version = version;
        read.doc = doc;
        Ok(())
    }

    /// A put, as [`PutCall`](super::PutCall) runs it.
    pub(super) async fn put_doc(&self, w: DocWrite<'_, D>) -> Result<PutOutcome> {
        match self.write_doc(w).await? {
            Applied::Put(out) => Ok(out),
            // Only a step carries an event.
            Applied::Event(job) => Err(Error::Protocol { script: "put", reply: format!("event applied by {job}") }),
            Applied::Stepped { version, .. } => {
                Err(Error::Protocol { script: "put", reply: format!("a step's answer (version {version})") })
            }
        }
    }

    /// A put, or with `step` a step: the same checks and retries, the
    /// step's script and arguments; with a `durability` that waits, the
    /// wait for replicas after it. With `keep_lifetime` a document that has
    /// a lifetime keeps what it has left.
    pub(super) async fn write_doc(&self, w: DocWrite<'_, D>) -> Result<Applied> {
        let DocWrite { doc, expect, read, op, step, durability, keep_lifetime } = w;
        let step = step.as_ref();
        let plan = &*self.plan;
        let entries = doc.index_entries(self.valkey.prefix())?;
        self.valkey.span_scope(&entries.scope);
        if let Some(read) = read {
            read.identity().check(&entries.id, &entries.scope)?;
        }
        let text = self
            .codec
            .encode_stored(doc, &entries.id)
            .map_err(|e| Error::codec("encode", D::SPEC.kind, &entries.id)(Box::new(e)))?;
        // A text the codec cannot read back would be acknowledged and then
        // fail every read (JSON writes NaN as `null`, and writes nesting
        // its reader refuses): refused here, before anything is sent.
        self.codec
            .decode_stored(&text, &entries.id)
            .map_err(|e| Error::codec("encode", D::SPEC.kind, &entries.id)(Box::new(NotReadBack(e))))?;
        let key = entries.key.as_str();
        // Counted as a live writer of this schema before it writes.
        self.announce_before_write(key).await?;
        // The state the script will check the stored index fields against.
        let mut state = match (read, expect) {
            (Some(r), _) => Some(r.state.clone()),
            (None, Expect::Create) => Some(ReadState::missing(plan.fields.len())),
            (None, _) if !plan.has_indexes() => None,
            // A read that got no answer (a primary failing over) does not
            // end the write: the script compares the stored index fields
            // with what we send and hands back what is stored when they
            // differ, so the write goes on as if nothing were stored, under
            // its own retry rule and bound (a read bound, then a write bound).
            (None, _) => Some(self.read_state_or_guess(key, &mut false).await?),
        };
        let wanted = match expect {
            Expect::Version(n) => Some(Revision::of_history(n, "")),
            Expect::Revision(r) => Some(r),
            Expect::Create | Expect::Any => None,
        };
        if let (Some(s), Some(want)) = (&state, wanted)
            && s.exists
            && !s.revision().satisfies(&want)
        {
            // Our own earlier write (same op id, unknown outcome) counts as
            // done; a write that waits for replicas goes to the script,
            // which recognises it too, so that there is a write of this
            // connection to wait for.
            match applied_version(&s.ops, s.version, op) {
                Some(v) if !durability.waits() => {
                    self.valkey.metrics().add_already_applied();
                    return Ok(Applied::Put(PutOutcome::Written { version: v }));
                }
                Some(_) => {}
                None => return Ok(Applied::Put(PutOutcome::Conflict { current: s.version })),
            }
        }
        let (l, script, name) = match step {
            Some(args) if args.plan.outbox.is_some() => (&args.plan.layout.put, &args.plan.script, "step"),
            Some(args) => (&args.plan.layout.put, &args.plan.script, "write"),
            None => (&plan.put_layout, &plan.put, "put"),
        };
        if plan.sharded {
            self.register_scope(&entries.scope).await?;
        }
        let attempts = if expect == Expect::Any { MAX_OVERWRITE_ATTEMPTS } else { MAX_REREADS };
        let mut turn = None;
        for attempt in 1..=attempts {
            super::before_attempt(&self.valkey, D::SPEC.kind, key, attempt, &mut turn).await;
            let target = WriteTarget {
                key,
                id: &entries.id,
                scope: &entries.scope,
                list_key: entries.list.as_ref().map(|list| list.key.clone()),
                expect: match expect {
                    Expect::Create => Arg::Static("create"),
                    Expect::Any => Arg::Static("any"),
                    Expect::Version(n) => Arg::Owned(n.to_string()),
                    Expect::Revision(r) => Arg::Owned(r.script_arg()),
                },
                op,
            };
            let score = entries.list.as_ref().map(|list| list.score.map_or_else(String::new, |x| x.to_string()));
            let tomb = plan.tomb_key(self.valkey.prefix(), D::SPEC.kind, &entries.scope, &entries.id)?;
            let body = PutBody { doc: &text, score, ttl_ms: self.ttl_ms(), keep_lifetime, tomb };
            let mut call = match step {
                Some(args) => Call::step(plan, &self.valkey, D::SPEC.kind, target, body, args)?,
                None => Call::put(l, plan, &self.valkey, D::SPEC.kind, target, body)?,
            };
            call.new_entries(&l.indexes, entries.unique.iter().chain(&entries.groups), key);
            call.reads(l.indexes.iter().map(|s| &s.index), plan, &self.valkey, &entries.id, state.as_ref(), key)?;
            call.seal(l.tail);
            let (reply, wait) = call.invoke(&self.valkey, script, key, durability).await?;
            match decode(name, key, &reply.value, step.is_some())? {
                Reply::Written { version, already, values } => {
                    if already {
                        self.valkey.metrics().add_already_applied();
                    }
                    check_wait(key, version, durability, wait)?;
                    if step.is_some() && !already {
                        return Ok(Applied::Stepped { version, values });
                    }
                    return Ok(Applied::Put(PutOutcome::Written { version }));
                }
                Reply::Conflict { current } => return Ok(Applied::Put(PutOutcome::Conflict { current })),
                Reply::NotFound => return Ok(Applied::Put(PutOutcome::NotFound)),
                Reply::EventApplied { job } => return Ok(Applied::Event(job)),
                Reply::WrongScope { stored } => {
                    return Err(Error::WrongScope { id: entries.id.clone(), stored, given: entries.scope.clone() });
                }
                Reply::UniqueViolation { index, holder } => {
                    let slots = l.indexes.get(index.saturating_sub(1));
                    return Err(Error::UniqueViolation {
                        type_name: D::SPEC.type_name,
                        index: slots.map(|s| s.index.name.clone()).unwrap_or_default(),
                        key: slots.map(|s| call.key(s.new.key).to_owned()).unwrap_or_default(),
                        holder,
                    });
                }
                // The script hands back what is stored: the next attempt
                // starts from it without a read of its own.
                Reply::Retry(stored) => state = Some(self.state_of(key, stored)?),
                Reply::SchemaBehind { stored } => return Err(schema_behind::<D>(name, stored)),
            }
        }
        Err(Error::Contention { key: key.to_owned(), attempts })
    }

    /// Adds `scope` to the registry of a sharded type, before its write:
    /// the registry is one set for every scope, in another slot than the
    /// scope's keys, so no script can write both. Before the write, so a
    /// scope that has entries is always listed (a write that then fails
    /// leaves a listed scope with nothing in it, which readers skip).
    /// `SADD` is safe to repeat; each store remembers the scopes it added,
    /// so only a scope's first write through it pays the round trip.
    /// `rebuild` adds any scope a document has and the registry lacks.
    async fn register_scope(&self, scope: &str) -> Result<()> {
        const REMEMBERED: usize = 4096;
        let known = |plan: &super::plan::Plan| plan.registered.lock().map(|s| s.contains(scope)).unwrap_or(false);
        if known(&self.plan) {
            return Ok(());
        }
        let key = self.plan.registry_key.clone();
        let cmd = redis::cmd("SADD").arg(&key).arg(scope).clone();
        crate::retry::repeatable(&self.valkey, "scope registration", &key, |mut con| {
            let cmd = cmd.clone();
            async move { cmd.query_async::<i64>(&mut con).await }
        })
        .await
        .map_err(|f| f.into_error(&key))?;
        if let Ok(mut set) = self.plan.registered.lock() {
            // A bound on what a long-lived store remembers: forgetting
            // costs one idempotent round trip, never correctness.
            if set.len() >= REMEMBERED {
                set.clear();
            }
            set.insert(scope.to_owned());
        }
        Ok(())
    }

    /// The delete of a read, as [`DeleteCall`] runs it.
    pub(super) async fn delete_read(
        &self,
        read: &Stored<D>,
        op: Option<&str>,
        durability: &Durability,
    ) -> Result<DeleteOutcome> {
        // The read's public scope may have been changed by hand: it must
        // still be the scope the store read, or the delete would name
        // another tenant's document.
        read.identity().check(&read.id, &read.scope)?;
        self.delete_inner(
            Some(&read.scope),
            &read.id,
            DeleteExpect::Revision(read.revision()),
            Some(read.state.clone()),
            op,
            durability,
        )
        .await
    }

    /// [`Store::read_state`] for a write that checks the state again in
    /// its script: a read that got no answer (a connection error) gives a
    /// missing document instead, and sets `guessed`; any other error is
    /// the write's. Cleared when a read answers.
    async fn read_state_or_guess(&self, key: &str, guessed: &mut bool) -> Result<ReadState> {
        match self.read_state(key).await {
            Ok(s) => {
                *guessed = false;
                Ok(s)
            }
            Err(e) if e.is_connection() => {
                tracing::debug!(key = self.valkey.shown(key), error = %e, "no stored state read; the script will tell");
                *guessed = true;
                Ok(ReadState::missing(self.plan.fields.len()))
            }
            Err(e) => Err(e),
        }
    }

    pub(super) async fn delete_inner(
        &self,
        in_scope: Option<&str>,
        id: &str,
        expect: DeleteExpect,
        read: Option<ReadState>,
        op: Option<&str>,
        durability: &Durability,
    ) -> Result<DeleteOutcome> {
        let caller_op = op.is_some();
        let op = stored_op(op)?;
        let plan = &*self.plan;
        let key = plan.doc_key(self.valkey.prefix(), in_scope, id)?;
        self.announce_before_write(&key).await?;
        // A read that got no answer (a primary failing over) does not end
        // the delete, as for `put`: it goes on as if nothing were stored,
        // and the script's answer says what is (a conflict, a scope, or
        // the stored state), after which it reads again. Such a guess is
        // never taken for the caller's answer.
        let mut guessed = false;
        let mut state = match read {
            Some(s) => s,
            None => self.read_state_or_guess(&key, &mut guessed).await?,
        };
        let l = &plan.delete_layout;
        let attempts = if expect == DeleteExpect::Any { MAX_OVERWRITE_ATTEMPTS } else { MAX_REREADS };
        let mut turn = None;
        for attempt in 1..=attempts {
            super::before_attempt(&self.valkey, D::SPEC.kind, &key, attempt, &mut turn).await;
            // A missing document still goes to the script: its tombstone
            // tells whether this operation deleted it.
            let scope = state.scope.clone().unwrap_or_default();
            self.valkey.span_scope(in_scope.unwrap_or(&scope));
            // Named in a scope it is not in: refused before the script.
            if let Some(given) = in_scope.filter(|g| state.exists && *g != scope) {
                return Err(Error::WrongScope { id: id.to_owned(), stored: scope, given: given.to_owned() });
            }
            let list_key = match plan.list_key(self.valkey.prefix(), &scope) {
                Some(key) if state.exists => Some(key?),
                _ => None,
            };
            // The version read (a retry after a lost reply finds its op id in
            // the tombstone before it looks at a document created again in
            // between; `DeleteExpect::Any` re-reads on a conflict), or, with
            // the caller's op id, the version the caller expects: the script
            // looks for that id before it compares, so a repeated call
            // reports its earlier delete whatever is stored now.
            let expected = match expect {
                DeleteExpect::Version(n) if caller_op => Revision::of_history(n, ""),
                DeleteExpect::Revision(r) if caller_op => r,
                // Checked against the read below: the script then expects
                // exactly the document read.
                _ => state.revision(),
            };
            let target = WriteTarget {
                key: &key,
                id,
                scope: &scope,
                list_key,
                expect: Arg::Owned(expected.script_arg()),
                op: &op,
            };
            // The tombstone of a document named by scope and id is the
            // scope's, whether or not the document is there now.
            let tomb = plan.tomb_key(self.valkey.prefix(), D::SPEC.kind, in_scope.unwrap_or(&scope), id);
            let mut call = Call::delete(l, plan, &self.valkey, D::SPEC.kind, target, tomb)?;
            let wanted = match expect {
                DeleteExpect::Version(n) => Some(Revision::of_history(n, "")),
                DeleteExpect::Revision(r) => Some(r),
                DeleteExpect::Any => None,
            };
            if let Some(want) = wanted
                && !caller_op
                && state.exists
                && !state.revision().satisfies(&want)
            {
                return Ok(DeleteOutcome::Conflict { current: state.version });
            }
            call.reads(l.indexes.iter(), plan, &self.valkey, id, Some(&state), &key)?;
            call.seal(l.tail);
            let (reply, wait) = call.invoke(&self.valkey, &plan.delete, &key, durability).await?;
            match decode("delete", &key, &reply.value, false)? {
                Reply::Written { version, already, .. } => {
                    // Already applied: this op id deleted it, in an attempt
                    // whose reply was lost or an earlier call with the
                    // caller's id.
                    if already {
                        self.valkey.metrics().add_already_applied();
                    }
                    check_wait(&key, version, durability, wait)?;
                    return Ok(DeleteOutcome::Deleted { version });
                }
                Reply::Conflict { .. } if expect == DeleteExpect::Any || guessed => {
                    state = self.read_state_or_guess(&key, &mut guessed).await?;
                }
                Reply::Conflict { current } => return Ok(DeleteOutcome::Conflict { current }),
                Reply::NotFound => return Ok(DeleteOutcome::NotFound),
                // Read missing, created under some scope since: read again.
                Reply::WrongScope { .. } if !state.exists => {
                    state = self.read_state_or_guess(&key, &mut guessed).await?;
                }
                Reply::WrongScope { stored } => {
                    return Err(Error::WrongScope { id: id.to_owned(), stored, given: scope });
                }
                Reply::Retry(stored) => {
                    state = self.state_of(&key, stored)?;
                    guessed = false;
                }
                Reply::SchemaBehind { stored } => return Err(schema_behind::<D>("delete", stored)),
                // The delete script sends neither.
                Reply::EventApplied { .. } | Reply::UniqueViolation { .. } => {
                    return Err(Error::Protocol { script: "delete", reply: short(&reply.value) });
                }
            }
        }
        Err(Error::Contention { key, attempts })
    }

    /// The step (or write with effects) as [`StepCall`](super::StepCall)
    /// runs it; `op` overrides [`Effects::op`].
    pub(super) async fn step_inner(
        &self,
        read: Option<&Stored<D>>,
        next: &D,
        effects: &Effects,
        op: &str,
        durability: &Durability,
    ) -> Result<StepOutcome> {
        let prefix = self.valkey.prefix();
        let step = effects.step_args(&self.plan.step, prefix, &next.scope(), D::SPEC.type_name)?;
        // The document key for the effects' slot check; a step without
        // effects (the common one) does not compute its entries twice.
        if !step.effects.is_empty() {
            let doc_key = next.index_entries(prefix)?.key;
            super::effects::check(step.effects, &self.valkey, &doc_key, D::SPEC.is_sharded())?;
        }
        let expect = read.map_or(Expect::Create, |r| Expect::Revision(r.revision()));
        let w = DocWrite { doc: next, expect, read, op, step: Some(step), durability, keep_lifetime: false };
        Ok(step_outcome(self.write_doc(w).await?))
    }
}

/// A step's outcome from what its script did.
fn step_outcome(applied: Applied) -> StepOutcome {
    match applied {
        Applied::Put(PutOutcome::Written { version }) => StepOutcome::Written { version, values: Vec::new() },
        Applied::Stepped { version, values } => StepOutcome::Written { version, values },
        Applied::Put(PutOutcome::Conflict { current }) => StepOutcome::Conflict { current },
        Applied::Put(PutOutcome::NotFound) => StepOutcome::NotFound,
        Applied::Event(job) => StepOutcome::EventApplied { job },
    }
}

/// The refusal of a write of this release to a document a newer schema
/// wrote (stamp `stored`).
fn schema_behind<D: Document>(script: &'static str, stored: u64) -> Error {
    match u32::try_from(stored) {
        Ok(stored) => Error::SchemaBehind { kind: D::SPEC.kind, stored, ours: D::SPEC.schema },
        Err(_) => Error::Protocol { script, reply: format!("a schema stamp past u32: {stored}") },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_history_lookup() {
        let ops = "aaaaaaaaaaa1bbbbbbbbbbb2aaaaaaaaaaaa";
        assert_eq!(applied_version(ops, 5, "aaaaaaaaaaa1"), Some(3));
        assert_eq!(applied_version(ops, 5, "aaaaaaaaaaaa"), Some(5));
        // Only whole entries match, never a run across a boundary.
        assert_eq!(applied_version(ops, 5, "1bbbbbbbbbbb"), None);
        assert_eq!(applied_version(ops, 5, "b"), None);
        assert_eq!(applied_version("a b=4", 5, "aaaaaaaaaaa1"), None);
    }

    #[test]
    fn op_ids_are_valid_and_unique() {
        let a = new_op_id();
        let b = new_op_id();
        assert_ne!(a, b);
        assert!(lua::valid_op_id(&a), "{a}");
        assert_eq!(a.len(), lua::OP_ID_LEN);
    }
}
