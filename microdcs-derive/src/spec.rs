//! IR -> `microdcs_schema::DocumentSpec`, filling in the derive's defaults.
//!
//! The spec only borrows, and its index specs borrow binding slices, so it is
//! built inside [`with_spec`] from storage that lives on that call's stack.

use microdcs_schema::{Binding, DocumentSpec, IndexSpec, ListSpec, OutboxSpec, Source};

use crate::ast::{self, Document, Index, Value};

/// The texts of a spec, with defaults where the attributes are silent.
pub(crate) struct Texts {
    pub(crate) type_name: String,
    pub(crate) kind: String,
    pub(crate) key: String,
    pub(crate) id_field: String,
    pub(crate) scope_field: String,
    pub(crate) list_key: Option<String>,
    /// `None`: `changes = none`.
    pub(crate) changes: Option<String>,
    pub(crate) nudge: String,
    pub(crate) registry: String,
    /// The outbox stream and event marker templates.
    pub(crate) outbox: Option<(String, Option<String>)>,
}

impl Texts {
    pub(crate) fn of(doc: &Document) -> Self {
        let type_name = doc.ident.to_string();
        // The kind is the type name in lower case, and the document key is
        // the kind and the id.
        let kind = doc.kind.as_ref().map_or_else(|| type_name.to_lowercase(), syn::LitStr::value);
        let key = doc.key.as_ref().map_or_else(|| format!("{kind}:{{id}}"), syn::LitStr::value);
        // Shared families: every document type of a keyspace uses the same
        // ones unless told otherwise.
        // A type sharded by scope (`{#scope}` in its document key) keeps
        // its change entries in its scope's slot by default.
        let sharded = DocumentSpec { unscoped: doc.unscoped.is_some(), ..DocumentSpec::new("", "", &key) }.is_sharded();
        let default_changes =
            if sharded { microdcs_schema::builtin::SHARDED_CHANGES.key } else { microdcs_schema::builtin::CHANGES.key };
        let changes = match &doc.changes {
            None => Some(default_changes.to_owned()),
            Some(crate::attr::ChangesAttr::Template(l)) => Some(l.value()),
            Some(crate::attr::ChangesAttr::None(_)) => None,
        };
        let nudge = doc.nudge.as_ref().map_or_else(|| "nudge:{kind}".to_owned(), syn::LitStr::value);
        let registry = doc.registry.as_ref().map_or_else(|| "scopes".to_owned(), syn::LitStr::value);
        // Without an id or scope field the checks still run, on the names
        // the field would have had.
        let id_field = doc.id.as_ref().map_or_else(|| "id".to_owned(), |f| f.ident.to_string());
        let scope_field = doc.scope.as_ref().map_or_else(|| "scope".to_owned(), |f| f.ident.to_string());
        let list_key = doc.list.as_ref().and_then(|l| l.key.as_ref()).map(syn::LitStr::value);
        let outbox = doc.outbox.as_ref().map(|o| (o.stream.value(), o.events.as_ref().map(syn::LitStr::value)));
        Texts { type_name, kind, key, id_field, scope_field, list_key, changes, nudge, registry, outbox }
    }
}

/// Builds the spec of `doc` and hands it to `f`.
pub(crate) fn with_spec<R>(doc: &Document, texts: &Texts, f: impl FnOnce(&DocumentSpec<'_>) -> R) -> R {
    let unique_bindings: Vec<Vec<Binding<'_>>> = doc.unique.iter().map(bindings).collect();
    let group_bindings: Vec<Vec<Binding<'_>>> = doc.groups.iter().map(bindings).collect();
    let unique = index_specs(&doc.unique, &unique_bindings);
    let groups = index_specs(&doc.groups, &group_bindings);
    // A list without a key was reported; the checks go on without it.
    let list = match (&doc.list, &texts.list_key) {
        (Some(l), Some(key)) => Some(ListSpec { key, score: l.score.as_ref().map(value_source) }),
        _ => None,
    };
    let fields: Vec<&str> = doc.field_names.iter().map(String::as_str).collect();
    let spec = DocumentSpec {
        type_name: &texts.type_name,
        fields: &fields,
        kind: &texts.kind,
        key: &texts.key,
        id_field: &texts.id_field,
        scope_field: &texts.scope_field,
        list,
        unique: &unique,
        groups: &groups,
        changes: texts.changes.as_deref(),
        nudge: &texts.nudge,
        registry: &texts.registry,
        ttl_ms: doc.ttl.as_ref().and_then(|(_, ms)| *ms),
        unscoped: doc.unscoped.is_some(),
        schema: doc.schema,
        outbox: match (&texts.outbox, &doc.outbox) {
            (Some((stream, events)), Some(o)) => {
                Some(OutboxSpec { stream, events: events.as_deref(), event_ttl_ms: o.event_ttl_ms })
            }
            _ => None,
        },
    };
    f(&spec)
}

fn bindings(ix: &Index) -> Vec<Binding<'_>> {
    ix.bindings.iter().map(|b| Binding { placeholder: &b.placeholder, source: source(&b.source) }).collect()
}

fn index_specs<'a>(indexes: &'a [Index], bindings: &'a [Vec<Binding<'a>>]) -> Vec<IndexSpec<'a>> {
    indexes
        .iter()
        .zip(bindings)
        .map(|(ix, b)| IndexSpec {
            name: &ix.name,
            key: &ix.key_text,
            bindings: b,
            when: ix.when.as_ref().map(value_source),
            score: ix.score.as_ref().map(value_source),
            max: ix.max,
            each: ix.each,
        })
        .collect()
}

fn source(s: &ast::Source) -> Source<'_> {
    match s {
        ast::Source::Id => Source::Id,
        ast::Source::Scope => Source::Scope,
        ast::Source::Value(v) => value_source(v),
    }
}

fn value_source(v: &Value) -> Source<'_> {
    match v {
        Value::Field(m, _) => Source::Field(&m.name),
        Value::Method(m) => Source::Method(&m.name),
    }
}

#[cfg(test)]
mod tests {
    use microdcs_schema::{Binding, ListSpec, Source};
    use syn::parse_quote;

    use super::{Texts, with_spec};
    use crate::ast::tests::parse;

    #[test]
    fn defaults_follow_the_type_name() {
        let (doc, errors) = parse(&parse_quote! { struct JobOrder { id: String, scope: String } });
        assert_eq!(errors, Vec::<String>::new());
        with_spec(&doc, &Texts::of(&doc), |spec| {
            assert_eq!(spec.type_name, "JobOrder");
            assert_eq!(spec.kind, "joborder");
            assert_eq!(spec.key, "joborder:{id}");
            assert_eq!((spec.id_field, spec.scope_field), ("id", "scope"));
            assert_eq!((spec.changes, spec.nudge, spec.registry), (Some("changes:{scope}"), "nudge:{kind}", "scopes"));
            assert_eq!(spec.list, None);
            assert!(spec.unique.is_empty() && spec.groups.is_empty());
        });
    }

    #[test]
    fn default_key_uses_the_given_kind() {
        let (doc, _) = parse(&parse_quote! {
            #[microdcs(kind = "order")]
            struct JobOrder { #[microdcs(id)] number: u64, #[microdcs(scope)] area: String }
        });
        with_spec(&doc, &Texts::of(&doc), |spec| {
            assert_eq!((spec.kind, spec.key), ("order", "order:{id}"));
            assert_eq!((spec.id_field, spec.scope_field), ("number", "area"));
        });
    }

    #[test]
    fn attributes_override_defaults() {
        let (doc, errors) = parse(&parse_quote! {
            #[microdcs(
                kind = "item",
                key = "things:{id}",
                list(key = "things:list:{scope}", score = rank()),
                changes = "ch:{scope}",
                nudge = "nu:{kind}",
                registry = "reg",
            )]
            struct Item { id: String, scope: String }
        });
        assert_eq!(errors, Vec::<String>::new());
        with_spec(&doc, &Texts::of(&doc), |spec| {
            assert_eq!((spec.kind, spec.key), ("item", "things:{id}"));
            assert_eq!(spec.list, Some(ListSpec { key: "things:list:{scope}", score: Some(Source::Method("rank")) }));
            assert_eq!((spec.changes, spec.nudge, spec.registry), (Some("ch:{scope}"), "nu:{kind}", "reg"));
        });
    }

    #[test]
    fn index_bindings_become_spec_sources() {
        let (doc, errors) = parse(&parse_quote! {
            #[microdcs(group(key = "o:{scope}:{state}:{code}", state = state_text()))]
            struct Order { id: String, scope: String, code: String }
        });
        assert_eq!(errors, Vec::<String>::new());
        with_spec(&doc, &Texts::of(&doc), |spec| {
            let ix = spec.groups[0];
            assert_eq!((ix.name, ix.key), ("by_code", "o:{scope}:{state}:{code}"));
            assert_eq!(
                ix.bindings,
                [
                    Binding { placeholder: "state", source: Source::Method("state_text") },
                    Binding { placeholder: "scope", source: Source::Scope },
                    Binding { placeholder: "code", source: Source::Field("code") },
                ]
            );
        });
    }

    #[test]
    fn a_list_without_key_is_left_out_of_the_spec() {
        let (doc, errors) = parse(&parse_quote! {
            #[microdcs(list(score = n))]
            struct Order { id: String, scope: String, n: u8 }
        });
        assert_eq!(errors.len(), 1);
        with_spec(&doc, &Texts::of(&doc), |spec| assert_eq!(spec.list, None));
    }
}
