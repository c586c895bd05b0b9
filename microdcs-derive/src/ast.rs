//! The derive input as an owned IR: the struct's fields and attributes with
//! every index binding resolved. It keeps the syn nodes (and so their spans)
//! so that later errors and generated code can point at what the user wrote.

use proc_macro2::Span;
use syn::{Data, DeriveInput, Fields, Ident, LitStr, Type};

use microdcs_schema::KeyTemplate;

use crate::attr::{Bind, Container, FieldAttr, IndexAttr, ListAttr};
use crate::ctxt::Ctxt;

/// A document type as far as it could be understood; when anything was wrong
/// the problem is in the `Ctxt` and parts of this may be missing.
pub(crate) struct Document {
    pub(crate) ident: Ident,
    /// `None` when the struct has no id field (reported).
    pub(crate) id: Option<Field>,
    /// `None` when the struct has no scope field (reported).
    pub(crate) scope: Option<Field>,
    pub(crate) kind: Option<LitStr>,
    pub(crate) key: Option<LitStr>,
    pub(crate) list: Option<List>,
    /// Indexes without a key were reported and are left out, so positions
    /// here are the positions the schema checks report.
    pub(crate) unique: Vec<Index>,
    pub(crate) groups: Vec<Index>,
    pub(crate) changes: Option<crate::attr::ChangesAttr>,
    pub(crate) nudge: Option<LitStr>,
    pub(crate) registry: Option<LitStr>,
    /// `ttl = "30m"` and its milliseconds (`None` if the text was refused,
    /// which was reported).
    pub(crate) ttl: Option<(LitStr, Option<u64>)>,
    /// `outbox(...)` with a stream (one without was reported), and the
    /// marker lifetime in milliseconds (the default when not given).
    pub(crate) outbox: Option<Outbox>,
    /// `unscoped`: no scope field; every document has the scope `UNSCOPED`.
    pub(crate) unscoped: Option<Span>,
    /// The struct's field names in declaration order (unraw, as serde
    /// names them): the positions `CompactJson` stores values at.
    pub(crate) field_names: Vec<String>,
    /// `schema = N`: the release's schema version (1 when not given, or
    /// when the number was refused, which was reported).
    pub(crate) schema: u32,
}

/// A type's outbox.
pub(crate) struct Outbox {
    pub(crate) span: Span,
    pub(crate) stream: LitStr,
    pub(crate) events: Option<LitStr>,
    pub(crate) event_ttl_ms: u64,
}

/// A named field of the struct.
#[derive(Clone)]
pub(crate) struct Field {
    pub(crate) ident: Ident,
    pub(crate) ty: Type,
}

/// A field or method name with its text, which the spec borrows.
#[derive(Clone)]
pub(crate) struct Member {
    pub(crate) ident: Ident,
    pub(crate) name: String,
}

impl Member {
    fn new(ident: Ident) -> Self {
        Member { name: ident.to_string(), ident }
    }
}

/// A value read from the document: a field or a `&self` method.
#[derive(Clone)]
pub(crate) enum Value {
    /// The name as the binding wrote it (or the field's own name when the
    /// binding is implicit) and the field's type if the struct has that
    /// field; without one, rustc reports the unknown field at the name.
    Field(Member, Option<Box<Type>>),
    Method(Member),
}

/// Where an index placeholder's value comes from.
#[derive(Clone)]
pub(crate) enum Source {
    Id,
    Scope,
    Value(Value),
}

/// One placeholder of an index key and its source.
pub(crate) struct Binding {
    pub(crate) placeholder: String,
    pub(crate) source: Source,
}

/// `list(...)`.
pub(crate) struct List {
    /// The whole attribute, for errors when the key is missing.
    pub(crate) span: Span,
    /// `None` when missing (reported).
    pub(crate) key: Option<LitStr>,
    pub(crate) score: Option<Value>,
}

/// A unique or group index with its bindings resolved.
pub(crate) struct Index {
    pub(crate) key: LitStr,
    /// The key template, the text of `key`.
    pub(crate) key_text: String,
    pub(crate) name: String,
    /// The `name = "..."` literal, else the attribute.
    pub(crate) name_span: Span,
    /// Explicit bindings first, in the order written, then the implicit ones
    /// in template order.
    pub(crate) bindings: Vec<Binding>,
    /// Every placeholder the attribute binds explicitly, as written (even
    /// rejected ones), so errors about a placeholder can point at it.
    pub(crate) written: Vec<Ident>,
    /// A conditional group's `when`: the `bool` value keeping the id in.
    pub(crate) when: Option<Value>,
    /// A sorted index's score, and its bound.
    pub(crate) score: Option<Value>,
    pub(crate) max: Option<u64>,
    /// `each(...)`: its one value placeholder takes each value of a collection.
    pub(crate) each: bool,
}

impl Document {
    pub(crate) fn from_ast(cx: &mut Ctxt, input: &DeriveInput) -> Self {
        let ident = &input.ident;
        if !input.generics.params.is_empty() {
            cx.error_spanned_by(&input.generics, "a document type cannot be generic");
        }
        let fields: Option<Vec<(Field, FieldAttr)>> = match &input.data {
            Data::Struct(s) => match &s.fields {
                Fields::Named(named) => Some(
                    named
                        .named
                        .iter()
                        .filter_map(|f| {
                            let attr = FieldAttr::from_attrs(cx, &f.attrs);
                            let ident = f.ident.clone()?;
                            Some((Field { ident, ty: f.ty.clone() }, attr))
                        })
                        .collect(),
                ),
                _ => None,
            },
            _ => None,
        };
        if fields.is_none() {
            cx.error_spanned_by(ident, "#[derive(Document)] needs a struct with named fields");
        }
        let c = Container::from_attrs(cx, &input.attrs);
        if let (Some(crate::attr::ChangesAttr::None(_)), Some(nudge)) = (c.changes.get(), c.nudge.get()) {
            cx.error_spanned_by(
                nudge,
                "`nudge` has no use with `changes = none`: a type without change entries publishes no nudge",
            );
        }
        let fields = fields.as_deref();
        let id = find_marked(cx, ident, fields, "id", |a| a.id);
        let unscoped = c.unscoped.get().copied();
        let scope = match unscoped {
            None => find_marked(cx, ident, fields, "scope", |a| a.scope),
            Some(_) => {
                // A field named `scope` is an ordinary field then; a field
                // marked as the scope contradicts the attribute.
                for span in fields.into_iter().flatten().filter_map(|(_, a)| a.scope) {
                    cx.error_at(
                        span,
                        "an `unscoped` type has no scope field: remove `#[microdcs(scope)]` or `unscoped`",
                    );
                }
                None
            }
        };

        let fields = fields.unwrap_or_default();
        let field_names = fields.iter().map(|(f, _)| syn::ext::IdentExt::unraw(&f.ident).to_string()).collect();
        let resolver = Resolver { type_name: ident.to_string(), fields };
        let unique = c.unique.iter().filter_map(|ix| resolver.index(cx, ix)).collect();
        let groups = c.groups.iter().filter_map(|ix| resolver.index(cx, ix)).collect();
        let list = c.list.take().map(|ListAttr { span, key, score }| List {
            span,
            key,
            score: score.map(|b| {
                let v = resolver.value(&b);
                if let Value::Field(m, Some(ty)) = &v {
                    crate::field_shape::list_score(cx, &m.ident, ty);
                }
                v
            }),
        });
        Document {
            ident: ident.clone(),
            id,
            scope,
            kind: c.kind.take(),
            key: c.key.take(),
            list,
            unique,
            groups,
            changes: c.changes.take(),
            nudge: c.nudge.take(),
            registry: c.registry.take(),
            ttl: c.ttl.take().map(|lit| {
                let ms = ttl_millis(cx, &lit, "ttl");
                (lit, ms)
            }),
            unscoped,
            field_names,
            schema: c.schema.take().map_or(1, |lit| schema_version(cx, &lit)),
            outbox: c.outbox.take().and_then(|o| {
                let event_ttl_ms = match &o.event_ttl {
                    Some(lit) => ttl_millis(cx, lit, "event_ttl")?,
                    None => microdcs_schema::DEFAULT_EVENT_TTL_MS,
                };
                Some(Outbox { span: o.span, stream: o.stream?, events: o.events, event_ttl_ms })
            }),
        }
    }
}

/// The version of `schema = N`: a whole number from 1 to
/// [`microdcs_schema::MAX_SCHEMA`], or a spanned error (and 1).
fn schema_version(cx: &mut Ctxt, lit: &syn::LitInt) -> u32 {
    match lit.base10_parse::<u32>() {
        Ok(n) if (1..=microdcs_schema::MAX_SCHEMA).contains(&n) => n,
        _ => {
            cx.error_spanned_by(
                lit,
                format_args!(
                    "`schema` is a whole number from 1 to {}: raise it by one in each release that changes what \
                     the type stores",
                    microdcs_schema::MAX_SCHEMA
                ),
            );
            1
        }
    }
}

/// The milliseconds of `ttl = "..."` (the settings' duration grammar:
/// `30m`, `1h30m`, `500ms`, `00:30:00`), or a spanned error.
fn ttl_millis(cx: &mut Ctxt, lit: &LitStr, what: &str) -> Option<u64> {
    duration_ms(lit, what).map_err(|why| cx.error_spanned_by(lit, why)).ok()
}

/// The milliseconds of a lifetime attribute `what = "..."`, at least 1 ms,
/// or why not.
pub(crate) fn duration_ms(lit: &LitStr, what: &str) -> Result<u64, String> {
    match microdcs_schema::duration::parse_duration(&lit.value()) {
        Ok(d) if d.as_millis() == 0 => Err(format!("`{what}` must be at least 1ms")),
        Ok(d) => Ok(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        Err(e) => Err(format!("`{what}`: {e}")),
    }
}

/// The field marked `#[microdcs(<what>)]`, else the field named `<what>`.
/// `fields` is `None` when the input is not a struct with named fields,
/// which was reported already.
fn find_marked(
    cx: &mut Ctxt,
    ident: &Ident,
    fields: Option<&[(Field, FieldAttr)]>,
    what: &str,
    get: impl Fn(&FieldAttr) -> Option<Span>,
) -> Option<Field> {
    let fields = fields?;
    let mut marked = fields.iter().filter_map(|(f, a)| get(a).map(|_| f));
    let first = marked.next();
    for (_, a) in fields.iter().filter(|(_, a)| get(a).is_some()).skip(1) {
        cx.error_at(get(a).unwrap_or_else(Span::call_site), format_args!("only one field can be the {what}"));
    }
    if let Some(f) = first.or_else(|| fields.iter().map(|(f, _)| f).find(|f| f.ident == what)) {
        return Some(f.clone());
    }
    cx.error_spanned_by(
        ident,
        format_args!("`{ident}` has no {what} field: name a field `{what}` or mark one with `#[microdcs({what})]`"),
    );
    None
}

/// Resolves bindings against the struct's fields.
struct Resolver<'a> {
    type_name: String,
    fields: &'a [(Field, FieldAttr)],
}

impl Resolver<'_> {
    fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().map(|(f, _)| f).find(|f| f.ident == name)
    }

    fn value(&self, bind: &Bind) -> Value {
        match bind {
            Bind::Field(f) => {
                let member = Member::new(f.clone());
                let ty = self.field(&member.name).map(|f| Box::new(f.ty.clone()));
                Value::Field(member, ty)
            }
            Bind::Method(m) => Value::Method(Member::new(m.clone())),
        }
    }

    /// Explicit bindings, then for each other placeholder `{id}`, `{scope}`
    /// or the field of the same name. `None` when the index has no key
    /// (reported while parsing the attribute).
    fn index(&self, cx: &mut Ctxt, ix: &IndexAttr) -> Option<Index> {
        let key = ix.key.clone()?;
        let mut bindings = Vec::new();
        for (p, b) in &ix.bindings {
            if p == "id" || p == "scope" {
                cx.error_spanned_by(
                    p,
                    format_args!("`{{{p}}}` always binds to the document's {p} and cannot be rebound"),
                );
                continue;
            }
            bindings.push(Binding { placeholder: p.to_string(), source: Source::Value(self.value(b)) });
        }
        let written = ix.bindings.iter().map(|(p, _)| p.clone()).collect();
        let key_text = key.value();
        let Ok(template) = KeyTemplate::parse(&key_text) else {
            // The schema checks report the syntax errors; nothing is emitted.
            let name = ix.name.as_ref().map_or_else(|| "index".to_owned(), LitStr::value);
            let when = ix.when.as_ref().map(|(_, b)| self.value(b));
            let score = ix.score.as_ref().map(|(_, b)| self.value(b));
            let max = ix.max.map(|(_, m)| m);
            let each = ix.each;
            return Some(Index { key, key_text, name, name_span: ix.span, bindings, written, when, score, max, each });
        };
        let explicit = bindings.len();
        for p in template.placeholders() {
            if bindings.iter().any(|b| b.placeholder == p) {
                continue;
            }
            let source = match p {
                "id" => Source::Id,
                "scope" => Source::Scope,
                _ => match self.field(p) {
                    Some(f) => Source::Value(Value::Field(Member::new(f.ident.clone()), Some(Box::new(f.ty.clone())))),
                    None => {
                        self.unknown_placeholder(cx, &key, p, &bindings[..explicit]);
                        continue;
                    }
                },
            };
            bindings.push(Binding { placeholder: p.to_owned(), source });
        }
        let name = match &ix.name {
            Some(n) => n.value(),
            None => match default_index_name(&template) {
                Some(name) => name,
                None => {
                    cx.error_at(ix.span, "this index has no value placeholder to name it after; add `name = \"...\"`");
                    String::from("index")
                }
            },
        };
        let name_span = ix.name.as_ref().map_or(ix.span, LitStr::span);
        if syn::parse_str::<Ident>(&name).is_err() {
            cx.error_at(name_span, format_args!("index name `{name}` must be a Rust identifier"));
        }
        Some(Index {
            key,
            key_text,
            name,
            name_span,
            bindings,
            written,
            when: ix.when.as_ref().map(|(_, b)| {
                let v = self.value(b);
                if let Value::Field(m, Some(ty)) = &v {
                    crate::field_shape::when(cx, &m.ident, ty);
                }
                v
            }),
            score: ix.score.as_ref().map(|(_, b)| self.value(b)),
            max: ix.max.map(|(_, m)| m),
            each: ix.each,
        })
    }

    fn unknown_placeholder(&self, cx: &mut Ctxt, key: &LitStr, p: &str, explicit: &[Binding]) {
        let fields = self.fields.iter().map(|(f, _)| f.ident.to_string());
        let candidates: Vec<String> = fields.chain(explicit.iter().map(|b| b.placeholder.clone())).collect();
        let hint = microdcs_schema::suggest(p, candidates.iter().map(String::as_str))
            .map(|s| format!("; did you mean `{s}`?"))
            .unwrap_or_default();
        let type_name = &self.type_name;
        cx.error_spanned_by(
            key,
            format_args!(
                "unknown placeholder `{{{p}}}`: `{type_name}` has no field `{p}` and the index has no binding `{p} = field` or `{p} = method()`{hint}"
            ),
        );
    }
}

/// `by_` and the last placeholder that is not the scope: the scope narrows
/// every index, so the placeholder after it is what the index is about.
fn default_index_name(template: &KeyTemplate) -> Option<String> {
    template.placeholders().filter(|p| *p != "scope").last().map(|p| format!("by_{p}"))
}

#[cfg(test)]
pub(crate) mod tests {
    use quote::ToTokens;
    use syn::parse_quote;

    use super::{Document, Index, Source, Value};
    use crate::ctxt::Ctxt;

    /// The IR of `input` and the messages of the errors found on the way.
    pub(crate) fn parse(input: &syn::DeriveInput) -> (Document, Vec<String>) {
        let mut cx = Ctxt::new();
        let doc = Document::from_ast(&mut cx, input);
        let errors = cx.check().err().map(|e| e.into_iter().map(|e| e.to_string()).collect()).unwrap_or_default();
        (doc, errors)
    }

    /// `placeholder=source` per binding, the source as `id`, `scope`,
    /// `field:<name>:<type or ?>` or `method:<name>`.
    fn bindings(ix: &Index) -> Vec<String> {
        let value = |v: &Value| match v {
            Value::Field(m, ty) => {
                let ty = ty.as_ref().map_or_else(|| "?".to_owned(), |t| t.to_token_stream().to_string());
                format!("field:{}:{ty}", m.name)
            }
            Value::Method(m) => format!("method:{}", m.name),
        };
        ix.bindings
            .iter()
            .map(|b| {
                let src = match &b.source {
                    Source::Id => "id".to_owned(),
                    Source::Scope => "scope".to_owned(),
                    Source::Value(v) => value(v),
                };
                format!("{}={src}", b.placeholder)
            })
            .collect()
    }

    #[test]
    fn id_scope_and_same_named_fields_bind_implicitly() {
        let (doc, errors) = parse(&parse_quote! {
            #[microdcs(group(key = "order:bystate:{scope}:{state}:{id}"))]
            struct Order { id: String, scope: String, state: u8 }
        });
        assert_eq!(errors, Vec::<String>::new());
        assert_eq!(bindings(&doc.groups[0]), ["scope=scope", "state=field:state:u8", "id=id"]);
    }

    #[test]
    fn explicit_bindings_come_first_and_win() {
        let (doc, errors) = parse(&parse_quote! {
            #[microdcs(unique(key = "o:{code}:{state}:{owner}", state = state_text(), code = external_code, owner = nobody))]
            struct Order { id: String, scope: String, external_code: Option<String>, state: u8, owner: String }
        });
        assert_eq!(errors, Vec::<String>::new());
        assert_eq!(
            bindings(&doc.unique[0]),
            [
                "state=method:state_text",
                "code=field:external_code:Option < String >",
                // Not a field: left to rustc, which reports it at the name.
                "owner=field:nobody:?",
            ]
        );
    }

    #[test]
    fn id_and_scope_cannot_be_rebound() {
        let (doc, errors) = parse(&parse_quote! {
            #[microdcs(group(key = "o:{scope}:{x}", scope = area, x = x))]
            struct Order { id: String, scope: String, area: String, x: String }
        });
        assert_eq!(errors, ["`{scope}` always binds to the document's scope and cannot be rebound"]);
        // The implicit binding stands in for the rejected one.
        assert_eq!(bindings(&doc.groups[0]), ["x=field:x:String", "scope=scope"]);
    }

    #[test]
    fn unknown_placeholder_suggests_a_field() {
        let (doc, errors) = parse(&parse_quote! {
            #[microdcs(group(key = "o:{scope}:{stat}"))]
            struct Order { id: String, scope: String, state: String }
        });
        assert_eq!(
            errors,
            [
                "unknown placeholder `{stat}`: `Order` has no field `stat` and the index has no binding `stat = field` or `stat = method()`; did you mean `state`?"
            ]
        );
        assert_eq!(bindings(&doc.groups[0]), ["scope=scope"]);
    }

    #[test]
    fn index_name_defaults_to_last_placeholder_but_scope() {
        let (doc, errors) = parse(&parse_quote! {
            #[microdcs(
                group(key = "o:bystate:{scope}:{state}"),
                group(key = "o:byowner:{owner}:{scope}"),
                unique(key = "o:bycode:{code}:{id}"),
                unique(name = "lookup", key = "o:lookup:{code}"),
            )]
            struct Order { id: String, scope: String, state: String, owner: String, code: String }
        });
        assert_eq!(errors, Vec::<String>::new());
        let names = |v: &[Index]| v.iter().map(|ix| ix.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&doc.groups), ["by_state", "by_owner"]);
        assert_eq!(names(&doc.unique), ["by_id", "lookup"]);
    }

    #[test]
    fn index_of_only_the_scope_needs_a_name() {
        let (doc, errors) = parse(&parse_quote! {
            #[microdcs(group(key = "o:all:{scope}"))]
            struct Order { id: String, scope: String }
        });
        assert_eq!(errors, ["this index has no value placeholder to name it after; add `name = \"...\"`"]);
        assert_eq!(doc.groups[0].name, "index");
    }

    #[test]
    fn index_name_must_be_an_identifier() {
        let (_, errors) = parse(&parse_quote! {
            #[microdcs(group(name = "by state", key = "o:{state}"))]
            struct Order { id: String, scope: String, state: String }
        });
        assert_eq!(errors, ["index name `by state` must be a Rust identifier"]);
    }

    #[test]
    fn index_without_key_is_left_out() {
        let (doc, errors) = parse(&parse_quote! {
            #[microdcs(group(name = "a"), group(key = "o:{state}"))]
            struct Order { id: String, scope: String, state: String }
        });
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("an index needs `key = \"...\"`"), "{errors:?}");
        assert_eq!(doc.groups.len(), 1);
        assert_eq!(doc.groups[0].name, "by_state");
    }

    #[test]
    fn id_and_scope_are_the_marked_or_same_named_fields() {
        let (doc, errors) = parse(&parse_quote! {
            struct Order { #[microdcs(id)] number: u64, id: String, scope: String }
        });
        assert_eq!(errors, Vec::<String>::new());
        assert_eq!(doc.id.map(|f| f.ident.to_string()).as_deref(), Some("number"));
        assert_eq!(doc.scope.map(|f| f.ident.to_string()).as_deref(), Some("scope"));
    }

    #[test]
    fn missing_id_and_scope_are_reported_even_without_fields() {
        let (doc, errors) = parse(&parse_quote! { struct Order {} });
        assert_eq!(
            errors,
            [
                "`Order` has no id field: name a field `id` or mark one with `#[microdcs(id)]`",
                "`Order` has no scope field: name a field `scope` or mark one with `#[microdcs(scope)]`",
            ]
        );
        assert!(doc.id.is_none() && doc.scope.is_none());
    }

    #[test]
    fn two_marked_ids_are_reported() {
        let (_, errors) = parse(&parse_quote! {
            struct Order { #[microdcs(id)] a: String, #[microdcs(id)] b: String, scope: String }
        });
        assert_eq!(errors, ["only one field can be the id"]);
    }

    #[test]
    fn tuple_struct_reports_only_its_shape() {
        let (_, errors) = parse(&parse_quote! { struct Order(String, String); });
        assert_eq!(errors, ["#[derive(Document)] needs a struct with named fields"]);
    }
}
