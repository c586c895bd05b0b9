//! The read script for unique lookups.

use super::layout::all_index_fields;
use super::text::{lua_escape_class, lua_str};
use crate::spec::DocumentSpec;

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
    let (before, after) = spec.key.split_once("{id}").unwrap_or((spec.key, ""));
    format!(
        "\
-- microdcs unique lookup for `{ty}`. Generated; do not edit.
-- KEYS[1] the unique index key (string holding a document id)
-- ARGV[1] the key prefix
-- Returns: nil when the index key is absent, else
--   {{id, v, scope, doc{fields_doc}}} of the document (fields false when absent)
local id = redis.call('GET', KEYS[1])
if not id then return nil end
local enc = string.gsub(id, '{class}', function(c) return string.format('%%%02X', string.byte(c)) end)
local r = redis.call('HMGET', ARGV[1] .. ':' .. {before} .. enc .. {after}, 'v', 'scope', 'doc'{extra})
table.insert(r, 1, id)
return r
",
        ty = spec.type_name,
        class = lua_escape_class(),
        before = lua_str(before),
        after = lua_str(after),
        fields_doc = names.iter().map(|f| format!(", {f}")).collect::<String>(),
    )
}
