//! Runs the schema checks on the spec and reports each problem at the
//! attribute (or bound placeholder) it is about.

use proc_macro2::Span;
use syn::LitStr;

use microdcs_schema::{Attr, DocumentSpec, SchemaErrorKind, check_document};

use crate::ast::{Document, Index};
use crate::ctxt::Ctxt;

/// Returns whether every problem reported is an overlap of two of the
/// type's families: the type is otherwise whole, so its items can still be
/// emitted, and code using them reports nothing more.
pub(crate) fn schema(cx: &mut Ctxt, doc: &Document, spec: &DocumentSpec<'_>) -> bool {
    let mut only_overlaps = true;
    // Unbound placeholders were reported while resolving, with a suggestion.
    for e in check_document(spec).into_iter().filter(|e| !matches!(e.kind, SchemaErrorKind::Unbound(_))) {
        only_overlaps &= matches!(e.kind, SchemaErrorKind::Overlap { .. });
        cx.error_at(span_of(doc, &e.origin.attr, e.origin.placeholder.as_deref()), &e);
    }
    only_overlaps
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
