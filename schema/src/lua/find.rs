//! The read script for unique lookups.

use super::layout::all_index_fields;
use super::text::{lua_escape_class, lua_str};
use crate::spec::DocumentSpec;
use crate::template::{Atom, KeyTemplate};

/// The read script for unique lookups of `spec`: `GET` the unique key, then
/// `HMGET` the document it names, in one round trip.
///
/// This is the one script that builds a key in Lua: the document key is only
/// known after the `GET`. It is read-only and the deployment runs a single
/// primary (no cluster slots to declare keys for), so the undeclared key is
/// safe. The encoding uses [`lua_escape_class`], the same set as the Rust
/// encoder.
pub fn find_script(spec: &DocumentSpec<'_>) -> String {
    let names = all_index_fields(spec);
    let fields: Vec<String> = names.iter().map(|f| lua_str(f)).collect();
    let extra = if fields.is_empty() { String::new() } else { format!(", {}", fields.join(", ")) };
    let per_scope = spec.ids_per_scope();
    format!(
        "\
-- microdcs unique lookup for `{ty}`. Generated; do not edit.
-- KEYS[1] the unique index key (string holding a document id)
-- ARGV[1] the key prefix{scope_doc}
-- Returns: nil when the index key is absent, else
--   {{id, v, scope, ops, doc{fields_doc}}} of the document (fields false when absent;
--   `ops` so a read found here carries its revision like any other read)
local id = redis.call('GET', KEYS[1])
if not id then return nil end
local function enc(v) return (string.gsub(v, '{class}', function(c) return string.format('%%%02X', string.byte(c)) end)) end
local r = redis.call('HMGET', ARGV[1] .. {key}, 'v', 'scope', 'ops', 'doc'{extra})
table.insert(r, 1, id)
return r
",
        ty = spec.type_name,
        class = lua_escape_class(),
        key = doc_key_expr(spec.key),
        scope_doc = if per_scope { "\n-- ARGV[2] the scope (the document key holds it)" } else { "" },
        fields_doc = names.iter().map(|f| format!(", {f}")).collect::<String>(),
    )
}

/// The Lua expression of the document key after the prefix: its literals,
/// the encoded id (`enc(id)`) and, for ids unique per scope, the encoded
/// scope (`enc(ARGV[2])`), joined as the Rust renderer joins them.
fn doc_key_expr(template: &str) -> String {
    let Ok(t) = KeyTemplate::parse(template) else { return lua_str(template) };
    let (mut parts, mut lit) = (Vec::new(), String::new());
    for seg in t.segments() {
        lit.push(':');
        for (j, atom) in seg.iter().enumerate() {
            if j > 0 {
                lit.push('|');
            }
            match atom {
                Atom::Literal(l) => lit.push_str(l),
                Atom::Placeholder(p) | Atom::HashTag(p) => {
                    // A tag's braces are literal text around the value, as
                    // the renderer writes them.
                    let tag = matches!(atom, Atom::HashTag(_));
                    if tag {
                        lit.push('{');
                    }
                    if !lit.is_empty() {
                        parts.push(lua_str(&std::mem::take(&mut lit)));
                    }
                    parts.push(if p == "scope" { "enc(ARGV[2])".to_owned() } else { "enc(id)".to_owned() });
                    if tag {
                        lit.push('}');
                    }
                }
            }
        }
    }
    if !lit.is_empty() {
        parts.push(lua_str(&lit));
    }
    parts.join(" .. ")
}
