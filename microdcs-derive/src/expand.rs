//! `#[derive(Document)]`: attributes -> IR -> spec -> checks -> code.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{DeriveInput, Ident};

use microdcs_schema::{DocumentSpec, IndexSpec, KeyTemplate, Source as SpecSource};

use crate::ast::{Document, Field, Index, Source, Value};
use crate::check;
use crate::ctxt::Ctxt;
use crate::fallback;
use crate::keys::{builder_fn, param_ident};
use crate::spec::{self, Texts};

pub(crate) fn derive(input: &DeriveInput) -> TokenStream {
    try_expand(input).unwrap_or_else(|err| fallback::expand(input, &err))
}

fn try_expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let mut cx = Ctxt::new();
    let doc = Document::from_ast(&mut cx, input);
    let texts = Texts::of(&doc);
    spec::with_spec(&doc, &texts, |spec| {
        let parsed = !cx.has_errors();
        let only_overlaps = check::schema(&mut cx, &doc, spec);
        // Only a document without errors is taken apart for emission, so
        // that no error is reported twice.
        let checked = if cx.has_errors() { None } else { Checked::new(&mut cx, &doc) };
        if parsed && only_overlaps && checked.is_none() {
            // Two of the type's families overlap, and nothing else is
            // wrong: every item is still emitted beside the errors, since a
            // stub without the key builders, index functions and list
            // traits would add an error at every use of them (most pointing
            // into this library's source).
            let mut scratch = Ctxt::new();
            let whole = Checked::new(&mut scratch, &doc);
            if let (Ok(()), Some(whole), Err(errors)) = (scratch.check(), whole, cx.check()) {
                let mut out = errors.to_compile_error();
                out.extend(emit(&whole, spec, true));
                return Ok(out);
            }
            return Err(syn::Error::new(doc.ident.span(), "microdcs: this document type could not be checked"));
        }
        cx.check()?;
        match checked {
            Some(checked) => Ok(emit(&checked, spec, false)),
            // Whatever made `checked` empty was reported, so this is not
            // reached; should it be, it is still an error and not a panic.
            None => Err(syn::Error::new(doc.ident.span(), "microdcs: this document type could not be checked")),
        }
    })
}

/// A document that passed every check, with what emission needs spelled out.
struct Checked<'a> {
    doc: &'a Document,
    id: &'a Field,
    /// `None` for an unscoped type.
    scope: Option<&'a Field>,
    unique: Vec<Entry<'a>>,
    groups: Vec<Entry<'a>>,
}

/// An index with the source of each placeholder, in template order.
struct Entry<'a> {
    index: &'a Index,
    slots: Vec<(&'a str, &'a Source)>,
}

impl<'a> Checked<'a> {
    /// `None` when something is missing; each such case was reported
    /// already or is reported here.
    fn new(cx: &mut Ctxt, doc: &'a Document) -> Option<Self> {
        let unique: Option<Vec<Entry<'a>>> = doc.unique.iter().map(|ix| Entry::new(cx, ix)).collect();
        let groups: Option<Vec<Entry<'a>>> = doc.groups.iter().map(|ix| Entry::new(cx, ix)).collect();
        let scope = match doc.unscoped {
            Some(_) => None,
            None => Some(doc.scope.as_ref()?),
        };
        Some(Checked { doc, id: doc.id.as_ref()?, scope, unique: unique?, groups: groups? })
    }
}

impl<'a> Entry<'a> {
    fn new(cx: &mut Ctxt, index: &'a Index) -> Option<Self> {
        // Generated function names are made from the index name.
        if syn::parse_str::<Ident>(&index.name).is_err() {
            cx.error_at(index.name_span, format_args!("index name `{}` must be a Rust identifier", index.name));
            return None;
        }
        // The schema checks parsed the template and found every placeholder
        // bound; were they to disagree, the key is where the problem is.
        let template = match KeyTemplate::parse(&index.key_text) {
            Ok(t) => t,
            Err(errors) => {
                for e in errors {
                    cx.error_spanned_by(&index.key, e);
                }
                return None;
            }
        };
        let mut slots = Vec::new();
        for p in template.placeholders() {
            match index.bindings.iter().find(|b| b.placeholder == p) {
                Some(b) => slots.push((b.placeholder.as_str(), &b.source)),
                None => cx.error_spanned_by(
                    &index.key,
                    format_args!("placeholder `{{{p}}}` is not bound to a field or method"),
                ),
            }
        }
        (slots.len() == template.placeholders().count()).then_some(Entry { index, slots })
    }
}

/// The Lua scripts of the spec. The only calls into `microdcs_schema::lua`.
fn scripts(spec: &DocumentSpec<'_>) -> [String; 4] {
    let (put, _) = microdcs_schema::lua::put_script(spec);
    let (delete, _) = microdcs_schema::lua::delete_script(spec);
    let find = microdcs_schema::lua::find_script(spec);
    let (step, _) = microdcs_schema::lua::step_script(spec);
    [put, delete, find, step]
}

fn private() -> TokenStream {
    crate::runtime::private()
}

fn source_tokens(s: &SpecSource<'_>) -> TokenStream {
    let rt = crate::runtime::path();
    match s {
        SpecSource::Id => quote!(#rt::__private::Source::Id),
        SpecSource::Scope => quote!(#rt::__private::Source::Scope),
        SpecSource::Field(n) => quote!(#rt::__private::Source::Field(#n)),
        SpecSource::Method(n) => quote!(#rt::__private::Source::Method(#n)),
    }
}

fn index_spec_tokens(ix: &IndexSpec<'_>) -> TokenStream {
    let rt = crate::runtime::path();
    let name = ix.name;
    let key = ix.key;
    let bindings = ix.bindings.iter().map(|b| {
        let p = b.placeholder;
        let s = source_tokens(&b.source);
        quote!(#rt::__private::Binding { placeholder: #p, source: #s })
    });
    let when = match &ix.when {
        Some(s) => {
            let s = source_tokens(s);
            quote!(::core::option::Option::Some(#s))
        }
        None => quote!(::core::option::Option::None),
    };
    let score = match &ix.score {
        Some(s) => {
            let s = source_tokens(s);
            quote!(::core::option::Option::Some(#s))
        }
        None => quote!(::core::option::Option::None),
    };
    let max = match ix.max {
        Some(m) => quote!(::core::option::Option::Some(#m)),
        None => quote!(::core::option::Option::None),
    };
    let each = ix.each;
    quote!(#rt::__private::IndexSpec {
        name: #name, key: #key, bindings: &[#(#bindings),*], when: #when, score: #score, max: #max, each: #each
    })
}

/// The `SPEC` constant's value.
fn spec_tokens(spec: &DocumentSpec<'_>) -> TokenStream {
    let p = private();
    let DocumentSpec {
        type_name,
        fields,
        kind,
        key,
        id_field,
        scope_field,
        changes,
        nudge,
        registry,
        ttl_ms,
        outbox,
        unscoped,
        schema,
        ..
    } = *spec;
    let outbox = match outbox {
        Some(o) => {
            let (stream, ttl) = (o.stream, o.event_ttl_ms);
            let events = match o.events {
                Some(e) => quote!(::core::option::Option::Some(#e)),
                None => quote!(::core::option::Option::None),
            };
            quote!(::core::option::Option::Some(#p::OutboxSpec { stream: #stream, events: #events, event_ttl_ms: #ttl }))
        }
        None => quote!(::core::option::Option::None),
    };
    let changes = match changes {
        Some(c) => quote!(::core::option::Option::Some(#c)),
        None => quote!(::core::option::Option::None),
    };
    let ttl_ms = match ttl_ms {
        Some(ms) => quote!(::core::option::Option::Some(#ms)),
        None => quote!(::core::option::Option::None),
    };
    let list = match &spec.list {
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
    let unique = spec.unique.iter().map(index_spec_tokens);
    let groups = spec.groups.iter().map(index_spec_tokens);
    quote! {
        #p::DocumentSpec {
            type_name: #type_name,
            fields: &[#(#fields),*],
            kind: #kind,
            key: #key,
            id_field: #id_field,
            scope_field: #scope_field,
            list: #list,
            unique: &[#(#unique),*],
            groups: &[#(#groups),*],
            changes: #changes,
            nudge: #nudge,
            registry: #registry,
            ttl_ms: #ttl_ms,
            outbox: #outbox,
            unscoped: #unscoped,
            schema: #schema,
        }
    }
}

/// Key builders for the document, its list and its indexes.
fn key_fns(c: &Checked<'_>, spec: &DocumentSpec<'_>) -> TokenStream {
    let (type_name, key) = (spec.type_name, spec.key);
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
    let indexes = c.unique.iter().map(|e| ("unique", e.index)).chain(c.groups.iter().map(|e| ("group", e.index)));
    let index_fns = indexes.map(|(what, ix)| {
        let f = format_ident!("{}_key", ix.name, span = ix.name_span);
        let doc = format!("Key of the {what} index `{}` of `{type_name}`: `{{prefix}}:{}`.", ix.name, ix.key_text);
        builder_fn(&f, &ix.key_text, &doc)
    });
    quote! {
        #doc_key_fn
        #list_fn
        #(#index_fns)*
    }
}

/// One query constructor per index, named after it.
fn query_fns(c: &Checked<'_>, type_name: &str) -> TokenStream {
    let p = private();
    let unique = c.unique.iter().enumerate().map(|(i, e)| (true, i, e));
    let all = unique.chain(c.groups.iter().enumerate().map(|(i, e)| (false, i, e)));
    let fns = all.map(|(unique, i, e)| {
        let ix = e.index;
        let f = format_ident!("{}", ix.name, span = ix.name_span);
        let params: Vec<Ident> = e.slots.iter().map(|(ph, _)| param_ident(ph)).collect();
        let (ty, what) = if unique {
            (
                quote!(#p::UniqueQuery<Self>),
                format!(
                    "Finds the `{type_name}` whose unique index `{}` (`{}`) has these values; run it with `Store::find`.",
                    ix.name, ix.key_text
                ),
            )
        } else {
            (
                quote!(#p::GroupQuery<Self>),
                format!(
                    "The ids in group index `{}` (`{}`) of `{type_name}`; run it with `Store::ids`.",
                    ix.name, ix.key_text
                ),
            )
        };
        quote! {
            #[doc = #what]
            pub fn #f(#(#params: &(impl #p::KeySegment + ?::core::marker::Sized)),*) -> #ty {
                <#ty>::new(#i, ::std::vec![#(::std::string::ToString::to_string(&*#p::KeySegment::key_segment(#params))),*])
            }
        }
    });
    quote!(#(#fns)*)
}

/// `<Ty as KeySegment>::key_segment(&self.field)`, at the field's type so a
/// type that is no key segment is reported there.
fn key_segment_expr(f: &Field) -> TokenStream {
    let p = private();
    let (ty, ident) = (&f.ty, &f.ident);
    quote_spanned!(ty.span()=> <#ty as #p::KeySegment>::key_segment(&self.#ident))
}

/// The index entry of one index: its key, and the values stored in the hash;
/// `None` when a value is absent (the document is not in that index).
fn index_entry(e: &Entry<'_>, type_name: &str) -> TokenStream {
    if e.index.each {
        return crate::each::each_entry(e.index, &e.slots, type_name);
    }
    let p = private();
    let f = format_ident!("{}_key", e.index.name);
    let mut lets = Vec::new();
    let mut args = Vec::new();
    let mut fields = Vec::new();
    for (i, (ph, src)) in e.slots.iter().enumerate() {
        let v = format_ident!("__v{}", i);
        let value = match src {
            Source::Id => {
                args.push(quote!(&*__id));
                continue;
            }
            Source::Scope => {
                args.push(quote!(&*__scope));
                continue;
            }
            Source::Value(Value::Method(m)) => {
                let (m, tmp) = (&m.ident, format_ident!("__t{}", i));
                let call = quote_spanned!(m.span()=> self.#m());
                lets.push(quote!(let #tmp = #call;));
                quote_spanned!(m.span()=> #p::IndexValue::index_value(&#tmp))
            }
            Source::Value(Value::Field(m, Some(ty))) => {
                let f = &m.ident;
                quote_spanned!(ty.span()=> <#ty as #p::IndexValue>::index_value(&self.#f))
            }
            // No such field: rustc reports it at the name.
            Source::Value(Value::Field(m, None)) => {
                let f = &m.ident;
                quote_spanned!(f.span()=> #p::IndexValue::index_value(&self.#f))
            }
        };
        lets.push(quote! {
            let ::core::option::Option::Some(#v) = #value else { break 'entry ::core::option::Option::None };
        });
        args.push(quote!(&*#v));
        fields.push(quote!((#ph, ::std::string::ToString::to_string(&*#v))));
    }
    // A conditional group: out of the set while `when` is false, and in
    // the hash a marker field named after the index while a member. The
    // condition is read as a `bool`, so another type is an error at `when`.
    let marker = &e.index.name;
    let condition = e.index.when.as_ref().map(|w| {
        let value = match w {
            Value::Method(m) => {
                let m = &m.ident;
                quote_spanned!(m.span()=> { let __w: bool = self.#m(); __w })
            }
            Value::Field(m, _) => {
                let f = &m.ident;
                quote_spanned!(f.span()=> { let __w: bool = self.#f; __w })
            }
        };
        if e.index.score.is_none() {
            fields.push(quote!((#marker, ::std::string::String::from("1"))));
        }
        quote! {
            if !#value {
                break 'entry ::core::option::Option::None;
            }
        }
    });
    // A sorted index: its score (or out of the index for `None`), kept in
    // the hash field named after the index; NaN and infinities are refused
    // as for a list score.
    if let Some(score) = &e.index.score {
        let value = match score {
            Value::Method(m) => {
                let m = &m.ident;
                quote_spanned!(m.span()=> #p::IndexScore::index_score(&self.#m()))
            }
            Value::Field(m, Some(ty)) => {
                let f = &m.ident;
                quote_spanned!(ty.span()=> <#ty as #p::IndexScore>::index_score(&self.#f))
            }
            Value::Field(m, None) => {
                let f = &m.ident;
                quote_spanned!(f.span()=> #p::IndexScore::index_score(&self.#f))
            }
        };
        lets.push(quote! {
            let ::core::option::Option::Some(__score) = #value else { break 'entry ::core::option::Option::None };
            if !__score.is_finite() {
                return ::core::result::Result::Err(#p::IndexError::NonFiniteScore { type_name: #type_name, score: __score });
            }
        });
        fields.push(quote!((#marker, ::std::string::ToString::to_string(&__score))));
    }
    quote! {
        'entry: {
            #condition
            #(#lets)*
            ::core::option::Option::Some(#p::IndexEntry {
                key: Self::#f(prefix, #(#args),*)?,
                fields: ::std::vec![#(#fields),*],
                more: ::std::vec::Vec::new(),
            })
        }
    }
}

/// The list entry: the list key and, for a sorted set, the score (NaN is
/// refused, it cannot be ordered).
fn list_entry(c: &Checked<'_>, spec: &DocumentSpec<'_>) -> TokenStream {
    let p = private();
    let (Some(list), Some(_)) = (&c.doc.list, &spec.list) else { return quote!(::core::option::Option::None) };
    let score = match &list.score {
        None => quote!(::core::option::Option::None),
        Some(v) => {
            let e = match v {
                Value::Field(m, Some(ty)) => {
                    let f = &m.ident;
                    quote_spanned!(ty.span()=> <#ty as #p::Score>::score(&self.#f))
                }
                Value::Field(m, None) => {
                    let f = &m.ident;
                    quote_spanned!(f.span()=> #p::Score::score(&self.#f))
                }
                Value::Method(m) => {
                    let m = &m.ident;
                    quote_spanned!(m.span()=> #p::Score::score(&self.#m()))
                }
            };
            let type_name = spec.type_name;
            quote! {{
                let __s: f64 = #e;
                // A sorted set takes `inf`, but the JSON document cannot hold
                // it (it would read back as `null`), and NaN has no order.
                if !__s.is_finite() {
                    return ::core::result::Result::Err(#p::IndexError::NonFiniteScore { type_name: #type_name, score: __s });
                }
                ::core::option::Option::Some(__s)
            }}
        }
    };
    // An unscoped type's list is one key with no placeholder.
    let key = if spec.unscoped { quote!(Self::list_key(prefix)?) } else { quote!(Self::list_key(prefix, &*__scope)?) };
    quote!(::core::option::Option::Some(#p::ListEntry { key: #key, score: #score }))
}

/// The type's items. `refused`: the build fails with errors about the type
/// already, so its `SPEC` is the refused stand-in (a keyspace listing the
/// type reports nothing more about it) and its scripts are empty.
fn emit(c: &Checked<'_>, spec: &DocumentSpec<'_>, refused: bool) -> TokenStream {
    let p = private();
    let ident = &c.doc.ident;
    let (spec_value, [put_script, delete_script, find_script, step_script]) = if refused {
        let name = spec.type_name;
        (quote!(#p::invalid_spec(#name)), Default::default())
    } else {
        (spec_tokens(spec), scripts(spec))
    };
    let id_expr = key_segment_expr(c.id);
    // The document key's values in template order: the id, and the scope
    // for ids unique per scope.
    let doc_key_args: Vec<TokenStream> = KeyTemplate::parse(spec.key)
        .map(|t| t.placeholders().map(|p| if p == "scope" { quote!(&*__scope) } else { quote!(&*__id) }).collect())
        .unwrap_or_default();
    let scope_expr = match c.scope {
        Some(f) => key_segment_expr(f),
        None => quote!(#p::Cow::Borrowed(#p::UNSCOPED)),
    };
    let list_entry = list_entry(c, spec);
    let unique_entries = c.unique.iter().map(|e| index_entry(e, spec.type_name));
    let group_entries = c.groups.iter().map(|e| index_entry(e, spec.type_name));
    let key_fns = key_fns(c, spec);
    let query_fns = query_fns(c, spec.type_name);
    // Only a type with a list gets `Store::list`: a call on a type without
    // one is a compile error, not a run-time surprise.
    let has_list = spec.list.map(|_| {
        quote! {
            #[automatically_derived]
            impl #p::HasList for #ident {}
        }
    });
    let has_changes = spec.changes.map(|_| {
        quote! {
            #[automatically_derived]
            impl #p::HasChanges for #ident {}
        }
    });
    // Only a type with an outbox gets `Store::step`.
    let has_outbox = spec.outbox.map(|_| {
        quote! {
            #[automatically_derived]
            impl #p::HasOutbox for #ident {}
        }
    });
    quote! {
        const _: () = {
            #has_list
            #has_changes
            #has_outbox

            #[automatically_derived]
            impl #p::Document for #ident {
                const SPEC: #p::DocumentSpec<'static> = #spec_value;

                const PUT_SCRIPT: &'static str = #put_script;
                const DELETE_SCRIPT: &'static str = #delete_script;
                const FIND_SCRIPT: &'static str = #find_script;
                const STEP_SCRIPT: &'static str = #step_script;

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
                        key: Self::key(prefix, #(#doc_key_args),*)?,
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
                #key_fns
                #query_fns
            }
        };
    }
}

#[cfg(test)]
mod tests;
