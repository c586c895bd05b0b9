//! Runs the schema checks on the spec and reports each problem at the
//! attribute (or bound placeholder) it is about.

use proc_macro2::Span;
use syn::LitStr;

use microdcs_schema::{Attr, DocumentSpec, SchemaErrorKind, check_document};

use crate::ast::{Document, Index, Value};
use crate::ctxt::Ctxt;
use syn::Type;

pub(crate) fn schema(cx: &mut Ctxt, doc: &Document, spec: &DocumentSpec<'_>) {
    // Unbound placeholders were reported while resolving, with a suggestion.
    for e in check_document(spec).into_iter().filter(|e| !matches!(e.kind, SchemaErrorKind::Unbound(_))) {
        cx.error_at(span_of(doc, &e.origin.attr, e.origin.placeholder.as_deref()), &e);
    }
}

/// The tokens an error is about: the literal of the attribute, or for an
/// index the explicit binding of the placeholder concerned; the type name
/// when the attribute was not written (its default is at fault).
fn span_of(doc: &Document, attr: &Attr, placeholder: Option<&str>) -> Span {
    let ident = doc.ident.span();
    let lit_or = |l: Option<&LitStr>| l.map_or(ident, LitStr::span);
    let index = |ix: Option<&Index>| {
        let Some(ix) = ix else { return ident };
        placeholder
            .and_then(|p| ix.written.iter().find(|i| *i == p))
            .map_or_else(|| ix.key.span(), proc_macro2::Ident::span)
    };
    match attr {
        Attr::Kind => lit_or(doc.kind.as_ref()),
        Attr::Key => lit_or(doc.key.as_ref()),
        Attr::List => doc.list.as_ref().map_or(ident, |l| l.key.as_ref().map_or(l.span, LitStr::span)),
        Attr::Unique(i) => index(doc.unique.get(*i)),
        Attr::Group(i) => index(doc.groups.get(*i)),
        Attr::Changes => doc.changes.as_ref().map_or(doc.ident.span(), crate::attr::ChangesAttr::span),
        Attr::Nudge => lit_or(doc.nudge.as_ref()),
        Attr::Registry => lit_or(doc.registry.as_ref()),
        Attr::Ttl => lit_or(doc.ttl.as_ref().map(|(l, _)| l)),
        Attr::Outbox => doc.outbox.as_ref().map_or(ident, |o| o.stream.span()),
        Attr::OutboxEvents => doc.outbox.as_ref().map_or(ident, |o| o.events.as_ref().map_or(o.span, LitStr::span)),
        Attr::Family(_) | Attr::Document(_) => ident,
    }
}

/// What a field's type plainly is, from its spelling: `Option`, text or a
/// number; `None` for anything else (an alias may be anything, so it is
/// left to rustc).
fn plain_shape(ty: &Type) -> Option<&'static str> {
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?.ident.to_string();
    Some(match last.as_str() {
        "Option" => "an `Option`",
        "String" | "str" => "text",
        "Vec" => "a `Vec`",
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" | "u8" | "u16" | "u32" | "u64" | "u128" | "usize" | "f32"
        | "f64" => "a number",
        _ => return None,
    })
}

/// `when = field` on a field that is plainly not a `bool`: our message at
/// the binding, with the method to write instead (rustc would only say
/// "expected `bool`", and for an `Option<bool>` suggest `.expect`).
pub(crate) fn when(cx: &mut Ctxt, v: &Value) {
    let Value::Field(m, Some(ty)) = v else { return };
    let Some(shape) = plain_shape(ty) else { return };
    let body = if shape == "an `Option`" { format!("self.{} == Some(true)", m.name) } else { "...".to_owned() };
    cx.error_spanned_by(
        &m.ident,
        format_args!(
            "`when` takes a `bool`, and `{name}` is {shape}: bind a `&self` method that says when the document \
             is a member, e.g. `when = is_{name}()` with `fn is_{name}(&self) -> bool {{ {body} }}`",
            name = m.name,
        ),
    );
}

/// A list score on an `Option` field: every listed document has a score,
/// so point at the index that leaves out documents without one.
pub(crate) fn list_score(cx: &mut Ctxt, v: &Value) {
    let Value::Field(m, Some(ty)) = v else { return };
    if plain_shape(ty) != Some("an `Option`") {
        return;
    }
    cx.error_spanned_by(
        &m.ident,
        format_args!(
            "a list score cannot be an `Option`: every document of the type is in its list; for a score some \
             documents lack, use a sorted index, `sorted(key = \"...:{{scope}}\", score = {})`, which leaves out \
             documents whose score is `None`",
            m.name
        ),
    );
}
