//! What a workflow step carries: a compare-and-set of a document that, in
//! the same generated script, appends work entries to the type's outbox
//! stream and applies an event at most once (an applied-event marker,
//! checked and set); and the write with family effects, the same script
//! without the outbox. Here its vocabulary ([`Effects`], [`WorkEntry`],
//! [`Event`], [`StepOutcome`]) and the checks and keys of its script
//! arguments; the methods that start one are in `request.rs`, the write
//! that runs it in `write.rs`.

use serde::Serialize;

use microdcs_schema::{KeyPrefix, KeyTemplate};

use super::plan::StepPlan;
use super::render_err;
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

/// What a step (or a [`Store::write`](super::Store::write)) does beside storing the document:
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
    pub(super) plan: &'a StepPlan,
    /// The outbox stream, for a type with an outbox.
    pub(super) work_key: Option<String>,
    pub(super) marker_key: Option<String>,
    pub(super) marker_ttl_ms: u64,
    pub(super) entries: &'a [WorkEntry],
    /// The family effects, checked.
    pub(super) effects: &'a [super::effects::FamilyEffect],
}

impl Effects {
    /// What these effects add to the script call of a step of type
    /// `type_name` (step `plan`) in `scope`: the work entries checked, the
    /// outbox stream and event marker keys rendered. Nothing is sent.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a malformed work entry, too many
    /// entries or fields, work or an event for a type without an outbox
    /// (or an event without `events`), an event that does not fit the
    /// marker template; [`Error::Key`] for a key that cannot be rendered.
    pub(super) fn step_args<'a>(
        &'a self,
        plan: &'a StepPlan,
        prefix: &KeyPrefix,
        scope: &str,
        type_name: &str,
    ) -> Result<StepArgs<'a>> {
        if self.work.len() > MAX_WORK_ENTRIES {
            return Err(Error::InvalidArgument(format!(
                "a step appends at most {MAX_WORK_ENTRIES} work entries, not {}",
                self.work.len()
            )));
        }
        for e in &self.work {
            e.check()?;
        }
        let total: usize = self.work.iter().map(|e| e.fields.len()).sum();
        if total > MAX_STEP_FIELDS {
            return Err(Error::InvalidArgument(format!(
                "a step's work entries hold at most {MAX_STEP_FIELDS} fields together, not {total}"
            )));
        }
        let args = |work_key, marker_key, marker_ttl_ms| StepArgs {
            plan,
            work_key,
            marker_key,
            marker_ttl_ms,
            entries: &self.work,
            effects: &self.family,
        };
        let Some(outbox) = &plan.outbox else {
            if !self.work.is_empty() || self.event.is_some() {
                return Err(Error::InvalidArgument(format!(
                    "`{type_name}` declares no outbox, so its writes carry family effects only, no work entries or \
                     event; declare `outbox(stream = ...)` on it for those"
                )));
            }
            return Ok(args(None, None, 0));
        };
        let work_key = outbox.work.render(prefix, &[scope]).map_err(render_err)?;
        let marker_key = match (&self.event, &outbox.events) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(Error::InvalidArgument(format!(
                    "`{type_name}` declares no `events` in its outbox, so a step cannot apply an event"
                )));
            }
            (Some(ev), Some(t)) => Some(marker_key(t, prefix, scope, ev)?),
        };
        Ok(args(Some(work_key), marker_key, outbox.event_ttl_ms))
    }
}

/// The marker key of `ev`: the template's placeholders filled by name, and
/// the event's source given exactly when the template has one (a source
/// left out of the key would merge two sources' events).
fn marker_key(t: &KeyTemplate, prefix: &KeyPrefix, scope: &str, ev: &Event) -> Result<String> {
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
        let p = KeyPrefix::new("t").unwrap();
        let t = KeyTemplate::parse("sfc:event:{scope}:{source}|{id}").unwrap();
        assert_eq!(marker_key(&t, &p, "s1", &Event::new("line-1", "e-7")).unwrap(), "t:sfc:event:s1:line-1|e-7");
        assert!(marker_key(&t, &p, "s1", &Event::id("e-7")).is_err());
        let t = KeyTemplate::parse("ev:{id}").unwrap();
        assert!(marker_key(&t, &p, "s1", &Event::new("x", "e-7")).is_err());
        assert_eq!(marker_key(&t, &p, "s1", &Event::id("e-7")).unwrap(), "t:ev:e-7");
    }
}
