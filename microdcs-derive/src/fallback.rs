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
    let rt = crate::runtime::path();
    let ident = &input.ident;
    let name = ident.to_string();
    if !input.generics.params.is_empty() {
        return TokenStream::new();
    }
    quote! {
        const _: () = {
            #[automatically_derived]
            impl #rt::__private::Document for #ident {
                const SPEC: #rt::__private::DocumentSpec<'static> =
                    #rt::__private::invalid_spec(#name);
                const PUT_SCRIPT: &'static str = "";
                const DELETE_SCRIPT: &'static str = "";
                const FIND_SCRIPT: &'static str = "";
                fn id(&self) -> #rt::__private::Cow<'_, str> {
                    ::core::panic!("invalid document type")
                }
                fn scope(&self) -> #rt::__private::Cow<'_, str> {
                    ::core::panic!("invalid document type")
                }
                fn index_entries(
                    &self,
                    _: &#rt::__private::KeyPrefix,
                ) -> ::core::result::Result<#rt::__private::IndexEntries, #rt::__private::IndexError> {
                    ::core::panic!("invalid document type")
                }
            }
        };
    }
}
