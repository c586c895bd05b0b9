//! The rules across the families of a keyspace, written once as constant
//! functions: `keyspace!` evaluates them at compile time (so a collision is
//! a build error) and [`check_keyspace`] walks the same enumeration at run
//! time to report every problem with its origin.

use super::document::{check_document, parse_at};
use super::error::{Attr, SchemaError, SchemaErrorKind, origin};
use super::message::ConstMessage;
use crate::spec::{DocumentSpec, Family, KeyType, KeyspaceSpec, Role};
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
    Undeclared { doc: &'a DocumentSpec<'a>, template: &'a str, key_type: KeyType },
}

/// Where the enumeration of problems stands: pair `(i, j)` of families,
/// then shared reference `r` of document `d`.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    i: usize,
    j: usize,
    d: usize,
    r: usize,
}

const START: Cursor = Cursor { i: 0, j: 1, d: 0, r: 0 };

/// The next problem at or after `c`, and the cursor after it.
const fn next_problem<'a>(ks: &'a KeyspaceSpec<'a>, mut c: Cursor) -> Option<(Problem<'a>, Cursor)> {
    let n = ks.family_count();
    while c.i < n {
        while c.j < n {
            let (a, b) = (ks.family(c.i), ks.family(c.j));
            c.j += 1;
            if conflict(&a, &b) {
                return Some((Problem::Overlap(a, b), c));
            }
        }
        c.i += 1;
        c.j = c.i + 1;
    }
    while c.d < ks.documents.len() {
        let doc = &ks.documents[c.d];
        let refs = [(doc.changes, KeyType::Stream), (doc.nudge, KeyType::Channel), (doc.registry, KeyType::Set)];
        while c.r < refs.len() {
            let (template, key_type) = refs[c.r];
            c.r += 1;
            if !declares(ks, template, key_type) {
                return Some((Problem::Undeclared { doc, template, key_type }, c));
            }
        }
        c.d += 1;
        c.r = 0;
    }
    None
}

/// Whether the keyspace declares a family with exactly this template and type.
const fn declares(ks: &KeyspaceSpec<'_>, template: &str, key_type: KeyType) -> bool {
    let mut f = 0;
    while f < ks.families.len() {
        let fam = &ks.families[f];
        if str_eq(fam.key, template) && fam.key_type as u8 == key_type as u8 {
            return true;
        }
        f += 1;
    }
    false
}

const fn str_eq(a: &str, b: &str) -> bool {
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

/// The first cross-family problem of a keyspace as a message naming both
/// sides, for `keyspace!` (which fails the build with it); empty when the
/// keyspace is sound. Template syntax and per-document rules are checked by
/// the macros with spans; this assumes valid templates.
pub const fn keyspace_problem(ks: &KeyspaceSpec<'_>) -> ConstMessage {
    match next_problem(ks, START) {
        None => ConstMessage::new(),
        Some((Problem::Overlap(a, b), _)) => ConstMessage::new()
            .push("key families overlap: ")
            .family(&a)
            .push(" and ")
            .family(&b)
            .push(" can render the same key"),
        Some((Problem::Undeclared { doc, template, key_type }, _)) => ConstMessage::new()
            .push("document type `")
            .push(doc.type_name)
            .push("` uses the ")
            .push(key_type.type_name())
            .push(" `")
            .push(template)
            .push("`, which keyspace `")
            .push(ks.name)
            .push("` does not declare"),
    }
}

/// Checks a whole keyspace: every document, every declared family's syntax,
/// unique names, and every problem of the cross-family enumeration that
/// `keyspace!` evaluates at compile time.
pub fn check_keyspace(ks: &KeyspaceSpec<'_>) -> Vec<SchemaError> {
    let mut errors = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for doc in ks.documents {
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
    let mut cursor = START;
    while let Some((problem, next)) = next_problem(ks, cursor) {
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
            Problem::Undeclared { doc, template, key_type } => {
                let attr = match key_type {
                    KeyType::Stream => Attr::Changes,
                    KeyType::Channel => Attr::Nudge,
                    _ => Attr::Registry,
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
