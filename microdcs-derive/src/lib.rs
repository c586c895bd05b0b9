//! Proc macros of microdcs. Use them through `microdcs-valkey`, which
//! re-exports them with the runtime they expand to.
//!
//! - `#[derive(Document)]`: key builders, the document spec, index entries.
//! - `keyspace!`: a keyspace of document types and other key families, with a
//!   compile-time check that no two families can render the same key.
//!
//! Parsing maps syn into the `microdcs-schema` model; every rule lives there.
#![forbid(unsafe_code)]

mod ast;
mod attr;
mod check;
mod ctxt;
mod expand;
mod fallback;
mod keys;
mod keyspace;
mod segment;
mod spec;

use proc_macro::TokenStream;

/// Derives `microdcs_valkey::Document`. See the `microdcs-valkey` docs.
#[proc_macro_derive(Document, attributes(microdcs))]
pub fn derive_document(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    expand::derive(&input).into()
}

/// Derives `microdcs_valkey::KeySegment` for an enum without fields.
#[proc_macro_derive(KeySegment, attributes(microdcs))]
pub fn derive_key_segment(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    segment::derive(&input).into()
}

/// Declares a keyspace. See the `microdcs-valkey` docs.
#[proc_macro]
pub fn keyspace(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as keyspace::KeyspaceInput);
    keyspace::expand(&input).into()
}
