//! The path generated code names the runtime by: `::microdcs_valkey`, or
//! what `#[microdcs(crate = "...")]` says (as serde's `crate` attribute),
//! for a crate that re-exports or renames the runtime.

use std::cell::RefCell;

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::{Attribute, LitStr};

thread_local! {
    // Set for the length of one expansion by `Scope`, read by every emitter;
    // a thread-local rather than a parameter threaded through each of them,
    // since a macro expansion runs on one thread from start to end.
    static RUNTIME: RefCell<Option<TokenStream>> = const { RefCell::new(None) };
}

/// The runtime crate's path in generated code.
pub(crate) fn path() -> TokenStream {
    RUNTIME.with(|r| r.borrow().clone()).unwrap_or_else(|| quote!(::microdcs_valkey))
}

/// The runtime's hidden module shared with the derive.
pub(crate) fn private() -> TokenStream {
    let rt = path();
    quote!(#rt::__private)
}

/// The override of one expansion; the default comes back when dropped, even
/// when the expansion panics.
pub(crate) struct Scope(());

impl Scope {
    pub(crate) fn enter(path: Option<syn::Path>) -> Self {
        RUNTIME.with(|r| *r.borrow_mut() = path.map(|p| p.into_token_stream()));
        Scope(())
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        RUNTIME.with(|r| *r.borrow_mut() = None);
    }
}

/// `crate = "path"` among the `#[microdcs(...)]` attributes, if any. Every
/// other entry is left to the attribute's own parser.
///
/// # Errors
/// A `crate` value that is not a string literal holding a path.
pub(crate) fn override_in(attrs: &[Attribute]) -> syn::Result<Option<syn::Path>> {
    let mut found = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("microdcs")) {
        // Only lists can hold `crate = ...`; other shapes are the attribute
        // parser's to report.
        if !matches!(attr.meta, syn::Meta::List(_)) {
            continue;
        }
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                let lit: LitStr = meta.value()?.parse()?;
                found = Some(lit.parse::<syn::Path>().map_err(|_| {
                    syn::Error::new(lit.span(), "`crate` names a path, such as `crate = \"my_app::microdcs_valkey\"`")
                })?);
            } else if meta.input.peek(syn::Token![=]) {
                let _: syn::Expr = meta.value()?.parse()?;
            } else if meta.input.peek(syn::token::Paren) {
                let content;
                syn::parenthesized!(content in meta.input);
                // Consumed whole: syn reports tokens a parser left behind.
                let _: TokenStream = content.parse()?;
            }
            Ok(())
        })?;
    }
    Ok(found)
}
