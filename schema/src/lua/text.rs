//! Lua text helpers: string literals, the script header, the escape class.

use std::fmt::Write as _;

use crate::spec::DocumentSpec;

/// `s` as a single-quoted Lua string literal.
pub(super) fn lua_str(s: &str) -> String {
    // Names come from identifiers and templates; escape anyway.
    let mut out = String::from("'");
    for c in s.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A described KEYS or ARGV position.
pub(super) type Described = (usize, String);

/// The comment block that opens a write script: what it is, every KEYS and
/// ARGV position (in position order), and its replies.
pub(super) fn header(
    out: &mut String,
    title: &str,
    spec: &DocumentSpec<'_>,
    mut keys: Vec<Described>,
    mut argv: Vec<Described>,
    returns: &str,
) {
    let _ = writeln!(
        out,
        "-- microdcs {title} script for `{}` (kind `{}`). Generated; do not edit.",
        spec.type_name, spec.kind
    );
    keys.sort_by_key(|(i, _)| *i);
    argv.sort_by_key(|(i, _)| *i);
    for (i, d) in keys {
        let _ = writeln!(out, "-- KEYS[{i}] {d}");
    }
    for (i, d) in argv {
        let _ = writeln!(out, "-- ARGV[{i}] {d}");
    }
    out.push_str("-- Returns:\n");
    out.push_str(returns);
}

/// The Lua pattern class of bytes that [`crate::encode`] escapes, derived
/// from `needs_escape` so the two cannot drift. Punctuation is written as
/// `%c` (a literal inside a class), control characters and space as `\ddd`.
pub fn lua_escape_class() -> String {
    let mut s = String::from("[");
    for b in 0u8..=127 {
        if !crate::encode::needs_escape(b) {
            continue;
        }
        if b == 0 {
            // Lua 5.1 patterns cannot hold a NUL byte; `%z` matches it.
            s.push_str("%z");
        } else if b.is_ascii_punctuation() {
            s.push('%');
            if b == b'\\' {
                s.push('\\');
            }
            s.push(b as char);
        } else {
            let _ = write!(s, "\\{b:03}");
        }
    }
    s.push(']');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_class_matches_encoder() {
        let class = lua_escape_class();
        for p in ["%%", "%:", "%|", "%*", "%?", "%[", "%]", "%\\\\", "%{", "%}", "\\032", "%z", "\\031", "\\127"] {
            assert!(class.contains(p), "{p} missing in {class}");
        }
        assert!(!class.contains('a'), "letters are not escaped");
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(lua_str("a'b\\c\nd"), "'a\\'b\\\\c\\nd'");
    }
}
