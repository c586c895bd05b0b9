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

/// How many bytes of recent operation ids a document hash keeps (field
/// `ops`, entries ` op=version`). With the longest op ids (64 bytes) that is
/// at least 16 writes; with generated ids (32 hex digits) about 40.
pub const OP_HISTORY_BYTES: usize = 1536;

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

/// HMGET slot of each value the scripts read (1-based), for one layout.
struct Slots {
    /// Distinct index fields and their slots.
    fields: Vec<(String, usize)>,
    /// Slot of the stored `score`, for a sorted-set list (put only).
    score: Option<usize>,
    /// The HMGET field list as Lua literals.
    hmget: String,
}

impl Slots {
    fn new(l: &PutLayout, with_ops: bool) -> Self {
        let mut names = vec!["v".to_owned(), "scope".to_owned()];
        if with_ops {
            names.push("ops".to_owned());
        }
        let score = l.score.map(|_| {
            names.push("score".to_owned());
            names.len()
        });
        let mut fields = Vec::new();
        for f in &l.fields {
            names.push(f.clone());
            fields.push((f.clone(), names.len()));
        }
        let hmget = names.iter().map(|n| lua_str(n)).collect::<Vec<_>>().join(", ");
        Slots { fields, score, hmget }
    }

    fn of(&self, field: &str) -> usize {
        self.fields.iter().find(|(f, _)| f == field).map(|(_, s)| *s).expect("index field has a slot")
    }
}

/// Reads the hash and checks corruption and scope (both scripts).
fn prologue(out: &mut String, slots: &Slots, l: &PutLayout) {
    let _ = write!(
        out,
        "\
local doc_key = KEYS[{dk}]
local id = ARGV[{id}]
local scope = ARGV[{scope}]
local op = ARGV[{op}]
local cur = redis.call('HMGET', doc_key, {hmget})
local exists = cur[1] ~= false or cur[2] ~= false
local v = 0
if exists then
  if cur[1] == false or not string.find(cur[1], '^[1-9]%d*$') then return {{6, 'v'}} end
  v = tonumber(cur[1])
  if cur[2] == false then return {{6, 'scope'}} end
  if redis.call('HSTRLEN', doc_key, 'doc') == 0 and redis.call('HEXISTS', doc_key, 'doc') == 0 then return {{6, 'doc'}} end
  if cur[2] ~= scope then return {{3, cur[2]}} end
elseif redis.call('EXISTS', doc_key) == 1 then
  return {{6, 'v'}}
end
",
        dk = l.doc_key,
        id = l.id,
        scope = l.scope,
        op = l.op,
        hmget = slots.hmget,
    );
}

/// Per index: compare the caller's read with the stored fields (`{5}` on a
/// difference) and define `was_n`, and for puts `new_n` and `keep_n`.
fn check_reads(out: &mut String, slots: &Slots, l: &PutLayout, put: bool) {
    for (i, ix) in l.indexes.iter().enumerate() {
        let n = i + 1;
        let what = if ix.unique { "unique" } else { "group" };
        let _ = writeln!(out, "-- index {n}: {what} `{}`", ix.name);
        let mut was = String::from("exists");
        for f in &ix.fields {
            let _ = write!(was, " and cur[{}] ~= false", slots.of(f));
        }
        let _ = writeln!(out, "local was_{n} = {was}");
        let _ = writeln!(out, "if was_{n} ~= (ARGV[{}] == '1') then return {{5}} end", ix.old_flag);
        if !ix.fields.is_empty() {
            let diffs: Vec<String> = ix
                .fields
                .iter()
                .enumerate()
                .map(|(k, f)| format!("cur[{}] ~= ARGV[{}]", slots.of(f), ix.old_flag + 1 + k))
                .collect();
            let _ = writeln!(out, "if was_{n} and ({}) then return {{5}} end", diffs.join(" or "));
        }
        if put {
            let _ = writeln!(out, "local new_{n} = ARGV[{}] == '1'", ix.new_flag);
            let _ =
                writeln!(out, "local keep_{n} = was_{n} and new_{n} and KEYS[{}] == KEYS[{}]", ix.new_key, ix.old_key);
        }
    }
}

/// The op history: ` op=version` entries, oldest dropped beyond
/// [`OP_HISTORY_BYTES`] (a length check, not a count: no scan per write).
const HISTORY: &str = "\
local ops = (cur[3] or '') .. ' ' .. op .. '=' .. newv_s
while #ops > HISTORY_BYTES do
  ops = string.sub(ops, (string.find(ops, ' ', 2, true)))
end
";

/// The put script of `spec`, with its layout.
///
/// Order: read and check everything (hash, scope, op history, expectation,
/// the caller's read of each index, unique holders), then validate the type
/// of every index key it will write with a read on that key, and only then
/// write, starting with the change entry. A failing command therefore
/// aborts the script before its first write: no partial writes. Index keys
/// whose entry does not move are not touched.
pub fn put_script(spec: &DocumentSpec<'_>) -> (String, PutLayout) {
    let l = PutLayout::new(spec, false);
    let slots = Slots::new(&l, true);
    let mut out = String::new();
    header(&mut out, "put", spec, &describe_keys(spec, &l, false), &describe_argv(&l, false), PUT_RETURNS);
    prologue(&mut out, &slots, &l);
    let _ = write!(
        out,
        "\
if exists and cur[3] then
  local hist = cur[3] .. ' '
  local _, e = string.find(hist, ' ' .. op .. '=', 1, true)
  if e then return {{7, tonumber(string.sub(hist, e + 1, string.find(hist, ' ', e + 1, true) - 1))}} end
end
local expect = ARGV[{expect}]
if expect == 'create' then
  if exists then return {{0, v}} end
elseif expect ~= 'any' then
  if not exists then return {{2}} end
  if v ~= tonumber(expect) then return {{0, v}} end
end
",
        expect = l.expect
    );
    check_reads(&mut out, &slots, &l, true);
    // Validate, before any write, every key a write will touch.
    out.push_str("-- validation reads (a wrong type aborts here, before any write)\n");
    for (i, ix) in l.indexes.iter().enumerate() {
        let n = i + 1;
        if ix.unique {
            let _ = writeln!(
                out,
                "if new_{n} and not keep_{n} then\n  local holder = redis.call('GET', KEYS[{nk}])\n  if holder and holder ~= id then return {{4, {n}, holder}} end\nend",
                nk = ix.new_key
            );
            let _ = writeln!(
                out,
                "local drop_{n} = was_{n} and not keep_{n} and redis.call('GET', KEYS[{}]) == id",
                ix.old_key
            );
        } else {
            let _ =
                writeln!(out, "if new_{n} and not keep_{n} then redis.call('SISMEMBER', KEYS[{}], id) end", ix.new_key);
            let _ =
                writeln!(out, "if was_{n} and not keep_{n} then redis.call('SISMEMBER', KEYS[{}], id) end", ix.old_key);
        }
    }
    match (l.list_key, l.score, slots.score) {
        (Some(k), Some(a), Some(sc)) => {
            let _ = writeln!(out, "local list_same = exists and cur[{sc}] == ARGV[{a}]");
            let _ = writeln!(out, "if not list_same then redis.call('ZSCORE', KEYS[{k}], id) end");
        }
        (Some(k), _, _) => {
            let _ = writeln!(out, "if not exists then redis.call('SISMEMBER', KEYS[{k}], id) end");
        }
        _ => {}
    }
    let _ = writeln!(out, "if not exists then redis.call('SISMEMBER', KEYS[{}], scope) end", l.registry_key);
    // Writes.
    let _ = write!(
        out,
        "\
-- writes
local newv = v + 1
local newv_s = string.format('%d', newv)
local change = 'updated'
if not exists then change = 'created' end
redis.call('XADD', KEYS[{changes}], 'MAXLEN', '~', ARGV[{maxlen}], '*', 'id', id, 'v', newv_s, 'op', op, 'change', change, 'kind', ARGV[{kind}])
",
        changes = l.changes_key,
        maxlen = l.maxlen,
        kind = l.kind,
    );
    for (i, ix) in l.indexes.iter().enumerate() {
        let n = i + 1;
        if ix.unique {
            let _ = writeln!(out, "if drop_{n} then redis.call('DEL', KEYS[{}]) end", ix.old_key);
            let _ = writeln!(out, "if new_{n} and not keep_{n} then redis.call('SET', KEYS[{}], id) end", ix.new_key);
        } else {
            let _ = writeln!(out, "if was_{n} and not keep_{n} then redis.call('SREM', KEYS[{}], id) end", ix.old_key);
            let _ = writeln!(out, "if new_{n} and not keep_{n} then redis.call('SADD', KEYS[{}], id) end", ix.new_key);
        }
    }
    match (l.list_key, l.score) {
        (Some(k), Some(a)) => {
            let _ = writeln!(out, "if not list_same then redis.call('ZADD', KEYS[{k}], ARGV[{a}], id) end");
        }
        (Some(k), None) => {
            let _ = writeln!(out, "if not exists then redis.call('SADD', KEYS[{k}], id) end");
        }
        _ => {}
    }
    out.push_str(&HISTORY.replace("HISTORY_BYTES", &OP_HISTORY_BYTES.to_string()));
    let _ = writeln!(out, "local h = {{'v', newv_s, 'scope', scope, 'op', op, 'ops', ops, 'doc', ARGV[{}]}}", l.doc);
    if let Some(a) = l.score {
        let _ = writeln!(out, "h[#h + 1] = 'score'\nh[#h + 1] = ARGV[{a}]");
    }
    if !slots.fields.is_empty() {
        out.push_str("local drop = {}\n");
        for (f, slot) in &slots.fields {
            // The field is stored when any index that uses it is indexed
            // (they share the source, so the values agree).
            let users: Vec<(usize, usize)> = l
                .indexes
                .iter()
                .enumerate()
                .filter_map(|(i, ix)| ix.fields.iter().position(|g| g == f).map(|k| (i + 1, ix.new_flag + 1 + k)))
                .collect();
            let mut first = true;
            for (n, arg) in &users {
                let kw = if first { "if" } else { "elseif" };
                first = false;
                let _ = writeln!(out, "{kw} new_{n} then\n  h[#h + 1] = {}\n  h[#h + 1] = ARGV[{arg}]", lua_str(f));
            }
            let _ = writeln!(out, "elseif cur[{slot}] ~= false then\n  drop[#drop + 1] = {}\nend", lua_str(f));
        }
        out.push_str("if #drop > 0 then redis.call('HDEL', doc_key, unpack(drop)) end\n");
    }
    let _ = write!(
        out,
        "\
redis.call('HSET', doc_key, unpack(h))
if not exists then redis.call('SADD', KEYS[{registry}], scope) end
redis.call('PUBLISH', ARGV[{channel}], scope)
return {{1, newv}}
",
        registry = l.registry_key,
        channel = l.channel,
    );
    (out, l)
}

/// The delete script of `spec`, with its layout. Same order as the put
/// script: checks, validation reads, then writes starting with the change entry.
pub fn delete_script(spec: &DocumentSpec<'_>) -> (String, PutLayout) {
    let l = PutLayout::new(spec, true);
    let slots = Slots::new(&l, false);
    let mut out = String::new();
    header(&mut out, "delete", spec, &describe_keys(spec, &l, true), &describe_argv(&l, true), DELETE_RETURNS);
    prologue(&mut out, &slots, &l);
    let _ = write!(
        out,
        "\
if not exists then return {{2}} end
local expect = ARGV[{expect}]
if expect ~= 'any' and v ~= tonumber(expect) then return {{0, v}} end
",
        expect = l.expect
    );
    check_reads(&mut out, &slots, &l, false);
    out.push_str("-- validation reads (a wrong type aborts here, before any write)\n");
    for (i, ix) in l.indexes.iter().enumerate() {
        let n = i + 1;
        if ix.unique {
            let _ = writeln!(out, "local drop_{n} = was_{n} and redis.call('GET', KEYS[{}]) == id", ix.old_key);
        } else {
            let _ = writeln!(out, "if was_{n} then redis.call('SISMEMBER', KEYS[{}], id) end", ix.old_key);
        }
    }
    let list_remove = match (l.list_key, spec.list) {
        (Some(k), Some(list)) => {
            let (check, rm) = if list.score.is_some() { ("ZSCORE", "ZREM") } else { ("SISMEMBER", "SREM") };
            let _ = writeln!(out, "redis.call('{check}', KEYS[{k}], id)");
            format!("redis.call('{rm}', KEYS[{k}], id)\n")
        }
        _ => String::new(),
    };
    let _ = write!(
        out,
        "\
-- writes
redis.call('XADD', KEYS[{changes}], 'MAXLEN', '~', ARGV[{maxlen}], '*', 'id', id, 'v', string.format('%d', v), 'op', op, 'change', 'deleted', 'kind', ARGV[{kind}])
",
        changes = l.changes_key,
        maxlen = l.maxlen,
        kind = l.kind,
    );
    for (i, ix) in l.indexes.iter().enumerate() {
        let n = i + 1;
        if ix.unique {
            let _ = writeln!(out, "if drop_{n} then redis.call('DEL', KEYS[{}]) end", ix.old_key);
        } else {
            let _ = writeln!(out, "if was_{n} then redis.call('SREM', KEYS[{}], id) end", ix.old_key);
        }
    }
    out.push_str(&list_remove);
    let _ = write!(
        out,
        "\
redis.call('DEL', doc_key)
redis.call('PUBLISH', ARGV[{channel}], scope)
return {{1, v}}
",
        channel = l.channel,
    );
    (out, l)
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
        // The change entry is the first write: every check and validation read comes before it.
        let xadd = text.find("redis.call('XADD'").unwrap();
        for w in ["'SET'", "'DEL'", "'SADD'", "'SREM'", "'ZADD'", "'HSET'", "'HDEL'"] {
            if let Some(at) = text.find(&format!("redis.call({w}")) {
                assert!(at > xadd, "{w} before the change entry");
            }
        }
        for r in ["'GET'", "'SISMEMBER'", "'ZSCORE'"] {
            let at = text.find(&format!("redis.call({r}")).unwrap();
            assert!(at < xadd, "{r} after the first write");
        }
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
