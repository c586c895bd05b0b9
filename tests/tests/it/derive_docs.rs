//! The derive's doc examples are `ignore`d (a proc-macro crate cannot run
//! them: they expand to `::microdcs_valkey` paths), so each one must appear
//! verbatim in a trybuild pass case, which compiles and runs it. This check
//! lives here, beside the pass cases, so that the packaged derive crate
//! reads no file outside itself.

/// The ```` ```ignore ```` blocks of the doc comments in `source`.
fn ignored_examples(source: &str) -> Vec<Vec<&str>> {
    let doc =
        source.lines().filter_map(|l| l.trim_start().strip_prefix("///")).map(|l| l.strip_prefix(' ').unwrap_or(l));
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in doc {
        match (&mut current, line.trim()) {
            (None, "```ignore") => current = Some(Vec::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(block), _) => block.push(line),
            (None, _) => {}
        }
    }
    blocks
}

/// Whether `block` appears in `file` as consecutive lines, ignoring
/// indentation (an example may sit inside a function there).
fn contains(file: &str, block: &[&str]) -> bool {
    let lines: Vec<&str> = file.lines().map(str::trim).collect();
    let block: Vec<&str> = block.iter().map(|l| l.trim()).collect();
    lines.windows(block.len()).any(|w| w == block.as_slice())
}

#[test]
fn every_example_is_compiled_by_a_trybuild_pass_case() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ui/pass");
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the trybuild pass cases are read from {}: {e}", dir.display()))
        .map(|entry| std::fs::read_to_string(entry.expect("directory entry").path()).expect("a pass case"))
        .collect();
    let examples = ignored_examples(include_str!("../../../microdcs-derive/src/lib.rs"));
    assert!(examples.len() >= 10, "found only {} examples", examples.len());
    for example in examples {
        assert!(
            files.iter().any(|f| contains(f, &example)),
            "this example is in no file of tests/ui/pass/ (copy it there, e.g. attribute_reference.rs):\n{}",
            example.join("\n")
        );
    }
}

#[test]
fn a_changed_example_is_found_missing() {
    let file = "fn main() {\n    let a = 1;\n    let b = 2;\n}\n";
    assert!(contains(file, &["let a = 1;", "let b = 2;"]));
    assert!(!contains(file, &["let a = 1;", "let b = 3;"]));
    let source = "/// ```ignore\n/// let a = 1;\n/// ```\n/// ```text\n/// no\n/// ```\n";
    assert_eq!(ignored_examples(source), [["let a = 1;"]]);
}
