//! `#[derive(Document)]`: attributes -> `microdcs_schema::DocumentSpec` ->
//! checks (errors mapped to spans) -> expansion.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, Ident, LitStr, Type};

use microdcs_schema::{
    Attr, Binding, DocumentSpec, IndexSpec, KeyTemplate, ListSpec, SchemaErrorKind, Source, check_document,
};

use crate::attr::{Bind, Container, FieldAttr, IndexAttr};
use crate::ctxt::Ctxt;
use crate::keys::builder_fn;

pub(crate) fn expand(input: &DeriveInput) -> TokenStream {
    match build(input) {
        Ok(ts) => ts,
        Err(err) => {
            let mut out = err.to_compile_error();
            out.extend(stub(input));
            out
        }
    }
}

/// On invalid input: a `Document` impl that keeps follow-on errors (a
/// keyspace listing this type) from drowning the real one.
fn stub(input: &DeriveInput) -> TokenStream {
    let ident = &input.ident;
    let name = ident.to_string();
    if !input.generics.params.is_empty() {
        return TokenStream::new();
    }
    quote! {
        const _: () = {
            #[automatically_derived]
            impl ::microdcs_valkey::__private::Document for #ident {
                const SPEC: ::microdcs_valkey::__private::DocumentSpec<'static> =
                    ::microdcs_valkey::__private::invalid_spec(#name);
                const PUT_SCRIPT: &'static str = "";
                const DELETE_SCRIPT: &'static str = "";
                const FIND_SCRIPT: &'static str = "";
                fn id(&self) -> ::microdcs_valkey::__private::Cow<'_, str> {
                    ::core::panic!("invalid document type")
                }
                fn scope(&self) -> ::microdcs_valkey::__private::Cow<'_, str> {
                    ::core::panic!("invalid document type")
                }
                fn index_entries(
                    &self,
                    _: &::microdcs_valkey::__private::KeyPrefix,
                ) -> ::core::result::Result<::microdcs_valkey::__private::IndexEntries, ::microdcs_valkey::__private::IndexError> {
                    ::core::panic!("invalid document type")
                }
            }
        };
    }
}

struct FieldInfo<'a> {
    ident: &'a Ident,
    ty: &'a Type,
}

/// A resolved index: attribute, template text, and (placeholder, source) pairs.
struct Resolved<'a> {
    attr: &'a IndexAttr,
    name: String,
    name_span: Span,
    key: String,
    bindings: Vec<(String, OwnedSource)>,
}

#[derive(Clone, PartialEq)]
enum OwnedSource {
    Id,
    Scope,
    Field(Ident),
    Method(Ident),
}

fn build(input: &DeriveInput) -> syn::Result<TokenStream> {
    let mut cx = Ctxt::default();
    let ident = &input.ident;
    if !input.generics.params.is_empty() {
        cx.error_spanned_by(&input.generics, "a document type cannot be generic");
    }
    let fields: Vec<(&syn::Field, FieldAttr)> = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(named) => named.named.iter().map(|f| (f, FieldAttr::from_attrs(&mut cx, &f.attrs))).collect(),
            _ => {
                cx.error_spanned_by(ident, "#[derive(Document)] needs a struct with named fields");
                Vec::new()
            }
        },
        _ => {
            cx.error_spanned_by(ident, "#[derive(Document)] needs a struct with named fields");
            Vec::new()
        }
    };
    let c = Container::from_attrs(&mut cx, &input.attrs);

    let id = find_marked(&mut cx, ident, &fields, "id", |a| a.id);
    let scope = find_marked(&mut cx, ident, &fields, "scope", |a| a.scope);
    let field_names: Vec<String> = fields.iter().filter_map(|(f, _)| f.ident.as_ref().map(Ident::to_string)).collect();
    let field_of = |name: &str| {
        fields.iter().find_map(|(f, _)| {
            let i = f.ident.as_ref()?;
            (i == name).then_some(FieldInfo { ident: i, ty: &f.ty })
        })
    };

    let type_name = ident.to_string();

    // Resolve index bindings: explicit, then `{id}`, `{scope}`, then a field of the same name.
    let resolve =
        |cx: &mut Ctxt, ix| resolve_index(cx, ix, &field_names, &type_name, &|p| field_of(p).map(|f| f.ident.clone()));
    let uniques: Vec<Resolved<'_>> = c.unique.iter().filter_map(|ix| resolve(&mut cx, ix)).collect();
    let groups: Vec<Resolved<'_>> = c.groups.iter().filter_map(|ix| resolve(&mut cx, ix)).collect();
    build_rest(cx, ident, &c, id, scope, &type_name, uniques, groups, &field_of)
}

/// Resolves index bindings: explicit, then `{id}`, `{scope}`, then a field of the same name.
fn resolve_index<'a>(
    cx: &mut Ctxt,
    ix: &'a IndexAttr,
    field_names: &[String],
    type_name: &str,
    field_of: &dyn Fn(&str) -> Option<Ident>,
) -> Option<Resolved<'a>> {
    {
        let key_lit = ix.key.as_ref()?;
        let key = key_lit.value();
        let mut bindings = Vec::new();
        let mut explicit_names: Vec<String> = Vec::new();
        for (p, b) in &ix.bindings {
            if p == "id" || p == "scope" {
                cx.error_spanned_by(
                    p,
                    format_args!("`{{{p}}}` always binds to the document's {p} and cannot be rebound"),
                );
                continue;
            }
            explicit_names.push(p.to_string());
            let src = match b {
                Bind::Field(f) => OwnedSource::Field(f.clone()),
                Bind::Method(m) => OwnedSource::Method(m.clone()),
            };
            bindings.push((p.to_string(), src));
        }
        if let Ok(t) = KeyTemplate::parse(&key) {
            for p in t.placeholders() {
                if bindings.iter().any(|(q, _)| q == p) {
                    continue;
                }
                let src = match p {
                    "id" => OwnedSource::Id,
                    "scope" => OwnedSource::Scope,
                    _ => match field_of(p) {
                        Some(f) => OwnedSource::Field(f),
                        None => {
                            let cands =
                                field_names.iter().map(String::as_str).chain(explicit_names.iter().map(String::as_str));
                            let hint = microdcs_schema::suggest(p, cands)
                                .map(|s| format!("; did you mean `{s}`?"))
                                .unwrap_or_default();
                            cx.error_spanned_by(
                                key_lit,
                                format_args!(
                                    "unknown placeholder `{{{p}}}`: `{type_name}` has no field `{p}` and the index has no binding `{p} = field` or `{p} = method()`{hint}"
                                ),
                            );
                            continue;
                        }
                    },
                };
                bindings.push((p.to_owned(), src));
            }
            // The default name: `by_` + the last placeholder that is not the scope.
            let name = match &ix.name {
                Some(n) => n.value(),
                None => match t.placeholders().filter(|p| *p != "scope").last() {
                    Some(p) => format!("by_{p}"),
                    None => {
                        cx.error_at(
                            ix.span,
                            "this index has no value placeholder to name it after; add `name = \"...\"`",
                        );
                        String::from("index")
                    }
                },
            };
            let name_span = ix.name.as_ref().map_or(ix.span, LitStr::span);
            if syn::parse_str::<Ident>(&name).is_err() {
                cx.error_at(name_span, format_args!("index name `{name}` must be a Rust identifier"));
            }
            Some(Resolved { attr: ix, name, name_span, key, bindings })
        } else {
            // Syntax errors are reported by the schema check below.
            let name = ix.name.as_ref().map_or_else(|| "index".to_owned(), LitStr::value);
            Some(Resolved { attr: ix, name, name_span: ix.span, key, bindings })
        }
    }
}

fn to_bindings(v: &[(String, String, u8)]) -> Vec<Binding<'_>> {
    v.iter()
        .map(|(p, n, tag)| Binding {
            placeholder: p,
            source: match tag {
                0 => Source::Id,
                1 => Source::Scope,
                2 => Source::Field(n),
                _ => Source::Method(n),
            },
        })
        .collect()
}

#[allow(clippy::too_many_arguments, reason = "the second half of `build`, split for lifetimes")]
fn build_rest<'a>(
    mut cx: Ctxt,
    ident: &Ident,
    c: &Container,
    id: Option<FieldInfo<'a>>,
    scope: Option<FieldInfo<'a>>,
    type_name: &str,
    uniques: Vec<Resolved<'_>>,
    groups: Vec<Resolved<'_>>,
    field_of: &dyn Fn(&str) -> Option<FieldInfo<'a>>,
) -> syn::Result<TokenStream> {
    let type_name = type_name.to_owned();
    let kind = c.kind.get().map_or_else(|| type_name.to_lowercase(), LitStr::value);
    let key = c.key.get().map_or_else(|| format!("{kind}:{{id}}"), LitStr::value);
    let changes = c.changes.get().map_or_else(|| "changes:{scope}".to_owned(), LitStr::value);
    let nudge = c.nudge.get().map_or_else(|| "nudge:{kind}".to_owned(), LitStr::value);
    let registry = c.registry.get().map_or_else(|| "scopes".to_owned(), LitStr::value);
    let list_key = c.list.get().and_then(|l| l.key.as_ref()).map(LitStr::value);
    let id_field = id.as_ref().map_or_else(|| "id".to_owned(), |f| f.ident.to_string());
    let scope_field = scope.as_ref().map_or_else(|| "scope".to_owned(), |f| f.ident.to_string());

    // Build the borrowed spec for the checks.
    let src_names = |r: &Resolved<'_>| -> Vec<(String, String, u8)> {
        r.bindings
            .iter()
            .map(|(p, s)| {
                let (n, tag) = match s {
                    OwnedSource::Id => (String::new(), 0),
                    OwnedSource::Scope => (String::new(), 1),
                    OwnedSource::Field(f) => (f.to_string(), 2),
                    OwnedSource::Method(m) => (m.to_string(), 3),
                };
                (p.clone(), n, tag)
            })
            .collect()
    };
    let u_names: Vec<_> = uniques.iter().map(src_names).collect();
    let g_names: Vec<_> = groups.iter().map(src_names).collect();
    let u_bind: Vec<Vec<Binding<'_>>> = u_names.iter().map(|v| to_bindings(v)).collect();
    let g_bind: Vec<Vec<Binding<'_>>> = g_names.iter().map(|v| to_bindings(v)).collect();
    let u_specs: Vec<IndexSpec<'_>> =
        uniques.iter().zip(&u_bind).map(|(r, b)| IndexSpec { name: &r.name, key: &r.key, bindings: b }).collect();
    let g_specs: Vec<IndexSpec<'_>> =
        groups.iter().zip(&g_bind).map(|(r, b)| IndexSpec { name: &r.name, key: &r.key, bindings: b }).collect();
    let score_name = c.list.get().and_then(|l| l.score.as_ref()).map(|b| b.ident().to_string());
    let list = match (c.list.get(), &list_key) {
        (Some(l), Some(k)) => Some(ListSpec {
            key: k,
            score: match (&l.score, &score_name) {
                (Some(Bind::Field(_)), Some(n)) => Some(Source::Field(n)),
                (Some(Bind::Method(_)), Some(n)) => Some(Source::Method(n)),
                _ => None,
            },
        }),
        _ => None,
    };
    let spec = DocumentSpec {
        type_name: &type_name,
        kind: &kind,
        key: &key,
        id_field: &id_field,
        scope_field: &scope_field,
        list,
        unique: &u_specs,
        groups: &g_specs,
        changes: &changes,
        nudge: &nudge,
        registry: &registry,
    };

    // Unbound placeholders were reported while resolving, with a suggestion.
    for e in check_document(&spec).into_iter().filter(|e| !matches!(e.kind, SchemaErrorKind::Unbound(_))) {
        let span = span_of(c, &uniques, &groups, ident, &e.origin.attr, e.origin.placeholder.as_deref());
        cx.error_at(span, &e);
    }
    if cx.has_errors() {
        cx.check()?;
    }
    let (Some(id), Some(scope)) = (id, scope) else { unreachable_checked() };

    Ok(emit(ident, &spec, c, &uniques, &groups, &id, &scope, field_of))
}

fn unreachable_checked() -> ! {
    // `find_marked` records an error whenever it returns `None`, so this is
    // never reached after `cx.check()` returned `Ok`.
    panic!("microdcs-derive: id or scope missing without an error")
}

fn find_marked<'a>(
    cx: &mut Ctxt,
    ident: &Ident,
    fields: &'a [(&'a syn::Field, FieldAttr)],
    what: &str,
    get: impl Fn(&FieldAttr) -> Option<Span>,
) -> Option<FieldInfo<'a>> {
    let marked: Vec<_> = fields.iter().filter(|(_, a)| get(a).is_some()).collect();
    if marked.len() > 1 {
        for (_, a) in &marked[1..] {
            cx.error_at(get(a).unwrap_or_else(Span::call_site), format_args!("only one field can be the {what}"));
        }
    }
    if let Some((f, _)) = marked.first() {
        return f.ident.as_ref().map(|i| FieldInfo { ident: i, ty: &f.ty });
    }
    match fields.iter().find(|(f, _)| f.ident.as_ref().is_some_and(|i| i == what)) {
        Some((f, _)) => f.ident.as_ref().map(|i| FieldInfo { ident: i, ty: &f.ty }),
        None => {
            if !fields.is_empty() {
                cx.error_spanned_by(
                    ident,
                    format_args!(
                        "`{ident}` has no {what} field: name a field `{what}` or mark one with `#[microdcs({what})]`"
                    ),
                );
            }
            None
        }
    }
}

fn span_of(
    c: &Container,
    uniques: &[Resolved<'_>],
    groups: &[Resolved<'_>],
    ident: &Ident,
    attr: &Attr,
    placeholder: Option<&str>,
) -> Span {
    let lit_or = |l: Option<&LitStr>| l.map_or_else(|| ident.span(), LitStr::span);
    let index = |r: Option<&Resolved<'_>>| {
        let Some(r) = r else { return ident.span() };
        if let Some(p) = placeholder
            && let Some((i, _)) = r.attr.bindings.iter().find(|(i, _)| i == p)
        {
            return i.span();
        }
        r.attr.key.as_ref().map_or(r.name_span, LitStr::span)
    };
    match attr {
        Attr::Kind => lit_or(c.kind.get()),
        Attr::Key => lit_or(c.key.get()),
        Attr::List => c.list.get().map_or_else(|| ident.span(), |l| l.key.as_ref().map_or(l.span, LitStr::span)),
        Attr::Unique(i) => index(uniques.get(*i)),
        Attr::Group(i) => index(groups.get(*i)),
        Attr::Changes => lit_or(c.changes.get()),
        Attr::Nudge => lit_or(c.nudge.get()),
        Attr::Registry => lit_or(c.registry.get()),
        Attr::Family(_) | Attr::Document(_) => ident.span(),
    }
}

fn source_tokens(s: &Source<'_>) -> TokenStream {
    match s {
        Source::Id => quote!(::microdcs_valkey::__private::Source::Id),
        Source::Scope => quote!(::microdcs_valkey::__private::Source::Scope),
        Source::Field(n) => quote!(::microdcs_valkey::__private::Source::Field(#n)),
        Source::Method(n) => quote!(::microdcs_valkey::__private::Source::Method(#n)),
    }
}

fn index_spec_tokens(ix: &IndexSpec<'_>) -> TokenStream {
    let name = ix.name;
    let key = ix.key;
    let bindings = ix.bindings.iter().map(|b| {
        let p = b.placeholder;
        let s = source_tokens(&b.source);
        quote!(::microdcs_valkey::__private::Binding { placeholder: #p, source: #s })
    });
    quote!(::microdcs_valkey::__private::IndexSpec { name: #name, key: #key, bindings: &[#(#bindings),*] })
}

#[allow(clippy::too_many_arguments, reason = "one call site; the pieces are distinct")]
fn emit<'a>(
    ident: &Ident,
    spec: &DocumentSpec<'_>,
    c: &Container,
    uniques: &[Resolved<'_>],
    groups: &[Resolved<'_>],
    id: &FieldInfo<'a>,
    scope: &FieldInfo<'a>,
    field_of: &dyn Fn(&str) -> Option<FieldInfo<'a>>,
) -> TokenStream {
    let p = quote!(::microdcs_valkey::__private);
    let type_name = spec.type_name;
    let kind = spec.kind;
    let key = spec.key;
    let (changes, nudge, registry) = (spec.changes, spec.nudge, spec.registry);
    let id_name = id.ident.to_string();
    let scope_name = scope.ident.to_string();
    let list_tokens = match &spec.list {
        Some(l) => {
            let k = l.key;
            let s = match &l.score {
                Some(s) => {
                    let t = source_tokens(s);
                    quote!(::core::option::Option::Some(#t))
                }
                None => quote!(::core::option::Option::None),
            };
            quote!(::core::option::Option::Some(#p::ListSpec { key: #k, score: #s }))
        }
        None => quote!(::core::option::Option::None),
    };
    let unique_specs = spec.unique.iter().map(index_spec_tokens);
    let group_specs = spec.groups.iter().map(index_spec_tokens);

    // Key builders.
    let doc_key_fn = builder_fn(
        &format_ident!("key"),
        key,
        &format!("Key of the `{type_name}` document with this id: `{{prefix}}:{key}`."),
    );
    let list_fn = spec.list.as_ref().map(|l| {
        builder_fn(
            &format_ident!("list_key"),
            l.key,
            &format!("Key of the per-scope list of `{type_name}`: `{{prefix}}:{}`.", l.key),
        )
    });
    let index_fns =
        uniques.iter().map(|r| ("unique", r)).chain(groups.iter().map(|r| ("group", r))).map(|(what, r)| {
            let f = format_ident!("{}_key", r.name, span = r.name_span);
            builder_fn(
                &f,
                &r.key,
                &format!("Key of the {what} index `{}` of `{type_name}`: `{{prefix}}:{}`.", r.name, r.key),
            )
        });

    let (put_script, _) = microdcs_schema::lua::put_script(spec);
    let (delete_script, _) = microdcs_schema::lua::delete_script(spec);
    let find_script = microdcs_schema::lua::find_script(spec);
    let query_fns = uniques.iter().enumerate().map(|(i, r)| (true, i, r)).chain(groups.iter().enumerate().map(|(i, r)| (false, i, r))).map(|(unique, i, r)| {
        let f = format_ident!("{}", r.name, span = r.name_span);
        let t = KeyTemplate::parse(&r.key).expect("checked");
        let params: Vec<Ident> = t.placeholders().map(crate::keys::param_ident).collect();
        let (ty, what) = if unique {
            (quote!(#p::UniqueQuery<Self>), format!("Finds the `{type_name}` whose unique index `{}` (`{}`) has these values; run it with `Store::find`.", r.name, r.key))
        } else {
            (quote!(#p::GroupQuery<Self>), format!("The ids in group index `{}` (`{}`) of `{type_name}`; run it with `Store::ids`.", r.name, r.key))
        };
        quote! {
            #[doc = #what]
            pub fn #f(#(#params: &(impl #p::KeySegment + ?::core::marker::Sized)),*) -> #ty {
                <#ty>::new(#i, ::std::vec![#(::std::string::ToString::to_string(&*#p::KeySegment::key_segment(#params))),*])
            }
        }
    }).collect::<Vec<_>>();

    // Index entries.
    let id_ty = id.ty;
    let id_ident = id.ident;
    let scope_ty = scope.ty;
    let scope_ident = scope.ident;
    let id_expr = quote_spanned!(id_ty.span()=> <#id_ty as #p::KeySegment>::key_segment(&self.#id_ident));
    let scope_expr = quote_spanned!(scope_ty.span()=> <#scope_ty as #p::KeySegment>::key_segment(&self.#scope_ident));

    let value_expr = |src: &OwnedSource| -> TokenStream {
        match src {
            OwnedSource::Id | OwnedSource::Scope => quote!(::core::option::Option::Some(())),
            OwnedSource::Field(f) => match field_of(&f.to_string()) {
                Some(fi) => {
                    let ty = fi.ty;
                    quote_spanned!(ty.span()=> <#ty as #p::IndexValue>::index_value(&self.#f))
                }
                // Unknown field named in a binding: let rustc report it at the name.
                None => quote_spanned!(f.span()=> #p::IndexValue::index_value(&self.#f)),
            },
            OwnedSource::Method(m) => quote_spanned!(m.span()=> #p::IndexValue::index_value(&self.#m())),
        }
    };

    let index_entry = |r: &Resolved<'_>| -> TokenStream {
        let t = KeyTemplate::parse(&r.key).expect("checked");
        let f = format_ident!("{}_key", r.name);
        let mut lets = Vec::new();
        let mut args = Vec::new();
        let mut fields = Vec::new();
        for (i, ph) in t.placeholders().enumerate() {
            let (_, src) = r.bindings.iter().find(|(q, _)| q == ph).expect("bound");
            let v = format_ident!("__v{}", i);
            let tmp = format_ident!("__t{}", i);
            match src {
                OwnedSource::Id => args.push(quote!(&*__id)),
                OwnedSource::Scope => args.push(quote!(&*__scope)),
                OwnedSource::Method(m) => {
                    let call = quote_spanned!(m.span()=> self.#m());
                    let val = quote_spanned!(m.span()=> #p::IndexValue::index_value(&#tmp));
                    lets.push(quote! {
                        let #tmp = #call;
                        let ::core::option::Option::Some(#v) = #val else { break 'entry ::core::option::Option::None };
                    });
                    args.push(quote!(&*#v));
                    fields.push(quote!((#ph, ::std::string::ToString::to_string(&*#v))));
                }
                OwnedSource::Field(_) => {
                    let val = value_expr(src);
                    lets.push(quote! {
                        let ::core::option::Option::Some(#v) = #val else { break 'entry ::core::option::Option::None };
                    });
                    args.push(quote!(&*#v));
                    fields.push(quote!((#ph, ::std::string::ToString::to_string(&*#v))));
                }
            }
        }
        quote! {
            'entry: {
                #(#lets)*
                ::core::option::Option::Some(#p::IndexEntry {
                    key: Self::#f(prefix, #(#args),*)?,
                    fields: ::std::vec![#(#fields),*],
                })
            }
        }
    };
    let unique_entries = uniques.iter().map(index_entry);
    let group_entries = groups.iter().map(index_entry);

    let list_entry = match (c.list.get(), &spec.list) {
        (Some(l), Some(_)) => {
            let score = match &l.score {
                None => quote!(::core::option::Option::None),
                Some(b) => {
                    let e = match b {
                        Bind::Field(f) => match field_of(&f.to_string()) {
                            Some(fi) => {
                                let ty = fi.ty;
                                quote_spanned!(ty.span()=> <#ty as #p::Score>::score(&self.#f))
                            }
                            None => quote_spanned!(f.span()=> #p::Score::score(&self.#f)),
                        },
                        Bind::Method(m) => quote_spanned!(m.span()=> #p::Score::score(&self.#m())),
                    };
                    quote! {{
                        let __s: f64 = #e;
                        if __s.is_nan() {
                            return ::core::result::Result::Err(#p::IndexError::NanScore { type_name: #type_name });
                        }
                        ::core::option::Option::Some(__s)
                    }}
                }
            };
            quote!(::core::option::Option::Some(#p::ListEntry { key: Self::list_key(prefix, &*__scope)?, score: #score }))
        }
        _ => quote!(::core::option::Option::None),
    };

    quote! {
        const _: () = {
            #[automatically_derived]
            impl #p::Document for #ident {
                const SPEC: #p::DocumentSpec<'static> = #p::DocumentSpec {
                    type_name: #type_name,
                    kind: #kind,
                    key: #key,
                    id_field: #id_name,
                    scope_field: #scope_name,
                    list: #list_tokens,
                    unique: &[#(#unique_specs),*],
                    groups: &[#(#group_specs),*],
                    changes: #changes,
                    nudge: #nudge,
                    registry: #registry,
                };

                const PUT_SCRIPT: &'static str = #put_script;
                const DELETE_SCRIPT: &'static str = #delete_script;
                const FIND_SCRIPT: &'static str = #find_script;

                fn id(&self) -> #p::Cow<'_, str> {
                    #id_expr
                }

                fn scope(&self) -> #p::Cow<'_, str> {
                    #scope_expr
                }

                fn index_entries(
                    &self,
                    prefix: &#p::KeyPrefix,
                ) -> ::core::result::Result<#p::IndexEntries, #p::IndexError> {
                    let __id = #id_expr;
                    let __scope = #scope_expr;
                    ::core::result::Result::Ok(#p::IndexEntries {
                        key: Self::key(prefix, &*__id)?,
                        list: #list_entry,
                        unique: ::std::vec![#(#unique_entries),*],
                        groups: ::std::vec![#(#group_entries),*],
                        id: ::std::string::ToString::to_string(&*__id),
                        scope: ::std::string::ToString::to_string(&*__scope),
                    })
                }
            }

            #[automatically_derived]
            impl #ident {
                #doc_key_fn
                #list_fn
                #(#index_fns)*
                #(#query_fns)*
            }
        };
    }
}
