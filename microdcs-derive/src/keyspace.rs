//! `keyspace!`: document types plus the non-document key families of one
//! application, with builders per family and a compile-time overlap check.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Attribute, Ident, LitStr, Token, Visibility};

use microdcs_schema::{Attr, FamilyKind, FamilySpec, KeyType, KeyspaceSpec, check_keyspace};

use crate::ctxt::Ctxt;
use crate::keys::builder_fn;

pub(crate) struct FamilyDecl {
    name: Ident,
    ty: Ident,
    /// `value<T>`, `hash<K, V>`, `channel<T>`: the types of the values.
    type_args: Vec<syn::Type>,
    /// `ttl = "60s"`: the lifetime every write gives a key of the family,
    /// and its milliseconds (or why the text is no lifetime).
    ttl: Option<(LitStr, Result<u64, String>)>,
    key_type: Option<KeyType>,
    key: LitStr,
}

pub(crate) struct KeyspaceInput {
    attrs: Vec<Attribute>,
    vis: Visibility,
    name: Ident,
    documents: Vec<syn::Path>,
    documents_kw: Option<Ident>,
    families: Vec<FamilyDecl>,
    /// `shard: scope`: the keyspace spreads over a cluster by scope.
    shard: Option<Ident>,
}

const TYPES: &[&str] = &FamilyKind::WORDS;

fn key_type(name: &str) -> Option<KeyType> {
    FamilyKind::from_word(name).and_then(FamilyKind::key_type)
}

impl KeyspaceInput {
    /// The attributes written before the keyspace's name.
    pub(crate) fn attrs(&self) -> &[Attribute] {
        &self.attrs
    }
}

impl Parse for KeyspaceInput {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis: Visibility = input.parse()?;
        let name: Ident = input.parse()?;
        let body;
        syn::braced!(body in input);
        let mut documents = Vec::new();
        let mut documents_kw = None;
        let mut families = Vec::new();
        let mut shard: Option<Ident> = None;
        // Every entry is parsed, an error recorded and the entry skipped,
        // so one build reports every malformed entry, each at its span.
        let mut errors: Option<syn::Error> = None;
        let mut record = |e: syn::Error| match &mut errors {
            Some(all) => all.combine(e),
            None => errors = Some(e),
        };
        while !body.is_empty() {
            let entry: Ident = match body.parse() {
                Ok(e) => e,
                Err(e) => {
                    record(e);
                    skip_entry(&body);
                    if body.parse::<Option<Token![,]>>()?.is_none() {
                        break;
                    }
                    continue;
                }
            };
            let parsed = body.parse::<Token![:]>().and_then(|_| {
                if entry == "documents" {
                    if documents_kw.is_some() {
                        return Err(syn::Error::new(entry.span(), "duplicate `documents` list"));
                    }
                    let list;
                    syn::bracketed!(list in body);
                    let paths: Punctuated<syn::Path, Token![,]> = list.parse_terminated(syn::Path::parse, Token![,])?;
                    documents.extend(paths);
                    documents_kw = Some(entry.clone());
                    Ok(())
                } else if entry == "shard" && !body.peek2(syn::token::Paren) && !body.peek2(Token![<]) {
                    // `shard: scope`; a family named `shard` has its type
                    // and template after the colon instead.
                    let by: Ident = body.parse()?;
                    if by != "scope" {
                        return Err(syn::Error::new(
                            by.span(),
                            format_args!(
                                "a keyspace is sharded by its documents' scope only: write `shard: scope`, not `shard: {by}`"
                            ),
                        ));
                    }
                    if shard.is_some() {
                        return Err(syn::Error::new(entry.span(), "duplicate `shard`"));
                    }
                    shard = Some(by);
                    Ok(())
                } else {
                    families.push(parse_family(entry.clone(), &body)?);
                    Ok(())
                }
            });
            if let Err(e) = parsed {
                record(e);
                skip_entry(&body);
            }
            if body.is_empty() {
                break;
            }
            if let Err(e) = body.parse::<Token![,]>() {
                record(e);
                break;
            }
        }
        if let Some(e) = errors {
            return Err(e);
        }
        Ok(KeyspaceInput { attrs, vis, name, documents, documents_kw, families, shard })
    }
}

/// One family entry after its `name:`, as `ty<args>("template", ttl = "...")`.
fn parse_family(entry: Ident, body: ParseStream<'_>) -> syn::Result<FamilyDecl> {
    let ty: Ident = body.parse()?;
    let mut type_args = Vec::new();
    if body.peek(Token![<]) {
        body.parse::<Token![<]>()?;
        loop {
            type_args.push(body.parse::<syn::Type>()?);
            if body.peek(Token![>]) {
                break;
            }
            body.parse::<Token![,]>()?;
        }
        body.parse::<Token![>]>()?;
    }
    let expected: &[usize] = match ty.to_string().as_str() {
        "value" => &[1],
        "hash" => &[0, 2],
        "channel" => &[0, 1],
        _ => &[0],
    };
    if !expected.contains(&type_args.len()) {
        let msg = match ty.to_string().as_str() {
            "value" => {
                "`value` needs the type of its values: `value<u32>(\"...\")` (or `string(\"...\")` for text)".to_owned()
            }
            "hash" => {
                "`hash` takes the types of its fields and values, `hash<String, u64>(\"...\")`, or none".to_owned()
            }
            "channel" => "`channel` takes the type of its messages, `channel<u64>(\"...\")`, or none".to_owned(),
            other => format!("`{other}` takes no type: only `value<T>`, `hash<K, V>` and `channel<T>` do"),
        };
        return Err(syn::Error::new(ty.span(), msg));
    }
    let content;
    syn::parenthesized!(content in body);
    let key: LitStr = content.parse()?;
    let mut ttl = None;
    if content.peek(Token![,]) {
        content.parse::<Token![,]>()?;
        let name: Ident = content.parse()?;
        if name != "ttl" {
            return Err(syn::Error::new(
                name.span(),
                "after the template a family takes only `ttl = \"...\"`, e.g. `hash(\"seen:{pod}\", ttl = \"60s\")`",
            ));
        }
        content.parse::<Token![=]>()?;
        let lit = content.parse::<LitStr>()?;
        let ms = crate::ast::duration_ms(&lit, "ttl");
        ttl = Some((lit, ms));
    }
    if !content.is_empty() {
        return Err(
            content.error("expected the key template and at most `ttl = \"...\"`, e.g. `string(\"ce:dedupe:{hash}\")`")
        );
    }
    Ok(FamilyDecl { key_type: key_type(&ty.to_string()), name: entry, ty, type_args, ttl, key })
}

/// Skips what is left of a refused entry, up to the `,` that ends it, so
/// the entries after it are still parsed and every problem is reported.
fn skip_entry(body: ParseStream<'_>) {
    let _ = body.step(|cursor| {
        let mut rest = *cursor;
        // A `,` between `<` and `>` separates type arguments, not entries.
        let mut angle = 0usize;
        while let Some((tt, next)) = rest.token_tree() {
            if let proc_macro2::TokenTree::Punct(p) = &tt {
                match p.as_char() {
                    '<' => angle += 1,
                    '>' => angle = angle.saturating_sub(1),
                    ',' if angle == 0 => return Ok(((), rest)),
                    _ => {}
                }
            }
            rest = next;
        }
        Ok(((), rest))
    });
}

pub(crate) fn expand(input: &KeyspaceInput) -> TokenStream {
    let mut cx = Ctxt::new();
    for f in &input.families {
        if f.key_type.is_none() {
            let hint = microdcs_schema::suggest(&f.ty.to_string(), TYPES.iter().copied())
                .map(|s| format!("; did you mean `{s}`?"))
                .unwrap_or_default();
            cx.error_spanned_by(
                &f.ty,
                format_args!("unknown key type `{}` (expected one of: {}){hint}", f.ty, TYPES.join(", ")),
            );
        }
    }
    for f in &input.families {
        if f.ty == "content"
            && microdcs_schema::KeyTemplate::parse(&f.key.value()).is_ok_and(|t| !t.placeholders().eq(["hash"]))
        {
            cx.error_spanned_by(&f.key, "a content family has exactly one placeholder, `{hash}` (the text's digest)");
        }
        if let Some((ttl, ms)) = &f.ttl {
            let ty = f.ty.to_string();
            if matches!(ty.as_str(), "stream" | "channel" | "content" | "rate_limit") {
                cx.error_spanned_by(
                    ttl,
                    format_args!(
                        "a `{ty}` family takes no `ttl`: {}",
                        match ty.as_str() {
                            "stream" => "stream entries leave by trimming, not by expiry",
                            "channel" => "a channel holds nothing",
                            "content" => "texts by digest are kept while referenced",
                            _ => "its window and backoff are its lifetime",
                        }
                    ),
                );
            } else if let Err(why) = ms {
                cx.error_spanned_by(ttl, why);
            }
        }
        // The keyspace type's own items; a family of that name would clash.
        if f.name == "open" || f.name == "SPEC" {
            cx.error_spanned_by(
                &f.name,
                format_args!("`{}` is taken by the keyspace itself; name the family otherwise", f.name),
            );
        }
    }
    if input.documents_kw.is_none() && input.families.is_empty() {
        cx.error_spanned_by(
            &input.name,
            "an empty keyspace: list `documents: [...]` and families like `dedupe: string(\"ce:dedupe:{hash}\")`",
        );
    }
    // Declared families are checked here, with spans; document families are
    // compared with everything by the constant evaluation emitted below.
    let names: Vec<String> = input.families.iter().map(|f| f.name.to_string()).collect();
    let keys: Vec<String> = input.families.iter().map(|f| f.key.value()).collect();
    let specs: Vec<FamilySpec<'_>> = input
        .families
        .iter()
        .zip(names.iter().zip(&keys))
        .map(|(f, (n, k))| FamilySpec::new(n, k, f.key_type.unwrap_or(KeyType::String)))
        .collect();
    let ks_name = input.name.to_string();
    let spec = KeyspaceSpec { name: &ks_name, documents: &[], families: &specs, shard: None };
    for e in check_keyspace(&spec) {
        let span = match &e.origin.attr {
            Attr::Family(n) => {
                input.families.iter().rev().find(|f| f.name == n).map_or(input.name.span(), |f| f.key.span())
            }
            _ => input.name.span(),
        };
        cx.error_at(span, e);
    }
    if let Err(e) = cx.check() {
        return e.to_compile_error();
    }

    let p = crate::runtime::private();
    let KeyspaceInput { attrs, vis, name, documents, .. } = input;
    // `#[microdcs(...)]` configures this expansion; the rest (docs, derives)
    // goes on the generated type.
    let outer = attrs.iter().filter(|a| !a.path().is_ident("microdcs"));
    let family_specs = input.families.iter().map(|f| {
        let n = f.name.to_string();
        let k = &f.key;
        let t = match f.key_type.unwrap_or(KeyType::String) {
            KeyType::String => quote!(String),
            KeyType::Hash => quote!(Hash),
            KeyType::Set => quote!(Set),
            KeyType::SortedSet => quote!(SortedSet),
            KeyType::Stream => quote!(Stream),
            KeyType::List => quote!(List),
            KeyType::Channel => quote!(Channel),
        };
        let kind = format_ident!(
            "{}",
            format!("{:?}", FamilyKind::from_word(&f.ty.to_string()).unwrap_or(FamilyKind::String))
        );
        let ttl = match &f.ttl {
            Some((_, Ok(ms))) => quote!(::core::option::Option::Some(#ms)),
            _ => quote!(::core::option::Option::None),
        };
        quote!(#p::FamilySpec { name: #n, key: #k, key_type: #p::KeyType::#t, kind: #p::FamilyKind::#kind, ttl_ms: #ttl })
    });
    let builders = input.families.iter().map(|f| {
        let suffix = if f.key_type == Some(KeyType::Channel) { "channel" } else { "key" };
        let fname = format_ident!("{}_{}", f.name, suffix, span = f.name.span());
        let what = f.key_type.map_or("string", KeyType::type_name);
        let builder = builder_fn(
            &fname,
            &f.key.value(),
            &format!("The {what} `{{prefix}}:{}` (family `{}`).", f.key.value(), f.name),
        );
        let typed = typed_fn(name, f, &fname);
        quote!(#builder #typed)
    });
    let doc_specs =
        documents.iter().map(|d| quote_spanned!(syn::spanned::Spanned::span(d)=> <#d as #p::Document>::SPEC));
    // A panic in a named constant reads best of what rustc allows: the
    // message comes first ("evaluation panicked: <message>", one problem a
    // line), the span is the keyspace's name and the label names the check
    // (`assert!` or an unnamed constant would say "evaluation of `_::_`").
    // An unused constant in a block is still evaluated.
    let check = quote_spanned! {name.span()=>
        #[allow(dead_code)]
        const KEYSPACE_CHECK: () = {
            let problems: #p::ConstMessage =
                #p::keyspace_problem::<{ <#name>::SPEC.family_count() }>(&<#name>::SPEC);
            if !problems.is_empty() {
                ::core::panic!("{}", problems.as_str());
            }
        };
    };
    let spec_doc = format!("The spec of keyspace `{name}`: its document types and key families.");
    let shard = match &input.shard {
        Some(_) => quote!(::core::option::Option::Some("scope")),
        None => quote!(::core::option::Option::None),
    };
    quote! {
        #(#outer)*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #vis struct #name;

        const _: () = {
            #[automatically_derived]
            impl #name {
                #[doc = #spec_doc]
                pub const SPEC: #p::KeyspaceSpec<'static> = #p::KeyspaceSpec {
                    name: #ks_name,
                    documents: &[#(#doc_specs),*],
                    families: &[#(#family_specs),*],
                    shard: #shard,
                };
                #(#builders)*

                /// This keyspace on a connection: stores of its document types.
                pub fn open(valkey: #p::Valkey) -> #p::KeyspaceHandle<Self> {
                    #p::open_keyspace(valkey)
                }
            }

            #[automatically_derived]
            impl #p::Keyspace for #name {
                const SPEC: #p::KeyspaceSpec<'static> = <#name>::SPEC;
            }

            #(
                #[automatically_derived]
                impl #p::InKeyspace<#name> for #documents {}
            )*

            #[automatically_derived]
            impl #p::EachDocument for #name {
                fn each_document<V: #p::DocumentVisitor<Self>>(v: &mut V) {
                    // A type with the JSON codec is visited, any other
                    // skipped: the first candidate of `&&Probe` exists
                    // only for the former (method resolution, no bound
                    // the keyspace would fail on).
                    #[allow(unused_imports)]
                    use #p::{VisitJson as _, VisitOther as _};
                    #( (&&#p::Probe::<Self, #documents>::new()).visit_probe(v); )*
                    let _ = v;
                }
            }
            #check
        };
    }
}

/// The typed handle of one key of family `f` (`Plant::reference(&plant,
/// kind, scope)`), made from its key builder `builder`; nothing for a stream
/// (read and written through `Streams`).
fn typed_fn(keyspace: &Ident, f: &FamilyDecl, builder: &Ident) -> TokenStream {
    let p = crate::runtime::private();
    let handle = match (f.ty.to_string().as_str(), f.key_type) {
        ("value", _) => {
            let t = &f.type_args;
            quote!(#p::TypedValue<#(#t),*>)
        }
        ("hash", _) if !f.type_args.is_empty() => {
            let t = &f.type_args;
            quote!(#p::TypedHash<#(#t),*>)
        }
        ("channel", _) if !f.type_args.is_empty() => {
            let t = &f.type_args;
            quote!(#p::TypedChannel<#(#t),*>)
        }
        ("counter", _) => quote!(#p::CounterKey),
        ("rate_limit", _) => quote!(#p::RateLimitKey),
        (_, Some(KeyType::List)) => quote!(#p::ListKey),
        (_, Some(KeyType::String)) => quote!(#p::StringKey),
        (_, Some(KeyType::Hash)) => quote!(#p::HashKey),
        (_, Some(KeyType::Set)) => quote!(#p::SetKey),
        (_, Some(KeyType::SortedSet)) => quote!(#p::SortedSetKey),
        (_, Some(KeyType::Channel)) => quote!(#p::ChannelKey),
        _ => return TokenStream::new(),
    };
    let Ok(t) = microdcs_schema::KeyTemplate::parse(&f.key.value()) else { return TokenStream::new() };
    if f.ty == "content" {
        // A family of texts by digest: the handle is the family itself.
        let name = &f.name;
        let key = &f.key;
        let doc = format!("Texts of family `{name}` (`{}`) stored and read by SHA-256 digest.", f.key.value());
        return quote! {
            #[doc = #doc]
            pub fn #name(
                handle: &#p::KeyspaceHandle<#keyspace>,
            ) -> ::core::result::Result<#p::ContentFamily, #p::Error> {
                #p::ContentFamily::from_template(handle.valkey().clone(), #key)
            }
        };
    }
    let params: Vec<Ident> = t.placeholders().map(crate::keys::param_ident).collect();
    let name = &f.name;
    let family = name.to_string();
    let ttl = match f.ttl.as_ref().map(|(_, ms)| ms) {
        Some(Ok(ms)) => quote!(::core::option::Option::Some(#ms)),
        _ => quote!(::core::option::Option::None),
    };
    let doc = format!(
        "Typed operations on one key of family `{name}` (`{}`), one round trip each.\n\n# Errors\nA value that is empty or longer than `MAX_VALUE_LEN` bytes.",
        f.key.value()
    );
    quote! {
        #[doc = #doc]
        pub fn #name(
            handle: &#p::KeyspaceHandle<#keyspace>,
            #(#params: &(impl #p::KeySegment + ?::core::marker::Sized),)*
        ) -> ::core::result::Result<#handle, #p::Error> {
            let key = Self::#builder(handle.valkey().prefix(), #(#params),*).map_err(#p::Error::Key)?;
            ::core::result::Result::Ok(<#handle as #p::FromKey>::from_family_key(handle.valkey().clone(), #family, key, #ttl))
        }
    }
}
