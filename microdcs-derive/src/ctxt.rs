//! Error accumulation: every problem is collected and reported together.

use std::fmt::Display;

use quote::ToTokens;

/// Collects errors during parsing and checking (like serde_derive's `Ctxt`).
///
/// The errors must be taken with [`Ctxt::check`]; dropping a `Ctxt` without
/// doing so would silently lose them, so it is asserted against on drop.
pub(crate) struct Ctxt {
    /// `None` once `check` has taken the errors.
    errors: Option<Vec<syn::Error>>,
}

impl Ctxt {
    pub(crate) fn new() -> Self {
        Ctxt { errors: Some(Vec::new()) }
    }

    pub(crate) fn error_spanned_by(&mut self, tokens: impl ToTokens, msg: impl Display) {
        self.syn_error(syn::Error::new_spanned(tokens.into_token_stream(), msg));
    }

    pub(crate) fn error_at(&mut self, span: proc_macro2::Span, msg: impl Display) {
        self.syn_error(syn::Error::new(span, msg));
    }

    pub(crate) fn syn_error(&mut self, err: syn::Error) {
        // `errors` is only `None` after `check` consumed `self`, so this
        // always pushes.
        if let Some(errors) = &mut self.errors {
            errors.push(err);
        }
    }

    pub(crate) fn has_errors(&self) -> bool {
        self.errors.as_ref().is_some_and(|e| !e.is_empty())
    }

    /// All errors as one, or `Ok` if there were none.
    pub(crate) fn check(mut self) -> Result<(), syn::Error> {
        let mut iter = self.errors.take().unwrap_or_default().into_iter();
        let Some(mut first) = iter.next() else { return Ok(()) };
        for e in iter {
            first.combine(e);
        }
        Err(first)
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        // A forgotten `check` is a bug in this crate, not in the user's code.
        // Asserting only when not already unwinding keeps a first panic's
        // message from being replaced by an abort.
        if self.errors.is_some() && !std::thread::panicking() {
            panic!("microdcs-derive: Ctxt dropped without check()");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Ctxt;
    use proc_macro2::Span;

    #[test]
    fn check_combines_all_errors() {
        let mut cx = Ctxt::new();
        assert!(!cx.has_errors());
        cx.error_at(Span::call_site(), "first");
        cx.error_at(Span::call_site(), "second");
        assert!(cx.has_errors());
        let messages: Vec<String> = cx.check().unwrap_err().into_iter().map(|e| e.to_string()).collect();
        assert_eq!(messages, ["first", "second"]);
    }

    #[test]
    fn check_without_errors_is_ok() {
        assert!(Ctxt::new().check().is_ok());
    }

    #[test]
    #[should_panic(expected = "dropped without check")]
    fn dropping_unchecked_panics() {
        let _cx = Ctxt::new();
    }
}
