//! The rules for one document type.

use super::error::{Attr, SchemaError, SchemaErrorKind, origin};
use super::keyspace::{conflict, overlap_error};
use crate::spec::{DocumentSpec, Family, RESERVED_FIELDS, Source};
use crate::template::KeyTemplate;

/// Parses a template, turning syntax errors into schema errors.
pub(super) fn parse_at(src: &str, owner: &str, attr: &Attr, errors: &mut Vec<SchemaError>) -> Option<KeyTemplate> {
    match KeyTemplate::parse(src) {
        Ok(t) => Some(t),
        Err(es) => {
            errors.extend(es.into_iter().map(|e| SchemaError {
                origin: origin(owner, attr.clone(), None),
                kind: SchemaErrorKind::Template(e.kind),
            }));
            None
        }
    }
}

/// Checks one document type: template syntax, the id in the document key,
/// list placeholders, index bindings and hash fields, and that its own
/// families are pairwise disjoint.
pub fn check_document(doc: &DocumentSpec<'_>) -> Vec<SchemaError> {
    let mut errors = Vec::new();
    check_kind(doc, &mut errors);
    check_document_key(doc, &mut errors);
    check_list(doc, &mut errors);
    check_indexes(doc, &mut errors);
    check_shared(doc, &mut errors);
    check_ttl(doc, &mut errors);
    check_outbox(doc, &mut errors);
    let families: Vec<_> = doc.families().collect();
    check_disjoint(&families, &mut errors);
    check_tags(doc, &mut errors);
    errors
}

/// The templates of every key a type's scripts touch besides the document
/// hash, each with its attribute, a name for messages and where it sits in
/// KEYS (the put's, the step's for the outbox): the list, the indexes (their
/// new entry), the change stream, the work stream and the event markers.
fn script_keys<'a>(doc: &DocumentSpec<'a>) -> Vec<(Attr, String, &'a str, String)> {
    let put = crate::lua::PutLayout::new(doc);
    let ty = doc.type_name;
    let mut out = Vec::new();
    if let (Some(list), Some(k)) = (doc.list, put.common.list_key) {
        out.push((Attr::List, "the list".to_owned(), list.key, format!("KEYS[{k}] of the `{ty}` put")));
    }
    let all = doc.unique.iter().enumerate().map(|(i, x)| (Attr::Unique(i), x));
    let all = all.chain(doc.groups.iter().enumerate().map(|(i, x)| (Attr::Group(i), x)));
    for ((attr, ix), slots) in all.zip(&put.indexes) {
        let what = format!("the {} index `{}`", if slots.index.unique { "unique" } else { "group" }, ix.name);
        let at = match slots.new_count {
            Some(_) => format!("one of the multi-valued KEYS of the `{ty}` put"),
            None => format!("KEYS[{}] of the `{ty}` put", slots.new.key),
        };
        out.push((attr, what, ix.key, at));
    }
    if let Some(c) = doc.changes {
        let k = put.common.changes_key;
        out.push((Attr::Changes, "the change stream".to_owned(), c, format!("KEYS[{k}] of the `{ty}` put")));
    }
    if let Some(o) = doc.outbox {
        let step = crate::lua::StepLayout::new(doc).outbox.expect("a type with an outbox has its slots");
        let at = format!("KEYS[{}] of the `{ty}` step", step.work_key);
        out.push((Attr::Outbox, "the outbox stream".to_owned(), o.stream, at));
        if let Some(e) = o.events {
            let at = format!("KEYS[{}] of the `{ty}` step", step.marker_key);
            out.push((Attr::OutboxEvents, "the event marker key".to_owned(), e, at));
        }
    }
    out
}

/// Hash tags in a document type: only `{#scope}`, which shards the type.
/// A type is sharded by its document key (`job:{#scope}:{id}`); then every
/// other key its scripts touch must carry the same tag, or a cluster could
/// place it on another primary than the document and refuse the script.
/// Each key without it is its own error, naming the fix.
fn check_tags(doc: &DocumentSpec<'_>, errors: &mut Vec<SchemaError>) {
    use crate::template::Atom;
    let tags = |src: &str| -> Vec<String> {
        KeyTemplate::parse(src)
            .map(|t| {
                t.segments()
                    .iter()
                    .flatten()
                    .filter_map(|a| if let Atom::HashTag(p) = a { Some(p.clone()) } else { None })
                    .collect()
            })
            .unwrap_or_default()
    };
    let sharded = doc.is_sharded();
    let mut all: Vec<(Attr, String, &str, String)> =
        vec![(Attr::Key, "the document key".into(), doc.key, String::new())];
    all.extend(script_keys(doc));
    // The nudge channel may carry the tag (a shard channel) but need not:
    // a `PUBLISH` reaches subscribers from any slot.
    if !doc.nudge_text().is_empty() {
        all.push((Attr::Nudge, "the nudge channel".into(), doc.nudge_text(), String::new()));
    }
    for (attr, what, src, at) in all {
        let found = tags(src);
        for p in found.iter().filter(|p| *p != "scope") {
            // The document key may hold no other placeholder than the id
            // and the scope, so its only tag is the scope's, as is a tag
            // named after the scope field anywhere; another key's tag is
            // meant as a plain placeholder.
            let fix = if matches!(attr, Attr::Key) || *p == doc.scope_field {
                crate::spec::SCOPE_TAG.to_owned()
            } else {
                format!("{{{p}}}")
            };
            errors.push(SchemaError {
                origin: origin(doc.type_name, attr.clone(), Some(p)),
                kind: SchemaErrorKind::HashTagInDocument {
                    tag: p.clone(),
                    fix: src.replacen(&format!("{{#{p}}}"), &fix, 1),
                },
            });
        }
        let tagged = found.iter().any(|p| p == "scope");
        if tagged && !sharded && !doc.unscoped && matches!(attr, Attr::Nudge) {
            errors.push(SchemaError {
                origin: origin(doc.type_name, attr, Some("scope")),
                kind: SchemaErrorKind::SharedTemplate {
                    expected: "the placeholder `{kind}`: a nudge channel per scope (`{#scope}`) is a shard channel in \
                               the slot of the scope's documents, so only a sharded type (document key with \
                               `{#scope}`) has one",
                },
            });
        } else if tagged && !sharded && !doc.unscoped {
            errors.push(SchemaError {
                origin: origin(doc.type_name, attr, Some("scope")),
                kind: SchemaErrorKind::ScopeTagUnsharded { what, key: doc.key.to_owned() },
            });
        } else if sharded && !tagged && !at.is_empty() && KeyTemplate::parse(src).is_ok() {
            errors.push(SchemaError {
                origin: origin(doc.type_name, attr, None),
                kind: SchemaErrorKind::NotCoLocated {
                    what,
                    template: src.to_owned(),
                    at,
                    fix: super::message::ConstMessage::new().tagged(src).as_str().to_owned(),
                },
            });
        }
    }
}

/// The kind names channels and change entries: a lower-case identifier.
fn check_kind(doc: &DocumentSpec<'_>, errors: &mut Vec<SchemaError>) {
    let k = doc.kind.as_bytes();
    let ok = !k.is_empty()
        && k[0].is_ascii_lowercase()
        && k.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_');
    if !ok {
        errors.push(SchemaError {
            origin: origin(doc.type_name, Attr::Kind, None),
            kind: SchemaErrorKind::BadKind(doc.kind.to_owned()),
        });
    }
}

/// The document key contains `{id}` and nothing else.
fn check_document_key(doc: &DocumentSpec<'_>, errors: &mut Vec<SchemaError>) {
    let Some(t) = parse_at(doc.key, doc.type_name, &Attr::Key, errors) else { return };
    if !t.has_placeholder("id") {
        errors
            .push(SchemaError { origin: origin(doc.type_name, Attr::Key, None), kind: SchemaErrorKind::KeyWithoutId });
    }
    // A hash tag other than the scope's is `check_tags`'s to report, with
    // its fix: reported here too, it would be a second error whose advice
    // contradicts the first.
    let tags: Vec<&str> = t
        .segments()
        .iter()
        .flatten()
        .filter_map(|a| if let crate::template::Atom::HashTag(p) = a { Some(p.as_str()) } else { None })
        .collect();
    for p in t.placeholders().filter(|p| *p != "id" && (*p == "scope" || !tags.contains(p))) {
        let kind = match p {
            "scope" if doc.unscoped => SchemaErrorKind::Unscoped("its document key cannot hold `{scope}`".to_owned()),
            "scope" => continue,
            _ => SchemaErrorKind::KeyExtraPlaceholder(p.to_owned()),
        };
        errors.push(SchemaError { origin: origin(doc.type_name, Attr::Key, Some(p)), kind });
    }
    // Ids unique per scope: an index entry holds an id, so its key must
    // name the scope for the entry to name a document.
    // (A sharded type's keys need the scope as their tag: `check_tags`
    // names each key without it, with the fix.)
    if t.has_placeholder("scope") && !doc.unscoped && !doc.is_sharded() {
        let all = doc.unique.iter().enumerate().map(|(i, x)| (Attr::Unique(i), x));
        for (attr, ix) in all.chain(doc.groups.iter().enumerate().map(|(i, x)| (Attr::Group(i), x))) {
            if KeyTemplate::parse(ix.key).is_ok_and(|t| !t.has_placeholder("scope")) {
                errors.push(SchemaError {
                    origin: origin(doc.type_name, attr, None),
                    kind: SchemaErrorKind::IndexWithoutScope,
                });
            }
        }
    }
}

/// The list key has exactly `{scope}` (no placeholder for an unscoped type).
fn check_list(doc: &DocumentSpec<'_>, errors: &mut Vec<SchemaError>) {
    let Some(list) = doc.list else { return };
    let Some(t) = parse_at(list.key, doc.type_name, &Attr::List, errors) else { return };
    if doc.unscoped {
        for p in t.placeholders() {
            errors.push(SchemaError {
                origin: origin(doc.type_name, Attr::List, Some(p)),
                kind: SchemaErrorKind::Unscoped(format!("its list key takes no placeholder, not `{{{p}}}`")),
            });
        }
        return;
    }
    if !t.has_placeholder("scope") {
        errors.push(SchemaError {
            origin: origin(doc.type_name, Attr::List, None),
            kind: SchemaErrorKind::ListPlaceholder(None),
        });
    }
    for p in t.placeholders().filter(|p| *p != "scope") {
        errors.push(SchemaError {
            origin: origin(doc.type_name, Attr::List, Some(p)),
            kind: SchemaErrorKind::ListPlaceholder(Some(p.to_owned())),
        });
    }
}

/// Index bindings cover every placeholder, name no missing one, and the hash
/// fields they store (one per field or method placeholder) do not collide.
fn check_indexes(doc: &DocumentSpec<'_>, errors: &mut Vec<SchemaError>) {
    let mut names: Vec<&str> = Vec::new();
    let mut fields: Vec<(&str, Source<'_>, &str)> = Vec::new();
    let all = doc.unique.iter().enumerate().map(|(i, x)| (Attr::Unique(i), x));
    let all = all.chain(doc.groups.iter().enumerate().map(|(i, x)| (Attr::Group(i), x)));
    for (attr, ix) in all {
        let err = |kind, p: Option<&str>| SchemaError { origin: origin(doc.type_name, attr.clone(), p), kind };
        if names.contains(&ix.name) {
            errors.push(err(SchemaErrorKind::DuplicateName(ix.name.to_owned()), None));
        }
        names.push(ix.name);
        let Some(t) = parse_at(ix.key, doc.type_name, &attr, errors) else { continue };
        for p in t.placeholders() {
            if ix.binding(p).is_none() {
                errors.push(err(SchemaErrorKind::Unbound(p.to_owned()), Some(p)));
            }
        }
        for b in ix.bindings {
            if doc.unscoped && b.source == Source::Scope {
                errors.push(err(
                    SchemaErrorKind::Unscoped(format!("an index cannot use its scope (`{{{}}}`)", b.placeholder)),
                    Some(b.placeholder),
                ));
                continue;
            }
            if !t.has_placeholder(b.placeholder) {
                errors.push(err(SchemaErrorKind::UnusedBinding(b.placeholder.to_owned()), Some(b.placeholder)));
                continue;
            }
            // A multi-valued index stores its values in its own field (the
            // marker check below), never under its placeholder's name.
            if matches!(b.source, Source::Id | Source::Scope) || ix.each {
                continue;
            }
            if RESERVED_FIELDS.contains(&b.placeholder) {
                errors.push(err(SchemaErrorKind::ReservedField(b.placeholder.to_owned()), Some(b.placeholder)));
            }
            match fields.iter().find(|(f, _, _)| *f == b.placeholder) {
                Some((_, src, other)) if *src != b.source => errors.push(err(
                    SchemaErrorKind::FieldClash { field: b.placeholder.to_owned(), other: (*other).to_owned() },
                    Some(b.placeholder),
                )),
                Some(_) => {}
                None => fields.push((b.placeholder, b.source, ix.name)),
            }
        }
    }
    check_each(doc, errors);
    // A conditional group keeps its membership marker in the hash field
    // named after the index: it must not be a reserved field or another
    // index's value field.
    for (i, ix) in doc.groups.iter().enumerate() {
        if !ix.kind().has_marker() {
            continue;
        }
        let err = |kind| SchemaError { origin: origin(doc.type_name, Attr::Group(i), None), kind };
        if RESERVED_FIELDS.contains(&ix.name) {
            errors.push(err(SchemaErrorKind::ReservedField(ix.name.to_owned())));
        }
        if let Some((_, _, other)) = fields.iter().find(|(f, _, _)| *f == ix.name) {
            errors.push(err(SchemaErrorKind::FieldClash { field: ix.name.to_owned(), other: (*other).to_owned() }));
        }
    }
}

/// A multi-valued index has exactly one value placeholder (a field or a
/// method, which gives the collection), besides at most `{scope}`: its
/// hash field keeps the values, from which every key follows. It holds no
/// `{id}` (a set per id would hold one id), and it is a group, never
/// unique (one key per value cannot name one holder).
fn check_each(doc: &DocumentSpec<'_>, errors: &mut Vec<SchemaError>) {
    for (i, ix) in doc.unique.iter().enumerate().filter(|(_, ix)| ix.each) {
        errors.push(SchemaError {
            origin: origin(doc.type_name, Attr::Unique(i), None),
            kind: SchemaErrorKind::EachMisuse(format!(
                "unique index `{}` cannot be multi-valued: declare it with `each(...)`, a group",
                ix.name
            )),
        });
    }
    for (i, ix) in doc.groups.iter().enumerate().filter(|(_, ix)| ix.each) {
        let err = |why: String, p: Option<&str>| SchemaError {
            origin: origin(doc.type_name, Attr::Group(i), p),
            kind: SchemaErrorKind::EachMisuse(why),
        };
        if ix.when.is_some() || ix.score.is_some() {
            errors.push(err(format!("`each` index `{}` takes no `when` or `score`", ix.name), None));
        }
        let Ok(t) = KeyTemplate::parse(ix.key) else { continue };
        let values: Vec<&str> = t
            .placeholders()
            .filter(|p| matches!(ix.binding(p).map(|b| b.source), Some(Source::Field(_) | Source::Method(_))))
            .collect();
        if t.has_placeholder("id") {
            errors.push(err(
                format!(
                    "`each` index `{}` cannot hold `{{id}}`: it keeps one set per value, holding the ids of the \
                     documents that have it",
                    ix.name
                ),
                Some("id"),
            ));
        }
        if values.len() != 1 {
            errors.push(err(
                format!(
                    "`each` index `{}` takes exactly one value placeholder, bound to a collection field or method \
                     (`tag = tags`), besides `{{scope}}`; `{}` has {}",
                    ix.name,
                    ix.key,
                    values.len()
                ),
                values.get(1).copied(),
            ));
        }
    }
}

/// A lifetime is longer than zero, and a type with one keeps no entries
/// that would outlive its documents (a set member cannot expire with the
/// hash that claims it).
fn check_ttl(doc: &DocumentSpec<'_>, errors: &mut Vec<SchemaError>) {
    let Some(ttl) = doc.ttl_ms else { return };
    let err = |attr, kind| SchemaError { origin: origin(doc.type_name, attr, None), kind };
    if ttl == 0 {
        errors.push(err(Attr::Ttl, SchemaErrorKind::ZeroTtl));
    }
    if doc.list.is_some() {
        errors.push(err(Attr::List, SchemaErrorKind::TtlWithEntries("a list".into())));
    }
    for (i, g) in doc.groups.iter().enumerate() {
        errors.push(err(Attr::Group(i), SchemaErrorKind::TtlWithEntries(format!("group index `{}`", g.name))));
    }
}

/// The outbox stream has exactly `{scope}` (work is per scope, like
/// changes); an event marker names the event by `{id}`, optionally with its
/// `{source}` and the `{scope}`; markers live longer than zero.
fn check_outbox(doc: &DocumentSpec<'_>, errors: &mut Vec<SchemaError>) {
    let Some(o) = doc.outbox else { return };
    let err = |kind, p: Option<&str>| SchemaError { origin: origin(doc.type_name, Attr::Outbox, p), kind };
    if let Some(t) = parse_at(o.stream, doc.type_name, &Attr::Outbox, errors)
        && !t.placeholders().eq(["scope"])
    {
        errors.push(err(SchemaErrorKind::SharedTemplate { expected: "the placeholder `{scope}`" }, None));
    }
    if let Some(events) = o.events
        && let Some(t) = parse_at(events, doc.type_name, &Attr::OutboxEvents, errors)
    {
        let events_err =
            |kind, p: Option<&str>| SchemaError { origin: origin(doc.type_name, Attr::OutboxEvents, p), kind };
        if !t.has_placeholder("id") {
            errors.push(events_err(SchemaErrorKind::EventPlaceholder(None), None));
        }
        for p in t.placeholders().filter(|p| !["scope", "source", "id"].contains(p)) {
            errors.push(events_err(SchemaErrorKind::EventPlaceholder(Some(p.to_owned())), Some(p)));
        }
    }
    if o.event_ttl_ms == 0 {
        errors.push(err(SchemaErrorKind::ZeroTtl, None));
    }
    if o.event_ttl_ms > crate::lua::MAX_LIFETIME_MS {
        errors.push(err(SchemaErrorKind::OutboxMisuse("`event_ttl` may be at most 100 years".into()), None));
    }
    // Work in the change stream would be trimmed by its length cap and
    // read by change consumers as changes.
    if doc.changes == Some(o.stream) {
        errors.push(err(
            SchemaErrorKind::OutboxMisuse(format!(
                "the outbox stream `{}` is the type's change stream: work would be trimmed with the changes",
                o.stream
            )),
            None,
        ));
    }
}

/// `changes` uses exactly `{scope}`, `nudge` exactly `{kind}`, `registry` none.
fn check_shared(doc: &DocumentSpec<'_>, errors: &mut Vec<SchemaError>) {
    let rules: [(Option<&str>, Attr, &[&str], &'static str); 3] = [
        (doc.changes, Attr::Changes, &["scope"], "the placeholder `{scope}`"),
        (
            doc.changes.map(|_| doc.nudge),
            Attr::Nudge,
            &["kind"],
            "the placeholder `{kind}` (a sharded type may add the scope as hash tag, `nudge:{kind}:{#scope}`, for \
             one channel per scope sent with SPUBLISH)",
        ),
        (Some(doc.registry), Attr::Registry, &[], "no placeholder"),
    ];
    for (src, attr, want, expected) in rules {
        // Without change entries the type uses neither stream nor channel.
        let Some(src) = src else { continue };
        let Some(t) = parse_at(src, doc.type_name, &attr, errors) else { continue };
        // A nudge per scope: `{#scope}` after `{kind}`. On an unsharded
        // type `check_tags` names the tag; one error is enough.
        let per_scope = matches!(attr, Attr::Nudge)
            && !doc.unscoped
            && t.placeholders().eq(["kind", "scope"])
            && crate::spec::contains(src, crate::spec::SCOPE_TAG);
        if !per_scope && !t.placeholders().eq(want.iter().copied()) {
            errors.push(SchemaError {
                origin: origin(doc.type_name, attr, None),
                kind: SchemaErrorKind::SharedTemplate { expected },
            });
        }
    }
}

/// No two families of one document type can render the same key (the rule
/// of [`conflict`]). Families whose template does not parse are skipped:
/// their syntax error is reported on its own.
fn check_disjoint(families: &[Family<'_>], errors: &mut Vec<SchemaError>) {
    let valid: Vec<&Family<'_>> = families.iter().filter(|f| KeyTemplate::parse(f.key).is_ok()).collect();
    for (i, a) in valid.iter().enumerate() {
        for b in &valid[i + 1..] {
            if conflict(a, b) {
                errors.push(overlap_error(a, b));
            }
        }
    }
}
