//! The admin tool's output: Markdown tables for people, one JSON document
//! for tools (`--json`).

use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::time::Instant;

use serde_json::{Value, json};

use super::{Inspect, Ran};
use crate::client::Valkey;
use crate::each::EachDocument;
use crate::error::Result;
use crate::inspect::Inspector;
use crate::lock::LockDiff;
use crate::store::{BackfillReport, LiveWriters, Report};

pub(super) fn json(v: &Value) -> String {
    format!("{}\n", serde_json::to_string_pretty(v).unwrap_or_default())
}

fn view<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// A progress line on stderr, when it is a terminal and the output is not
/// JSON: documents, index entries and documents per second.
pub(super) fn progress(json: bool) -> impl Fn(u64, u64) + Sync {
    let show = !json && std::io::stderr().is_terminal();
    let start = Instant::now();
    move |docs: u64, entries: u64| {
        if show {
            let secs = start.elapsed().as_secs_f64().max(1e-6);
            eprint!("\r{docs} documents, {entries} index entries, {:.0} documents/s   ", docs as f64 / secs);
        }
    }
}

fn report_json(kind: &str, r: &Report) -> Value {
    json!({
        "kind": kind,
        "documents": r.documents,
        "entries": r.entries,
        "fixed": r.fixed,
        "truncated": r.truncated,
        "clean": r.is_clean(),
        "differences": r.differences.iter().map(ToString::to_string).collect::<Vec<_>>(),
    })
}

fn report_table(out: &mut String, reports: &[(&str, Report)]) -> u64 {
    out.push_str("| kind | index | difference | count |\n|---|---|---|---|\n");
    let mut total = 0;
    for (kind, report) in reports {
        for ((index, what), n) in report.summary() {
            let _ = writeln!(out, "| {kind} | {index} | {what} | {n} |");
            total += n;
        }
        total += report.truncated;
    }
    if total == 0 {
        out.push_str("| (all) | (all) | none | 0 |\n");
    }
    for (kind, report) in reports {
        for d in report.differences.iter().take(20) {
            let _ = writeln!(out, "  {kind}: {d}");
        }
    }
    total
}

/// `verify` and `rebuild`: exit 1 on differences.
pub(super) fn reports(reports: &[(&str, Report)], fix: bool, json_out: bool) -> Ran {
    let total: u64 = reports.iter().map(|(_, r)| r.differences.len() as u64 + r.truncated).sum();
    let fixed: u64 = reports.iter().map(|(_, r)| r.fixed).sum();
    let code = u8::from(total != 0);
    if json_out {
        let kinds: Vec<Value> = reports.iter().map(|(k, r)| report_json(k, r)).collect();
        return Ran { code, output: json(&json!({ "kinds": kinds, "clean": total == 0, "fixed": fixed })) };
    }
    let mut out = String::new();
    report_table(&mut out, reports);
    if fix {
        let _ = writeln!(out, "\nfixed {fixed} entries");
    }
    Ran { code, output: out }
}

fn flagged_json(flagged: &[(&str, Vec<String>)]) -> Value {
    flagged.iter().map(|(k, ix)| json!({ "kind": k, "indexes": ix })).collect()
}

/// `migrate plan`: exit 1 when the lock holds a breaking change.
pub(super) fn plan(lock: Option<&LockDiff>, flagged: &[(&str, Vec<String>)], json_out: bool) -> Ran {
    let breaking = lock.is_some_and(|d| d.worst() == Some(crate::lock::ChangeClass::Breaking));
    let code = u8::from(breaking);
    if json_out {
        let changes: Option<Vec<Value>> = lock.map(|d| {
            d.changes
                .iter()
                .map(|c| json!({ "subject": c.subject, "what": c.what, "class": c.class.as_str(), "fix": c.fix }))
                .collect()
        });
        return Ran {
            code,
            output: json(&json!({ "lock": changes, "rebuild": flagged_json(flagged), "breaking": breaking })),
        };
    }
    let mut out = String::new();
    if let Some(d) = lock {
        out.push_str("## Schema lock\n\n");
        out.push_str(&d.report());
    }
    out.push_str("\n## Indexes to rebuild (`migrate apply`)\n\n");
    if flagged.is_empty() {
        out.push_str("none: every layout is recorded\n");
    }
    for (kind, ix) in flagged {
        let _ = writeln!(out, "- {kind}: {}", ix.join(", "));
    }
    Ran { code, output: out }
}

/// What `migrate status` shows besides the lease.
pub(super) struct Status<'a> {
    /// Indexes whose recorded layout differs (`needs_rebuild`), per kind.
    pub(super) flagged: &'a [(&'a str, Vec<String>)],
    /// Indexes building (queries through them refused), per kind.
    pub(super) building: &'a [(&'a str, Vec<String>)],
    /// Live writers by schema, per kind.
    pub(super) writers: &'a [(&'a str, LiveWriters)],
}

fn writers_json(writers: &[(&str, LiveWriters)]) -> Value {
    Value::Array(
        writers
            .iter()
            .map(|(k, w)| {
                let schemas: serde_json::Map<String, Value> =
                    w.schemas.iter().map(|(s, n)| (s.to_string(), json!(n))).collect();
                json!({ "kind": k, "schemas": schemas, "older_remain": w.older_remain(), "damaged": w.damaged })
            })
            .collect(),
    )
}

/// `migrate status`.
pub(super) fn status(st: &Status<'_>, running: bool, ttl_ms: Option<u64>, json_out: bool) -> Ran {
    if json_out {
        return Ran {
            code: 0,
            output: json(&json!({
                "running": running,
                "lease_ttl_ms": ttl_ms,
                "rebuild": flagged_json(st.flagged),
                "building": flagged_json(st.building),
                "writers": writers_json(st.writers),
            })),
        };
    }
    let mut out = String::new();
    match (running, ttl_ms) {
        (true, Some(ms)) => {
            let _ = writeln!(out, "a migration is running (its lease has {ms} ms left)");
        }
        (true, None) => out.push_str("a migration is running\n"),
        (false, _) => out.push_str("no migration is running\n"),
    }
    if st.flagged.is_empty() {
        out.push_str("every index layout is recorded\n");
    }
    for (kind, ix) in st.flagged {
        let _ = writeln!(out, "to rebuild: {kind}: {}", ix.join(", "));
    }
    if st.building.is_empty() {
        out.push_str("every index is ready\n");
    }
    for (kind, ix) in st.building {
        let _ = writeln!(out, "building (queries refused until a backfill makes it ready): {kind}: {}", ix.join(", "));
    }
    for (kind, w) in st.writers {
        let schemas: Vec<String> = w.schemas.iter().map(|(s, n)| format!("schema {s} x{n}")).collect();
        let _ = writeln!(out, "live writers of {kind}: {}", schemas.join(", "));
    }
    Ran { code: 0, output: out }
}

fn backfill_json(kind: &str, r: &BackfillReport) -> Value {
    json!({
        "kind": kind,
        "passes": r.passes,
        "seen": r.seen,
        "rewritten": r.rewritten,
        "newer": r.newer,
        "damaged": r.damaged,
        "unique_held": r.unique_held,
        "contended": r.contended,
        "ready": r.ready,
        "building": r.building,
        "older_writers": r.older_writers,
    })
}

/// `migrate apply`: exit 1 when an index is still flagged or building
/// after it.
pub(super) fn applied(
    backfilled: &[(&str, BackfillReport)],
    recorded: &[(&str, String)],
    done: &[(&str, String, Report)],
    left: &[(&str, Vec<String>)],
    building: &[(&str, Vec<String>)],
    json_out: bool,
) -> Ran {
    let code = u8::from(!left.is_empty() || !building.is_empty());
    if json_out {
        let rebuilt: Vec<Value> = done
            .iter()
            .map(|(k, ix, r)| json!({ "kind": k, "index": ix, "documents": r.documents, "fixed": r.fixed }))
            .collect();
        let backfills: Vec<Value> = backfilled.iter().map(|(k, r)| backfill_json(k, r)).collect();
        let recorded: Vec<Value> = recorded.iter().map(|(k, ix)| json!({ "kind": k, "index": ix })).collect();
        return Ran {
            code,
            output: json(&json!({
                "backfilled": backfills,
                "recorded": recorded,
                "rebuilt": rebuilt,
                "left": flagged_json(left),
                "building": flagged_json(building),
            })),
        };
    }
    let mut out = String::new();
    for (kind, r) in backfilled {
        let _ = writeln!(
            out,
            "backfilled {kind}: {} documents seen, {} written again, {} damaged (verify names them); ready: {}",
            r.seen,
            r.rewritten,
            r.damaged,
            if r.ready.is_empty() { "none".to_owned() } else { r.ready.join(", ") }
        );
        if r.older_writers {
            let _ = writeln!(
                out,
                "  a writer of an older schema of {kind} is live: stop it, wait `WriterLifetime`, run apply again"
            );
        }
    }
    for (kind, ix) in recorded {
        let _ = writeln!(out, "ready through the backfill, layout recorded: {kind} {ix}");
    }
    if done.is_empty() {
        out.push_str("nothing to rebuild\n");
    }
    for (kind, ix, r) in done {
        let _ = writeln!(out, "rebuilt {kind} {ix}: {} documents, fixed {} entries", r.documents, r.fixed);
    }
    for (kind, ix) in left {
        let _ = writeln!(out, "still to rebuild: {kind}: {}", ix.join(", "));
    }
    for (kind, ix) in building {
        let _ = writeln!(out, "still building: {kind}: {}", ix.join(", "));
    }
    Ran { code, output: out }
}

/// `migrate finish`: exit 1 when a kind was not clean.
pub(super) fn finished(reports: &[(&str, Report)], left: &[(&str, Vec<String>)], json_out: bool) -> Ran {
    let clean = reports.iter().all(|(_, r)| r.is_clean()) && left.is_empty();
    let code = u8::from(!clean);
    if json_out {
        let kinds: Vec<Value> = reports.iter().map(|(k, r)| report_json(k, r)).collect();
        return Ran { code, output: json(&json!({ "kinds": kinds, "clean": clean, "left": flagged_json(left) })) };
    }
    let mut out = String::new();
    report_table(&mut out, reports);
    out.push_str(if clean {
        "\nfinished: every layout recorded\n"
    } else {
        "\nnot finished: rebuild what differs (`rebuild` or `migrate apply`), then `migrate finish` again\n"
    });
    Ran { code, output: out }
}

/// `inspect ...`: the inspector's views.
pub(super) async fn inspect<K: EachDocument>(valkey: &Valkey, what: Inspect, json_out: bool) -> Result<Ran> {
    let inspector = Inspector::new(&crate::KeyspaceHandle::<K>::new(valkey.clone()));
    let show = |value: Value, table: String| Ran { code: 0, output: if json_out { json(&value) } else { table } };
    Ok(match what {
        Inspect::Kinds => {
            let kinds = inspector.kinds();
            let families = inspector.families();
            let mut t = String::from("| Family | Role | Type | Template |\n|---|---|---|---|\n");
            for f in &families {
                let _ =
                    writeln!(t, "| {} | {} | {} | `{}` |", f.name, f.role, f.key_type, f.template.replace('|', "\\|"));
            }
            show(json!({ "kinds": view(&kinds), "families": view(&families) }), t)
        }
        Inspect::Scopes { kind } => {
            let scopes = inspector.scopes(&kind).await?;
            show(view(&scopes), format!("{}\n", scopes.join("\n")))
        }
        Inspect::Ids { kind, scope, cursor, count } => {
            let page = inspector.ids(&kind, &scope, cursor, count).await?;
            let next = page.next.map_or_else(|| "(end)".to_owned(), |n| format!("next: --cursor {n}"));
            show(view(&page), format!("{}\n{next}\n", page.ids.join("\n")))
        }
        Inspect::Index { kind, index, values } => {
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            let page = inspector.index_ids(&kind, &index, &values, 0, 1000).await?;
            show(view(&page), format!("{}\n", page.ids.join("\n")))
        }
        Inspect::Doc { kind, id } => match inspector.document(&kind, &id).await? {
            None => Ran { code: 1, output: if json_out { json(&Value::Null) } else { format!("no {kind} `{id}`\n") } },
            Some(d) => {
                let mut t = format!(
                    "{} `{}` at `{}`: version {}, scope {}, last op {}\n",
                    d.kind,
                    d.id,
                    d.key,
                    d.version.as_deref().unwrap_or("(none)"),
                    d.scope.as_deref().unwrap_or("(none)"),
                    d.ops.last().map_or("(none)", String::as_str)
                );
                for (f, v) in &d.fields {
                    let _ = writeln!(t, "  field {f} = {}", v.as_deref().unwrap_or("(none)"));
                }
                t += "\n| Index | Key | Entry |\n|---|---|---|\n";
                for e in &d.entries {
                    let state = view(&e.state)["state"].as_str().map(str::to_owned);
                    let _ = writeln!(
                        t,
                        "| {} | `{}` | {} |",
                        e.index,
                        e.key.as_deref().unwrap_or("-"),
                        state.unwrap_or_default().replace('_', " ")
                    );
                }
                if let Some(doc) = &d.document {
                    let _ = writeln!(t, "\n{}", serde_json::to_string_pretty(doc).unwrap_or_default());
                }
                show(view(&d), t)
            }
        },
        Inspect::Dedupe { source, id } => {
            let d = inspector.dedupe(&source, &id).await?;
            show(view(&d), format!("{}: {:?}, ttl {:?} ms\n", d.key, d.value, d.ttl_ms))
        }
        Inspect::Lease { name } => {
            let l = inspector.lease(&name).await?;
            let t = format!(
                "lease {}: holder {:?}, token {:?}, fence {:?}, ttl {:?} ms\n",
                l.name, l.holder, l.token, l.fence, l.ttl_ms
            );
            show(view(&l), t)
        }
        Inspect::Stream { kind, scope } => {
            let s = inspector.changes(&kind, &scope).await?;
            let mut t = format!(
                "{}: {} entries\n\n| Group | Consumers | Pending | Lag | Oldest pending (ms) |\n|---|---|---|---|---|\n",
                s.key, s.length
            );
            for g in &s.groups {
                let _ = writeln!(
                    t,
                    "| {} | {} | {} | {} | {} |",
                    g.name,
                    g.consumers,
                    g.pending,
                    g.lag.map_or_else(|| "-".into(), |l| l.to_string()),
                    g.oldest_pending_age_ms.map_or_else(|| "-".into(), |a| a.to_string())
                );
            }
            show(view(&s), t)
        }
        Inspect::Value { family, values } => {
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            let v = inspector.value(&family, &values).await?;
            show(view(&v), format!("{}: {:?}, {:?} ms ago\n", v.key, v.value, v.age_ms))
        }
    })
}
