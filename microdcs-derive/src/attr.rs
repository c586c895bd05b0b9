//! Parsing of `#[microdcs(...)]` attributes into an IR that keeps the syn
//! nodes, so every later error can point at the tokens it is about.

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::{Ident, LitStr, Token};

use crate::ctxt::Ctxt;

/// Where an index placeholder's value comes from, as written.
#[derive(Clone)]
pub(crate) enum Bind {
    /// `state = state_text`
    Field(Ident),
    /// `state = normalized_state()`
    Method(Ident),
}

/// `list(key = "...", score = field)`.
pub(crate) struct ListAttr {
    pub(crate) span: Span,
    pub(crate) key: Option<LitStr>,
    pub(crate) score: Option<Bind>,
}

/// `unique(...)`, `group(...)` or `member(...)`.
pub(crate) struct IndexAttr {
    pub(crate) span: Span,
    pub(crate) name: Option<LitStr>,
    pub(crate) key: Option<LitStr>,
    pub(crate) bindings: Vec<(Ident, Bind)>,
    /// `member(..., when = running())`: the condition, with its span.
    pub(crate) when: Option<(Span, Bind)>,
    /// `sorted(..., score = due())`: the score, with its span.
    pub(crate) score: Option<(Span, Bind)>,
    /// `sorted(..., max = 100)`: the bound, with its span.
    pub(crate) max: Option<(Span, u64)>,
    /// `each(...)`: a multi-valued index.
    pub(crate) each: bool,
}

/// What kind of index an attribute declares.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum IndexKind {
    Unique,
    Group,
    Member,
    Sorted,
    Each,
}

/// `changes = "template"` or `changes = none`.
#[derive(Clone)]
pub(crate) enum ChangesAttr {
    /// The change stream template.
    Template(LitStr),
    /// No change entries and no nudge; the ident, for spans.
    None(Ident),
}

impl ChangesAttr {
    pub(crate) fn span(&self) -> Span {
        match self {
            ChangesAttr::Template(l) => l.span(),
            ChangesAttr::None(i) => i.span(),
        }
    }
}

fn changes_value(meta: &ParseNestedMeta<'_>) -> syn::Result<ChangesAttr> {
    let input = meta.value()?;
    if input.peek(LitStr) {
        return Ok(ChangesAttr::Template(input.parse()?));
    }
    let ident: Ident = input.parse()?;
    if ident == "none" {
        Ok(ChangesAttr::None(ident))
    } else {
        Err(syn::Error::new(
            ident.span(),
            "expected a stream template (`changes = \"changes:{scope}\"`) or `none` (no change entries, no nudge)",
        ))
    }
}

/// A `key = "..."` style attribute that may be given once.
pub(crate) struct Once<T> {
    name: &'static str,
    value: Option<(Span, T)>,
}

impl<T> Once<T> {
    fn new(name: &'static str) -> Self {
        Once { name, value: None }
    }

    fn set(&mut self, cx: &mut Ctxt, span: Span, value: T) {
        if self.value.is_some() {
            cx.error_at(span, format_args!("duplicate microdcs attribute `{}`", self.name));
        } else {
            self.value = Some((span, value));
        }
    }

    pub(crate) fn get(&self) -> Option<&T> {
        self.value.as_ref().map(|(_, v)| v)
    }

    pub(crate) fn take(self) -> Option<T> {
        self.value.map(|(_, v)| v)
    }
}

/// `outbox(stream = "...", events = "...", event_ttl = "1h")`.
pub(crate) struct OutboxAttr {
    pub(crate) span: Span,
    pub(crate) stream: Option<LitStr>,
    pub(crate) events: Option<LitStr>,
    pub(crate) event_ttl: Option<LitStr>,
}

/// All container attributes.
pub(crate) struct Container {
    pub(crate) kind: Once<LitStr>,
    pub(crate) key: Once<LitStr>,
    pub(crate) list: Once<ListAttr>,
    pub(crate) changes: Once<ChangesAttr>,
    pub(crate) nudge: Once<LitStr>,
    pub(crate) registry: Once<LitStr>,
    pub(crate) ttl: Once<LitStr>,
    pub(crate) outbox: Once<OutboxAttr>,
    /// `unscoped`: the span of the word.
    pub(crate) unscoped: Once<Span>,
    /// `schema = 2`: the release's schema version.
    pub(crate) schema: Once<syn::LitInt>,
    pub(crate) unique: Vec<IndexAttr>,
    pub(crate) groups: Vec<IndexAttr>,
}

const CONTAINER_KEYS: &[&str] = &[
    "kind", "key", "list", "unique", "group", "member", "sorted", "each", "changes", "nudge", "registry", "ttl",
    "outbox", "unscoped", "schema", "crate",
];

pub(crate) fn unknown(cx: &mut Ctxt, meta: &ParseNestedMeta<'_>, known: &[&str], what: &str) {
    let name = meta.path.get_ident().map(ToString::to_string).unwrap_or_default();
    let hint = microdcs_schema::suggest(&name, known.iter().copied())
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_else(|| format!("; expected one of: {}", known.join(", ")));
    cx.error_spanned_by(&meta.path, format_args!("unknown {what} `{name}`{hint}"));
}

/// Skips whatever follows an unknown key (`= value` or `(...)`), so parsing
/// can go on and report later problems too.
pub(crate) fn skip_rest(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        let _: proc_macro2::TokenStream = meta.value()?.parse::<syn::Expr>().map(quote::ToTokens::into_token_stream)?;
    } else if meta.input.peek(syn::token::Paren) {
        let _ = meta.parse_nested_meta(|inner| skip_rest(&inner));
    }
    Ok(())
}

fn lit(meta: &ParseNestedMeta<'_>) -> syn::Result<LitStr> {
    meta.value()?.parse()
}

fn bind(meta: &ParseNestedMeta<'_>) -> syn::Result<Bind> {
    let input = meta.value()?;
    let ident: Ident = input.parse()?;
    if input.peek(syn::token::Paren) {
        let content;
        syn::parenthesized!(content in input);
        if !content.is_empty() {
            return Err(content.error("a bound method takes no arguments (it is called as `self.method()`)"));
        }
        Ok(Bind::Method(ident))
    } else {
        Ok(Bind::Field(ident))
    }
}

impl Container {
    pub(crate) fn from_attrs(cx: &mut Ctxt, attrs: &[syn::Attribute]) -> Self {
        let mut c = Container {
            kind: Once::new("kind"),
            key: Once::new("key"),
            list: Once::new("list"),
            changes: Once::new("changes"),
            nudge: Once::new("nudge"),
            registry: Once::new("registry"),
            ttl: Once::new("ttl"),
            outbox: Once::new("outbox"),
            unscoped: Once::new("unscoped"),
            schema: Once::new("schema"),
            unique: Vec::new(),
            groups: Vec::new(),
        };
        for attr in attrs.iter().filter(|a| a.path().is_ident("microdcs")) {
            let res = attr.parse_nested_meta(|meta| {
                let span = meta.path.get_ident().map_or_else(Span::call_site, Ident::span);
                let p = &meta.path;
                if p.is_ident("kind") {
                    c.kind.set(cx, span, lit(&meta)?);
                } else if p.is_ident("key") {
                    c.key.set(cx, span, lit(&meta)?);
                } else if p.is_ident("changes") {
                    c.changes.set(cx, span, changes_value(&meta)?);
                } else if p.is_ident("nudge") {
                    c.nudge.set(cx, span, lit(&meta)?);
                } else if p.is_ident("registry") {
                    c.registry.set(cx, span, lit(&meta)?);
                } else if p.is_ident("ttl") {
                    c.ttl.set(cx, span, lit(&meta)?);
                } else if p.is_ident("unscoped") {
                    if !meta.input.is_empty() && !meta.input.peek(Token![,]) {
                        return Err(meta.error("`unscoped` takes no value: write `#[microdcs(unscoped)]`"));
                    }
                    c.unscoped.set(cx, span, span);
                } else if p.is_ident("schema") {
                    c.schema.set(cx, span, meta.value()?.parse()?);
                } else if p.is_ident("outbox") {
                    let outbox = parse_outbox(cx, &meta, span)?;
                    c.outbox.set(cx, span, outbox);
                } else if p.is_ident("list") {
                    let list = parse_list(cx, &meta, span)?;
                    c.list.set(cx, span, list);
                } else if p.is_ident("unique") {
                    c.unique.push(parse_index(cx, &meta, span, IndexKind::Unique)?);
                } else if p.is_ident("group") {
                    c.groups.push(parse_index(cx, &meta, span, IndexKind::Group)?);
                } else if p.is_ident("member") {
                    c.groups.push(parse_index(cx, &meta, span, IndexKind::Member)?);
                } else if p.is_ident("sorted") {
                    c.groups.push(parse_index(cx, &meta, span, IndexKind::Sorted)?);
                } else if p.is_ident("each") {
                    c.groups.push(parse_index(cx, &meta, span, IndexKind::Each)?);
                } else if p.is_ident("crate") {
                    // The runtime's path, read by the macro's entry point.
                    skip_rest(&meta)?;
                } else if p.is_ident("id") || p.is_ident("scope") {
                    cx.error_spanned_by(
                        p,
                        "`id` and `scope` mark fields: put `#[microdcs(id)]` / `#[microdcs(scope)]` on the field",
                    );
                } else {
                    unknown(cx, &meta, CONTAINER_KEYS, "microdcs attribute");
                    skip_rest(&meta)?;
                }
                Ok(())
            });
            if let Err(e) = res {
                cx.syn_error(e);
            }
        }
        c
    }
}

fn parse_outbox(cx: &mut Ctxt, meta: &ParseNestedMeta<'_>, span: Span) -> syn::Result<OutboxAttr> {
    let mut stream = Once::new("stream");
    let mut events = Once::new("events");
    let mut event_ttl = Once::new("event_ttl");
    meta.parse_nested_meta(|inner| {
        let s = inner.path.get_ident().map_or_else(Span::call_site, Ident::span);
        if inner.path.is_ident("stream") {
            stream.set(cx, s, lit(&inner)?);
        } else if inner.path.is_ident("events") {
            events.set(cx, s, lit(&inner)?);
        } else if inner.path.is_ident("event_ttl") {
            event_ttl.set(cx, s, lit(&inner)?);
        } else {
            unknown(cx, &inner, &["stream", "events", "event_ttl"], "outbox attribute");
            skip_rest(&inner)?;
        }
        Ok(())
    })?;
    if stream.get().is_none() {
        cx.error_at(span, "`outbox(...)` needs `stream = \"...\"`, e.g. `outbox(stream = \"sfc:work:{scope}\")`");
    }
    if let (None, Some(ttl)) = (events.get(), event_ttl.get()) {
        cx.error_spanned_by(
            ttl,
            "`event_ttl` has no use without `events = \"...\"`: steps of this type carry no event",
        );
    }
    Ok(OutboxAttr { span, stream: stream.take(), events: events.take(), event_ttl: event_ttl.take() })
}

fn parse_list(cx: &mut Ctxt, meta: &ParseNestedMeta<'_>, span: Span) -> syn::Result<ListAttr> {
    let mut key = Once::new("key");
    let mut score = Once::new("score");
    meta.parse_nested_meta(|inner| {
        let s = inner.path.get_ident().map_or_else(Span::call_site, Ident::span);
        if inner.path.is_ident("key") {
            key.set(cx, s, lit(&inner)?);
        } else if inner.path.is_ident("score") {
            score.set(cx, s, bind(&inner)?);
        } else {
            unknown(cx, &inner, &["key", "score"], "list attribute");
            skip_rest(&inner)?;
        }
        Ok(())
    })?;
    if key.get().is_none() {
        cx.error_at(span, "`list(...)` needs `key = \"...\"`, e.g. `list(key = \"joborder:list:{scope}\")`");
    }
    Ok(ListAttr { span, key: key.take(), score: score.take() })
}

/// A `member` (conditional group) takes `when = method()` and needs it; a
/// `sorted` index takes `score = field` (needed) and `max = N`; both may
/// take `when`.
fn parse_index(cx: &mut Ctxt, meta: &ParseNestedMeta<'_>, span: Span, kind: IndexKind) -> syn::Result<IndexAttr> {
    let member = kind == IndexKind::Member;
    let sorted = kind == IndexKind::Sorted;
    let mut name = Once::new("name");
    let mut key = Once::new("key");
    let mut when = Once::new("when");
    let mut score = Once::new("score");
    let mut max = Once::new("max");
    let mut bindings: Vec<(Ident, Bind)> = Vec::new();
    meta.parse_nested_meta(|inner| {
        let Some(ident) = inner.path.get_ident().cloned() else {
            cx.error_spanned_by(
                &inner.path,
                "expected `name`, `key` or `placeholder = field` / `placeholder = method()`",
            );
            return skip_rest(&inner);
        };
        if ident == "name" {
            name.set(cx, ident.span(), lit(&inner)?);
        } else if kind == IndexKind::Each && (ident == "when" || ident == "score" || ident == "max") {
            cx.error_at(
                ident.span(),
                format_args!(
                    "`each(...)` takes no `{ident}`: it keeps the id in one plain set per value; use `member(...)` \
                     or `sorted(...)` for a single value"
                ),
            );
            skip_rest(&inner)?;
        } else if (member || sorted) && ident == "when" {
            let b = bind(&inner)?;
            when.set(cx, ident.span(), (ident.span(), b));
        } else if sorted && ident == "score" {
            let b = bind(&inner)?;
            score.set(cx, ident.span(), (ident.span(), b));
        } else if sorted && ident == "max" {
            let n: syn::LitInt = inner.value()?.parse()?;
            match n.base10_parse::<u64>() {
                Ok(0) | Err(_) => cx.error_spanned_by(&n, "`max` keeps at least one entry: a whole number from 1"),
                Ok(v) => max.set(cx, ident.span(), (n.span(), v)),
            }
        } else if ident == "key" {
            key.set(cx, ident.span(), lit(&inner)?);
        } else if inner.input.peek(Token![=]) {
            let b = bind(&inner)?;
            if bindings.iter().any(|(p, _)| *p == ident) {
                cx.error_at(ident.span(), format_args!("duplicate binding for placeholder `{{{ident}}}`"));
            } else {
                bindings.push((ident, b));
            }
        } else {
            cx.error_spanned_by(
                &ident,
                format_args!("expected `{ident} = field` or `{ident} = method()` to bind placeholder `{{{ident}}}`"),
            );
            skip_rest(&inner)?;
        }
        Ok(())
    })?;
    if key.get().is_none() {
        cx.error_at(span, "an index needs `key = \"...\"`, e.g. `unique(key = \"jobresponse:byorder:{order}\")`");
    }
    if member && when.get().is_none() {
        cx.error_at(span, "`member(...)` needs `when = method()`: the `bool` that keeps the id in the set");
    }
    if sorted && score.get().is_none() {
        cx.error_at(span, "`sorted(...)` needs `score = field` or `score = method()`: the number that orders the ids");
    }
    Ok(IndexAttr {
        span,
        name: name.take(),
        key: key.take(),
        bindings,
        when: when.take(),
        score: score.take(),
        max: max.take(),
        each: kind == IndexKind::Each,
    })
}

/// Field markers: `#[microdcs(id)]`, `#[microdcs(scope)]`.
#[derive(Default)]
pub(crate) struct FieldAttr {
    pub(crate) id: Option<Span>,
    pub(crate) scope: Option<Span>,
}

impl FieldAttr {
    pub(crate) fn from_attrs(cx: &mut Ctxt, attrs: &[syn::Attribute]) -> Self {
        let mut f = FieldAttr::default();
        for attr in attrs.iter().filter(|a| a.path().is_ident("microdcs")) {
            let res = attr.parse_nested_meta(|meta| {
                let span = meta.path.get_ident().map_or_else(Span::call_site, Ident::span);
                let slot = if meta.path.is_ident("id") {
                    &mut f.id
                } else if meta.path.is_ident("scope") {
                    &mut f.scope
                } else {
                    unknown(cx, &meta, &["id", "scope"], "field attribute");
                    return skip_rest(&meta);
                };
                if slot.is_some() {
                    cx.error_at(span, "duplicate microdcs field attribute");
                }
                *slot = Some(span);
                Ok(())
            });
            if let Err(e) = res {
                cx.syn_error(e);
            }
        }
        f
    }
}
