//! The rules across the families of a keyspace, written once as constant
//! functions: `keyspace!` evaluates them at compile time (so a collision is
//! a build error) and [`check_keyspace`] walks the same enumeration at run
//! time to report every problem with its origin.

use super::buckets::{PAIRS_START, PairCursor, Slot, Table};
use super::document::{check_document, parse_at};
use super::error::{Attr, SchemaError, SchemaErrorKind, origin};
use super::message::ConstMessage;
use crate::spec::{DocumentSpec, Family, KeyType, KeyspaceSpec, Role, str_eq};
use crate::template::{KeyTemplate, templates_overlap};

/// Whether two families can hold the same key: their templates can render
/// the same text, and both are keys or both are channels (a channel name
/// never clashes with a key).
pub(crate) const fn conflict(a: &Family<'_>, b: &Family<'_>) -> bool {
    let channels = is_channel(a.key_type) == is_channel(b.key_type);
    channels && templates_overlap(a.key, b.key)
}

const fn is_channel(t: KeyType) -> bool {
    matches!(t, KeyType::Channel)
}

/// The overlap error, reported at the later family and naming both.
pub(crate) fn overlap_error(a: &Family<'_>, b: &Family<'_>) -> SchemaError {
    SchemaError {
        origin: origin(b.owner, Attr::of_role(b.role), None),
        kind: SchemaErrorKind::Overlap {
            first: ConstMessage::new().family(a).as_str().to_owned(),
            second: ConstMessage::new().family(b).as_str().to_owned(),
            fix: ConstMessage::new().separated(super::message::rewritten(a, b)).as_str().to_owned(),
        },
    }
}

/// One problem across a keyspace's families.
#[derive(Debug, Clone, Copy)]
enum Problem<'a> {
    /// Families `a` and `b` (in declaration order) can render the same key.
    Overlap(Family<'a>, Family<'a>),
    /// A document type uses a shared family (change stream, nudge channel,
    /// scope registry) that the keyspace does not declare with that type.
    /// `at` is the document's position in the keyspace.
    /// `name` is what a declaration would call it.
    Undeclared { doc: &'a DocumentSpec<'a>, at: usize, template: &'a str, key_type: KeyType, name: &'static str },
    /// Two document types (in keyspace order) with the same kind: their
    /// change entries would mix, and a new document of one would start from
    /// the other's tombstone.
    DuplicateKind(&'a DocumentSpec<'a>, &'a DocumentSpec<'a>),
    /// A declared family named and typed as a shared one (`changes`,
    /// `nudge`, `scopes`) that no document type uses: usually meant as a
    /// rename of the default, which every type still writes.
    UnusedShared(&'a crate::spec::FamilySpec<'a>),
    /// A document type in a keyspace sharded by scope whose document key
    /// does not carry the scope as its hash tag.
    NotSharded(&'a DocumentSpec<'a>),
}

/// Where the enumeration of problems stands: the candidate pairs of
/// families, then shared reference `r` of document `d`, then pairs of
/// documents (`k1`, `k2`) for their kinds, then declared family `f`.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    pairs: PairCursor,
    d: usize,
    r: usize,
    k1: usize,
    k2: usize,
    f: usize,
    s: usize,
}

const START: Cursor = Cursor { pairs: PAIRS_START, d: 0, r: 0, k1: 0, k2: 1, f: 0, s: 0 };

/// The shared families a declaration may name: the roles documents use.
const SHARED_ROLES: [(&str, KeyType); 3] =
    [("changes", KeyType::Stream), ("nudge", KeyType::Channel), ("scopes", KeyType::Set)];

/// Whether declared family `f` is a shared one (by name and type) that no
/// document type of the keyspace uses.
///
/// A keyspace without document types is left alone: `keyspace!` also
/// checks its declared families before it can see the types.
const fn unused_shared(ks: &KeyspaceSpec<'_>, f: &crate::spec::FamilySpec<'_>) -> bool {
    if ks.documents.is_empty() {
        return false;
    }
    // A refused type's stand-in uses nothing: its real attributes may be
    // the users of the family, so say nothing until it compiles.
    let mut d = 0;
    while d < ks.documents.len() {
        if ks.documents[d].is_refused() {
            return false;
        }
        d += 1;
    }
    let mut r = 0;
    while r < SHARED_ROLES.len() {
        let (name, key_type) = SHARED_ROLES[r];
        if str_eq(f.name, name) && f.key_type as u8 == key_type as u8 {
            let mut d = 0;
            while d < ks.documents.len() {
                if uses(&ks.documents[d], f.key, f.key_type) {
                    return false;
                }
                d += 1;
            }
            return true;
        }
        r += 1;
    }
    false
}

/// The next problem at or after `c`, and the cursor after it. Overlaps come
/// first, ordered by the earlier family and then the later one; only pairs
/// in the same bucket (see [`Table`]) are compared.
const fn next_problem<'a>(ks: &'a KeyspaceSpec<'a>, t: &Table<'_, 'a>, mut c: Cursor) -> Option<(Problem<'a>, Cursor)> {
    while let Some((i, j, next)) = t.next_pair(c.pairs) {
        c.pairs = next;
        let (a, b) = (t.family(i), t.family(j));
        if conflict(&a, &b) {
            return Some((Problem::Overlap(a, b), c));
        }
    }
    while c.d < ks.documents.len() {
        let doc = &ks.documents[c.d];
        // A type whose attributes were refused has its own errors; its
        // stand-in spec takes no part in the keyspace's checks.
        if doc.is_refused() {
            c.d += 1;
            c.r = 0;
            continue;
        }
        let refs = shared_refs(doc);
        while c.r < refs.len() {
            let (template, key_type, name) = refs[c.r];
            c.r += 1;
            // "": not used by this type (`changes = none`, no outbox).
            if !template.is_empty() && !ks.has_family(template, key_type) {
                return Some((Problem::Undeclared { doc, at: c.d, template, key_type, name }, c));
            }
        }
        c.d += 1;
        c.r = 0;
    }
    while c.k1 < ks.documents.len() {
        while c.k2 < ks.documents.len() {
            let (a, b) = (&ks.documents[c.k1], &ks.documents[c.k2]);
            c.k2 += 1;
            if !a.is_refused() && !b.is_refused() && str_eq(a.kind, b.kind) {
                return Some((Problem::DuplicateKind(a, b), c));
            }
        }
        c.k1 += 1;
        c.k2 = c.k1 + 1;
    }
    while c.f < ks.families.len() {
        let f = &ks.families[c.f];
        c.f += 1;
        if unused_shared(ks, f) {
            return Some((Problem::UnusedShared(f), c));
        }
    }
    while ks.shard.is_some() && c.s < ks.documents.len() {
        let doc = &ks.documents[c.s];
        c.s += 1;
        if !doc.is_refused() && !doc.is_sharded() {
            return Some((Problem::NotSharded(doc), c));
        }
    }
    None
}

/// One key of a type that needs the scope tag, as ``what `t` -> `fix` ``,
/// or nothing when it has the tag or is unused (`""`).
const fn push_offender(msg: ConstMessage, what: &str, name: &str, template: &str) -> ConstMessage {
    if template.is_empty() || crate::spec::contains(template, crate::spec::SCOPE_TAG) {
        return msg;
    }
    let msg = msg.push("\n    ").push(what);
    let msg = if name.is_empty() { msg } else { msg.push(" `").push(name).push("`") };
    msg.push(" `").push(template).push("` -> `").tagged(template).push("`")
}

/// Every cross-family problem of a keyspace as one message, for `keyspace!`
/// (which fails the build with it); empty when the keyspace is sound. One
/// problem is one line; several are counted on a first line and listed one
/// per line, so a build shows everything that needs fixing at once instead
/// of one problem per build. Template syntax and per-document rules are
/// checked by the macros with spans; this assumes valid templates.
///
/// `N` is room for the families, at least `ks.family_count()`: constant
/// evaluation cannot allocate, so the caller sizes the storage
/// (`keyspace!` passes the family count).
pub const fn keyspace_problem<const N: usize>(ks: &KeyspaceSpec<'_>) -> ConstMessage {
    let mut slots = [Slot::EMPTY; N];
    let mut order = [0; N];
    let mut pos = [0; N];
    let t = Table::build(ks, &mut slots, &mut order, &mut pos);
    let count = problem_count(ks, &t);
    let mut msg = ConstMessage::new();
    // A sound keyspace, the usual case, needs no second walk.
    if count == 0 {
        return msg;
    }
    if count > 1 {
        msg = msg.push("keyspace `").push(ks.name).push("` has ").push_usize(count).push(" problems:");
    }
    let mut cursor = START;
    while let Some((problem, next)) = next_problem(ks, &t, cursor) {
        cursor = next;
        if is_repeat(ks, &problem) {
            continue;
        }
        if count > 1 {
            msg = msg.push("\n- ");
        }
        msg = describe(msg, ks, &problem);
    }
    msg
}

/// How many lines [`keyspace_problem`] lists.
const fn problem_count<'a>(ks: &'a KeyspaceSpec<'a>, t: &Table<'_, 'a>) -> usize {
    let mut count = 0;
    let mut cursor = START;
    while let Some((problem, next)) = next_problem(ks, t, cursor) {
        cursor = next;
        if !is_repeat(ks, &problem) {
            count += 1;
        }
    }
    count
}

/// Whether an earlier document type uses the same undeclared family: the
/// message names all its users on the first one's line, since one
/// declaration fixes them all.
const fn is_repeat(ks: &KeyspaceSpec<'_>, problem: &Problem<'_>) -> bool {
    let Problem::Undeclared { at, template, key_type, .. } = *problem else { return false };
    let mut d = 0;
    while d < at {
        if uses(&ks.documents[d], template, key_type) {
            return true;
        }
        d += 1;
    }
    false
}

/// The shared families a document type refers to, each with its type and
/// the name a declaration would give it; `""` where the type uses none.
const fn shared_refs<'a>(doc: &DocumentSpec<'a>) -> [(&'a str, KeyType, &'static str); 5] {
    [
        (doc.changes_text(), KeyType::Stream, "changes"),
        (doc.nudge_text(), KeyType::Channel, "nudge"),
        (doc.registry, KeyType::Set, "scopes"),
        (doc.outbox_text(), KeyType::Stream, "work"),
        (doc.events_text(), KeyType::String, "events"),
    ]
}

/// Whether a document type refers to this shared family.
const fn uses(doc: &DocumentSpec<'_>, template: &str, key_type: KeyType) -> bool {
    let refs = shared_refs(doc);
    let mut r = 0;
    while r < refs.len() {
        if refs[r].1 as u8 == key_type as u8 && !refs[r].0.is_empty() && str_eq(refs[r].0, template) {
            return true;
        }
        r += 1;
    }
    false
}

/// Appends one problem's text.
const fn describe(msg: ConstMessage, ks: &KeyspaceSpec<'_>, problem: &Problem<'_>) -> ConstMessage {
    match *problem {
        Problem::NotSharded(doc) if doc.unscoped => msg
            .push("document type `")
            .push(doc.type_name)
            .push("` is unscoped, but keyspace `")
            .push(ks.name)
            .push("` is sharded by scope (`shard: scope`): an unscoped type has no scope to shard by; keep it in a keyspace of its own (an island, with a tagged prefix)"),
        Problem::NotSharded(doc) => {
            let mut msg = msg
                .push("document type `")
                .push(doc.type_name)
                .push("` is in keyspace `")
                .push(ks.name)
                .push("`, sharded by scope (`shard: scope`), but its scripts' keys do not carry the scope as their hash tag, so on a cluster they may live on different primaries; make each per scope:");
            msg = push_offender(msg, "the document key", "", doc.key);
            if let Some(l) = doc.list {
                msg = push_offender(msg, "the list", "", l.key);
            }
            let mut i = 0;
            while i < doc.unique.len() {
                msg = push_offender(msg, "unique index", doc.unique[i].name, doc.unique[i].key);
                i += 1;
            }
            let mut i = 0;
            while i < doc.groups.len() {
                msg = push_offender(msg, "group index", doc.groups[i].name, doc.groups[i].key);
                i += 1;
            }
            msg = push_offender(msg, "the change stream", "", doc.changes_text());
            msg = push_offender(msg, "the outbox stream", "", doc.outbox_text());
            push_offender(msg, "the event marker key", "", doc.events_text())
        }
        Problem::Overlap(a, b) => msg.overlap(&a, &b),
        Problem::DuplicateKind(a, b) => msg
            .push("document types `")
            .push(a.type_name)
            .push("` and `")
            .push(b.type_name)
            .push("` both have kind `")
            .push(a.kind)
            .push("`: their change entries would mix and a new document of one would start from the other's tombstone; give one of them another `kind = \"...\"`"),
        Problem::UnusedShared(f) => {
            let (attr, default) = match f.key_type {
                KeyType::Stream => ("changes", crate::builtin::CHANGES.key),
                KeyType::Channel => ("nudge", crate::builtin::NUDGE.key),
                _ => ("registry", crate::builtin::SCOPES.key),
            };
            msg.push("family `")
                .push(f.name)
                .push(": ")
                .push(f.key_type.type_name())
                .push("(\"")
                .push(f.key)
                .push("\")` is declared but no document type uses it (they use `")
                .push(default)
                .push("` unless told otherwise): to move them, give each type `")
                .push(attr)
                .push(" = \"")
                .push(f.key)
                .push("\"`; otherwise remove the declaration")
        }
        Problem::Undeclared { template, key_type, name, .. } => {
            // Every type using the family, the first one included.
            let mut users = 0;
            let mut d = 0;
            while d < ks.documents.len() {
                if uses(&ks.documents[d], template, key_type) {
                    users += 1;
                }
                d += 1;
            }
            let mut msg = msg.push(if users > 1 { "document types " } else { "document type " });
            let (mut d, mut listed) = (0, 0);
            while d < ks.documents.len() {
                let other = &ks.documents[d];
                if uses(other, template, key_type) {
                    if listed > 0 {
                        msg = msg.push(if listed + 1 == users { " and " } else { ", " });
                    }
                    msg = msg.push("`").push(other.type_name).push("`");
                    listed += 1;
                }
                d += 1;
            }
            msg.push(if users > 1 { " use the " } else { " uses the " })
                .push(key_type.type_name())
                .push(" `")
                .push(template)
                .push("`, which keyspace `")
                .push(ks.name)
                .push("` does not declare; add `")
                .push(name)
                .push(": ")
                .push(key_type.type_name())
                .push("(\"")
                .push(template)
                .push("\")`")
        }
    }
}

/// Checks a whole keyspace: every document, every declared family's syntax,
/// unique names, and every problem of the cross-family enumeration that
/// `keyspace!` evaluates at compile time.
pub fn check_keyspace(ks: &KeyspaceSpec<'_>) -> Vec<SchemaError> {
    let mut errors = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for doc in ks.documents.iter().filter(|d| !d.is_refused()) {
        if names.contains(&doc.type_name) {
            errors.push(SchemaError {
                origin: origin(ks.name, Attr::Document(doc.type_name.to_owned()), None),
                kind: SchemaErrorKind::DuplicateName(doc.type_name.to_owned()),
            });
        }
        names.push(doc.type_name);
        errors.extend(check_document(doc));
    }
    let mut fam_names: Vec<&str> = Vec::new();
    for f in ks.families {
        let attr = Attr::Family(f.name.to_owned());
        if fam_names.contains(&f.name) {
            errors.push(SchemaError {
                origin: origin(ks.name, attr.clone(), None),
                kind: SchemaErrorKind::DuplicateName(f.name.to_owned()),
            });
        }
        fam_names.push(f.name);
        parse_at(f.key, ks.name, &attr, &mut errors);
    }
    let n = ks.family_count();
    let (mut slots, mut order, mut pos) = (vec![Slot::EMPTY; n], vec![0; n], vec![0; n]);
    let t = Table::build(ks, &mut slots, &mut order, &mut pos);
    let mut cursor = START;
    while let Some((problem, next)) = next_problem(ks, &t, cursor) {
        cursor = next;
        match problem {
            Problem::Overlap(a, b) => {
                // Within one document type `check_document` reported it
                // already; a template that does not parse has its own error.
                let same_doc = a.owner == b.owner && !matches!(b.role, Role::Declared(_));
                let valid = KeyTemplate::parse(a.key).is_ok() && KeyTemplate::parse(b.key).is_ok();
                if !same_doc && valid {
                    errors.push(overlap_error(&a, &b));
                }
            }
            Problem::DuplicateKind(a, b) => errors.push(SchemaError {
                origin: origin(b.type_name, Attr::Kind, None),
                kind: SchemaErrorKind::DuplicateKind { kind: b.kind.to_owned(), other: a.type_name.to_owned() },
            }),
            Problem::NotSharded(doc) => errors.push(SchemaError {
                origin: origin(doc.type_name, Attr::Key, None),
                kind: SchemaErrorKind::NotSharded { keyspace: ks.name.to_owned() },
            }),
            Problem::UnusedShared(f) => errors.push(SchemaError {
                origin: origin(ks.name, Attr::Family(f.name.to_owned()), None),
                kind: SchemaErrorKind::UnusedShared { template: f.key.to_owned() },
            }),
            Problem::Undeclared { doc, template, key_type, name, .. } => {
                let attr = match name {
                    "changes" => Attr::Changes,
                    "nudge" => Attr::Nudge,
                    "scopes" => Attr::Registry,
                    _ => Attr::Outbox,
                };
                errors.push(SchemaError {
                    origin: origin(doc.type_name, attr, None),
                    kind: SchemaErrorKind::Undeclared { template: template.to_owned(), key_type },
                });
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests;
