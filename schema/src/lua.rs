//! Lua generation: one put script and one delete script per document type,
//! plus a read script for unique lookups, with their KEYS/ARGV layout.
//!
//! Pure functions from a [`DocumentSpec`]. The layout structs are the single
//! description of argument positions: the generated text and the runtime's
//! argument assembly both read them. Scripts never build keys (except the
//! read-only unique lookup, see [`find_script`]), never build or parse JSON,
//! and report outcomes as `{code, ...}` arrays (see [`ret`]).

use std::fmt::Write as _;

use crate::spec::{DocumentSpec, IndexSpec, Source};

/// Return codes: the first element of every script reply.
pub mod ret {
    /// `{0, current}`: the expected version does not match.
    pub const CONFLICT: i64 = 0;
    /// `{1, version}`: written (put) or deleted (delete; `version` was the last one).
    pub const WRITTEN: i64 = 1;
    /// `{2}`: no such document.
    pub const NOT_FOUND: i64 = 2;
    /// `{3, stored_scope}`: the id belongs to another scope; nothing written.
    pub const WRONG_SCOPE: i64 = 3;
    /// `{4, index_position, holder_id}`: a unique key is held by another id; nothing written.
    pub const UNIQUE_VIOLATION: i64 = 4;
    /// `{5}`: stored index fields differ from what the caller read; read again.
    pub const RETRY: i64 = 5;
    /// `{6, field}`: the hash is corrupt (`v` not a positive integer, `doc` or `scope` missing).
    pub const CORRUPT: i64 = 6;
    /// `{7, version}`: this operation id was already applied and produced `version`.
    pub const ALREADY_APPLIED: i64 = 7;
}

/// How many recent operation ids a document hash remembers (field `ops`).
pub const OP_HISTORY: usize = 16;

/// The longest operation id accepted.
pub const MAX_OP_ID_LEN: usize = 64;

/// Whether `op` is a valid operation id: 1 to 64 of `[A-Za-z0-9_.:-]`
/// (no space or `=`, which delimit the `ops` history).
pub fn valid_op_id(op: &str) -> bool {
    !op.is_empty()
        && op.len() <= MAX_OP_ID_LEN
        && op.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

/// Argument positions of one index in a put or delete script (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSlots {
    /// Index name.
    pub name: String,
    /// Unique (string key -> id) or group (set of ids).
    pub unique: bool,
    /// Hash fields holding the index values, in placeholder order.
    pub fields: Vec<String>,
    /// KEYS position of the new key (put only; 0 in delete layouts).
    pub new_key: usize,
    /// KEYS position of the old key.
    pub old_key: usize,
    /// ARGV position of the "new entry present" flag (put only; 0 in delete layouts).
    /// The new field values follow it.
    pub new_flag: usize,
    /// ARGV position of the "old entry present" flag; the old field values follow it.
    pub old_flag: usize,
}

/// The KEYS/ARGV layout of a put script (1-based positions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutLayout {
    /// Distinct index hash fields, in the order the script reads them.
    pub fields: Vec<String>,
    /// KEYS: the document hash (1).
    pub doc_key: usize,
    /// KEYS: the change stream (2).
    pub changes_key: usize,
    /// KEYS: the scope registry (3).
    pub registry_key: usize,
    /// KEYS: the list, when the type has one.
    pub list_key: Option<usize>,
    /// ARGV: expected version (`create`, `any` or a number).
    pub expect: usize,
    /// ARGV: operation id.
    pub op: usize,
    /// ARGV: document id.
    pub id: usize,
    /// ARGV: scope.
    pub scope: usize,
    /// ARGV: document text (put only; 0 in delete layouts).
    pub doc: usize,
    /// ARGV: kind.
    pub kind: usize,
    /// ARGV: nudge channel name.
    pub channel: usize,
    /// ARGV: change stream approximate max length.
    pub maxlen: usize,
    /// ARGV: list score, for a sorted-set list (put only).
    pub score: Option<usize>,
    /// Per index (unique first, then groups).
    pub indexes: Vec<IndexSlots>,
    /// Number of KEYS.
    pub num_keys: usize,
    /// Number of ARGV.
    pub num_args: usize,
}

/// The hash fields of one index: its field and method placeholders, in
/// template order (the order the generated index entries use).
pub fn index_fields(ix: &IndexSpec<'_>) -> Vec<String> {
    let Ok(t) = crate::template::KeyTemplate::parse(ix.key) else { return Vec::new() };
    t.placeholders()
        .filter(|p| matches!(ix.binding(p).map(|b| b.source), Some(Source::Field(_) | Source::Method(_))))
        .map(str::to_owned)
        .collect()
}

/// The distinct hash fields of all indexes of `spec`, in index order.
pub fn all_index_fields(spec: &DocumentSpec<'_>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for ix in spec.unique.iter().chain(spec.groups) {
        for f in index_fields(ix) {
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    out
}

impl PutLayout {
    /// The layout of `spec`'s put script (`delete = false`) or delete script.
    pub fn new(spec: &DocumentSpec<'_>, delete: bool) -> Self {
        let mut k = 3;
        let list_key = spec.list.map(|_| {
            k += 1;
            k
        });
        let mut a = 0;
        let mut next = || {
            a += 1;
            a
        };
        let expect = next();
        let op = next();
        let id = next();
        let scope = next();
        let doc = if delete { 0 } else { next() };
        let kind = next();
        let channel = next();
        let maxlen = next();
        let score = match spec.list {
            Some(l) if l.score.is_some() && !delete => Some(next()),
            _ => None,
        };
        let mut indexes = Vec::new();
        let all = spec.unique.iter().map(|x| (true, x)).chain(spec.groups.iter().map(|x| (false, x)));
        for (unique, ix) in all {
            let fields = index_fields(ix);
            let (new_key, old_key) = if delete {
                k += 1;
                (0, k)
            } else {
                k += 2;
                (k - 1, k)
            };
            let new_flag = if delete {
                0
            } else {
                let f = next();
                for _ in &fields {
                    next();
                }
                f
            };
            let old_flag = next();
            for _ in &fields {
                next();
            }
            indexes.push(IndexSlots { name: ix.name.to_owned(), unique, fields, new_key, old_key, new_flag, old_flag });
        }
        let num_args = next() - 1;
        PutLayout {
            fields: all_index_fields(spec),
            doc_key: 1,
            changes_key: 2,
            registry_key: 3,
            list_key,
            expect,
            op,
            id,
            scope,
            doc,
            kind,
            channel,
            maxlen,
            score,
            indexes,
            num_keys: k,
            num_args,
        }
    }
}

fn lua_str(s: &str) -> String {
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

/// The index table both scripts iterate over: positions and HMGET slots.
fn index_table(layout: &PutLayout) -> String {
    let mut s = String::from("local IX = {\n");
    for ix in &layout.indexes {
        let hm: Vec<String> = ix
            .fields
            .iter()
            .map(|f| (4 + layout.fields.iter().position(|g| g == f).expect("field listed")).to_string())
            .collect();
        let _ = writeln!(
            s,
            "  {{ unique = {}, name = {}, nk = {}, ok = {}, nf = {}, of = {}, hm = {{ {} }} }},",
            ix.unique,
            lua_str(&ix.name),
            ix.new_key,
            ix.old_key,
            ix.new_flag,
            ix.old_flag,
            hm.join(", ")
        );
    }
    s.push_str("}\n");
    s
}

fn header(
    out: &mut String,
    title: &str,
    spec: &DocumentSpec<'_>,
    keys: &[(usize, String)],
    argv: &[(usize, String)],
    returns: &str,
) {
    let _ = writeln!(
        out,
        "-- microdcs {title} script for `{}` (kind `{}`). Generated; do not edit.",
        spec.type_name, spec.kind
    );
    for (i, d) in keys {
        let _ = writeln!(out, "-- KEYS[{i}] {d}");
    }
    for (i, d) in argv {
        let _ = writeln!(out, "-- ARGV[{i}] {d}");
    }
    out.push_str("-- Returns:\n");
    out.push_str(returns);
}

const PUT_RETURNS: &str = "\
--   {1, version}          written; `version` is the new version
--   {0, current}          the expected version does not match (create of an existing document)
--   {2}                   update of a missing document
--   {3, stored_scope}     the id belongs to another scope; nothing written
--   {4, index, holder}    unique index number `index` (1-based) holds another id; nothing written
--   {5}                   stored index fields differ from the caller's read; read again
--   {6, field}            corrupt hash (`v` not a positive integer, `scope` or `doc` missing)
--   {7, version}          this operation id was already applied, producing `version`
";

const DELETE_RETURNS: &str = "\
--   {1, version}          deleted; `version` was the last version
--   {0, current}          the expected version does not match
--   {2}                   no such document
--   {3, stored_scope}     the id belongs to another scope; nothing deleted
--   {5}                   stored index fields differ from the caller's read; read again
--   {6, field}            corrupt hash
";

fn describe_keys(spec: &DocumentSpec<'_>, l: &PutLayout, delete: bool) -> Vec<(usize, String)> {
    let mut keys = vec![
        (l.doc_key, format!("document hash `{}`", spec.key)),
        (l.changes_key, format!("change stream `{}` (XADD MAXLEN ~)", spec.changes)),
        (l.registry_key, format!("scope registry `{}` (set)", spec.registry)),
    ];
    if let (Some(k), Some(list)) = (l.list_key, spec.list) {
        let t = if list.score.is_some() { "sorted set" } else { "set" };
        keys.push((k, format!("list `{}` ({t})", list.key)));
    }
    for (ix, slots) in spec.unique.iter().chain(spec.groups).zip(&l.indexes) {
        let what = if slots.unique { "unique" } else { "group" };
        if !delete {
            keys.push((
                slots.new_key,
                format!("{what} `{}` `{}`: new key (KEYS[1] when not indexed)", ix.name, ix.key),
            ));
        }
        keys.push((
            slots.old_key,
            format!("{what} `{}`: old key as the caller read it (KEYS[1] when not indexed)", ix.name),
        ));
    }
    keys
}

fn describe_argv(l: &PutLayout, delete: bool) -> Vec<(usize, String)> {
    let mut argv = vec![
        (
            l.expect,
            if delete {
                "expected version: `any` or the version number"
            } else {
                "expected version: `create`, `any` or the version number"
            }
            .to_owned(),
        ),
        (l.op, "operation id (kept in `op` and the `ops` history)".into()),
        (l.id, "document id".into()),
        (l.scope, "scope".into()),
    ];
    if !delete {
        argv.push((l.doc, "document text, stored as is in `doc`".into()));
    }
    argv.push((l.kind, "kind (change entries)".into()));
    argv.push((l.channel, "nudge channel (PUBLISH scope)".into()));
    argv.push((l.maxlen, "change stream approximate max length".into()));
    if let Some(s) = l.score {
        argv.push((s, "list score".into()));
    }
    for ix in &l.indexes {
        let fields = ix.fields.join(", ");
        if !delete {
            argv.push((
                ix.new_flag,
                format!("`{}`: `1` if the new document is indexed, else `0`; then new values of: {fields}", ix.name),
            ));
        }
        argv.push((
            ix.old_flag,
            format!(
                "`{}`: `1` if the caller read an indexed document, else `0`; then the values read of: {fields}",
                ix.name
            ),
        ));
    }
    argv
}

/// Shared prologue: read the hash, check corruption and scope.
fn prologue(out: &mut String, l: &PutLayout) {
    let fields: Vec<String> = l.fields.iter().map(|f| lua_str(f)).collect();
    let extra = if fields.is_empty() { String::new() } else { format!(", {}", fields.join(", ")) };
    let _ = write!(
        out,
        "\
local doc_key = KEYS[{dk}]
local exists = redis.call('EXISTS', doc_key) == 1
local cur = redis.call('HMGET', doc_key, 'v', 'scope', 'ops'{extra})
local v = 0
if exists then
  local doc_len = redis.call('HSTRLEN', doc_key, 'doc')
  v = tonumber(cur[1])
  if v == nil or v < 1 or v ~= math.floor(v) then return {{6, 'v'}} end
  if cur[2] == false then return {{6, 'scope'}} end
  if doc_len == 0 and redis.call('HEXISTS', doc_key, 'doc') == 0 then return {{6, 'doc'}} end
  if cur[2] ~= ARGV[{scope}] then return {{3, cur[2]}} end
end
",
        dk = l.doc_key,
        scope = l.scope,
    );
}

/// Checks the caller's read of every index against the stored fields.
const CHECK_OLD: &str = "\
for _, ix in ipairs(IX) do
  local stored = exists
  for _, h in ipairs(ix.hm) do if cur[h] == false then stored = false end end
  local read = ARGV[ix.of] == '1'
  if stored ~= read then return {5} end
  if stored then
    for i, h in ipairs(ix.hm) do if cur[h] ~= ARGV[ix.of + i] then return {5} end end
  end
end
";

/// The put script of `spec`, with its layout.
pub fn put_script(spec: &DocumentSpec<'_>) -> (String, PutLayout) {
    let l = PutLayout::new(spec, false);
    let mut out = String::new();
    header(&mut out, "put", spec, &describe_keys(spec, &l, false), &describe_argv(&l, false), PUT_RETURNS);
    out.push_str(&index_table(&l));
    prologue(&mut out, &l);
    let list = match (l.list_key, l.score) {
        (Some(k), Some(s)) => format!("redis.call('ZADD', KEYS[{k}], ARGV[{s}], id)\n"),
        (Some(k), None) => format!("redis.call('SADD', KEYS[{k}], id)\n"),
        _ => String::new(),
    };
    let score_field = match l.score {
        Some(s) => format!("table.insert(h, 'score'); table.insert(h, ARGV[{s}])\n"),
        None => String::new(),
    };
    let _ = write!(
        out,
        "\
local op = ARGV[{op}]
local id = ARGV[{id}]
local ops = cur[3] or ''
if exists then
  local hist = ops .. ' '
  local _, e = string.find(hist, ' ' .. op .. '=', 1, true)
  if e then
    local stop = string.find(hist, ' ', e + 1, true)
    return {{7, tonumber(string.sub(hist, e + 1, stop - 1))}}
  end
end
local expect = ARGV[{expect}]
if expect == 'create' then
  if exists then return {{0, v}} end
elseif expect ~= 'any' then
  if not exists then return {{2}} end
  if v ~= tonumber(expect) then return {{0, v}} end
end
{check_old}\
for n, ix in ipairs(IX) do
  if ix.unique and ARGV[ix.nf] == '1' then
    local holder = redis.call('GET', KEYS[ix.nk])
    if holder and holder ~= id then return {{4, n, holder}} end
  end
end
local newv = v + 1
ops = ops .. ' ' .. op .. '=' .. newv
local count = 0
for _ in string.gmatch(ops, ' ') do count = count + 1 end
while count > {history} do
  ops = string.sub(ops, string.find(ops, ' ', 2, true))
  count = count - 1
end
local h = {{'v', newv, 'scope', ARGV[{scope}], 'op', op, 'ops', ops, 'doc', ARGV[{doc}]}}
{score_field}\
local drop = {{}}
for _, ix in ipairs(IX) do
  local indexed = ARGV[ix.nf] == '1'
  local was = ARGV[ix.of] == '1'
  if was and (not indexed or KEYS[ix.nk] ~= KEYS[ix.ok]) then
    if ix.unique then
      if redis.call('GET', KEYS[ix.ok]) == id then redis.call('DEL', KEYS[ix.ok]) end
    else
      redis.call('SREM', KEYS[ix.ok], id)
    end
  end
  if indexed then
    if ix.unique then redis.call('SET', KEYS[ix.nk], id) else redis.call('SADD', KEYS[ix.nk], id) end
    for i, hm in ipairs(ix.hm) do
      table.insert(h, cur_names[hm]); table.insert(h, ARGV[ix.nf + i])
    end
  else
    for _, hm in ipairs(ix.hm) do table.insert(drop, cur_names[hm]) end
  end
end
if #drop > 0 then redis.call('HDEL', doc_key, unpack(drop)) end
redis.call('HSET', doc_key, unpack(h))
{list}\
local change = 'updated'
if not exists then change = 'created' end
redis.call('XADD', KEYS[{changes}], 'MAXLEN', '~', ARGV[{maxlen}], '*', 'id', id, 'v', newv, 'op', op, 'change', change, 'kind', ARGV[{kind}])
redis.call('SADD', KEYS[{registry}], ARGV[{scope}])
redis.call('PUBLISH', ARGV[{channel}], ARGV[{scope}])
return {{1, newv}}
",
        op = l.op,
        id = l.id,
        expect = l.expect,
        check_old = CHECK_OLD,
        history = OP_HISTORY,
        scope = l.scope,
        doc = l.doc,
        changes = l.changes_key,
        maxlen = l.maxlen,
        kind = l.kind,
        registry = l.registry_key,
        channel = l.channel,
    );
    (insert_names(out, &l), l)
}

/// Defines `cur_names` (HMGET slot -> field name) after the index table.
fn insert_names(text: String, l: &PutLayout) -> String {
    let names: Vec<String> =
        l.fields.iter().enumerate().map(|(i, f)| format!("[{}] = {}", i + 4, lua_str(f))).collect();
    let decl = format!("local cur_names = {{ {} }}\n", names.join(", "));
    text.replacen("local doc_key = ", &format!("{decl}local doc_key = "), 1)
}

/// The delete script of `spec`, with its layout.
pub fn delete_script(spec: &DocumentSpec<'_>) -> (String, PutLayout) {
    let l = PutLayout::new(spec, true);
    let mut out = String::new();
    header(&mut out, "delete", spec, &describe_keys(spec, &l, true), &describe_argv(&l, true), DELETE_RETURNS);
    out.push_str(&index_table(&l));
    prologue(&mut out, &l);
    let list = match (l.list_key, spec.list) {
        (Some(k), Some(list)) if list.score.is_some() => format!("redis.call('ZREM', KEYS[{k}], id)\n"),
        (Some(k), Some(_)) => format!("redis.call('SREM', KEYS[{k}], id)\n"),
        _ => String::new(),
    };
    let _ = write!(
        out,
        "\
if not exists then return {{2}} end
local op = ARGV[{op}]
local id = ARGV[{id}]
local expect = ARGV[{expect}]
if expect ~= 'any' and v ~= tonumber(expect) then return {{0, v}} end
{check_old}\
for _, ix in ipairs(IX) do
  if ARGV[ix.of] == '1' then
    if ix.unique then
      if redis.call('GET', KEYS[ix.ok]) == id then redis.call('DEL', KEYS[ix.ok]) end
    else
      redis.call('SREM', KEYS[ix.ok], id)
    end
  end
end
{list}\
redis.call('DEL', doc_key)
redis.call('XADD', KEYS[{changes}], 'MAXLEN', '~', ARGV[{maxlen}], '*', 'id', id, 'v', v, 'op', op, 'change', 'deleted', 'kind', ARGV[{kind}])
redis.call('PUBLISH', ARGV[{channel}], ARGV[{scope}])
return {{1, v}}
",
        op = l.op,
        id = l.id,
        expect = l.expect,
        check_old = CHECK_OLD,
        changes = l.changes_key,
        maxlen = l.maxlen,
        kind = l.kind,
        channel = l.channel,
        scope = l.scope,
    );
    (insert_names(out, &l), l)
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

/// The read script for unique lookups of `spec`: `GET` the unique key, then
/// `HMGET` the document it names, in one round trip.
///
/// This is the one script that builds a key in Lua: the document key is only
/// known after the `GET`. It is read-only and the deployment model is a
/// single primary (no cluster, seed `000`), so the undeclared key is safe.
/// The encoding uses [`lua_escape_class`], the same set as the Rust encoder.
pub fn find_script(spec: &DocumentSpec<'_>) -> String {
    let fields: Vec<String> = all_index_fields(spec).iter().map(|f| lua_str(f)).collect();
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
        fields_doc = all_index_fields(spec).iter().map(|f| format!(", {f}")).collect::<String>(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Binding, ListSpec};

    const BY_ORDER: [Binding<'static>; 1] = [Binding { placeholder: "order", source: Source::Field("job_order_id") }];
    const BY_STATE: [Binding<'static>; 2] = [
        Binding { placeholder: "scope", source: Source::Scope },
        Binding { placeholder: "state", source: Source::Method("normalized_state") },
    ];
    const UNIQUE: [IndexSpec<'static>; 1] =
        [IndexSpec { name: "by_order", key: "jobresponse:byorder:{order}", bindings: &BY_ORDER }];
    const GROUPS: [IndexSpec<'static>; 1] =
        [IndexSpec { name: "by_state", key: "jobresponse:bystate:{scope}:{state}", bindings: &BY_STATE }];
    const SPEC: DocumentSpec<'static> = DocumentSpec {
        type_name: "JobResponse",
        kind: "jobresponse",
        key: "jobresponse:{id}",
        id_field: "id",
        scope_field: "scope",
        list: Some(ListSpec { key: "jobresponse:list:{scope}", score: Some(Source::Field("start_time")) }),
        unique: &UNIQUE,
        groups: &GROUPS,
        changes: "changes:{scope}",
        nudge: "nudge:{kind}",
        registry: "scopes",
    };

    #[test]
    fn put_layout_positions() {
        let l = PutLayout::new(&SPEC, false);
        assert_eq!(l.fields, ["order", "state"]);
        assert_eq!(l.list_key, Some(4));
        assert_eq!((l.indexes[0].new_key, l.indexes[0].old_key), (5, 6));
        assert_eq!((l.indexes[1].new_key, l.indexes[1].old_key), (7, 8));
        assert_eq!(l.num_keys, 8);
        assert_eq!((l.expect, l.op, l.id, l.scope, l.doc, l.kind, l.channel, l.maxlen), (1, 2, 3, 4, 5, 6, 7, 8));
        assert_eq!(l.score, Some(9));
        // by_order: new flag 10, value 11, old flag 12, value 13; by_state: 14..17
        assert_eq!((l.indexes[0].new_flag, l.indexes[0].old_flag), (10, 12));
        assert_eq!((l.indexes[1].new_flag, l.indexes[1].old_flag), (14, 16));
        assert_eq!(l.num_args, 17);
    }

    #[test]
    fn delete_layout_positions() {
        let l = PutLayout::new(&SPEC, true);
        assert_eq!((l.doc, l.score), (0, None));
        assert_eq!((l.indexes[0].old_key, l.indexes[1].old_key), (5, 6));
        assert_eq!((l.indexes[0].old_flag, l.indexes[1].old_flag), (8, 10));
        assert_eq!(l.num_keys, 6);
        assert_eq!(l.num_args, 11);
    }

    #[test]
    fn header_lists_every_key_and_arg() {
        let (text, l) = put_script(&SPEC);
        for i in 1..=l.num_keys {
            assert!(text.contains(&format!("-- KEYS[{i}] ")), "KEYS[{i}] undocumented:\n{text}");
        }
        for i in 1..=l.num_args {
            let flagged = l.indexes.iter().any(|x| i > x.new_flag && i <= x.new_flag + x.fields.len())
                || l.indexes.iter().any(|x| i > x.old_flag && i <= x.old_flag + x.fields.len());
            assert!(flagged || text.contains(&format!("-- ARGV[{i}] ")), "ARGV[{i}] undocumented:\n{text}");
        }
        assert!(text.contains("MAXLEN', '~'"));
        assert!(!text.contains("cjson"), "scripts never build or parse JSON");
        let (text, _) = delete_script(&SPEC);
        assert!(text.contains("'deleted'"));
    }

    #[test]
    fn op_ids() {
        assert!(valid_op_id("0f3a-77:retry.1_x"));
        assert!(!valid_op_id(""));
        assert!(!valid_op_id("a b"));
        assert!(!valid_op_id("a=b"));
        assert!(!valid_op_id(&"x".repeat(65)));
    }

    #[test]
    fn escape_class_matches_encoder() {
        let class = lua_escape_class();
        for p in ["%%", "%:", "%|", "%*", "%?", "%[", "%]", "%\\\\", "%{", "%}", "\\032", "%z", "\\031", "\\127"] {
            assert!(class.contains(p), "{p} missing in {class}");
        }
        assert!(!class.contains('a'), "letters are not escaped");
    }
}
