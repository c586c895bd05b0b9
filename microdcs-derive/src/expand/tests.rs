use syn::parse_quote;

use super::{Checked, derive};
use crate::ast::tests::parse;
use crate::ctxt::Ctxt;

#[test]
fn valid_input_gets_an_impl_and_index_functions() {
    let out = derive(&parse_quote! {
        #[microdcs(group(key = "o:bystate:{scope}:{state}"))]
        struct Order { id: String, scope: String, state: String }
    })
    .to_string();
    assert!(!out.contains("compile_error"), "{out}");
    assert!(out.contains("impl :: microdcs_valkey :: __private :: Document for Order"), "{out}");
    assert!(out.contains("pub fn by_state_key"), "{out}");
    assert!(out.contains("pub fn by_state ("), "{out}");
}

#[test]
fn invalid_input_gets_errors_and_the_stub() {
    let out = derive(&parse_quote! { struct Order {} }).to_string();
    assert!(out.contains("compile_error ! { \"`Order` has no id field"), "{out}");
    assert!(out.contains("invalid_spec (\"Order\")"), "{out}");
}

#[test]
fn an_unbound_placeholder_at_emission_is_an_error_not_a_panic() {
    let (mut doc, errors) = parse(&parse_quote! {
        #[microdcs(group(key = "o:bystate:{scope}:{state}"))]
        struct Order { id: String, scope: String, state: String }
    });
    assert_eq!(errors, Vec::<String>::new());
    // Drop a binding the checks would have required.
    doc.groups[0].bindings.retain(|b| b.placeholder != "state");
    let mut cx = Ctxt::new();
    assert!(Checked::new(&mut cx, &doc).is_none());
    let err = cx.check().unwrap_err();
    assert_eq!(err.to_string(), "placeholder `{state}` is not bound to a field or method");
}
