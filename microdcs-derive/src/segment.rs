//! `#[derive(KeySegment)]`: a fieldless enum written into keys as one fixed
//! text per variant, so a `status: TaskStatus` field can be an index value
//! without a hand-written impl.

use proc_macro2::TokenStream;
use quote::quote;
use syn::ext::IdentExt;
use syn::{Data, DeriveInput, Fields, Ident, LitStr};

use crate::ctxt::Ctxt;

/// The `rename_all` rules, as serde spells them.
const RULES: &[&str] = &[
    "lowercase",
    "UPPERCASE",
    "PascalCase",
    "camelCase",
    "snake_case",
    "SCREAMING_SNAKE_CASE",
    "kebab-case",
    "SCREAMING-KEBAB-CASE",
];

/// One variant and the text it is written as.
struct Variant {
    ident: Ident,
    text: String,
}

pub(crate) fn derive(input: &DeriveInput) -> TokenStream {
    let mut cx = Ctxt::new();
    let variants = variants(&mut cx, input);
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let p = crate::runtime::private();
    // `{ .. }` matches a variant of any shape, so the impl compiles even for
    // a variant with fields (reported above): the only error is ours.
    let arms = variants.iter().map(|v| {
        let (var, text) = (&v.ident, &v.text);
        quote!(Self::#var { .. } => #text)
    });
    let body = if variants.is_empty() { quote!(match *self {}) } else { quote!(match self { #(#arms,)* }) };
    let errors = cx.check().err().map(|e| e.to_compile_error());
    let is_enum = matches!(input.data, Data::Enum(_));
    let impl_ = is_enum.then(|| {
        quote! {
            #[automatically_derived]
            impl #impl_generics #p::KeySegment for #ident #ty_generics #where_clause {
                fn key_segment(&self) -> #p::Cow<'_, str> {
                    #p::Cow::Borrowed(#body)
                }
            }
        }
    });
    quote! {
        #errors
        #impl_
    }
}

/// The variants with their texts; every problem is reported to `cx`.
fn variants(cx: &mut Ctxt, input: &DeriveInput) -> Vec<Variant> {
    let rule = rename_all(cx, &input.attrs);
    let data = match &input.data {
        Data::Enum(e) => e,
        Data::Struct(s) => {
            let (token, ident) = (s.struct_token, &input.ident);
            cx.error_spanned_by(
                quote!(#token #ident),
                "#[derive(KeySegment)] is for enums without fields; for a struct, implement \
                 `microdcs_valkey::KeySegment` by hand, or bind the index placeholder to a method \
                 that returns text (`p = method()`)",
            );
            return Vec::new();
        }
        Data::Union(u) => {
            let (token, ident) = (u.union_token, &input.ident);
            cx.error_spanned_by(quote!(#token #ident), "#[derive(KeySegment)] is for enums without fields");
            return Vec::new();
        }
    };
    let mut out: Vec<Variant> = Vec::new();
    for v in &data.variants {
        if !matches!(v.fields, Fields::Unit) {
            cx.error_spanned_by(
                &v.fields,
                format_args!(
                    "variant `{}` has fields: #[derive(KeySegment)] writes each variant as a fixed text, \
                     so variants cannot carry data; implement `microdcs_valkey::KeySegment` by hand, \
                     or bind the index placeholder to a method (`p = method()`)",
                    v.ident
                ),
            );
        }
        let name = v.ident.unraw().to_string();
        // A problem with the text is reported at the `rename` literal if
        // there is one, else at the variant's name.
        let (text, span) = match rename(cx, &v.attrs) {
            Some(lit) => (lit.value(), lit.span()),
            None => (rule.map_or_else(|| name.clone(), |r| apply(r, &name)), v.ident.span()),
        };
        if text.is_empty() {
            cx.error_at(
                span,
                format_args!(
                    "variant `{name}` would be written as empty text, which means \"not indexed\": \
                     a document with it would be in no index; give it a non-empty `rename`"
                ),
            );
        } else if text.len() > microdcs_schema::MAX_VALUE_LEN {
            cx.error_at(
                span,
                format_args!(
                    "variant `{name}` would be written as {} bytes; a key segment holds at most {}",
                    text.len(),
                    microdcs_schema::MAX_VALUE_LEN
                ),
            );
        } else if let Some(first) = out.iter().find(|o| o.text == text) {
            cx.error_at(
                span,
                format_args!(
                    "variants `{}` and `{name}` are both written as \"{text}\": they would share every \
                     index entry and could not be told apart; give one a different `rename`",
                    first.ident.unraw()
                ),
            );
        }
        out.push(Variant { ident: v.ident.clone(), text });
    }
    out
}

/// `#[microdcs(rename_all = "...")]` on the enum: the rule, if a valid one is given.
fn rename_all(cx: &mut Ctxt, attrs: &[syn::Attribute]) -> Option<&'static str> {
    let mut rule: Option<&'static str> = None;
    let mut seen = false;
    for attr in attrs.iter().filter(|a| a.path().is_ident("microdcs")) {
        let res = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                // Read by the macro's entry point.
                return crate::attr::skip_rest(&meta);
            }
            if !meta.path.is_ident("rename_all") {
                crate::attr::unknown(cx, &meta, &["rename_all", "crate"], "KeySegment attribute");
                return crate::attr::skip_rest(&meta);
            }
            let lit: LitStr = meta.value()?.parse()?;
            if seen {
                cx.error_spanned_by(&meta.path, "duplicate microdcs attribute `rename_all`");
                return Ok(());
            }
            seen = true;
            let value = lit.value();
            match RULES.iter().find(|r| **r == value) {
                Some(r) => rule = Some(r),
                None => {
                    let hint = microdcs_schema::suggest(&value, RULES.iter().copied())
                        .map(|s| format!("did you mean \"{s}\"? "))
                        .unwrap_or_default();
                    cx.error_spanned_by(
                        &lit,
                        format_args!(
                            "unknown rename_all rule \"{value}\"; {hint}expected one of: {}",
                            RULES.iter().map(|r| format!("\"{r}\"")).collect::<Vec<_>>().join(", ")
                        ),
                    );
                }
            }
            Ok(())
        });
        if let Err(e) = res {
            cx.syn_error(e);
        }
    }
    rule
}

/// `#[microdcs(rename = "...")]` on a variant.
fn rename(cx: &mut Ctxt, attrs: &[syn::Attribute]) -> Option<LitStr> {
    let mut out: Option<LitStr> = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("microdcs")) {
        let res = attr.parse_nested_meta(|meta| {
            if !meta.path.is_ident("rename") {
                crate::attr::unknown(cx, &meta, &["rename"], "variant attribute");
                return crate::attr::skip_rest(&meta);
            }
            let lit: LitStr = meta.value()?.parse()?;
            if out.is_some() {
                cx.error_spanned_by(&meta.path, "duplicate microdcs attribute `rename`");
            } else {
                out = Some(lit);
            }
            Ok(())
        });
        if let Err(e) = res {
            cx.syn_error(e);
        }
    }
    out
}

/// A variant name (PascalCase) under a rule, as serde converts it.
fn apply(rule: &str, name: &str) -> String {
    let snake = || {
        let mut s = String::with_capacity(name.len() + 4);
        for (i, ch) in name.char_indices() {
            if i > 0 && ch.is_uppercase() {
                s.push('_');
            }
            s.push(ch.to_ascii_lowercase());
        }
        s
    };
    match rule {
        "lowercase" => name.to_ascii_lowercase(),
        "UPPERCASE" => name.to_ascii_uppercase(),
        "camelCase" => {
            let mut chars = name.chars();
            chars.next().map(|c| c.to_ascii_lowercase().to_string() + chars.as_str()).unwrap_or_default()
        }
        "snake_case" => snake(),
        "SCREAMING_SNAKE_CASE" => snake().to_ascii_uppercase(),
        "kebab-case" => snake().replace('_', "-"),
        "SCREAMING-KEBAB-CASE" => snake().to_ascii_uppercase().replace('_', "-"),
        // PascalCase: variant names already are.
        _ => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use syn::parse_quote;

    use super::{RULES, apply, variants};
    use crate::ctxt::Ctxt;

    fn texts(input: &syn::DeriveInput) -> (Vec<String>, Vec<String>) {
        let mut cx = Ctxt::new();
        let v = variants(&mut cx, input);
        let errors = cx.check().err().map(|e| e.into_iter().map(|e| e.to_string()).collect()).unwrap_or_default();
        (v.into_iter().map(|v| v.text).collect(), errors)
    }

    #[test]
    fn rules_convert_like_serde() {
        let name = "OnHoldNow";
        let got: Vec<String> = RULES.iter().map(|r| apply(r, name)).collect();
        assert_eq!(
            got,
            [
                "onholdnow",
                "ONHOLDNOW",
                "OnHoldNow",
                "onHoldNow",
                "on_hold_now",
                "ON_HOLD_NOW",
                "on-hold-now",
                "ON-HOLD-NOW"
            ]
        );
    }

    #[test]
    fn variant_names_rename_all_and_rename() {
        let (t, e) = texts(&parse_quote! {
            #[microdcs(rename_all = "snake_case")]
            enum TaskStatus { NotStarted, Running, #[microdcs(rename = "held")] OnHold, r#Done }
        });
        assert_eq!(e, Vec::<String>::new());
        assert_eq!(t, ["not_started", "running", "held", "done"]);
        let (t, _) = texts(&parse_quote! { enum E { A, Bc } });
        assert_eq!(t, ["A", "Bc"]);
    }

    #[test]
    fn unknown_rule_suggests_the_closest() {
        let (_, e) = texts(&parse_quote! {
            #[microdcs(rename_all = "snakecase")]
            enum E { A }
        });
        assert_eq!(e.len(), 1);
        assert!(
            e[0].starts_with(
                "unknown rename_all rule \"snakecase\"; did you mean \"snake_case\"? expected one of: \"lowercase\""
            ),
            "{e:?}"
        );
    }

    #[test]
    fn empty_and_duplicate_texts_are_reported() {
        let (_, e) = texts(&parse_quote! {
            #[microdcs(rename_all = "lowercase")]
            enum E { #[microdcs(rename = "")] A, Ab, AB, #[microdcs(rename = "ab")] C }
        });
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(e[0].starts_with("variant `A` would be written as empty text"), "{e:?}");
        assert!(e[1].starts_with("variants `Ab` and `AB` are both written as \"ab\""), "{e:?}");
        assert!(e[2].starts_with("variants `Ab` and `C` are both written as \"ab\""), "{e:?}");
    }

    #[test]
    fn a_text_longer_than_a_key_segment_is_reported() {
        let long = "x".repeat(microdcs_schema::MAX_VALUE_LEN + 1);
        let input: syn::DeriveInput =
            syn::parse_str(&format!("enum E {{ #[microdcs(rename = \"{long}\")] A }}")).expect("an enum");
        let (_, e) = texts(&input);
        assert_eq!(e, ["variant `A` would be written as 1025 bytes; a key segment holds at most 1024"]);
    }

    #[test]
    fn only_fieldless_enums() {
        let (_, e) = texts(&parse_quote! { struct S { a: String } });
        assert!(e[0].starts_with("#[derive(KeySegment)] is for enums without fields"), "{e:?}");
        let (_, e) = texts(&parse_quote! { enum E { A(u8), B { x: u8 }, C } });
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e[0].starts_with("variant `A` has fields"), "{e:?}");
        assert!(e[1].starts_with("variant `B` has fields"), "{e:?}");
    }

    #[test]
    fn unknown_attributes_are_reported() {
        let (_, e) = texts(&parse_quote! {
            #[microdcs(rename_al = "lowercase")]
            enum E { #[microdcs(renam = "a")] A }
        });
        assert_eq!(
            e,
            [
                "unknown KeySegment attribute `rename_al`; did you mean `rename_all`?",
                "unknown variant attribute `renam`; did you mean `rename`?"
            ]
        );
    }
}
