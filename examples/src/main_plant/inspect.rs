//! `plant inspect`: the inspector's read-only views as tables or JSON.

use std::process::ExitCode;

use clap::Subcommand;
use microdcs_examples::plant::Plant;
use microdcs_valkey::{Valkey, inspect::Inspector};

use super::Res;

#[derive(Subcommand)]
pub(crate) enum InspectWhat {
    /// Document kinds and every key family.
    Kinds,
    /// Scopes holding documents of a kind.
    Scopes {
        /// `joborder`, `jobresponse`, `workmaster` or `sfc`.
        kind: String,
    },
    /// Ids of a kind in a scope, through its list.
    Ids {
        /// Document kind.
        kind: String,
        /// Scope.
        scope: String,
        /// Where to start (0, or the `next` of the previous page).
        #[arg(long, default_value_t = 0)]
        cursor: u64,
        /// Ids per page.
        #[arg(long, default_value_t = 100)]
        count: usize,
    },
    /// Ids through an index (`by_state line-1 Running`, `by_order o-1`).
    Index {
        /// Document kind.
        kind: String,
        /// Index name.
        index: String,
        /// The index template's values, in order.
        values: Vec<String>,
    },
    /// One document: version, op ids, index fields, the document, its index entries.
    Doc {
        /// Document kind.
        kind: String,
        /// Id.
        id: String,
    },
    /// The dedupe claim of an event.
    Dedupe {
        /// Event source.
        source: String,
        /// Event id.
        id: String,
    },
    /// A fencing lease.
    Lease {
        /// Lease name.
        name: String,
    },
    /// The change stream of a kind in a scope (length, groups, pending, lag).
    Stream {
        /// Document kind.
        kind: String,
        /// Scope.
        scope: String,
    },
    /// The SFC heartbeat and the time since it was written.
    Heartbeat,
}

pub(crate) async fn inspect(valkey: &Valkey, what: InspectWhat, json: bool) -> Res<ExitCode> {
    let inspector = Inspector::new(&Plant::open(valkey.clone()));
    let show = |value: serde_json::Value, table: String| {
        if json {
            println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
        } else {
            print!("{table}");
        }
    };
    let j = |v: &dyn erased::Ser| v.json();
    match what {
        InspectWhat::Kinds => {
            let kinds = inspector.kinds();
            let families = inspector.families();
            let mut t = String::from("| Family | Role | Type | Template |\n|---|---|---|---|\n");
            for f in &families {
                t += &format!("| {} | {} | {} | `{}` |\n", f.name, f.role, f.key_type, f.template.replace('|', "\\|"));
            }
            show(serde_json::json!({ "kinds": j(&kinds), "families": j(&families) }), t);
        }
        InspectWhat::Scopes { kind } => {
            let scopes = inspector.scopes(&kind).await?;
            show(j(&scopes), format!("{}\n", scopes.join("\n")));
        }
        InspectWhat::Ids { kind, scope, cursor, count } => {
            let page = inspector.ids(&kind, &scope, cursor, count).await?;
            let next = page.next.map_or_else(|| "(end)".to_owned(), |n| format!("next: --cursor {n}"));
            show(j(&page), format!("{}\n{next}\n", page.ids.join("\n")));
        }
        InspectWhat::Index { kind, index, values } => {
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            let page = inspector.index_ids(&kind, &index, &values, 0, 1000).await?;
            show(j(&page), format!("{}\n", page.ids.join("\n")));
        }
        InspectWhat::Doc { kind, id } => match inspector.document(&kind, &id).await? {
            None => {
                show(serde_json::Value::Null, format!("no {kind} `{id}`\n"));
                return Ok(ExitCode::from(1));
            }
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
                    t += &format!("  field {f} = {}\n", v.as_deref().unwrap_or("(none)"));
                }
                t += "\n| Index | Key | Entry |\n|---|---|---|\n";
                for e in &d.entries {
                    let state =
                        serde_json::to_value(&e.state).ok().and_then(|v| v["state"].as_str().map(str::to_owned));
                    t += &format!(
                        "| {} | `{}` | {} |\n",
                        e.index,
                        e.key.as_deref().unwrap_or("-"),
                        state.unwrap_or_default().replace('_', " ")
                    );
                }
                if let Some(doc) = &d.document {
                    t += &format!("\n{}\n", serde_json::to_string_pretty(doc).unwrap_or_default());
                }
                show(j(&d), t);
            }
        },
        InspectWhat::Dedupe { source, id } => {
            let d = inspector.dedupe(&source, &id).await?;
            show(j(&d), format!("{}: {:?}, ttl {:?} ms\n", d.key, d.value, d.ttl_ms));
        }
        InspectWhat::Lease { name } => {
            let l = inspector.lease(&name).await?;
            show(
                j(&l),
                format!(
                    "lease {}: holder {:?}, token {:?}, fence {:?}, ttl {:?} ms\n",
                    l.name, l.holder, l.token, l.fence, l.ttl_ms
                ),
            );
        }
        InspectWhat::Stream { kind, scope } => {
            let s = inspector.changes(&kind, &scope).await?;
            let mut t = format!(
                "{}: {} entries\n\n| Group | Consumers | Pending | Lag | Oldest pending (ms) |\n|---|---|---|---|---|\n",
                s.key, s.length
            );
            for g in &s.groups {
                t += &format!(
                    "| {} | {} | {} | {} | {} |\n",
                    g.name,
                    g.consumers,
                    g.pending,
                    g.lag.map_or_else(|| "-".into(), |l| l.to_string()),
                    g.oldest_pending_age_ms.map_or_else(|| "-".into(), |a| a.to_string())
                );
            }
            show(j(&s), t);
        }
        InspectWhat::Heartbeat => {
            let v = inspector.value("sfc_heartbeat", &[]).await?;
            show(j(&v), format!("{}: {:?}, {:?} ms ago\n", v.key, v.value, v.age_ms));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Serialising the views for `--json` through one function.
mod erased {
    pub(crate) trait Ser {
        fn json(&self) -> serde_json::Value;
    }
    impl<T: serde::Serialize> Ser for T {
        fn json(&self) -> serde_json::Value {
            serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
        }
    }
}
