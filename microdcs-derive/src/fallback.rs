//! What is emitted when the attributes do not check: the errors plus a stub
//! `Document` impl, so that follow-on errors (a keyspace listing this type,
//! calls to `Store` methods) do not drown the real one.

use proc_macro2::TokenStream;
use quote::quote;
use syn::DeriveInput;

pub(crate) fn expand(input: &DeriveInput, err: &syn::Error) -> TokenStream {
    let mut out = err.to_compile_error();
    out.extend(stub(input));
    out
}

/// The stub is never run: the crate fails to compile with the errors above.
/// A generic type gets none, since its parameters could not be named here.
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
