//! The workflow step: a compare-and-set of a document that, in the same
//! generated script, appends work entries to the type's outbox stream and
//! applies an event at most once (an applied-event marker, checked and set);
//! and the write with family effects, the same script without the outbox.

use serde::Serialize;

use microdcs_schema::{Document, HasOutbox, KeyTemplate};

use super::render_err;
use super::request::{StepCall, StepWhat};
use super::types::{Expect, Stored};
use super::{Store, write::Applied};
use crate::codec::Codec;
use crate::error::{Error, Result};

pub use microdcs_schema::lua::{MAX_ENTRY_FIELDS, MAX_WORK_ENTRIES};

/// The most fields of all work entries of one step together: one script
/// holds the server for as long as it runs.
pub const MAX_STEP_FIELDS: usize = 10_000;

/// The fields every work entry starts with, set by the script: the
/// document id and the version the step wrote.
pub const WORK_ENTRY_FIELDS: [&str; 2] = ["job", "v"];

/// One entry a step appends to the outbox stream: named fields in order,
/// after the `job` and `v` fields the script puts first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkEntry {
    fields: Vec<(String, String)>,
}

impl WorkEntry {
    /// An entry with no fields of its own.
    pub fn new() -> Self {
        WorkEntry::default()
    }

    /// Adds a field.
    #[must_use]
    pub fn field(mut self, name: impl Into<String>, value: impl ToString) -> Self {
        self.fields.push((name.into(), value.to_string()));
        self
    }

    /// An entry from the fields of a struct (or map): one stream field per
    /// field, sorted by name, strings as they are, other values as JSON
    /// text, `null`s left out.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `value` does not serialize to an
    /// object.
    pub fn from_fields<T: Serialize>(value: &T) -> Result<Self> {
        let v = serde_json::to_value(value)
            .map_err(|e| Error::InvalidArgument(format!("a work entry cannot be serialized: {e}")))?;
        let serde_json::Value::Object(map) = v else {
            return Err(Error::InvalidArgument("a work entry must serialize to an object (named fields)".into()));
        };
        let mut fields: Vec<(String, String)> = map
            .into_iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => (k, s),
                other => (k, other.to_string()),
            })
            .collect();
        // Defined whatever order the map keeps.
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(WorkEntry { fields })
    }

    /// The entry's own fields, in order.
    pub fn fields(&self) -> &[(String, String)] {
        &self.fields
    }

    fn check(&self) -> Result<()> {
        if self.fields.len() > MAX_ENTRY_FIELDS {
            return Err(Error::InvalidArgument(format!(
                "a work entry holds at most {MAX_ENTRY_FIELDS} fields, not {}",
                self.fields.len()
            )));
        }
        let mut seen = std::collections::HashSet::with_capacity(self.fields.len());
        for (name, _) in &self.fields {
            if name.is_empty() {
                return Err(Error::InvalidArgument("a work entry field needs a name".into()));
            }
            if WORK_ENTRY_FIELDS.contains(&name.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "work entry field `{name}` is set by the step itself (the document id and the new version)"
                )));
            }
            if !seen.insert(name.as_str()) {
                return Err(Error::InvalidArgument(format!("work entry field `{name}` is given twice")));
            }
        }
        Ok(())
    }
}

/// The event a step applies: its source and id name its marker, so a
/// redelivery of the same event finds the marker and writes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    source: Option<String>,
    id: String,
}

impl Event {
    /// The event `id` from `source` (for a marker template with `{source}`).
    pub fn new(source: impl Into<String>, id: impl Into<String>) -> Self {
        Event { source: Some(source.into()), id: id.into() }
    }

    /// The event `id` alone (for a marker template without `{source}`).
    pub fn id(id: impl Into<String>) -> Self {
        Event { source: None, id: id.into() }
    }
}

/// What a step (or a [`Store::write`]) does beside storing the document:
/// the work entries it appends and the event it applies (a type with an
/// outbox only), the family effects it applies, and its operation id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
    work: Vec<WorkEntry>,
    event: Option<Event>,
    family: Vec<super::effects::FamilyEffect>,
    pub(super) op: Option<String>,
}

impl Effects {
    /// No work, no event, a new operation id.
    pub fn new() -> Self {
        Effects::default()
    }

    /// Appends a work entry (appended to the stream in the order given).
    #[must_use]
    pub fn work(mut self, entry: WorkEntry) -> Self {
        self.work.push(entry);
        self
    }

    /// The event this step applies (at most once per marker lifetime).
    #[must_use]
    pub fn event(mut self, event: Event) -> Self {
        self.event = Some(event);
        self
    }

    /// Your own operation id, so a step retried in a later call (after an
    /// unknown outcome) is recognised as the same write; else a new one.
    #[must_use]
    pub fn op(mut self, op: impl Into<String>) -> Self {
        self.op = Some(op.into());
        self
    }

    /// The work entries, in order.
    pub fn entries(&self) -> &[WorkEntry] {
        &self.work
    }

    /// Adds `n` to a counter of the keyspace (`INCRBY`) in the step's own
    /// script: exactly when the step writes, never twice for one step.
    /// The new count is in [`StepOutcome::Written`]'s `values`.
    ///
    /// The counter and `n` are at most 16 characters of integer, so no sum
    /// overflows halfway through (checked before the first write, nothing
    /// written otherwise: a larger `n` or a stored count of more than 16
    /// characters is [`Error::InvalidArgument`], a stored value that is no
    /// 64-bit integer [`Error::Corrupt`], a key of another type
    /// [`Error::WrongType`] naming it). The count comes back exact, past
    /// 2^53 too.
    #[must_use]
    pub fn incr(mut self, counter: &crate::families::CounterKey, n: i64) -> Self {
        self.family.push(super::effects::FamilyEffect::incr(counter, n));
        self
    }

    /// Adds `n` to `field` of a hash of the keyspace (`HINCRBY`) in the
    /// step's script; the new value is in `values`. Bounds as
    /// [`Effects::incr`].
    #[must_use]
    pub fn hincr(mut self, hash: &crate::families::HashKey, field: &str, n: i64) -> Self {
        self.family.push(super::effects::FamilyEffect::hincr(hash, field, n));
        self
    }

    /// Adds `member` to a set of the keyspace (`SADD`) in the step's
    /// script; `values` gets 1 if it was added, 0 if it was there.
    #[must_use]
    pub fn add(mut self, set: &crate::families::SetKey, member: &str) -> Self {
        self.family.push(super::effects::FamilyEffect::set(set, true, member));
        self
    }

    /// Removes `member` from a set of the keyspace (`SREM`) in the step's
    /// script; `values` gets 1 if it was removed, 0 if it was not there.
    #[must_use]
    pub fn remove(mut self, set: &crate::families::SetKey, member: &str) -> Self {
        self.family.push(super::effects::FamilyEffect::set(set, false, member));
        self
    }

    /// Adds or moves `member` of a sorted set of the keyspace to `score`
    /// (`ZADD`) in the step's script; `values` gets 1 if it was added, 0
    /// if it moved. A score that is not finite is refused.
    #[must_use]
    pub fn zadd(mut self, zset: &crate::families::SortedSetKey, member: &str, score: f64) -> Self {
        self.family.push(super::effects::FamilyEffect::zadd(zset, member, score));
        self
    }

    /// Removes `member` from a sorted set of the keyspace (`ZREM`) in the
    /// step's script; `values` gets 1 if it was removed, else 0.
    #[must_use]
    pub fn zrem(mut self, zset: &crate::families::SortedSetKey, member: &str) -> Self {
        self.family.push(super::effects::FamilyEffect::zrem(zset, member));
        self
    }
}

/// The outcome of a step. Errors (wrong scope, unique violation, corrupt
/// hash) are [`Error`]s; these are the expected outcomes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum StepOutcome {
    /// Written, with its work entries and its event marker; the document
    /// now has this version. Also the answer to a retry of a step that was
    /// applied (same operation id).
    Written {
        /// The new version.
        version: u64,
        /// What the step's family effects returned, in their order (the
        /// new count of an increment, 1 or 0 for an add or remove). Empty
        /// when the step was recognised as applied already (a retry by its
        /// operation id): its effects are not applied again, and what they
        /// returned then is not kept, so read the families instead.
        values: Vec<i64>,
    },
    /// The expected version did not match; nothing was written.
    Conflict {
        /// The stored version.
        current: u64,
    },
    /// The step read a document that no longer exists; nothing written.
    NotFound,
    /// The step's event was applied already, by the step of document
    /// `job`; nothing was written.
    EventApplied {
        /// The id of the document whose step applied the event.
        job: String,
    },
}

/// The rendered outbox keys and entries of one step call.
pub(super) struct StepArgs<'a> {
    /// The type's step: script, layout, templates.
    pub(super) plan: &'a super::plan::StepPlan,
    /// The outbox stream, for a type with an outbox.
    pub(super) work_key: Option<String>,
    pub(super) marker_key: Option<String>,
    pub(super) marker_ttl_ms: u64,
    pub(super) entries: &'a [WorkEntry],
    /// The family effects, checked.
    pub(super) effects: &'a [super::effects::FamilyEffect],
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

    /// The step as [`StepCall`] runs it; `op` overrides [`Effects::op`].
    pub(super) async fn step_inner(
        &self,
        read: Option<&Stored<D>>,
        next: &D,
        effects: &Effects,
        op: &str,
        durability: &crate::config::Durability,
    ) -> Result<StepOutcome> {
        if effects.work.len() > MAX_WORK_ENTRIES {
            return Err(Error::InvalidArgument(format!(
                "a step appends at most {MAX_WORK_ENTRIES} work entries, not {}",
                effects.work.len()
            )));
        }
        for e in &effects.work {
            e.check()?;
        }
        let total: usize = effects.work.iter().map(|e| e.fields.len()).sum();
        if total > MAX_STEP_FIELDS {
            return Err(Error::InvalidArgument(format!(
                "a step's work entries hold at most {MAX_STEP_FIELDS} fields together, not {total}"
            )));
        }
        let scope = next.scope();
        let prefix = self.valkey.prefix();
        let step = &self.plan.step;
        let Some(outbox) = &step.outbox else {
            if !effects.work.is_empty() || effects.event.is_some() {
                return Err(Error::InvalidArgument(format!(
                    "`{}` declares no outbox, so its writes carry family effects only, no work entries or event; \
                     declare `outbox(stream = ...)` on it for those",
                    D::SPEC.type_name
                )));
            }
            return self.effects_write(read, next, effects, op, durability, None, None).await;
        };
        let work_key = outbox.work.render(prefix, &[&scope]).map_err(render_err)?;
        let marker_key = match (&effects.event, &outbox.events) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(Error::InvalidArgument(format!(
                    "`{}` declares no `events` in its outbox, so a step cannot apply an event",
                    D::SPEC.type_name
                )));
            }
            (Some(ev), Some(t)) => Some(marker_key(t, prefix, &scope, ev)?),
        };
        self.effects_write(read, next, effects, op, durability, Some(work_key), marker_key).await
    }

    /// The write of a step or of [`Store::write`], its keys worked out.
    #[allow(clippy::too_many_arguments, reason = "one private call site per kind of write")]
    async fn effects_write(
        &self,
        read: Option<&Stored<D>>,
        next: &D,
        effects: &Effects,
        op: &str,
        durability: &crate::config::Durability,
        work_key: Option<String>,
        marker_key: Option<String>,
    ) -> Result<StepOutcome> {
        let prefix = self.valkey.prefix();
        let step = &self.plan.step;
        // The document key for the effects' slot check; a step without
        // effects (the common one) does not compute its entries twice.
        if !effects.family.is_empty() {
            let doc_key = next.index_entries(prefix)?.key;
            super::effects::check(&effects.family, &self.valkey, &doc_key, D::SPEC.is_sharded())?;
        }
        let args = StepArgs {
            plan: step,
            work_key,
            marker_key,
            marker_ttl_ms: step.outbox.as_ref().map_or(0, |o| o.event_ttl_ms),
            entries: &effects.work,
            effects: &effects.family,
        };
        let applied = match read {
            Some(r) => {
                self.write_inner(
                    next,
                    Expect::Revision(r.revision()),
                    Some(r.state.clone()),
                    Some(r.identity()),
                    op,
                    Some(&args),
                    durability,
                    false,
                )
                .await?
            }
            None => self.write_inner(next, Expect::Create, None, None, op, Some(&args), durability, false).await?,
        };
        Ok(Self::outcome(applied))
    }

    pub(super) fn outcome(applied: Applied) -> StepOutcome {
        match applied {
            Applied::Put(super::PutOutcome::Written { version }) => {
                StepOutcome::Written { version, values: Vec::new() }
            }
            Applied::Stepped { version, values } => StepOutcome::Written { version, values },
            Applied::Put(super::PutOutcome::Conflict { current }) => StepOutcome::Conflict { current },
            Applied::Put(super::PutOutcome::NotFound) => StepOutcome::NotFound,
            Applied::Event(job) => StepOutcome::EventApplied { job },
        }
    }
}

/// The marker key of `ev`: the template's placeholders filled by name, and
/// the event's source given exactly when the template has one (a source
/// left out of the key would merge two sources' events).
fn marker_key(t: &KeyTemplate, prefix: &microdcs_schema::KeyPrefix, scope: &str, ev: &Event) -> Result<String> {
    let has_source = t.has_placeholder("source");
    match (&ev.source, has_source) {
        (Some(_), false) => {
            return Err(Error::InvalidArgument(
                "the event marker key has no `{source}`: give the event as `Event::id(...)`".into(),
            ));
        }
        (None, true) => {
            return Err(Error::InvalidArgument(
                "the event marker key has a `{source}`: give the event as `Event::new(source, id)`".into(),
            ));
        }
        _ => {}
    }
    let values: Vec<&str> = t
        .placeholders()
        .map(|p| match p {
            "scope" => scope,
            "source" => ev.source.as_deref().unwrap_or_default(),
            _ => ev.id.as_str(),
        })
        .collect();
    t.render(prefix, &values).map_err(render_err)
}

impl crate::observe::Outcome for StepOutcome {
    fn outcome(&self) -> &'static str {
        match self {
            StepOutcome::Written { .. } => "written",
            StepOutcome::Conflict { .. } => "conflict",
            StepOutcome::NotFound => "not_found",
            StepOutcome::EventApplied { .. } => "already_applied",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_checked() {
        assert!(WorkEntry::new().field("step", "mix").check().is_ok());
        assert!(WorkEntry::new().field("", "x").check().is_err());
        assert!(WorkEntry::new().field("job", "x").check().is_err(), "set by the script");
        assert!(WorkEntry::new().field("a", 1).field("a", 2).check().is_err());
        let mut big = WorkEntry::new();
        for i in 0..=MAX_ENTRY_FIELDS {
            big = big.field(format!("f{i}"), i);
        }
        assert!(big.check().is_err());
    }

    #[test]
    fn typed_entries() {
        #[derive(Serialize)]
        struct Start<'a> {
            step: &'a str,
            attempt: u32,
            note: Option<&'a str>,
        }
        let e = WorkEntry::from_fields(&Start { step: "mix", attempt: 2, note: None }).unwrap();
        assert_eq!(e.fields(), [("attempt".to_owned(), "2".to_owned()), ("step".to_owned(), "mix".to_owned())]);
        assert!(WorkEntry::from_fields(&3).is_err());
    }

    #[test]
    fn marker_keys() {
        let p = microdcs_schema::KeyPrefix::new("t").unwrap();
        let t = KeyTemplate::parse("sfc:event:{scope}:{source}|{id}").unwrap();
        assert_eq!(marker_key(&t, &p, "s1", &Event::new("line-1", "e-7")).unwrap(), "t:sfc:event:s1:line-1|e-7");
        assert!(marker_key(&t, &p, "s1", &Event::id("e-7")).is_err());
        let t = KeyTemplate::parse("ev:{id}").unwrap();
        assert!(marker_key(&t, &p, "s1", &Event::new("x", "e-7")).is_err());
        assert_eq!(marker_key(&t, &p, "s1", &Event::id("e-7")).unwrap(), "t:ev:e-7");
    }
}
