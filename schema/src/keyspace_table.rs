//! The key table of a keyspace as Markdown, from its spec: what each family
//! holds, for how long, and what writes it. Generated, so a committed copy
//! checked against it cannot drift from the code.

use std::fmt::Write as _;

use crate::{DocumentSpec, Family, FamilyKind, FamilySpec, KeyType, KeyspaceSpec, Role, Source, builtin};

/// The key table of `spec`: one row per family (document types' families
/// first, then declared and implicit ones), with its Valkey type, template,
/// content, lifetime and writer.
pub fn keyspace_markdown(spec: &KeyspaceSpec<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Keyspace `{}`\n", spec.name);
    out.push_str(
        "Generated from the keyspace spec (`keyspace_markdown`); every key is under the \
         configured prefix (`<prefix>:`).\n\n",
    );
    out.push_str("| Family | Type | Template | Content | Lifetime | Written by |\n|---|---|---|---|---|---|\n");
    for f in spec.all_families() {
        let (family, content, lifetime, writer) = describe(spec, &f);
        let _ = writeln!(
            out,
            "| {family} | {} | `{}` | {content} | {lifetime} | {writer} |",
            f.key_type.type_name(),
            f.key.replace('|', "\\|")
        );
    }
    out
}

fn source(s: &Source<'_>) -> String {
    match s {
        Source::Id => "the id".into(),
        Source::Scope => "the scope".into(),
        Source::Field(f) => format!("`{f}`"),
        Source::Method(m) => format!("`{m}()`"),
    }
}

fn doc_ttl(d: &DocumentSpec<'_>) -> String {
    d.ttl_ms.map_or_else(|| "none".to_owned(), |ms| format!("{ms} ms from each write (`ttl`)"))
}

fn describe(spec: &KeyspaceSpec<'_>, f: &Family<'_>) -> (String, String, String, String) {
    let doc = spec.documents.iter().find(|d| d.type_name == f.owner);
    let writes = |d: &DocumentSpec<'_>| format!("the put and delete scripts of `{}`", d.type_name);
    match (f.role, doc) {
        (Role::Document, Some(d)) => {
            let fields = crate::lua::all_index_fields(d);
            let extra = if fields.is_empty() {
                String::new()
            } else {
                format!(
                    " and the index fields {}",
                    fields.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")
                )
            };
            (
                format!("`{}` document", d.type_name),
                format!("`v`, {}`ops`, `doc`{extra}", if d.stores_scope() { "`scope`, " } else { "" }),
                doc_ttl(d),
                writes(d),
            )
        }
        (Role::List, Some(d)) => {
            let content = match d.list.and_then(|l| l.score) {
                Some(s) => format!("ids of a scope, scored by {}", source(&s)),
                None => "ids of a scope".into(),
            };
            (format!("`{}` list", d.type_name), content, doc_ttl(d), writes(d))
        }
        (Role::Unique(i), Some(d)) => (
            format!("`{}` `{}`", d.type_name, d.unique[i].name),
            "the id of the one document with these values".into(),
            doc_ttl(d),
            writes(d),
        ),
        (Role::Group(i), Some(d)) => (
            format!("`{}` `{}`", d.type_name, d.groups[i].name),
            "ids of the documents with these values".into(),
            doc_ttl(d),
            writes(d),
        ),
        // Not an `if let` guard: those are newer than the declared floor (1.88).
        (Role::Declared(name), _) => {
            let (c, l, w) = outbox_use(spec, f).unwrap_or_else(|| declared(spec, f));
            (format!("`{name}`"), c, l, w)
        }
        _ => (f.name.to_owned(), String::new(), String::new(), String::new()),
    }
}

/// A declared family that a document type's step writes: its work stream
/// or its event markers.
fn outbox_use(spec: &KeyspaceSpec<'_>, f: &Family<'_>) -> Option<(String, String, String)> {
    spec.documents.iter().find_map(|d| {
        let o = d.outbox?;
        let step = format!("the step script of `{}`", d.type_name);
        if f.key_type == KeyType::Stream && f.key == o.stream {
            return Some((
                "work entries: `job`, `v`, then the step's own fields".to_owned(),
                "never trimmed by length; acknowledged entries stay until the consumer runs `Streams::trim_acknowledged`".to_owned(),
                step,
            ));
        }
        (f.key_type == KeyType::String && o.events == Some(f.key)).then(|| {
            (
                "the id of the document whose step applied the event".to_owned(),
                format!("{} ms from the step (`event_ttl`)", o.event_ttl_ms),
                step,
            )
        })
    })
}

fn is(f: &Family<'_>, b: &FamilySpec<'_>) -> bool {
    f.key == b.key && f.key_type == b.key_type
}

fn declared(spec: &KeyspaceSpec<'_>, f: &Family<'_>) -> (String, String, String) {
    let s = |a: &str, b: &str, c: &str| (a.to_owned(), b.to_owned(), c.to_owned());
    if is(f, &builtin::CHANGES) {
        s(
            "change entries: `id`, `v`, `op`, `change`, `kind`",
            "entries every group has read trimmed by the poller; the rest capped near `ChangeStreamMaxLength` entries",
            "every write script",
        )
    } else if is(f, &builtin::NUDGE) {
        s("the scope of each write", "none (a channel)", "every write script")
    } else if is(f, &builtin::SCOPES) {
        s("the scopes that hold documents", "none", "the write that creates a document")
    } else if is(f, &builtin::TOMBSTONES) {
        s("`<version>:<delete op id><op history>` of a deleted document", "`TombstoneRetention`", "the delete scripts")
    } else if is(f, &builtin::DEDUPE) {
        s("`processing:<token>` or `done`", "`DedupeLease`, then `DedupeRetention`", "`ValkeyDedupe`")
    } else if is(f, &builtin::START_LOCK) {
        s("the holder of a start", "the start lease's lifetime", "`ValkeyStartLease`")
    } else if is(f, &builtin::LEASE) {
        s("`id`, `owner`, `token` of the current grant", "the lease's lifetime", "`LeaseStore`")
    } else if is(f, &builtin::LEASE_FENCE) {
        s("the highest fencing token issued", "none", "`LeaseStore`")
    } else if is(f, &builtin::LEASE_REQUEST) {
        s("the cached result of one request id", "a while after the request", "`LeaseStore`")
    } else if is(f, &builtin::LEASE_DATA) {
        s("the value the lease protects", "none", "`LeaseStore::fenced_write`")
    } else if is(f, &builtin::FINGERPRINTS) {
        s(
            "index-layout fingerprints by `kind:index`",
            "none",
            "`rebuild`, `accept_layouts`, a first deploy's `needs_rebuild`",
        )
    } else if is(f, &builtin::WRITERS) {
        s(
            "live writers of a kind: `<schema>:<writer id>` scored by expiry (server ms)",
            "each entry `WriterLifetime` after its last heartbeat",
            "every store that writes (`Store::announce`)",
        )
    } else if is(f, &builtin::INDEX_STATES) {
        s(
            "index states `building:<schema>:<fp>` / `ready:<schema>:<fp>`, backfill progress `@cursor`",
            "none",
            "`Store::announce`, `Store::backfill`",
        )
    } else {
        let decl = spec.declared(f.name).filter(|d| d.key == f.key);
        let kind = decl.map_or(FamilyKind::plain(f.key_type), |d| d.kind);
        let (content, handle) = match kind {
            FamilyKind::String => ("text values", "`StringKey`"),
            FamilyKind::Value => ("typed values (their text form)", "`TypedValue`"),
            FamilyKind::Counter => ("an integer count", "`CounterKey`"),
            FamilyKind::Content => ("texts by their digest", "`ContentFamily`"),
            FamilyKind::Hash => ("fields and values", "`HashKey` / `TypedHash`"),
            FamilyKind::RateLimit => ("`w`, `n` (window), `f`, `b`, `fe` (failures, block)", "`RateLimitKey`"),
            FamilyKind::Set => ("members", "`SetKey`"),
            FamilyKind::SortedSet => ("members with scores", "`SortedSetKey`"),
            FamilyKind::Stream | FamilyKind::Builtin => ("entries", "`Streams`"),
            FamilyKind::List => ("values, newest first", "`ListKey`"),
            FamilyKind::Channel => ("messages", "`ChannelKey` / `TypedChannel`"),
        };
        let lifetime = match (kind, decl.and_then(|d| d.ttl_ms)) {
            (FamilyKind::RateLimit, _) => "the window or block; failures `max` past the block".to_owned(),
            (_, Some(ms)) => format!("{ms} ms from each write (`ttl`)"),
            (FamilyKind::Channel, None) => "none (a channel)".to_owned(),
            (_, None) => "as written".to_owned(),
        };
        (content.to_owned(), lifetime, format!("the application, through {handle}"))
    }
}
