//! Error accumulation: every problem is collected and reported together.

use std::fmt::Display;

use quote::ToTokens;

/// Collects errors during parsing and checking (like serde_derive's `Ctxt`).
#[derive(Default)]
pub(crate) struct Ctxt {
    errors: Vec<syn::Error>,
}

impl Ctxt {
    pub(crate) fn error_spanned_by(&mut self, tokens: impl ToTokens, msg: impl Display) {
        self.errors.push(syn::Error::new_spanned(tokens.into_token_stream(), msg));
    }

    pub(crate) fn error_at(&mut self, span: proc_macro2::Span, msg: impl Display) {
        self.errors.push(syn::Error::new(span, msg));
    }

    pub(crate) fn syn_error(&mut self, err: syn::Error) {
        self.errors.push(err);
    }

    pub(crate) fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// All errors as one, or `Ok` if there were none.
    pub(crate) fn check(self) -> Result<(), syn::Error> {
        let mut iter = self.errors.into_iter();
        let Some(mut first) = iter.next() else { return Ok(()) };
        for e in iter {
            first.combine(e);
        }
        Err(first)
    }
}
