//! What the put and delete scripts share: the hash read with its
//! corruption and scope checks, the check of the caller's read of each
//! index, and the description of the positions both use.

use super::ret::{ALREADY_APPLIED, CONFLICT, CORRUPT, RETRY, SCHEMA_BEHIND, WRONG_SCOPE};
use std::fmt::Write as _;

use crate::spec::MAX_EACH_VALUES;

use super::layout::{CommonSlots, IndexSlots};
use super::text::{Described, lua_str};
use super::{MAX_VERSION, OP_ID_LEN};
use crate::spec::DocumentSpec;

/// The HMGET positions (1-based) of the values a write script reads.
pub(super) struct Slots {
    /// Position of the first distinct index field; the others follow in
    /// layout order.
    first_field: usize,
    /// Position of the stored `score`, for a sorted-set list (put only).
    pub(super) score: Option<usize>,
    /// Position of the stored `doc`, read only to see that it is there.
    pub(super) doc: usize,
    /// Position of the stored schema stamp ([`crate::spec::STAMP_FIELD`]).
    pub(super) stamp: usize,
    /// The HMGET field list as Lua literals.
    hmget: String,
    /// How many distinct index fields follow `first_field`.
    fields: usize,
    /// Whether `ops` is read (at position 3).
    ops: bool,
    /// Whether the hash holds the scope (not for an unscoped type).
    pub(super) stores_scope: bool,
}

impl Slots {
    /// Reads `v`, `scope`, then `ops` (when the script checks the op
    /// history), `score` (when it compares the list score), `doc`, then
    /// `fields`. The document text comes along in the one read the script
    /// makes anyway: cheaper than a second command to see that it exists.
    /// `scope` is read for every type: an unscoped type's hash written by
    /// an earlier release holds `_`, and any other value is damage.
    pub(super) fn new(fields: &[String], with_ops: bool, with_score: bool, stores_scope: bool) -> Self {
        let mut names = vec!["v", "scope"];
        if with_ops {
            names.push("ops");
        }
        let score = with_score.then(|| {
            names.push("score");
            names.len()
        });
        names.push("doc");
        let doc = names.len();
        names.push(crate::spec::STAMP_FIELD);
        let stamp = names.len();
        let first_field = names.len() + 1;
        let hmget = names.into_iter().chain(fields.iter().map(String::as_str)).map(lua_str).collect::<Vec<_>>();
        Slots {
            first_field,
            score,
            doc,
            stamp,
            hmget: hmget.join(", "),
            fields: fields.len(),
            ops: with_ops,
            stores_scope,
        }
    }

    /// The reply that sends the caller back to read again, carrying what
    /// it would read (`v`, `scope`, `ops`, then the index fields, in the
    /// order of the runtime's own state read), so the next attempt needs no
    /// read of its own: under contention that halves the time in which
    /// another write can overtake it. `false` (nil) for an absent field.
    pub(super) fn retry_reply(&self) -> String {
        let ops = if self.ops { "cur[3]" } else { "false" };
        let mut parts = vec![RETRY.to_string(), "cur[1]".into(), "cur[2]".into(), ops.into()];
        parts.extend((0..self.fields).map(|at| format!("cur[{}]", self.field(at))));
        format!("{{{}}}", parts.join(", "))
    }

    /// The position of the distinct index field at `at` in the layout's `fields`.
    pub(super) fn field(&self, at: usize) -> usize {
        self.first_field + at
    }
}

/// Reads the hash and checks corruption and scope.
pub(super) fn prologue(out: &mut String, slots: &Slots, c: &CommonSlots) {
    let _ = write!(
        out,
        "\
local doc_key = KEYS[{dk}]
local id = ARGV[{id}]
local scope = ARGV[{scope}]
local op = ARGV[{op}]
local cur = redis.call('HMGET', doc_key, {hmget})
local vs = cur[1]
local exists = vs ~= false or cur[2] ~= false
local v = 0
if exists then
  -- A version: decimal digits without sign or leading zero, at most {max}.
  -- Checked as text (bytes, not the locale's collation) before it is
  -- converted, so nothing is rounded before it is known to be exact; only
  -- a text as long as the limit needs the comparison byte by byte.
  if not vs or #vs > {max_len} or not string.find(vs, '^[1-9][0-9]*$') then return {{{CORRUPT}, 'v'}} end
  if #vs == {max_len} then
    for i = 1, {max_len} do
      local a, b = string.byte(vs, i), string.byte('{max}', i)
      if a ~= b then
        if a > b then return {{{CORRUPT}, 'v'}} end
        break
      end
    end
  end
  v = tonumber(vs)
  {scope_check}
  if cur[{doc}] == false then return {{{CORRUPT}, 'doc'}} end
  if cur[2] ~= scope then return {{{WRONG_SCOPE}, cur[2]}} end
elseif redis.call('EXISTS', doc_key) == 1 then
  return {{{CORRUPT}, 'v'}}
end
",
        dk = c.doc_key,
        id = c.id,
        scope = c.scope,
        op = c.op,
        hmget = slots.hmget,
        doc = slots.doc,
        scope_check = if slots.stores_scope {
            format!("if cur[2] == false then return {{{CORRUPT}, 'scope'}} end")
        } else {
            // An unscoped type's hash holds no scope: its documents all have
            // the one the caller passes.
            "if cur[2] == false then cur[2] = scope end".to_owned()
        },
        max = MAX_VERSION,
        max_len = MAX_VERSION.to_string().len(),
    );
}

/// Refuses a write of a type at schema `schema` to a document a newer
/// schema wrote (its stamp is greater): that writer stores fields and
/// index entries this one does not know, which this write would erase or
/// leave stale. Nothing is written; the reply names the stored schema. A
/// hash without a stamp is schema 1; a stamp that is not a version is
/// damage. Called after the op-history lookup, so a retried write that
/// was applied before a newer writer came is still recognised as applied.
pub(super) fn stamp_check(out: &mut String, slots: &Slots, schema: u32) {
    let _ = write!(
        out,
        "\
local sv = cur[{stamp}]
if exists and sv then
  if #sv > 7 or not string.find(sv, '^[1-9][0-9]*$') then return {{{CORRUPT}, 'sv'}} end
  if tonumber(sv) > {schema} then return {{{SCHEMA_BEHIND}, tonumber(sv)}} end
end
",
        stamp = slots.stamp,
    );
}

/// The `HSET` arguments that stamp a write of schema `schema` (with a
/// leading `, `), empty for schema 1, which stores no stamp.
pub(super) fn stamp_fields(schema: u32) -> String {
    match crate::spec::stamp_text(schema) {
        Some(t) => format!(", {}, {}", lua_str(crate::spec::STAMP_FIELD), lua_str(&t)),
        None => String::new(),
    }
}

/// Takes the stored op history into `ops`: the ids of the document's last
/// writes, oldest first, each `OP_ID_LEN` bytes with no separator, for
/// consecutive versions ending at `v`. A history whose length is not whole
/// entries, or that holds more writes than the version counts (a position
/// would give a version of 0 or less), is refused as corrupt; one in the
/// earlier ` op=version` form is dropped (its ids were longer).
pub(super) fn history(out: &mut String) {
    let _ = write!(
        out,
        "\
local ops = cur[3] or ''
if string.find(ops, '=', 1, true) then ops = '' end
if #ops % {n} ~= 0 or #ops / {n} > v then return {{{CORRUPT}, 'ops'}} end
",
        n = OP_ID_LEN
    );
}

/// Compares the expectation `expect` (a version, or `<version>:<op id>`
/// for a revision) with the stored `v` (as text, `cur[1]`) and the last id
/// of the stored history `ops`, returning a conflict with the stored
/// version when either differs. The op id is what tells two documents of
/// one version apart after a failover lost the write of one of them.
/// `indent` prefixes every line.
pub(super) fn revision_check(out: &mut String, indent: &str) {
    let text = format!(
        "\
local want_v, want_op = expect, nil
local at = string.find(expect, ':', 1, true)
if at then want_v, want_op = string.sub(expect, 1, at - 1), string.sub(expect, at + 1) end
if want_v ~= cur[1] or (want_op and string.sub(ops, -{n}) ~= want_op) then return {{{CONFLICT}, v}} end
",
        n = OP_ID_LEN
    );
    for line in text.lines() {
        let _ = writeln!(out, "{indent}{line}");
    }
}

/// Reads the document's tombstone from `KEYS[key]` (a wrong type aborts
/// here, before any write) into `tomb_v` (the last version), `tomb_op` (the
/// delete's op id) and `tomb_ops` (the history as it was), all `nil` when
/// there is none. The text is `<version>:<delete op id><history>`; anything
/// else is refused as corrupt, so a damaged tombstone never makes a write
/// look applied. `indent` prefixes every line.
pub(super) fn tomb_read(out: &mut String, key: usize, indent: &str) {
    let text = format!(
        "\
local tomb = redis.call('GET', KEYS[{key}])
local tomb_v, tomb_op, tomb_ops
if tomb then
  local tv, rest = string.match(tomb, '^([1-9][0-9]*):(.*)$')
  if not tv or #tv > {max_len} or tonumber(tv) > {max} or #rest < {n} or #rest % {n} ~= 0 then return {{{CORRUPT}, 'tomb'}} end
  tomb_v = tonumber(tv)
  tomb_op = string.sub(rest, 1, {n})
  tomb_ops = string.sub(rest, {n1})
  if #tomb_ops / {n} > tomb_v then return {{{CORRUPT}, 'tomb'}} end
end
",
        n = OP_ID_LEN,
        n1 = OP_ID_LEN + 1,
        max = MAX_VERSION,
        max_len = MAX_VERSION.to_string().len(),
    );
    for line in text.lines() {
        let _ = writeln!(out, "{indent}{line}");
    }
}

/// The statement that writes tombstone `KEYS[tomb]` again unchanged, its
/// expiry kept (see [`lookup`]).
pub(super) fn tomb_rewrite(tomb: usize) -> String {
    format!("redis.call('SET', KEYS[{tomb}], tomb, 'KEEPTTL')")
}

/// Looks `op` up in the history `hist` (a Lua expression) whose newest
/// entry produced version `newest`: a match at an entry boundary is this
/// write, already applied, and its position gives its version (`{7, version}`).
///
/// Before it answers, `rewrite` (a Lua statement) writes a value that holds
/// the history again, unchanged: a caller that waits for replicas after
/// the call (`WAIT` counts what this connection wrote) then waits for a
/// state that contains the earlier write, whichever connection made it.
pub(super) fn lookup(out: &mut String, hist: &str, newest: &str, rewrite: &str, indent: &str) {
    let text = format!(
        "\
local at = string.find({hist}, op, 1, true)
while at and at % {n} ~= 1 do at = string.find({hist}, op, at + 1, true) end
if at then
  {rewrite}
  return {{{ALREADY_APPLIED}, {newest} - (#{hist} - at + 1) / {n} + 1}}
end
",
        n = OP_ID_LEN
    );
    for line in text.lines() {
        let _ = writeln!(out, "{indent}{line}");
    }
}

/// Index `n` (1-based): compares the caller's read with the stored fields
/// (`{5}` on a difference) and defines `was_n`.
pub(super) fn check_read(out: &mut String, slots: &Slots, n: usize, ix: &IndexSlots) {
    let what = if ix.unique { "unique" } else { "group" };
    let _ = writeln!(out, "-- index {n}: {what} `{}`", ix.name);
    let mut was = String::from("exists");
    for f in &ix.fields {
        let _ = write!(was, " and cur[{}] ~= false", slots.field(f.at));
    }
    let _ = writeln!(out, "local was_{n} = {was}");
    let retry = slots.retry_reply();
    let _ = writeln!(out, "if was_{n} ~= (ARGV[{}] == '1') then return {retry} end", ix.old.flag);
    if !ix.fields.is_empty() {
        let diffs: Vec<String> = ix
            .fields
            .iter()
            .enumerate()
            .map(|(k, f)| format!("cur[{}] ~= ARGV[{}]", slots.field(f.at), ix.old.value(k)))
            .collect();
        let _ = writeln!(out, "if was_{n} and ({}) then return {retry} end", diffs.join(" or "));
    }
}

/// The KEYS both scripts use: document, change stream, registry, list.
pub(super) fn describe_common_keys(spec: &DocumentSpec<'_>, c: &CommonSlots) -> Vec<Described> {
    let mut keys = vec![
        (c.doc_key, format!("document hash `{}`", spec.key)),
        (
            c.changes_key,
            match spec.changes {
                Some(t) => format!("change stream `{t}` (XADD MAXLEN ~)"),
                None => "unused (`changes = none`: no change entry)".to_owned(),
            },
        ),
    ];
    if let Some(k) = c.registry_key {
        keys.push((k, format!("scope registry `{}` (set)", spec.registry)));
    }
    if let (Some(k), Some(list)) = (c.list_key, spec.list) {
        let t = if list.score.is_some() { "sorted set" } else { "set" };
        keys.push((k, format!("list `{}` ({t})", list.key)));
    }
    keys
}

/// How a write sends its nudge: `SPUBLISH` on the channel of the
/// document's scope for a type whose nudge carries the scope as its tag (a
/// shard channel must be in the script's slot, and is), else `PUBLISH`.
pub(super) fn nudge_command(spec: &DocumentSpec<'_>) -> &'static str {
    if spec.shard_nudge() { "SPUBLISH" } else { "PUBLISH" }
}

/// The line that sends the nudge, last of a write that appends a change.
pub(super) fn nudge_line(spec: &DocumentSpec<'_>, c: &CommonSlots) -> String {
    format!("redis.call('{}', ARGV[{}], scope)\n", nudge_command(spec), c.channel)
}

/// The ARGV both scripts use; `expect` describes the accepted expectations.
pub(super) fn describe_common_argv(spec: &DocumentSpec<'_>, c: &CommonSlots, expect: &str) -> Vec<Described> {
    vec![
        (c.expect, expect.to_owned()),
        (c.op, "operation id, exactly 12 characters (kept in the `ops` history)".into()),
        (c.id, "document id".into()),
        (c.scope, "scope".into()),
        (c.kind, "kind (change entries)".into()),
        (c.channel, format!("nudge channel ({} scope)", nudge_command(spec))),
        (c.maxlen, "change stream approximate max length".into()),
    ]
}

/// The KEYS and ARGV of the caller's read of one index.
pub(super) fn describe_read(ix: &IndexSlots) -> (Vec<Described>, Vec<Described>) {
    let what = if ix.unique { "unique" } else { "group" };
    let fields = ix.fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ");
    let flag = (
        ix.old.flag,
        format!(
            "`{}`: `1` if the caller read an indexed document, else `0`; then the values read of: {fields}",
            ix.name
        ),
    );
    match ix.old_count {
        Some(count) => (
            Vec::new(),
            vec![
                flag,
                (count, format!("`{}`: how many keys of the values read follow in the multi-valued keys", ix.name)),
            ],
        ),
        None => (
            vec![(
                ix.old.key,
                format!("{what} `{}`: old key as the caller read it (KEYS[1] when not indexed)", ix.name),
            )],
            vec![flag],
        ),
    }
}

/// The KEYS ranges of the multi-valued indexes (`each`), from the KEYS
/// position in ARGV `tail`: per such index `n` the keys read start at
/// `each_n_o` (`each_n_on` of them) and, in a put, the new ones at
/// `each_n_n` (`each_n_nn`). The counts must be whole numbers within the
/// bound and fill KEYS exactly to its end, or nothing is written.
/// `indexes`: `(n, old count position, new count position)`.
pub(super) fn each_ranges(out: &mut String, tail: usize, fixed_keys: usize, indexes: &[(usize, usize, Option<usize>)]) {
    let _ = write!(
        out,
        "\
local function each_count(t, max) return t and string.find(t, '^%d+$') and #t <= 5 and tonumber(t) <= max and tonumber(t) end
local function each_malformed() return redis.error_reply('ERR microdcs: malformed multi-valued index keys') end
local cursor = each_count(ARGV[{tail}], 99999)
if not cursor or cursor <= {fixed_keys} then return each_malformed() end
",
    );
    for (n, old, new) in indexes {
        let _ = writeln!(
            out,
            "local each_{n}_o, each_{n}_on = cursor, each_count(ARGV[{old}], {MAX_EACH_VALUES})\nif not each_{n}_on then return each_malformed() end\ncursor = cursor + each_{n}_on"
        );
        if let Some(new) = new {
            let _ = writeln!(
                out,
                "local each_{n}_n, each_{n}_nn = cursor, each_count(ARGV[{new}], {MAX_EACH_VALUES})\nif not each_{n}_nn then return each_malformed() end\ncursor = cursor + each_{n}_nn"
            );
        }
    }
    out.push_str("if cursor - 1 ~= #KEYS then return each_malformed() end\n");
}

/// Type-checks (a read of each) the keys of multi-valued index `n` that a
/// write will touch: those read and, in a put, the new ones.
pub(super) fn each_reads(out: &mut String, n: usize, put: bool) {
    let _ =
        writeln!(out, "for i = each_{n}_o, each_{n}_o + each_{n}_on - 1 do redis.call('SISMEMBER', KEYS[i], id) end");
    if put {
        let _ = writeln!(
            out,
            "for i = each_{n}_n, each_{n}_n + each_{n}_nn - 1 do redis.call('SISMEMBER', KEYS[i], id) end"
        );
    }
}
