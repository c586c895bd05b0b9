//! The per-type plan: scripts, layouts and key templates, derived from
//! `D::SPEC` once per store.

use microdcs_schema::lua::{self, DeleteLayout, PutLayout, StepLayout};
use microdcs_schema::{Document, IndexSpec, KeyTemplate, Source};

use super::types::ReadState;
use crate::client::Valkey;
use crate::error::{Error, Result};
use crate::retry::LuaScript;

/// Where an index placeholder's value comes from at run time.
#[derive(Debug, Clone, Copy)]
pub(super) enum Ph {
    Id,
    Scope,
    /// Position in `Plan::fields`.
    Field(usize),
    /// The value placeholder of a multi-valued index: its values are kept
    /// together in the index's own field.
    Each,
}

#[derive(Debug)]
pub(super) struct IndexPlan {
    pub(super) spec: &'static IndexSpec<'static>,
    pub(super) template: KeyTemplate,
    pub(super) placeholders: Vec<Ph>,
    /// The membership marker of a conditional group (the score of a sorted
    /// index): its position in
    /// `Plan::fields` (a member only while the hash holds it).
    pub(super) marker: Option<usize>,
}

/// The step of a type (its writes with family effects, and with an outbox
/// its work entries and event marker): script, layout and templates.
pub(super) struct StepPlan {
    pub(super) script: LuaScript,
    pub(super) layout: StepLayout,
    /// The outbox, for a type with one.
    pub(super) outbox: Option<OutboxPlan>,
}

/// The outbox of a type: its stream and markers.
pub(super) struct OutboxPlan {
    /// The work stream (`{scope}`).
    pub(super) work: KeyTemplate,
    /// The applied-event markers, when the type declares them.
    pub(super) events: Option<KeyTemplate>,
    /// How long a marker is kept, in milliseconds.
    pub(super) event_ttl_ms: u64,
}

/// Everything derived from `D::SPEC` once per store.
pub(super) struct Plan {
    pub(super) put: LuaScript,
    pub(super) delete: LuaScript,
    pub(super) find: LuaScript,
    pub(super) put_layout: PutLayout,
    pub(super) delete_layout: DeleteLayout,
    pub(super) doc: KeyTemplate,
    /// Where `{scope}` is among the document key's placeholders, for ids
    /// unique per scope (`task:{scope}:{id}`); `None`: ids are global.
    pub(super) doc_scope_at: Option<usize>,
    pub(super) list: Option<KeyTemplate>,
    pub(super) sorted_list: bool,
    /// The change stream, unless the type has `changes = none`.
    pub(super) changes: Option<KeyTemplate>,
    /// The tombstones' template (`{kind}`, `{id}`; a sharded type's also
    /// `{#scope}`).
    pub(super) tomb: KeyTemplate,
    pub(super) registry_key: String,
    /// A sharded type: its scripts leave the registry alone (it lives in
    /// another slot), so a write adds its scope first.
    pub(super) sharded: bool,
    /// The scopes this store has added to the registry, so only a scope's
    /// first write here pays the extra round trip (sharded types only).
    pub(super) registered: std::sync::Mutex<std::collections::HashSet<String>>,
    /// This store's entry in the registry of live writers, and the index
    /// states it has seen.
    pub(super) writer: super::evolution::Writer,
    /// The type's name, for messages.
    pub(super) type_name: &'static str,
    /// The nudge channel: one per kind, or one per scope (a shard channel).
    pub(super) nudge: NudgeChannel,
    /// The distinct index hash fields, in layout order.
    pub(super) fields: Vec<String>,
    /// Per field of `fields`, the indexes that keep it (unique first, then
    /// groups), so checks never parse a template per document.
    #[cfg_attr(
        not(feature = "maintenance"),
        allow(dead_code, reason = "read by verify; kept so the plan is one shape")
    )]
    pub(super) field_users: Vec<Vec<&'static str>>,
    pub(super) unique: Vec<IndexPlan>,
    pub(super) groups: Vec<IndexPlan>,
    pub(super) step: StepPlan,
}

fn parse(t: &str) -> KeyTemplate {
    // Checked at compile time by the derive.
    KeyTemplate::parse(t).unwrap_or_else(|e| panic!("template `{t}` passed the derive but not the parser: {e:?}"))
}

impl Plan {
    /// Refuses, before anything is sent, a type whose scripts do not suit
    /// the handle's placement on a cluster. With an untagged prefix
    /// (`Placement=sharded`) only a sharded type's keys share a slot; any
    /// other type's document, tombstone, change stream and index keys hash
    /// apart, and the cluster would refuse each script with `CROSSSLOT`.
    /// With a tagged prefix (an island, the default placement) a sharded
    /// type's scripts would run, but the prefix's tag decides the slot of
    /// every key, so all its scopes would share one slot: sharding
    /// silently off.
    pub(super) fn check_slots(&self, valkey: &Valkey) -> Result<()> {
        if !valkey.is_cluster() {
            return Ok(());
        }
        let prefix = valkey.prefix();
        let reason = match (self.sharded, prefix.slot().is_some()) {
            (false, false) => "it is not sharded by scope (its document key has no `{#scope}`), so its scripts' \
                               keys span slots, and this handle is on a cluster with an untagged prefix \
                               (Placement=sharded): open only keyspaces with `shard: scope` on it, or open this \
                               type's keyspace on a handle with Placement=island and a tagged prefix (`{island-1}`)"
                .to_owned(),
            (true, true) => format!(
                "it is sharded by scope (`shard: scope`), but this handle's prefix `{prefix}` is one hash tag \
                 (Placement=island), which puts every scope in one slot: sharding would be off. Open its \
                 keyspace on a handle with Placement=sharded and the prefix without braces"
            ),
            _ => return Ok(()),
        };
        Err(Error::Placement { type_name: self.type_name, reason })
    }

    pub(super) fn new<D: Document>(valkey: &Valkey) -> Self {
        let spec = &D::SPEC;
        let prefix = valkey.prefix();
        let fields = lua::all_index_fields(spec);
        let index_plan = |ix: &'static IndexSpec<'static>| {
            let template = parse(ix.key);
            let placeholders = template
                .placeholders()
                .map(|p| match ix.binding(p).map(|b| b.source) {
                    Some(Source::Id) => Ph::Id,
                    Some(Source::Scope) => Ph::Scope,
                    _ if ix.kind().is_each() => Ph::Each,
                    _ => Ph::Field(fields.iter().position(|f| f == p).expect("index field listed")),
                })
                .collect();
            let marker = ix.kind().has_marker().then(|| fields.iter().position(|f| f == ix.name)).flatten();
            IndexPlan { spec: ix, template, placeholders, marker }
        };
        let kind_channel = parse(spec.nudge);
        let doc = parse(spec.key);
        let doc_scope_at = doc.placeholders().position(|p| p == "scope");
        let users_of = |f: &String| {
            spec.unique
                .iter()
                .chain(spec.groups)
                .filter(|ix| lua::index_fields(ix).contains(f))
                .map(|ix| ix.name)
                .collect()
        };
        Plan {
            put: LuaScript::new(D::PUT_SCRIPT),
            delete: LuaScript::new(D::DELETE_SCRIPT),
            find: LuaScript::read_only(D::FIND_SCRIPT),
            put_layout: PutLayout::new(spec),
            delete_layout: DeleteLayout::new(spec),
            doc_scope_at,
            doc,
            list: spec.list.map(|l| parse(l.key)),
            sorted_list: spec.list.is_some_and(|l| l.score.is_some()),
            changes: spec.changes.map(parse),
            tomb: parse(spec.tombstones().key),
            sharded: spec.is_sharded(),
            registered: std::sync::Mutex::default(),
            writer: super::evolution::Writer::new(),
            type_name: spec.type_name,
            registry_key: parse(spec.registry).render(prefix, &[]).expect("no placeholders"),
            nudge: if spec.shard_nudge() {
                NudgeChannel::Scope(kind_channel)
            } else {
                NudgeChannel::Kind(kind_channel.render(prefix, &[spec.kind]).expect("kind is a valid value"))
            },
            unique: spec.unique.iter().map(index_plan).collect(),
            groups: spec.groups.iter().map(index_plan).collect(),
            field_users: fields.iter().map(users_of).collect(),
            fields,
            step: StepPlan {
                script: LuaScript::new(D::STEP_SCRIPT),
                layout: StepLayout::new(spec),
                outbox: spec.outbox.map(|o| OutboxPlan {
                    work: parse(o.stream),
                    events: o.events.map(parse),
                    event_ttl_ms: o.event_ttl_ms,
                }),
            },
        }
    }

    /// The list key of `scope`: an unscoped type's list has no
    /// placeholder, so the scope is not part of it. `None`: no list.
    pub(super) fn list_key(&self, prefix: &microdcs_schema::KeyPrefix, scope: &str) -> Option<Result<String>> {
        Some(super::render_list(self.list.as_ref()?, prefix, scope).map_err(super::render_err))
    }

    /// The document key of `id` (in `scope`, for ids unique per scope).
    ///
    /// A type with ids per scope needs the scope; other types take the id
    /// alone and ignore it.
    pub(super) fn doc_key(&self, prefix: &microdcs_schema::KeyPrefix, scope: Option<&str>, id: &str) -> Result<String> {
        match (self.doc_scope_at, scope) {
            (None, _) => self.doc.render(prefix, &[id]).map_err(super::render_err),
            (Some(_), None) => Err(Error::InvalidArgument(format!(
                "`{}` names a document by its scope and id (its key holds `{{scope}}`): use the `_in` forms, \
                 such as `get_in(scope, id)`",
                self.type_name
            ))),
            (Some(0), Some(scope)) => self.doc.render(prefix, &[scope, id]).map_err(super::render_err),
            (Some(_), Some(scope)) => self.doc.render(prefix, &[id, scope]).map_err(super::render_err),
        }
    }

    /// The id (and the scope, for ids unique per scope) a document key
    /// names; `None` for a key of another shape.
    pub(super) fn doc_of_key(
        &self,
        prefix: &microdcs_schema::KeyPrefix,
        key: &str,
    ) -> Option<(String, Option<String>)> {
        let mut values = self.doc.parse_key(prefix, key)?;
        match self.doc_scope_at {
            None => Some((values.remove(0), None)),
            Some(at) => {
                let scope = values.remove(at);
                Some((values.remove(0), Some(scope)))
            }
        }
    }

    /// The `SCAN` pattern of every document key.
    pub(super) fn doc_pattern(&self, prefix: &microdcs_schema::KeyPrefix) -> Result<String> {
        let any = vec![None; self.doc.placeholders().count()];
        self.doc.scan_pattern(prefix, &any).map_err(super::render_err)
    }

    /// The scope an index query names, for a type with ids per scope (whose
    /// every index key holds `{scope}`); `None` for other types.
    pub(super) fn query_scope<'q>(&self, ix: &IndexPlan, values: &'q [String]) -> Option<&'q str> {
        self.doc_scope_at?;
        ix.placeholders.iter().zip(values).find(|(ph, _)| matches!(ph, Ph::Scope)).map(|(_, v)| v.as_str())
    }

    /// The tombstone of a document: for ids per scope the id is qualified
    /// by its scope (each encoded, so no two pairs share a tombstone).
    pub(super) fn tomb_key(
        &self,
        prefix: &microdcs_schema::KeyPrefix,
        kind: &str,
        scope: &str,
        id: &str,
    ) -> Result<String> {
        match self.doc_scope_at {
            None => self.tomb.render(prefix, &[kind, id]).map_err(super::render_err),
            Some(_) if self.sharded => self.tomb.render(prefix, &[kind, scope, id]).map_err(super::render_err),
            Some(_) => {
                let mut qualified = String::new();
                for (i, v) in [scope, id].into_iter().enumerate() {
                    if i > 0 {
                        qualified.push(':');
                    }
                    microdcs_schema::encode::push_segment(
                        &mut qualified,
                        v,
                        microdcs_schema::builtin::TOMBSTONES.key,
                        "id",
                    )
                    .map_err(Error::Key)?;
                }
                self.tomb.render(prefix, &[kind, &qualified]).map_err(super::render_err)
            }
        }
    }

    pub(super) fn has_indexes(&self) -> bool {
        !self.unique.is_empty() || !self.groups.is_empty()
    }

    /// Unique indexes, then groups: the order of the layouts' indexes.
    pub(super) fn indexes(&self) -> impl Iterator<Item = &IndexPlan> {
        self.unique.iter().chain(&self.groups)
    }

    /// The old keys of an index from a read state: none if not indexed,
    /// else one, or one per value of a multi-valued index (the schema's one
    /// rule for "the entry these stored fields call for").
    pub(super) fn old_keys(&self, ix: &IndexPlan, valkey: &Valkey, id: &str, st: &ReadState) -> Result<Vec<String>> {
        if !st.exists {
            return Ok(Vec::new());
        }
        let scope = st.scope.as_deref().unwrap_or_default();
        let stored = |name: &str| {
            let at = self.fields.iter().position(|f| f == name)?;
            st.fields.get(at).and_then(Option::as_deref)
        };
        match microdcs_schema::stored_entry_keys(ix.spec, &ix.template, valkey.prefix(), id, scope, stored) {
            Ok(k) => Ok(k),
            // We never store a value that cannot be a key segment.
            Err(e) => Err(Error::Corrupt {
                key: self.doc_key(valkey.prefix(), st.scope.as_deref(), id).unwrap_or_else(|_| id.to_owned()),
                reason: format!("stored index field cannot form its key: {e}"),
            }),
        }
    }
}

/// Where a type's writes send their nudge.
pub(super) enum NudgeChannel {
    /// `PUBLISH` on the channel of the kind, rendered once.
    Kind(String),
    /// `SPUBLISH` on the channel of the document's scope: the template,
    /// rendered with the kind and the scope per write.
    Scope(KeyTemplate),
}
