//! The crates' modules (runtime, schema, derive) form layers: each top-level module imports only
//! modules below it, so there is no import cycle and a reader can learn the
//! runtime from its bottom up. Read from the sources (no build of their
//! own): every `crate::name` path outside comments is an import of module
//! `name`, or of the module a root `pub use` takes `name` from. A module not
//! listed in its crate's order fails the test, so a new one must be placed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The runtime's modules, lowest first.
const RUNTIME: &[&str] = &[
    // Leaves: errors, counters, codecs, bounds, operation ids, the key table.
    "error",
    "metrics",
    // What every operation reports (spans, the metrics facade).
    "observe",
    "codec",
    // A keyspace's document types one by one (for tools over any keyspace).
    "each",
    "limits",
    "op_id",
    "keyspace_doc",
    // The schema lock: a file compared with the spec.
    "lock",
    // Settings and the options they build.
    "config",
    // The connection handle and connecting.
    "client",
    // Script execution and the one retry rule.
    "retry",
    // Paging and key families.
    "page",
    "family",
    // The non-document families, then documents (whose steps apply
    // effects on those families), then what builds on them.
    "families",
    "store",
    "lease",
    "dedupe",
    "start_lease",
    "streams",
    "handle",
    "poller",
    "changes",
    "sweep",
    "inspect",
    "acl",
    // The admin tool: everything above, one program.
    "admin",
    // The test harness sees nothing of the rest.
    "testing",
];

/// The schema crate's modules, lowest first.
const SCHEMA: &[&str] = &[
    "slot", "encode", "prefix", "template", "duration", "family", "builtin", "spec", "lock", "entry", "document",
    "lua", "check",
];

/// The derive's modules, lowest first.
const DERIVE: &[&str] = &[
    // The runtime path every emitter names (a leaf: imports nothing).
    "runtime",
    "ctxt",
    "fallback",
    "keys",
    "attr",
    "field_shape",
    "segment",
    "ast",
    "each",
    "spec",
    "check",
    "expand",
    "keyspace",
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The modules declared in `lib.rs` (without test-only ones) and the module
/// each root re-export comes from.
fn root(lib: &str) -> (Vec<String>, BTreeMap<String, String>) {
    let (mut mods, mut items) = (Vec::new(), BTreeMap::new());
    let mut test_only = false;
    for line in lib.lines().map(str::trim) {
        if line == "#[cfg(test)]" {
            test_only = true;
            continue;
        }
        let decl = ["pub mod ", "pub(crate) mod ", "mod "].iter().find_map(|p| line.strip_prefix(p));
        if let Some(name) = decl.and_then(|d| d.strip_suffix(';'))
            && !test_only
        {
            mods.push(name.to_owned());
        }
        if !line.starts_with("#[") {
            test_only = false;
        }
    }
    // `pub use module::{A, B};` and `pub use module::path::A;`, across lines.
    for stmt in lib.split("pub use ").skip(1) {
        let stmt = &stmt[..stmt.find(';').unwrap_or(stmt.len())];
        let module = stmt.split("::").next().unwrap_or_default().trim().to_owned();
        let names = match (stmt.find('{'), stmt.rfind('}')) {
            (Some(a), Some(b)) => stmt[a + 1..b].to_owned(),
            _ => stmt.rsplit("::").next().unwrap_or_default().to_owned(),
        };
        for n in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            items.insert(n.to_owned(), module.clone());
        }
    }
    (mods, items)
}

/// Every import of one crate that points at its own layer or above.
fn upward_imports(src: &Path, order: &[&str]) -> Vec<String> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let (mods, items) = root(&lib);
    let rank = |m: &str| order.iter().position(|o| *o == m);
    let mut problems: Vec<String> =
        mods.iter().filter(|m| rank(m).is_none()).map(|m| format!("module `{m}` is in no layer: place it")).collect();
    let mut files = Vec::new();
    sources(src, &mut files);
    for file in files {
        let rel = file.strip_prefix(src).unwrap();
        let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
        let from = first.trim_end_matches(".rs").to_owned();
        if from == "lib" || !mods.contains(&from) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            for (at, _) in code.match_indices("crate::") {
                let rest = &code[at + 7..];
                let ident =
                    |t: &str| -> String { t.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect() };
                // `crate::{a::X, b}` names each module of the group.
                let names: Vec<String> = match rest.strip_prefix('{') {
                    Some(group) => {
                        group.split(['}', ';']).next().unwrap_or_default().split(',').map(|p| ident(p.trim())).collect()
                    }
                    None => vec![ident(rest)],
                };
                for name in names {
                    let to = if mods.contains(&name) { Some(name.clone()) } else { items.get(&name).cloned() };
                    let Some(to) = to.filter(|t| *t != from && mods.contains(t)) else { continue };
                    if let (Some(a), Some(b)) = (rank(&from), rank(&to))
                        && b >= a
                    {
                        problems.push(format!(
                            "{}:{}: `{from}` imports `{to}`, which is not below it: {}",
                            rel.display(),
                            n + 1,
                            line.trim()
                        ));
                    }
                }
            }
        }
    }
    problems
}

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name).join("src")
}

#[test]
fn the_runtime_imports_only_downward() {
    let problems = upward_imports(&crate_src("microdcs-valkey"), RUNTIME);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_schema_crate_imports_only_downward() {
    let problems = upward_imports(&crate_src("schema"), SCHEMA);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_derive_imports_only_downward() {
    let problems = upward_imports(&crate_src("microdcs-derive"), DERIVE);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_check_finds_an_upward_import() {
    // A module that names one above it is reported, so the test above
    // cannot pass by finding nothing.
    let dir = std::env::temp_dir().join(format!("microdcs-layers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod low;\nmod high;\npub use high::Thing;\n").unwrap();
    std::fs::write(dir.join("low.rs"), "// crate::high in a comment is no import\nuse crate::Thing;\n").unwrap();
    std::fs::write(dir.join("high.rs"), "use crate::low;\npub struct Thing;\n").unwrap();
    let problems = upward_imports(&dir, &["low", "high"]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("`low` imports `high`"), "{problems:?}");
    // A grouped import is seen too.
    std::fs::write(dir.join("low.rs"), "use crate::{high::Thing};\n").unwrap();
    let problems = upward_imports(&dir, &["low", "high"]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    std::fs::write(dir.join("lib.rs"), "mod low;\nmod high;\nmod stray;\n").unwrap();
    std::fs::write(dir.join("stray.rs"), "").unwrap();
    assert!(upward_imports(&dir, &["low", "high"]).iter().any(|p| p.contains("`stray` is in no layer")));
    let _ = std::fs::remove_dir_all(&dir);
}
