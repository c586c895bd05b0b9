//! The code a multi-valued index (`each(...)`) generates in
//! `index_entries`: kept apart from the other entries, which take one value.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::ast::{Index, Source, Value};

/// The entry of a multi-valued index (`each`): the collection's values,
/// each rendered into the key by the index's key builder, and the values
/// kept in the hash field named after the index. The collection is read
/// through `IndexValues` at its type, so another type is reported there.
pub(crate) fn each_entry(index: &Index, slots: &[(&str, &Source)], type_name: &str) -> TokenStream {
    let p = crate::runtime::private();
    let f = format_ident!("{}_key", index.name);
    let name = &index.name;
    let mut values = quote!(::std::vec::Vec::new());
    let mut args = Vec::new();
    for (_, src) in slots {
        match src {
            Source::Id => args.push(quote!(&*__id)),
            Source::Scope => args.push(quote!(&*__scope)),
            Source::Value(v) => {
                args.push(quote!(__each));
                values = match v {
                    Value::Method(m) => {
                        let m = &m.ident;
                        quote_spanned!(m.span()=> #p::IndexValues::index_values(&self.#m()))
                    }
                    Value::Field(m, Some(ty)) => {
                        let f = &m.ident;
                        quote_spanned!(ty.span()=> <#ty as #p::IndexValues>::index_values(&self.#f))
                    }
                    Value::Field(m, None) => {
                        let f = &m.ident;
                        quote_spanned!(f.span()=> #p::IndexValues::index_values(&self.#f))
                    }
                };
            }
        }
    }
    quote! {
        #p::IndexEntry::each(#type_name, #name, #values, |__each: &str| Self::#f(prefix, #(#args),*))?
    }
}
