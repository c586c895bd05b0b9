//! Generated key builders: straight-line code per template, no parsing at run time.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::Ident;

use microdcs_schema::{Atom, KeyTemplate};

/// The parameter name for a placeholder; keywords get a trailing `_`.
pub(crate) fn param_ident(placeholder: &str) -> Ident {
    match syn::parse_str::<Ident>(placeholder) {
        Ok(_) if placeholder == "prefix" => format_ident!("prefix_"),
        Ok(mut i) => {
            i.set_span(Span::call_site());
            i
        }
        Err(_) => format_ident!("{}_", placeholder),
    }
}

/// `pub fn name(prefix: &KeyPrefix, a: &(impl KeySegment + ?Sized), ...) -> Result<String, KeyError>`
/// for a valid template.
pub(crate) fn builder_fn(name: &Ident, template: &str, doc: &str) -> TokenStream {
    let p = crate::runtime::private();
    let Ok(t) = KeyTemplate::parse(template) else {
        return TokenStream::new();
    };
    // One parameter per placeholder, in order, named as it is met.
    let mut params: Vec<Ident> = Vec::new();
    let mut body = Vec::new();
    // Literal runs are merged into one push_str.
    let mut lit = String::new();
    for seg in t.segments() {
        lit.push(':');
        for (j, atom) in seg.iter().enumerate() {
            if j > 0 {
                lit.push('|');
            }
            match atom {
                Atom::Literal(l) => lit.push_str(l),
                Atom::Placeholder(ph) | Atom::HashTag(ph) => {
                    let tag = matches!(atom, Atom::HashTag(_));
                    if tag {
                        lit.push('{');
                    }
                    if !lit.is_empty() {
                        body.push(quote!(__k.push_str(#lit);));
                        lit.clear();
                    }
                    let arg = param_ident(ph);
                    body.push(quote! {
                        #p::push_segment(&mut __k, &#p::KeySegment::key_segment(#arg), #template, #ph)?;
                    });
                    params.push(arg);
                    if tag {
                        lit.push('}');
                    }
                }
            }
        }
    }
    if !lit.is_empty() {
        body.push(quote!(__k.push_str(#lit);));
    }
    let cap = template.len() + 24;
    let ret = quote!(::core::result::Result<::std::string::String, #p::KeyError>);
    let errors_doc = "# Errors\nA value that is empty or longer than `MAX_VALUE_LEN` bytes.";
    quote! {
        #[doc = #doc]
        #[doc = ""]
        #[doc = #errors_doc]
        pub fn #name(
            prefix: &#p::KeyPrefix,
            #(#params: &(impl #p::KeySegment + ?::core::marker::Sized),)*
        ) -> #ret {
            let mut __k = ::std::string::String::with_capacity(prefix.as_str().len() + #cap);
            __k.push_str(prefix.as_str());
            #(#body)*
            ::core::result::Result::Ok(__k)
        }
    }
}
