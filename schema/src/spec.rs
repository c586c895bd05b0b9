//! Document and keyspace specifications.
//!
//! The types borrow (`'a`) so the derive can emit them as `const` items
//! (`DocumentSpec<'static>`) and the checks can run on specs the derive builds
//! from attributes at expansion time.

pub use crate::family::{FamilyKind, FamilySpec, KeyType};

/// Where the value of an index placeholder comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source<'a> {
    /// The document id.
    Id,
    /// The document scope.
    Scope,
    /// A field of the struct, by name.
    Field(&'a str),
    /// A `&self` method of the struct, by name (for derived values such as a
    /// normalized state).
    Method(&'a str),
}

/// The most values one document gives one multi-valued index: each is a
/// key of the write script, which the server holds while it runs.
pub const MAX_EACH_VALUES: usize = 256;

/// The version of the layout text [`DocumentSpec::index_layouts`] writes:
/// an explicit encoding of our own (never a derived `Debug`, which may
/// change with the compiler), so a fingerprint changes only when a layout
/// does. A fingerprint recorded under an earlier encoding reads as changed
/// once, and the next rebuild records the new one.
pub const LAYOUT_VERSION: &str = "layout-v1";

/// A source in layout text: `id`, `scope`, `field:NAME`, `method:NAME`, or
/// `-` for none.
fn source_text(s: Option<Source<'_>>) -> String {
    match s {
        None => "-".to_owned(),
        Some(Source::Id) => "id".to_owned(),
        Some(Source::Scope) => "scope".to_owned(),
        Some(Source::Field(f)) => format!("field:{f}"),
        Some(Source::Method(m)) => format!("method:{m}"),
    }
}

/// A placeholder of an index key and its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding<'a> {
    /// Placeholder name (also the hash field that stores the value).
    pub placeholder: &'a str,
    /// Where the value comes from.
    pub source: Source<'a>,
}

/// A unique or group index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexSpec<'a> {
    /// Index name (`by_order`), used for generated method names.
    pub name: &'a str,
    /// Key template (`jobresponse:byorder:{order}`).
    pub key: &'a str,
    /// One binding per placeholder of `key`.
    pub bindings: &'a [Binding<'a>],
    /// For a conditional group (`member(..., when = running())`): the
    /// `bool` field or method that keeps the id in the set while true. The
    /// hash then stores a marker field named after the index, `1` while
    /// the document is a member, so its membership is known from the hash.
    pub when: Option<Source<'a>>,
    /// For a sorted index (`sorted(..., score = due())`): the numeric (or
    /// `Option`al numeric) field or method that scores the id in a sorted
    /// set; `None` leaves the document out. The hash keeps the score in a
    /// field named after the index.
    pub score: Option<Source<'a>>,
    /// For a bounded sorted index (`max = N`): the set keeps the `N`
    /// highest scores, trimmed by the write that adds one. An entry evicted
    /// so is not a difference for verify.
    pub max: Option<u64>,
    /// A multi-valued index (`each(...)`): its one field or method
    /// placeholder takes each value of a collection, so the document is in
    /// one set per value. The hash keeps the values, encoded and joined by
    /// `|`, in a field named after the index.
    pub each: bool,
}

/// What kind of group index a spec describes: the one reading of its
/// `when`, `score` and `max`, for every place that treats kinds apart (the
/// store's reads and claims, maintenance, the inspector, the generator). A
/// unique index is the other kind; which list holds a spec says that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupKind<'a> {
    /// `group(...)`: a set of ids per value.
    Set,
    /// `member(..., when = ...)`: a set holding the id while `when` is true.
    Member {
        /// The `bool` source.
        when: Source<'a>,
    },
    /// `each(...)`: one set per value of a collection.
    Each,
    /// `sorted(..., score = ...)`: a sorted set scored by `score`.
    Sorted {
        /// The score's source.
        score: Source<'a>,
        /// `max = N`: keeps the `N` highest scores.
        max: Option<u64>,
    },
}

impl GroupKind<'_> {
    /// Whether the hash keeps a marker field named after the index (the
    /// membership of a member index, the score of a sorted one, the values
    /// of a multi-valued one).
    pub const fn has_marker(&self) -> bool {
        !matches!(self, GroupKind::Set)
    }

    /// Whether it is multi-valued (`each(...)`): one set per value.
    pub const fn is_each(&self) -> bool {
        matches!(self, GroupKind::Each)
    }

    /// Whether its keys hold sorted sets.
    pub const fn is_sorted(&self) -> bool {
        matches!(self, GroupKind::Sorted { .. })
    }
}

impl<'a> IndexSpec<'a> {
    /// The kind of this index read as a group (a unique index reads as
    /// [`GroupKind::Set`]: it has no `when` or `score`).
    pub const fn kind(&self) -> GroupKind<'a> {
        match (self.score, self.when) {
            (Some(score), _) => GroupKind::Sorted { score, max: self.max },
            (None, Some(when)) => GroupKind::Member { when },
            (None, None) if self.each => GroupKind::Each,
            (None, None) => GroupKind::Set,
        }
    }

    /// The binding of `placeholder`, if any.
    pub fn binding(&self, placeholder: &str) -> Option<&Binding<'a>> {
        self.bindings.iter().find(|b| b.placeholder == placeholder)
    }
}

/// The per-scope list of a document type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListSpec<'a> {
    /// Key template; its only placeholder is `{scope}`.
    pub key: &'a str,
    /// `Some(source)`: a sorted set scored by that numeric field or method
    /// (stored in the hash as `score`); `None`: a plain set.
    pub score: Option<Source<'a>>,
}

/// The outbox of a type with a workflow step (`outbox(stream = "...",
/// events = "...")`): the stream a step appends its work entries to, and
/// the markers that make each event apply once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxSpec<'a> {
    /// Work stream template; its only placeholder is `{scope}`. Entries are
    /// never trimmed by length: work is removed only once acknowledged. A
    /// shared family: the keyspace declares it (`stream("...")`).
    pub stream: &'a str,
    /// Applied-event marker template (`sfc:event:{scope}:{source}|{id}`):
    /// placeholders among `{scope}`, `{source}` and `{id}` (the event's id,
    /// required). `None`: steps of the type carry no event. A shared
    /// family: the keyspace declares it (`string("...")`).
    pub events: Option<&'a str>,
    /// How long a marker is kept, in milliseconds (an event redelivered
    /// within it is recognised).
    pub event_ttl_ms: u64,
}

/// The default lifetime of an applied-event marker: one hour.
pub const DEFAULT_EVENT_TTL_MS: u64 = 3_600_000;

/// Everything the runtime and the checks need to know about a document type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocumentSpec<'a> {
    /// The Rust type name, for messages.
    pub type_name: &'a str,
    /// The struct's fields in declaration order (their Rust names): the
    /// order serde writes them in, so the positions [`CompactJson`] stores
    /// values at. The schema lock records it (see [`crate::lock`]); empty
    /// in a spec written by hand.
    ///
    /// [`CompactJson`]: https://docs.rs/microdcs-valkey/latest/microdcs_valkey/store/struct.CompactJson.html
    pub fields: &'a [&'a str],
    /// The kind (`jobresponse`): names the nudge channel and change entries.
    pub kind: &'a str,
    /// Document key template: `{id}`, and `{scope}` for ids unique per
    /// scope only ([`DocumentSpec::ids_per_scope`]).
    pub key: &'a str,
    /// Name of the id field.
    pub id_field: &'a str,
    /// Name of the scope field.
    pub scope_field: &'a str,
    /// The per-scope list, if any.
    pub list: Option<ListSpec<'a>>,
    /// Unique indexes: key -> id.
    pub unique: &'a [IndexSpec<'a>],
    /// Group indexes: set of ids per key.
    pub groups: &'a [IndexSpec<'a>],
    /// Change stream template (`changes:{scope}`), shared by document
    /// types; `None` (`changes = none`): writes append no change entry and
    /// publish no nudge, for types nobody consumes.
    pub changes: Option<&'a str>,
    /// Nudge channel template (`nudge:{kind}`), shared by document types.
    pub nudge: &'a str,
    /// Scope registry key (`scopes`), shared by document types.
    pub registry: &'a str,
    /// Default lifetime of a document in milliseconds (`ttl = "30m"`), set
    /// again by every write; `None`: documents live until deleted. A type
    /// with a lifetime has no list and no group index (their entries would
    /// outlive the document); its unique index keys expire with it.
    pub ttl_ms: Option<u64>,
    /// The outbox of the type's workflow step, if it has one.
    pub outbox: Option<OutboxSpec<'a>>,
    /// An unscoped type (`unscoped`): its documents have no scope field
    /// and all share the scope [`UNSCOPED`]; its list is one global set
    /// (no placeholder) and no index may use `{scope}`.
    pub unscoped: bool,
    /// The schema version of this release of the type
    /// (`#[microdcs(schema = N)]`, default 1): raised by the developer when
    /// a release changes what a document holds (a field, an index), so
    /// that a document remembers which schema last wrote it (its stamp,
    /// [`STAMP_FIELD`]) and a writer of an older release never overwrites
    /// it. See [`stamp_text`].
    pub schema: u32,
}

/// The hash field that holds a document's schema stamp: the
/// [`DocumentSpec::schema`] of the release that last wrote it, in decimal
/// ([`stamp_text`]). A type at schema 1 writes no stamp (a hash without
/// one counts as schema 1), so the hashes of types that never raise their
/// schema keep their size.
pub const STAMP_FIELD: &str = "sv";

/// The largest schema version a type may declare: the stamp stays a short
/// decimal text any script compares exactly as a Lua number.
pub const MAX_SCHEMA: u32 = 1_000_000;

/// The stamp a write of schema `schema` stores in [`STAMP_FIELD`]: the
/// version in decimal without sign or leading zero (`2`), `None` for
/// schema 1, which stores none. A persisted format (pinned by a test).
pub fn stamp_text(schema: u32) -> Option<String> {
    (schema > 1).then(|| schema.to_string())
}

/// The schema version a stored stamp names: `None` (no stamp) is 1; a text
/// that is not a version in [`stamp_text`]'s form (or beyond
/// [`MAX_SCHEMA`]) is damage, `Err` with the text.
pub fn parse_stamp(stored: Option<&str>) -> Result<u32, String> {
    let Some(t) = stored else { return Ok(1) };
    let canonical = !t.is_empty() && t.len() <= 7 && t.bytes().all(|b| b.is_ascii_digit()) && !t.starts_with('0');
    match t.parse::<u32>() {
        Ok(n) if canonical && (1..=MAX_SCHEMA).contains(&n) => Ok(n),
        _ => Err(t.to_owned()),
    }
}

/// The scope of every document of an unscoped type: what its hash, the
/// scope registry, its change entries and its nudges carry.
pub const UNSCOPED: &str = "_";

/// Hash fields every document hash has; index fields may not use these names.
pub const RESERVED_FIELDS: &[&str] = &["v", "scope", "op", "doc", "ops", "score", STAMP_FIELD];

/// Which part of a document or keyspace a family comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role<'a> {
    /// The document hash.
    Document,
    /// The per-scope list.
    List,
    /// Unique index number `n`.
    Unique(usize),
    /// Group index number `n`.
    Group(usize),
    /// A family declared in the keyspace, by name.
    Declared(&'a str),
}

/// One key family: a template, its type and its origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family<'a> {
    /// Document type or keyspace that declares it.
    pub owner: &'a str,
    /// Its role there.
    pub role: Role<'a>,
    /// Key template.
    pub key: &'a str,
    /// Type stored at the key.
    pub key_type: KeyType,
    /// Index name for unique and group indexes, family name for declared ones.
    pub name: &'a str,
}

impl<'a> DocumentSpec<'a> {
    /// A spec with the defaults the derive uses: fields `id` and `scope`, no
    /// list, no index, and the runtime's shared change stream, nudge channel
    /// and scope registry. Fill the rest with struct update syntax.
    pub const fn new(type_name: &'a str, kind: &'a str, key: &'a str) -> Self {
        DocumentSpec {
            type_name,
            fields: &[],
            kind,
            key,
            id_field: "id",
            scope_field: "scope",
            list: None,
            unique: &[],
            groups: &[],
            changes: Some(crate::builtin::CHANGES.key),
            nudge: crate::builtin::NUDGE.key,
            registry: crate::builtin::SCOPES.key,
            ttl_ms: None,
            outbox: None,
            unscoped: false,
            schema: 1,
        }
    }

    /// The stand-in the derive emits for a type whose attributes it refused
    /// (beside the errors that fail the build): no kind, no key and no
    /// family, so a keyspace listing the type reports nothing more about it.
    pub const fn refused(type_name: &'a str) -> Self {
        DocumentSpec { changes: None, nudge: "", registry: "", ..DocumentSpec::new(type_name, "", "") }
    }

    /// Whether this is the stand-in of a refused type ([`DocumentSpec::refused`]):
    /// a real spec always has a kind.
    pub const fn is_refused(&self) -> bool {
        self.kind.is_empty()
    }

    /// Whether ids are unique per scope only: the document key holds
    /// `{scope}` beside `{id}` (`task:{scope}:{id}`), so a document is
    /// named by its scope and id together.
    pub fn ids_per_scope(&self) -> bool {
        self.key.contains("{scope}") || self.is_sharded()
    }

    /// Whether the type is sharded by scope: its document key holds the
    /// scope as its hash tag, `{#scope}` (`job:{#scope}:{id}`). Every key
    /// its scripts touch then carries the same tag (the derive refuses a
    /// type where one does not), so one scope's keys share a cluster slot
    /// and the scopes of one keyspace spread over the primaries. Ids are
    /// unique per scope, as for any document key with the scope.
    pub const fn is_sharded(&self) -> bool {
        !self.unscoped && contains(self.key, SCOPE_TAG)
    }

    /// Whether a document's hash holds its scope in the `scope` field. An
    /// unscoped type's documents all have [`UNSCOPED`]: its hashes leave the
    /// field out, which on a small document is the difference between the
    /// server's compact hash and a larger one.
    pub const fn stores_scope(&self) -> bool {
        !self.unscoped
    }

    /// The scope of a stored document from its hash's `scope` field
    /// (`None`: absent): [`UNSCOPED`] for an unscoped type, whose hashes
    /// hold no scope (or, written by an earlier release, `_`). Whether a
    /// hash exists is told by its fields before this.
    pub fn stored_scope<'s>(&self, field: Option<&'s str>) -> Option<&'s str> {
        if self.stores_scope() { field } else { field.or(Some(UNSCOPED)) }
    }

    /// The tombstones this type's deletes leave: a sharded type's carry the
    /// scope as their tag ([`crate::builtin::SHARDED_TOMBSTONES`]), others'
    /// are [`crate::builtin::TOMBSTONES`].
    pub const fn tombstones(&self) -> FamilySpec<'static> {
        if self.is_sharded() { crate::builtin::SHARDED_TOMBSTONES } else { crate::builtin::TOMBSTONES }
    }

    /// Number of key families this document type owns (hash, list,
    /// indexes). Its change stream, outbox stream and event markers are
    /// shared families, which the keyspace declares.
    pub const fn family_count(&self) -> usize {
        if self.is_refused() {
            return 0;
        }
        1 + if self.list.is_some() { 1 } else { 0 } + self.unique.len() + self.groups.len()
    }

    /// Key family number `i` (`0..family_count()`): the document hash, then
    /// the list, the unique indexes and the group indexes.
    pub const fn family(&self, i: usize) -> Family<'a> {
        let owner = self.type_name;
        if i == 0 {
            return Family { owner, role: Role::Document, key: self.key, key_type: KeyType::Hash, name: "document" };
        }
        let mut i = i - 1;
        if let Some(list) = self.list {
            if i == 0 {
                let key_type = if list.score.is_some() { KeyType::SortedSet } else { KeyType::Set };
                return Family { owner, role: Role::List, key: list.key, key_type, name: "list" };
            }
            i -= 1;
        }
        if i < self.unique.len() {
            let ix = &self.unique[i];
            return Family { owner, role: Role::Unique(i), key: ix.key, key_type: KeyType::String, name: ix.name };
        }
        i -= self.unique.len();
        let ix = &self.groups[i];
        let key_type = if ix.kind().is_sorted() { KeyType::SortedSet } else { KeyType::Set };
        Family { owner, role: Role::Group(i), key: ix.key, key_type, name: ix.name }
    }

    /// All key families of this document type.
    pub fn families(&self) -> impl Iterator<Item = Family<'a>> + '_ {
        (0..self.family_count()).map(|i| self.family(i))
    }

    /// Each index's layout: its name, the fingerprints-hash field that
    /// records it (`{kind}:{index}`, the list as `list`) and the text a
    /// change of layout changes (template, kind of index, bindings or score
    /// source, and the document key). One definition, so recording and
    /// checking fingerprints can never name or describe an index apart.
    pub fn index_layouts(&self) -> Vec<IndexLayout<'a>> {
        let mut out = Vec::new();
        if let Some(l) = self.list {
            out.push(IndexLayout {
                index: "list",
                field: format!("{}:list", self.kind),
                text: format!("{LAYOUT_VERSION}|list|{}|score={}|doc={}", l.key, source_text(l.score), self.key),
            });
        }
        for (what, ixs) in [("unique", self.unique), ("group", self.groups)] {
            for ix in ixs {
                let bindings: Vec<String> =
                    ix.bindings.iter().map(|b| format!("{}={}", b.placeholder, source_text(Some(b.source)))).collect();
                let max = ix.max.map_or_else(|| "-".to_owned(), |m| m.to_string());
                // Named only when set, so the texts of the other kinds stay
                // as they were recorded.
                let each = if ix.each { "|each" } else { "" };
                out.push(IndexLayout {
                    index: ix.name,
                    field: format!("{}:{}", self.kind, ix.name),
                    text: format!(
                        "{LAYOUT_VERSION}|{what}|{}|{}|when={}|score={}|max={max}|doc={}{each}",
                        ix.key,
                        bindings.join(","),
                        source_text(ix.when),
                        source_text(ix.score),
                        self.key
                    ),
                });
            }
        }
        out
    }

    /// Where this type's change entries go and how readers learn of them;
    /// `None` for a type with `changes = none`.
    pub const fn feed(&self) -> Option<Feed<'a>> {
        match self.changes {
            Some(stream) => Some(Feed { kind: self.kind, stream, nudge: self.nudge, registry: self.registry }),
            None => None,
        }
    }

    /// The change stream template, or `""` for a type with `changes = none`
    /// (for the constant checks, which compare texts).
    pub(crate) const fn changes_text(&self) -> &'a str {
        match self.changes {
            Some(c) => c,
            None => "",
        }
    }

    /// The outbox stream template, or `""` for a type without an outbox.
    pub(crate) const fn outbox_text(&self) -> &'a str {
        match self.outbox {
            Some(o) => o.stream,
            None => "",
        }
    }

    /// The event marker template, or `""` when steps carry no event.
    pub(crate) const fn events_text(&self) -> &'a str {
        match self.outbox {
            Some(OutboxSpec { events: Some(e), .. }) => e,
            _ => "",
        }
    }

    /// The nudge channel template when writes publish on it, else `""`:
    /// a type without change entries sends no nudge.
    pub(crate) const fn nudge_text(&self) -> &'a str {
        if self.changes.is_some() { self.nudge } else { "" }
    }

    /// Whether writes send their nudge with `SPUBLISH` on a channel per
    /// scope: the nudge template carries the scope as its hash tag
    /// (`nudge:{kind}:{#scope}`), so the channel is in the slot of the
    /// document's scope, as a shard channel in a script must be. Only a
    /// sharded type may (the derive refuses it on others).
    pub const fn shard_nudge(&self) -> bool {
        self.changes.is_some() && contains(self.nudge, SCOPE_TAG)
    }
}

/// The layout of one index of a document type (see
/// [`DocumentSpec::index_layouts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexLayout<'a> {
    /// Index name (`list` for the per-scope list).
    pub index: &'a str,
    /// The field of the fingerprints hash that records it.
    pub field: String,
    /// What its fingerprint is computed over.
    pub text: String,
}

/// A stream per scope that a consumer reads, with the nudge channel that
/// announces new entries and the registry that lists the scopes: everything
/// the poller needs to find and wake a consumer, taken from a spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feed<'a> {
    /// The value of the nudge channel's `{kind}` placeholder.
    pub kind: &'a str,
    /// Stream template; its only placeholder is `{scope}`.
    pub stream: &'a str,
    /// Nudge channel template; its only placeholder is `{kind}`.
    pub nudge: &'a str,
    /// Scope registry key template (a set of scopes, no placeholder).
    pub registry: &'a str,
}

impl<'a> Feed<'a> {
    /// A feed on the runtime's shared nudge channel and scope registry (for
    /// streams that are not a document type's change stream, such as a work
    /// stream).
    pub const fn new(kind: &'a str, stream: &'a str) -> Self {
        Feed { kind, stream, nudge: crate::builtin::NUDGE.key, registry: crate::builtin::SCOPES.key }
    }
}

/// The shared families a document type uses: by default the first three,
/// in the order of its `changes`, `nudge` and `registry` fields; always the
/// tombstones its deletes leave (a sharded type's carry its scope as their
/// tag, and its default change stream is tagged the same way).
const SHARED: [FamilySpec<'static>; 7] = [
    crate::builtin::CHANGES,
    crate::builtin::NUDGE,
    crate::builtin::SCOPES,
    crate::builtin::TOMBSTONES,
    crate::builtin::SHARDED_CHANGES,
    crate::builtin::SHARDED_TOMBSTONES,
    crate::builtin::SHARDED_NUDGE,
];

/// The scope as a hash tag: the mark of a sharded type's keys.
pub const SCOPE_TAG: &str = "{#scope}";

/// Whether `needle` occurs in `hay`, in constant evaluation.
pub(crate) const fn contains(hay: &str, needle: &str) -> bool {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    if n.len() > h.len() {
        return false;
    }
    let mut i = 0;
    while i + n.len() <= h.len() {
        let mut j = 0;
        while j < n.len() && h[i + j] == n[j] {
            j += 1;
        }
        if j == n.len() {
            return true;
        }
        i += 1;
    }
    false
}

/// Byte equality in constant evaluation.
pub(crate) const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

mod keyspace;
pub use keyspace::KeyspaceSpec;

#[cfg(test)]
mod tests;
