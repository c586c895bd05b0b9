//! What a schema problem is and where it comes from.

use std::fmt;

use crate::spec::{KeyType, RESERVED_FIELDS, Role};
use crate::template::TemplateErrorKind;

/// Which attribute of a document type (or entry of a keyspace) a problem is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attr {
    /// `kind = ...`
    Kind,
    /// `key = ...` (the document key)
    Key,
    /// `list(...)`
    List,
    /// `unique(...)` number n.
    Unique(usize),
    /// `group(...)` number n.
    Group(usize),
    /// `changes = ...`
    Changes,
    /// `nudge = ...`
    Nudge,
    /// `registry = ...`
    Registry,
    /// `ttl = ...`
    Ttl,
    /// `outbox(...)`, its `stream` template.
    Outbox,
    /// The `events` template of `outbox(...)`.
    OutboxEvents,
    /// A family declared in a keyspace, by name.
    Family(String),
    /// A document type listed in a keyspace, by type name.
    Document(String),
}

impl Attr {
    pub(crate) fn of_role(role: Role<'_>) -> Attr {
        match role {
            Role::Document => Attr::Key,
            Role::List => Attr::List,
            Role::Unique(i) => Attr::Unique(i),
            Role::Group(i) => Attr::Group(i),
            Role::Declared(n) => Attr::Family(n.to_owned()),
        }
    }
}

/// Where a problem comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// Document type or keyspace name.
    pub owner: String,
    /// Attribute.
    pub attr: Attr,
    /// Placeholder concerned, if any.
    pub placeholder: Option<String>,
}

/// What is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaErrorKind {
    /// Template syntax.
    Template(TemplateErrorKind),
    /// The kind is not a lower-case identifier.
    BadKind(String),
    /// The document key has no `{id}`.
    KeyWithoutId,
    /// The document key uses a placeholder other than `{id}`.
    KeyExtraPlaceholder(String),
    /// The list key uses a placeholder other than `{scope}`, or lacks `{scope}`.
    ListPlaceholder(Option<String>),
    /// A placeholder has no binding.
    Unbound(String),
    /// A binding names a placeholder the template does not have.
    UnusedBinding(String),
    /// An index placeholder would be stored in a reserved hash field.
    ReservedField(String),
    /// Two indexes store different values in the same hash field.
    FieldClash {
        /// Hash field name.
        field: String,
        /// The other index.
        other: String,
    },
    /// Two families can render the same key.
    Overlap {
        /// Description of the first family.
        first: String,
        /// Description of the second family.
        second: String,
        /// A rewrite of one of them that separates the two.
        fix: String,
    },
    /// A shared template (`changes`, `nudge`, `registry`) has the wrong placeholders.
    SharedTemplate {
        /// Which placeholders it must have.
        expected: &'static str,
    },
    /// A document family uses a hash-tag placeholder other than `{#scope}`
    /// (only declared families may).
    HashTagInDocument {
        /// The tag's name (`tenant` for `{#tenant}`).
        tag: String,
        /// The template written with the fix (`order:{#scope}:{id}`).
        fix: String,
    },
    /// Two families or indexes share a name.
    DuplicateName(String),
    /// A key of a type that is not sharded (no `{#scope}` in its document
    /// key) carries the scope as its tag: it would live in another slot
    /// than the document. Names the key and the document key.
    ScopeTagUnsharded {
        /// Which key ("the list", "`by_order`").
        what: String,
        /// The document key template.
        key: String,
    },
    /// A key a sharded type's script touches lacks the scope tag: on a
    /// cluster it may live on another primary than the document.
    NotCoLocated {
        /// Which key ("the list", "`by_order`").
        what: String,
        /// Its template.
        template: String,
        /// Where it is in the script (`KEYS[5] of the JobResponse put`).
        at: String,
        /// The template made per scope.
        fix: String,
    },
    /// A document type in a keyspace sharded by scope is not sharded itself.
    NotSharded {
        /// The keyspace.
        keyspace: String,
    },
    /// A document type with a lifetime (`ttl`) has a list or group index,
    /// whose entries would outlive its documents; names what it has.
    TtlWithEntries(String),
    /// A lifetime of zero.
    ZeroTtl,
    /// An unscoped type uses `{scope}` (in an index), or its list key has
    /// a placeholder (the string names where).
    Unscoped(String),
    /// A type with ids per scope (`{scope}` in its key) has an index
    /// without `{scope}`: its entries hold ids, which name no document
    /// without the scope.
    IndexWithoutScope,
    /// An outbox that cannot work (its stream is the change stream, its
    /// marker lifetime too long); says why.
    OutboxMisuse(String),
    /// A multi-valued index (`each(...)`) that cannot work (not exactly
    /// one value placeholder, an `{id}`, unique); says why.
    EachMisuse(String),
    /// The event marker template uses a placeholder other than `{scope}`,
    /// `{source}` and `{id}` (`Some`), or lacks `{id}` (`None`).
    EventPlaceholder(Option<String>),
    /// A document refers to a shared family the keyspace does not declare.
    Undeclared {
        /// Template referred to.
        template: String,
        /// Expected type.
        key_type: KeyType,
    },
    /// Two document types of one keyspace share a kind (names the other).
    DuplicateKind {
        /// The kind.
        kind: String,
        /// The other type with it.
        other: String,
    },
    /// A declared shared family (change stream, nudge channel, scope
    /// registry) that no document type uses.
    UnusedShared {
        /// Its template.
        template: String,
    },
}

/// A problem with a spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// Where.
    pub origin: Origin,
    /// What.
    pub kind: SchemaErrorKind,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use SchemaErrorKind as K;
        match &self.kind {
            // Two templates share the outbox attribute: say which is wrong.
            K::Template(t) if self.origin.attr == Attr::Outbox => write!(f, "outbox `stream`: {t}"),
            K::Template(t) if self.origin.attr == Attr::OutboxEvents => write!(f, "outbox `events`: {t}"),
            K::Template(t) => write!(f, "{t}"),
            K::BadKind(k) => write!(f, "kind `{k}` must be a lower-case identifier ([a-z][a-z0-9_]*)"),
            K::KeyWithoutId => write!(f, "the document key must contain `{{id}}`"),
            K::KeyExtraPlaceholder(p) => write!(
                f,
                "the document key may only use `{{id}}` (and `{{scope}}` for ids unique per scope), not `{{{p}}}`"
            ),
            K::ListPlaceholder(Some(p)) => {
                write!(f, "the list key may only use `{{scope}}`, not `{{{p}}}` (one list per scope)")
            }
            K::ListPlaceholder(None) => write!(f, "the list key must contain `{{scope}}` (one list per scope)"),
            K::Unbound(p) => write!(f, "placeholder `{{{p}}}` is not bound to a field or method"),
            K::UnusedBinding(p) => write!(f, "`{p}` is bound but the key template has no `{{{p}}}`"),
            K::ReservedField(p) => write!(
                f,
                "placeholder `{{{p}}}` would be stored in the reserved hash field `{p}` (reserved: {})",
                RESERVED_FIELDS.join(", ")
            ),
            K::FieldClash { field, other } => write!(
                f,
                "placeholder `{{{field}}}` is bound to a different source in index `{other}`; both would be stored in hash field `{field}`"
            ),
            // The text of `ConstMessage::overlap`, which `keyspace!` reports.
            K::Overlap { first, second, fix } => write!(
                f,
                "key families overlap: {first} and {second}{}{}{fix}`",
                super::message::OVERLAP_RULE,
                super::message::OVERLAP_FIX
            ),
            K::SharedTemplate { expected } => write!(f, "this template must use exactly {expected}"),
            K::DuplicateName(n) => write!(f, "the name `{n}` is used twice"),
            K::HashTagInDocument { tag, fix } => write!(
                f,
                "hash-tag placeholder `{{#{tag}}}` in a document family: a document type may only be sharded by its \
                 scope, which every template names `{{scope}}` (`{{#scope}}` as the tag) whatever its field is \
                 called; write `{fix}`"
            ),
            K::ScopeTagUnsharded { what, key } => write!(
                f,
                "{what} carries the scope as its hash tag (`{{#scope}}`) but the document key `{key}` does not: the \
                 type is sharded by its document key; write it with `{{#scope}}` too (`kind:{{#scope}}:{{id}}`), or use \
                 `{{scope}}` here"
            ),
            K::NotCoLocated { what, template, at, fix } => write!(
                f,
                "{what} `{template}` is {at} and has no `{{#scope}}`: on a cluster it may live on another primary than \
                 the document, which refuses the script; make it per scope: `{fix}`"
            ),
            K::NotSharded { keyspace } => write!(
                f,
                "keyspace `{keyspace}` is sharded by scope (`shard: scope`), so every key of this type's scripts must \
                 carry the scope as its hash tag: write the document key as `kind:{{#scope}}:{{id}}` (and tag the list, \
                 the indexes and the streams the same way)"
            ),
            K::TtlWithEntries(what) => write!(
                f,
                "a document type with `ttl` cannot have {what}: its entries would outlive the documents, \
                 which expire on their own (unique indexes may stay: their keys expire with the document); for \
                 data that must stay ordered and expire, drop `ttl`, score a sorted index by the expiry time \
                 (`sorted(key = \"...:expiry:{{scope}}\", score = expires_at(), name = \"expiry\")`) and run an \
                 `ExpirySweep`, which deletes expired documents through the delete script"
            ),
            K::ZeroTtl => write!(f, "`ttl` must be longer than zero"),
            K::OutboxMisuse(why) => write!(f, "{why}"),
            K::EachMisuse(why) => write!(f, "{why}"),
            K::IndexWithoutScope => write!(
                f,
                "the document key holds `{{scope}}` (ids unique per scope), so this index key needs `{{scope}}` \
                 too: an entry holds an id, and an id names a document only within its scope"
            ),
            K::Unscoped(what) => write!(
                f,
                "the type is `unscoped` (its documents have no scope, its list is one global set), \
                 so {what}"
            ),
            K::EventPlaceholder(Some(p)) => write!(
                f,
                "the event marker key may only use `{{scope}}`, `{{source}}` and `{{id}}` (the event's), not `{{{p}}}`"
            ),
            K::EventPlaceholder(None) => {
                write!(f, "the event marker key must contain `{{id}}` (the event's id: one marker per event)")
            }
            K::Undeclared { template, key_type } => write!(
                f,
                "the keyspace does not declare the {} family `{template}` that this document type uses",
                key_type.type_name()
            ),
            K::DuplicateKind { kind, other } => write!(
                f,
                "kind `{kind}` is also the kind of `{other}`: their change entries and tombstones would mix; give one another `kind = \"...\"`"
            ),
            K::UnusedShared { template } => write!(
                f,
                "`{template}` is declared but no document type uses it; declare the family on the types instead (or remove it)"
            ),
        }
    }
}

impl std::error::Error for SchemaError {}

pub(crate) fn origin(owner: &str, attr: Attr, placeholder: Option<&str>) -> Origin {
    Origin { owner: owner.to_owned(), attr, placeholder: placeholder.map(str::to_owned) }
}
