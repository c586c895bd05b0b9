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
    // The admin tool: everything above, one program.
    "admin",
    // The test harness sees nothing of the rest.
    "testing",
];

/// The schema crate's modules, lowest first.
const SCHEMA: &[&str] = &[
    "slot",
    "encode",
    "prefix",
    "template",
    "duration",
    "family",
    "builtin",
    "spec",
    "lock",
    "entry",
    "document",
    "lua",
    "check",
    "acl",
    "keyspace_table",
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

// Circles among sibling modules, in every folder of the runtime.
//
// The layer order above ranks the top-level modules; inside a folder
// (`store/`, `client/`, ...) the files are siblings with no listed order,
// and what keeps them readable is that they too import each other in one
// direction only. This check finds every import between two modules of a
// folder (through `crate::`, `super::`, `self::` paths, a `use` of a child
// module's name, and a parent's re-export of a child's item) and fails on
// any set of siblings that import each other in a loop.

/// A module path, `["store", "write"]` for `src/store/write.rs`.
type ModPath = Vec<String>;

/// The module path of a source file under `src`.
fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).unwrap();
    let mut path: ModPath = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    let last = path.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && !(path.is_empty() && stem == "lib") {
        path.push(stem.to_owned());
    }
    path
}

/// A file's code without comments and without its unit-test module (whose
/// `super` is the file itself, not its parent).
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

/// The paths one use tree names: `a::{b, c::{d, e as f}}` gives `a::b`,
/// `a::c::d` and `a::c::e` (each with the name it is known by).
fn use_tree(tree: &str) -> Vec<(Vec<String>, String)> {
    fn split_top(s: &str) -> Vec<&str> {
        let (mut depth, mut start, mut parts) = (0, 0, Vec::new());
        for (i, c) in s.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&s[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&s[start..]);
        parts
    }
    let tree: String = tree.chars().filter(|c| !c.is_whitespace() || *c == ' ').collect();
    let tree = tree.trim();
    let mut out = Vec::new();
    match tree.find('{') {
        Some(open) => {
            let head: Vec<String> =
                tree[..open].split("::").map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
            let close = tree.rfind('}').filter(|c| *c > open).unwrap_or(tree.len());
            let inner = &tree[open + 1..close];
            for part in split_top(inner).into_iter().map(str::trim).filter(|p| !p.is_empty()) {
                for (tail, name) in use_tree(part) {
                    let mut path = head.clone();
                    // `a::{self, b}` names `a` itself.
                    if tail != ["self"] {
                        path.extend(tail);
                    }
                    let name = if name == "self" { path.last().cloned().unwrap_or_default() } else { name };
                    out.push((path, name));
                }
            }
        }
        None => {
            let (path, alias) = match tree.split_once(" as ") {
                Some((p, a)) => (p, Some(a.trim().to_owned())),
                None => (tree, None),
            };
            let path: Vec<String> = path.split("::").map(str::trim).map(str::to_owned).collect();
            let name = alias.unwrap_or_else(|| path.last().cloned().unwrap_or_default());
            out.push((path, name));
        }
    }
    out
}

/// The crate's module tree: each module's file, the names its `use`
/// statements bring in (with the absolute paths they stand for), and the
/// paths it names.
struct Tree {
    src: PathBuf,
    modules: BTreeMap<ModPath, PathBuf>,
    aliases: BTreeMap<ModPath, BTreeMap<String, ModPath>>,
    /// Per module: each absolute path it names, with the line.
    uses: BTreeMap<ModPath, Vec<(ModPath, usize)>>,
}

impl Tree {
    fn read(src: &Path) -> Tree {
        let mut files = Vec::new();
        sources(src, &mut files);
        let modules: BTreeMap<ModPath, PathBuf> = files.iter().map(|f| (module_of(src, f), f.clone())).collect();
        let mut tree = Tree { src: src.to_owned(), modules, aliases: BTreeMap::new(), uses: BTreeMap::new() };
        let all: Vec<ModPath> = tree.modules.keys().cloned().collect();
        for module in all {
            let code = code_of(&std::fs::read_to_string(&tree.modules[&module]).unwrap());
            let line_of = |at: usize| code[..at].matches('\n').count() + 1;
            let (mut aliases, mut uses) = (BTreeMap::new(), Vec::new());
            // `use` statements, whatever their visibility: a line that
            // opens with one (a `use ` inside a text is none).
            let mut offset = 0;
            let mut starts = Vec::new();
            for line in code.split('\n') {
                let t = line.trim_start();
                let t = t.strip_prefix("#[cfg(test)]").map_or(t, str::trim_start);
                let vis =
                    ["pub(crate) use ", "pub(super) use ", "pub use ", "use "].iter().find(|v| t.starts_with(**v));
                if let Some(v) = vis {
                    starts.push(offset + (line.len() - t.len()) + v.len() - 4);
                }
                offset += line.len() + 1;
            }
            for at in starts {
                let stmt = &code[at + 4..];
                let stmt = &stmt[..stmt.find(';').unwrap_or(stmt.len())];
                for (path, name) in use_tree(stmt) {
                    if let Some(abs) = tree.absolute(&module, &path, true) {
                        aliases.insert(name, abs.clone());
                        uses.push((abs, line_of(at)));
                    }
                }
            }
            // Paths in code: `crate::a::b`, `super::X`, `self::x::Y`.
            for start in ["crate::", "super::", "self::"] {
                for (at, _) in code.match_indices(start) {
                    let before = code[..at].chars().next_back();
                    if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                        continue;
                    }
                    let rest = &code[at..];
                    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
                    let mut tree_text = rest[..end].trim_end_matches(':').to_owned();
                    if rest[end..].starts_with('{') && rest[..end].ends_with("::") {
                        let close = rest[end..].find('}').map_or(rest.len(), |c| end + c + 1);
                        tree_text = rest[..close].to_owned();
                    }
                    for (path, _) in use_tree(&tree_text) {
                        if let Some(abs) = tree.absolute(&module, &path, false) {
                            uses.push((abs, line_of(at)));
                        }
                    }
                }
            }
            tree.aliases.insert(module.clone(), aliases);
            tree.uses.insert(module, uses);
        }
        tree
    }

    /// The absolute path `path` stands for in `module`, if it is of this
    /// crate; in a `use`, a first name that is a child module is relative.
    fn absolute(&self, module: &ModPath, path: &[String], in_use: bool) -> Option<ModPath> {
        let mut abs = module.clone();
        let mut segs = path.iter().peekable();
        match segs.peek().map(|s| s.as_str()) {
            Some("crate") => {
                abs.clear();
                segs.next();
            }
            Some("self") => {
                segs.next();
            }
            Some("super") => {
                while segs.peek().is_some_and(|s| *s == "super") {
                    abs.pop()?;
                    segs.next();
                }
            }
            Some(first) if in_use && self.modules.contains_key(&[module.clone(), vec![first.to_owned()]].concat()) => {}
            _ => return None,
        }
        abs.extend(segs.cloned());
        Some(abs)
    }

    /// The module an absolute path lands in: followed through modules and
    /// through the names their `use` statements bring in.
    fn landing(&self, path: &[String], depth: usize) -> ModPath {
        let mut at: ModPath = Vec::new();
        for (i, seg) in path.iter().enumerate() {
            let next = [at.clone(), vec![seg.clone()]].concat();
            if self.modules.contains_key(&next) {
                at = next;
                continue;
            }
            if depth < 8
                && let Some(target) = self.aliases.get(&at).and_then(|a| a.get(seg))
                && target.as_slice() != &path[..=i]
            {
                return self.landing(&[target.clone(), path[i + 1..].to_vec()].concat(), depth + 1);
            }
            break;
        }
        at
    }

    /// Each folder's imports between its own modules: parent -> (from, to)
    /// -> where.
    fn sibling_imports(&self) -> BTreeMap<ModPath, BTreeMap<(String, String), Vec<String>>> {
        let mut out: BTreeMap<ModPath, BTreeMap<(String, String), Vec<String>>> = BTreeMap::new();
        for (from, uses) in &self.uses {
            for (path, line) in uses {
                let to = self.landing(path, 0);
                let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
                if common < from.len() && common < to.len() {
                    let parent = from[..common].to_vec();
                    let file = self.modules[from].strip_prefix(&self.src).unwrap().display().to_string();
                    let at =
                        out.entry(parent).or_default().entry((from[common].clone(), to[common].clone())).or_default();
                    let place = format!("{file}:{line}");
                    if !at.contains(&place) {
                        at.push(place);
                    }
                }
            }
        }
        out
    }
}

/// Every circle among sibling modules: per folder, each set of modules
/// that reach each other, with the imports that tie them.
fn sibling_circles(src: &Path) -> Vec<String> {
    let tree = Tree::read(src);
    let mut circles = Vec::new();
    for (parent, edges) in tree.sibling_imports() {
        let reach = |from: &str| {
            let mut seen = std::collections::BTreeSet::new();
            let mut todo = vec![from.to_owned()];
            while let Some(m) = todo.pop() {
                for (a, b) in edges.keys() {
                    if *a == m && seen.insert(b.clone()) {
                        todo.push(b.clone());
                    }
                }
            }
            seen
        };
        let mut done = std::collections::BTreeSet::new();
        let names: std::collections::BTreeSet<&String> = edges.keys().flat_map(|(a, b)| [a, b]).collect();
        for m in names {
            if done.contains(m) {
                continue;
            }
            let from_m = reach(m);
            if !from_m.contains(m) {
                continue;
            }
            let members: Vec<String> = from_m.into_iter().filter(|o| reach(o).contains(m)).collect();
            let ties: Vec<String> = edges
                .iter()
                .filter(|((a, b), _)| members.contains(a) && members.contains(b))
                .map(|((a, b), at)| format!("  {a} -> {b} ({})", at.join(", ")))
                .collect();
            let folder = if parent.is_empty() { "the crate root".to_owned() } else { parent.join("/") + "/" };
            circles.push(format!("in {folder}: {}\n{}", members.join(", "), ties.join("\n")));
            done.extend(members);
        }
    }
    circles
}

/// Folders whose circle is known and not closed yet (none: the last one,
/// in `client/`, was closed by moving what connecting and Sentinel
/// following share into `client/transport`). A listed folder whose circle
/// is gone fails too, so the list only shrinks.
const KNOWN_CIRCLES: &[&str] = &[];

#[test]
fn no_circle_among_the_runtime_s_sibling_modules() {
    let circles = sibling_circles(&crate_src("microdcs-valkey"));
    let known = |c: &String| KNOWN_CIRCLES.iter().any(|k| c.starts_with(&format!("in {k}:")));
    let new: Vec<&String> = circles.iter().filter(|c| !known(c)).collect();
    assert!(
        new.is_empty(),
        "modules that import each other in a loop:\n{}",
        new.iter().map(|c| c.as_str()).collect::<Vec<_>>().join("\n")
    );
    for k in KNOWN_CIRCLES {
        assert!(
            circles.iter().any(|c| c.starts_with(&format!("in {k}:"))),
            "`{k}` has no circle any more: take it off KNOWN_CIRCLES"
        );
    }
}

#[test]
fn the_check_finds_a_circle_among_siblings() {
    // Two files of one folder that import each other, one of them through
    // the folder's re-export, are reported; so are two top-level modules.
    let dir = std::env::temp_dir().join(format!("microdcs-circles-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("store")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod store;\nmod low;\n").unwrap();
    std::fs::write(dir.join("low.rs"), "pub struct Low;\n").unwrap();
    std::fs::write(dir.join("store/mod.rs"), "mod a;\nmod b;\npub use b::{Thing, Other};\n").unwrap();
    std::fs::write(dir.join("store/a.rs"), "use super::Thing;\nuse crate::low::Low;\npub struct A;\n").unwrap();
    std::fs::write(dir.join("store/b.rs"), "// super::a in a comment is no import\npub struct Thing;\n").unwrap();
    assert!(sibling_circles(&dir).is_empty(), "{:?}", sibling_circles(&dir));
    std::fs::write(dir.join("store/b.rs"), "pub struct Thing;\nfn f() -> crate::store::a::A { crate::store::a::A }\n")
        .unwrap();
    let circles = sibling_circles(&dir);
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(circles[0].contains("in store/: a, b"), "{circles:?}");
    assert!(circles[0].contains("a -> b (store/a.rs:1)"), "{circles:?}");
    // A grouped `use` and a `use` of a child's name from the parent's
    // point of view both count.
    std::fs::write(dir.join("store/a.rs"), "use super::Thing;\n").unwrap();
    std::fs::write(dir.join("store/b.rs"), "pub struct Thing;\n").unwrap();
    std::fs::write(dir.join("low.rs"), "use crate::{store::Thing};\n").unwrap();
    let circles = sibling_circles(&dir);
    assert!(circles.is_empty(), "low -> store only: {circles:?}");
    std::fs::write(dir.join("store/a.rs"), "use super::Thing;\nuse crate::low;\n").unwrap();
    let circles = sibling_circles(&dir);
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(circles[0].contains("in the crate root: low, store"), "{circles:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
