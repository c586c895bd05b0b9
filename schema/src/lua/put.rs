// Just over 600 lines: one script, generated in the order it runs (checks,
// stamp, index moves, change entry); cutting it would scatter one script's
// text over files a reviewer reads together with its snapshot.
//! The put (compare-and-set) script.

use super::ret::{CONFLICT, CORRUPT, NOT_FOUND, UNIQUE_VIOLATION, WRITTEN};
use std::fmt::Write as _;

use super::common::{
    Slots, check_read, describe_common_argv, describe_common_keys, describe_read, each_ranges, each_reads, history,
    lookup, nudge_line, prologue, revision_check, stamp_check, stamp_fields, tomb_read, tomb_rewrite,
};
use super::layout::{PutLayout, StepLayout};
use super::text::{Described, header, lua_str};
use super::{MAX_VERSION, OP_ID_LEN};
use crate::spec::DocumentSpec;

pub(super) const PUT_RETURNS: &str = "\
--   {1, version}          written; `version` is the new version
--   {0, current}          the expected version does not match (create of an existing document)
--   {2}                   update of a missing document
--   {3, stored_scope}     the id belongs to another scope; nothing written
--   {4, index, holder}    unique index number `index` (1-based) holds another id; nothing written
--   {5, v, scope, ops, ...} stored index fields differ from the caller's read: what is
--                         stored (`v`, `scope`, `ops`, then every index field) to try again with
--   {6, field}            corrupt hash (`v` not a version, `scope` or `doc` missing)
--   {6, 'v', 'limit'}     the version is at its limit and cannot grow; nothing written
--   {6, 'tomb'}           corrupt tombstone; nothing written
--   {7, version}          this operation id was already applied, producing `version`
--                         (found in the history, or in the tombstone of a deleted document)
--   {9, stored_schema}    a newer schema of the type wrote the document (its stamp `sv`);
--                         nothing written
";

/// The op history: the ids of the last writes, oldest first, each
/// `OP_ID_LEN` bytes with no separator, for consecutive versions ending at
/// the stored `v`. Appending and trimming is one concatenation and at most
/// one `string.sub`; no scan. `keep` is the caller's history length in
/// bytes, taken from ARGV before the first write.
const HISTORY: &str = "\
ops = ops .. op
if #ops > keep then ops = string.sub(ops, -keep) end
";

fn describe(spec: &DocumentSpec<'_>, l: &PutLayout) -> (Vec<Described>, Vec<Described>) {
    let mut keys = describe_common_keys(spec, &l.common);
    let mut argv = describe_common_argv(
        spec,
        &l.common,
        "expected version: `create`, `any`, the version number, or `<version>:<op id>` (a revision: the version and the id of the write that produced it)",
    );
    argv.push((l.doc, "document text, stored as is in `doc`".into()));
    argv.push((l.history, "how many operation ids `ops` keeps (1 to 64)".into()));
    if let Some(t) = l.ttl {
        argv.push((
            t,
            "the document's lifetime in milliseconds (its unique keys expire with it); `keep:<ms>` keeps the lifetime it has left, `<ms>` when it has none".into(),
        ));
    }
    keys.push((l.tomb_key, format!("tombstone `{}`, read when the document is missing", spec.tombstones().key)));
    if let Some(s) = l.score {
        argv.push((s, "list score".into()));
    }
    for (spec_ix, ix) in spec.unique.iter().chain(spec.groups).zip(&l.indexes) {
        let read = &ix.index;
        let what = if read.unique { "unique" } else { "group" };
        let fields = read.fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ");
        match ix.new_count {
            Some(count) => argv.push((
                count,
                format!(
                    "`{}` `{}`: how many keys of the new values follow those read in the multi-valued keys",
                    read.name, spec_ix.key
                ),
            )),
            None => keys.push((
                ix.new.key,
                format!("{what} `{}` `{}`: new key (KEYS[1] when not indexed)", read.name, spec_ix.key),
            )),
        }
        argv.push((
            ix.new.flag,
            format!("`{}`: `1` if the new document is indexed, else `0`; then new values of: {fields}", read.name),
        ));
        let (k, a) = describe_read(read);
        keys.extend(k);
        argv.extend(a);
    }
    if let Some(t) = l.tail {
        argv.push((
            t,
            "KEYS position of the multi-valued keys: per such index, the keys of the values read, then of the new \
             ones (the last KEYS)"
                .into(),
        ));
    }
    (keys, argv)
}

/// The put script of `spec`, with its layout.
///
/// Order: read and check everything (hash, scope, op history, expectation,
/// the caller's read of each index, unique holders), then validate the type
/// of every key it will write with a read on that key, and only then write.
/// The first write is the one key not read before: the move of the first
/// group index entry when it moves (its sets are checked by the move, and
/// the change stream by a read), else the change entry. A failing command
/// therefore aborts the script before its first write: no partial writes.
/// Index keys whose entry does not move are not touched.
pub fn put_script(spec: &DocumentSpec<'_>) -> (String, PutLayout) {
    let l = PutLayout::new(spec);
    (generate(spec, &l, None), l)
}

/// The put text, with the step's parts when `step` is given.
pub(super) fn generate(spec: &DocumentSpec<'_>, l: &PutLayout, step: Option<&StepLayout>) -> String {
    let c = &l.common;
    let slots = Slots::new(&l.fields, true, l.score.is_some(), spec.stores_scope());
    let mut out = String::new();
    let (mut keys, mut argv) = describe(spec, l);
    let title = match step {
        Some(s) => {
            super::step::describe(spec, s, &mut keys, &mut argv);
            if s.outbox.is_some() { "step" } else { "write" }
        }
        None => "put",
    };
    let returns = match step {
        Some(s) if s.outbox.is_some() => {
            format!("{PUT_RETURNS}{}{}", super::step::RETURNS, super::step::OUTBOX_RETURNS)
        }
        Some(_) => format!("{PUT_RETURNS}{}", super::step::RETURNS),
        None => PUT_RETURNS.to_owned(),
    };
    header(&mut out, title, spec, keys, argv, &returns);
    prologue(&mut out, &slots, c);
    let _ = writeln!(out, "local keep = ARGV[{}] * {OP_ID_LEN}", l.history);
    history(&mut out);
    lookup(&mut out, "ops", "v", "redis.call('HSET', doc_key, 'v', vs)", "");
    // A missing document may have been deleted after this write applied
    // (its reply lost): the tombstone keeps the history it had.
    out.push_str("if not exists then\n");
    tomb_read(&mut out, l.tomb_key, "  ");
    out.push_str("  if tomb then\n");
    lookup(&mut out, "tomb_ops", "tomb_v", &tomb_rewrite(l.tomb_key), "    ");
    // Created again: its versions go on from the deleted document's, so a
    // read of that document can never match the new one.
    out.push_str("    v = tomb_v\n");
    out.push_str("  end\nend\n");
    stamp_check(&mut out, &slots, spec.schema);
    if let Some(s) = step {
        super::step::event_check(&mut out, s);
    }
    let _ = write!(
        out,
        "\
local expect = ARGV[{expect}]
if expect == 'create' then
  if exists then return {{{CONFLICT}, v}} end
elseif expect ~= 'any' then
  if not exists then return {{{NOT_FOUND}}} end
",
        expect = c.expect,
    );
    revision_check(&mut out, "  ");
    let _ = write!(out, "end\nif v >= {max} then return {{{CORRUPT}, 'v', 'limit'}} end\n", max = MAX_VERSION);
    if let Some(t) = l.tail {
        let each: Vec<_> = l
            .indexes
            .iter()
            .enumerate()
            .filter_map(|(i, ix)| Some((i + 1, ix.index.old_count?, ix.new_count)))
            .collect();
        let fixed = step.map_or(l.num_keys, |s| s.num_keys);
        each_ranges(&mut out, t, fixed, &each);
    }
    for (i, ix) in l.indexes.iter().enumerate() {
        let n = i + 1;
        check_read(&mut out, &slots, n, &ix.index);
        let _ = writeln!(out, "local new_{n} = ARGV[{}] == '1'", ix.new.flag);
        if ix.index.old_count.is_some() {
            // The same values text: the same keys.
            let _ = writeln!(
                out,
                "local keep_{n} = was_{n} and new_{n} and ARGV[{}] == ARGV[{}]",
                ix.new.value(0),
                ix.index.old.value(0)
            );
        } else {
            let _ = writeln!(
                out,
                "local keep_{n} = was_{n} and new_{n} and KEYS[{}] == KEYS[{}]",
                ix.new.key, ix.index.old.key
            );
        }
    }
    // Validate, before any write, every key a write will touch.
    out.push_str("-- validation reads (a wrong type aborts here, before any write)\n");
    for (i, ix) in l.indexes.iter().enumerate() {
        let n = i + 1;
        let (new_key, old_key) = (ix.new.key, ix.index.old.key);
        if ix.index.old_count.is_some() {
            out.push_str(&format!("if not keep_{n} then\n"));
            let mut reads = String::new();
            each_reads(&mut reads, n, true);
            for line in reads.lines() {
                let _ = writeln!(out, "  {line}");
            }
            out.push_str("end\n");
        } else if ix.index.unique {
            let _ = writeln!(
                out,
                "if new_{n} and not keep_{n} then\n  local holder = redis.call('GET', KEYS[{new_key}])\n  if holder and holder ~= id then return {{{UNIQUE_VIOLATION}, {n}, holder}} end\nend",
            );
            let _ =
                writeln!(out, "local drop_{n} = was_{n} and not keep_{n} and redis.call('GET', KEYS[{old_key}]) == id");
        } else if ix.index.sorted.is_some() {
            // A sorted entry is written again when its score changes, so
            // its new key is checked even when it stays.
            let _ = writeln!(out, "if new_{n} then redis.call('ZSCORE', KEYS[{new_key}], id) end");
            let _ = writeln!(out, "if was_{n} and not keep_{n} then redis.call('ZSCORE', KEYS[{old_key}], id) end");
        } else if Some(i) == lead(l) {
            // This entry moves as the first write (one SMOVE, whose failure
            // on a wrong type writes nothing); the change entry follows and
            // undoes the move if the stream refuses it (see `writes`), so
            // neither key needs a read here.
            let _ = writeln!(out, "local lead = not keep_{n} and (was_{n} or new_{n})");
        } else {
            let _ = writeln!(out, "if new_{n} and not keep_{n} then redis.call('SISMEMBER', KEYS[{new_key}], id) end");
            let _ = writeln!(out, "if was_{n} and not keep_{n} then redis.call('SISMEMBER', KEYS[{old_key}], id) end");
        }
    }
    match (c.list_key, l.score, slots.score) {
        (Some(k), Some(a), Some(sc)) => {
            let _ = writeln!(out, "local list_same = exists and cur[{sc}] == ARGV[{a}]");
            let _ = writeln!(out, "if not list_same then redis.call('ZSCORE', KEYS[{k}], id) end");
        }
        (Some(k), _, _) => {
            let _ = writeln!(out, "if not exists then redis.call('SISMEMBER', KEYS[{k}], id) end");
        }
        _ => {}
    }
    // A sharded type's registry is written before the script, by the
    // runtime: it is in another slot.
    if let Some(r) = c.registry_key {
        let _ = writeln!(out, "if not exists then redis.call('SISMEMBER', KEYS[{r}], scope) end");
    }
    if let Some(s) = step {
        super::step::entries_check(&mut out, s);
    }
    writes(&mut out, l, &slots, spec, step);
    out
}

/// The group index whose entry move is the first write, if any: the first
/// group index. Its old and new sets are checked by the move itself.
fn lead(l: &PutLayout) -> Option<usize> {
    l.indexes.iter().position(|ix| !ix.index.unique && ix.index.sorted.is_none() && ix.index.old_count.is_none())
}

/// The move of the lead group entry: SMOVE when it changes sets (SADD when
/// the id was missing from the old set), else SREM or SADD. `moved`
/// records what changed (`1` moved, `2` added to the new set, `3` removed
/// from the old one) so the move can be undone exactly.
fn lead_write(l: &PutLayout) -> String {
    let Some(i) = lead(l) else { return String::new() };
    let (n, ix) = (i + 1, &l.indexes[i]);
    let (new_key, old_key) = (ix.new.key, ix.index.old.key);
    format!(
        "\
local moved = 0
if lead then
  if not was_{n} then
    if redis.call('SADD', KEYS[{new_key}], id) == 1 then moved = 2 end
  elseif not new_{n} then
    if redis.call('SREM', KEYS[{old_key}], id) == 1 then moved = 3 end
  elseif redis.call('SMOVE', KEYS[{old_key}], KEYS[{new_key}], id) == 1 then
    moved = 1
  elseif redis.call('SADD', KEYS[{new_key}], id) == 1 then
    moved = 2
  end
end
"
    )
}

/// The change entry. After the lead move it is the second write, so a
/// stream of the wrong type (the one key not read before) must not leave
/// the move behind: the entry is added with `pcall`, and on an error the
/// move is undone before the error is returned. Nothing else has been
/// written then, so the script leaves the keyspace as it found it (cheaper
/// than a read of the stream on every write, which this replaces).
fn change_entry(l: &PutLayout) -> String {
    let c = &l.common;
    let add = format!(
        "'XADD', KEYS[{changes}], 'MAXLEN', '~', ARGV[{maxlen}], '*', 'id', id, 'v', newv_s, 'op', op, 'change', change, 'kind', ARGV[{kind}]",
        changes = c.changes_key,
        maxlen = c.maxlen,
        kind = c.kind,
    );
    let Some(i) = lead(l) else { return format!("redis.call({add})\n") };
    let ix = &l.indexes[i];
    let (new_key, old_key) = (ix.new.key, ix.index.old.key);
    format!(
        "\
local added = redis.pcall({add})
if type(added) == 'table' and added.err then
  if moved == 1 then
    redis.call('SMOVE', KEYS[{new_key}], KEYS[{old_key}], id)
  elseif moved == 2 then
    redis.call('SREM', KEYS[{new_key}], id)
  elseif moved == 3 then
    redis.call('SADD', KEYS[{old_key}], id)
  end
  return added
end
"
    )
}

/// The writes: the lead group move, then the change entry, then the rest.
/// `nudge`: the type has a change stream, so the write appends a change
/// entry and ends by sending this nudge line.
fn writes(out: &mut String, l: &PutLayout, slots: &Slots, spec: &DocumentSpec<'_>, step: Option<&StepLayout>) {
    let c = &l.common;
    let nudge = spec.changes.is_some().then(|| nudge_line(spec, &l.common));
    if let Some(t) = l.ttl {
        // The lifetime the write gives: the caller's, or what the document
        // has left (read before the first write). A document without one
        // (missing, or stored before the type had a lifetime) takes the
        // caller's, so a kept lifetime is never none.
        let _ = write!(
            out,
            "\
local life = ARGV[{t}]
if string.sub(life, 1, 5) == 'keep:' then
  local left = -1
  if exists then left = redis.call('PTTL', doc_key) end
  if left > 0 then life = string.format('%d', left) else life = string.sub(life, 6) end
end
"
        );
    }
    let _ = write!(
        out,
        "\
-- writes
local newv = v + 1
local newv_s = string.format('%d', newv)
local change = 'updated'
if not exists then change = 'created' end
{lead}{entry}",
        lead = lead_write(l),
        entry = if nudge.is_some() { change_entry(l) } else { String::new() },
    );
    for (i, ix) in l.indexes.iter().enumerate() {
        let n = i + 1;
        let (new_key, old_key) = (ix.new.key, ix.index.old.key);
        if Some(i) == lead(l) {
            continue;
        }
        if ix.index.old_count.is_some() {
            // Out of the sets of the values gone, into those of the values
            // new; a value kept is not touched.
            let _ = write!(
                out,
                "\
if not keep_{n} then
  local was_in, now_in = {{}}, {{}}
  for i = each_{n}_o, each_{n}_o + each_{n}_on - 1 do was_in[KEYS[i]] = true end
  for i = each_{n}_n, each_{n}_n + each_{n}_nn - 1 do now_in[KEYS[i]] = true end
  for i = each_{n}_o, each_{n}_o + each_{n}_on - 1 do
    if not now_in[KEYS[i]] then redis.call('SREM', KEYS[i], id) end
  end
  for i = each_{n}_n, each_{n}_n + each_{n}_nn - 1 do
    if not was_in[KEYS[i]] then redis.call('SADD', KEYS[i], id) end
  end
end
"
            );
            continue;
        }
        if let Some(max) = ix.index.sorted {
            // The score is the index's last field: its stored value and its
            // new one (the same text as the ZADD score).
            let k = ix.index.fields.len() - 1;
            let (stored, score) = (slots.field(ix.index.fields[k].at), ix.new.value(k));
            let _ = writeln!(out, "if was_{n} and not keep_{n} then redis.call('ZREM', KEYS[{old_key}], id) end");
            let _ = writeln!(
                out,
                "if new_{n} and (not keep_{n} or cur[{stored}] ~= ARGV[{score}]) then\n  redis.call('ZADD', KEYS[{new_key}], ARGV[{score}], id)"
            );
            if let Some(max) = max {
                // Bounded: keep the `max` highest scores.
                let _ = writeln!(
                    out,
                    "  local over = redis.call('ZCARD', KEYS[{new_key}]) - {max}\n  if over > 0 then redis.call('ZREMRANGEBYRANK', KEYS[{new_key}], 0, over - 1) end"
                );
            }
            out.push_str("end\n");
            continue;
        }
        if ix.index.unique {
            let _ = writeln!(out, "if drop_{n} then redis.call('DEL', KEYS[{old_key}]) end");
            match l.ttl {
                // The key lives as long as the document: set with the same
                // lifetime, or given it again when it stays.
                Some(_) => {
                    let _ = writeln!(
                        out,
                        "if new_{n} and not keep_{n} then redis.call('SET', KEYS[{new_key}], id, 'PX', life) end"
                    );
                    let _ = writeln!(out, "if keep_{n} then redis.call('PEXPIRE', KEYS[{new_key}], life) end");
                }
                None => {
                    let _ =
                        writeln!(out, "if new_{n} and not keep_{n} then redis.call('SET', KEYS[{new_key}], id) end");
                }
            }
        } else {
            let _ = writeln!(out, "if was_{n} and not keep_{n} then redis.call('SREM', KEYS[{old_key}], id) end");
            let _ = writeln!(out, "if new_{n} and not keep_{n} then redis.call('SADD', KEYS[{new_key}], id) end");
        }
    }
    match (c.list_key, l.score) {
        (Some(k), Some(a)) => {
            let _ = writeln!(out, "if not list_same then redis.call('ZADD', KEYS[{k}], ARGV[{a}], id) end");
        }
        (Some(k), None) => {
            let _ = writeln!(out, "if not exists then redis.call('SADD', KEYS[{k}], id) end");
        }
        _ => {}
    }
    if let Some(s) = step {
        super::step::writes(out, s);
    }
    out.push_str(HISTORY);
    // The usual case, every index indexed: one HSET with every field, as
    // written here (no table to build). `scope` is written again unchanged
    // (another scope was refused), which costs less than deciding not to.
    let all_new: Vec<String> = (1..=l.indexes.len()).map(|n| format!("new_{n}")).collect();
    let mut direct = format!("'v', newv_s, 'ops', ops, 'doc', ARGV[{}]{}", l.doc, stamp_fields(spec.schema));
    if slots.stores_scope {
        direct.push_str(", 'scope', scope");
    }
    if let Some(a) = l.score {
        let _ = write!(direct, ", 'score', ARGV[{a}]");
    }
    for (at, f) in l.fields.iter().enumerate() {
        // A field shared by several indexes has one source: any user's value.
        let arg =
            l.indexes.iter().find_map(|ix| ix.index.fields.iter().position(|g| g.at == at).map(|k| ix.new.value(k)));
        if let Some(arg) = arg {
            let _ = write!(direct, ", {}, ARGV[{arg}]", lua_str(f));
        }
    }
    if all_new.is_empty() {
        let _ = writeln!(out, "redis.call('HSET', doc_key, {direct})");
    } else {
        let _ = writeln!(out, "if {} then\n  redis.call('HSET', doc_key, {direct})\nelse", all_new.join(" and "));
        let mut rest = String::new();
        partial_hash_write(&mut rest, l, slots, spec.schema);
        for line in rest.lines() {
            let _ = writeln!(out, "  {line}");
        }
        out.push_str("end\n");
    }
    if l.ttl.is_some() {
        // Every write gives the document its lifetime again (or, kept,
        // what it has left), in the same script as the write.
        let _ = writeln!(out, "redis.call('PEXPIRE', doc_key, life)");
    }
    if let Some(r) = c.registry_key {
        let _ = writeln!(out, "if not exists then redis.call('SADD', KEYS[{r}], scope) end");
    }
    if let Some(line) = nudge {
        out.push_str(&line);
    }
    // A step also answers what its family effects returned, in order.
    let fx = if step.is_some() { ", fx_out" } else { "" };
    let _ = writeln!(out, "return {{{WRITTEN}, newv{fx}}}");
}

/// The hash write when some index is not indexed: its fields are dropped,
/// and only what changed is written.
fn partial_hash_write(out: &mut String, l: &PutLayout, slots: &Slots, schema: u32) {
    // `scope` never changes once written (another scope is refused).
    let _ = writeln!(out, "local h = {{'v', newv_s, 'ops', ops, 'doc', ARGV[{}]{}}}", l.doc, stamp_fields(schema));
    if slots.stores_scope {
        out.push_str("if not exists then\n  h[#h + 1] = 'scope'\n  h[#h + 1] = scope\nend\n");
    }
    if let Some(a) = l.score {
        // An unchanged score is neither moved in the list nor written.
        let _ = writeln!(out, "if not list_same then\n  h[#h + 1] = 'score'\n  h[#h + 1] = ARGV[{a}]\nend");
    }
    if !l.fields.is_empty() {
        out.push_str("local drop = nil\n");
        for (at, f) in l.fields.iter().enumerate() {
            // The field is stored when any index that uses it is indexed
            // (they share the source, so the values agree).
            let users = l.indexes.iter().enumerate().filter_map(|(i, ix)| {
                ix.index.fields.iter().position(|g| g.at == at).map(|k| (i + 1, ix.new.value(k)))
            });
            // A field already holding its new value is not written again.
            let stored = slots.field(at);
            for (u, (n, arg)) in users.enumerate() {
                let kw = if u == 0 { "if" } else { "elseif" };
                let _ = writeln!(
                    out,
                    "{kw} new_{n} then\n  if cur[{stored}] ~= ARGV[{arg}] then\n    h[#h + 1] = {f}\n    h[#h + 1] = ARGV[{arg}]\n  end",
                    f = lua_str(f)
                );
            }
            let _ = writeln!(
                out,
                "elseif cur[{stored}] ~= false then\n  drop = drop or {{}}\n  drop[#drop + 1] = {}\nend",
                lua_str(f)
            );
        }
        out.push_str("if drop then redis.call('HDEL', doc_key, unpack(drop)) end\n");
    }
    out.push_str("redis.call('HSET', doc_key, unpack(h))\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lua::delete_script;
    use crate::lua::tests_spec::SPEC;

    #[test]
    fn header_lists_every_key_and_arg() {
        let (text, l) = put_script(&SPEC);
        for i in 1..=l.num_keys {
            assert!(text.contains(&format!("-- KEYS[{i}] ")), "KEYS[{i}] undocumented:\n{text}");
        }
        for i in 1..=l.num_args {
            let flagged = l.indexes.iter().any(|x| i > x.new.flag && i <= x.new.flag + x.index.fields.len())
                || l.indexes.iter().any(|x| i > x.index.old.flag && i <= x.index.old.flag + x.index.fields.len());
            assert!(flagged || text.contains(&format!("-- ARGV[{i}] ")), "ARGV[{i}] undocumented:\n{text}");
        }
        assert!(text.contains("MAXLEN', '~'"));
        // Every read comes before the first write; the first write is the
        // lead group move or the change entry.
        let writes = ["'XADD'", "'SET'", "'DEL'", "'SADD'", "'SREM'", "'SMOVE'", "'ZADD'", "'HSET'", "'HDEL'"];
        // The unchanged rewrites before an already-applied answer end the
        // script there: not writes of this one.
        let body = text.replace("redis.call('HSET', doc_key, 'v', vs)", "").replace(&tomb_rewrite(l.tomb_key), "");
        let first_write = writes.iter().filter_map(|w| body.find(&format!("redis.call({w}"))).min().unwrap();
        let lead = body.find("if lead then\n  if not was_").unwrap();
        assert!(first_write > lead, "a write before the lead move");
        for r in ["'GET'", "'SISMEMBER'", "'ZSCORE'"] {
            let at = body.find(&format!("redis.call({r}")).unwrap();
            assert!(at < lead, "{r} after the first write");
        }
        // The change entry, the one key not read before, comes right after
        // the move and undoes it when the stream refuses the entry.
        let entry = text.find("local added = redis.pcall('XADD'").expect("change entry by pcall");
        let undo = text.find("if type(added) == 'table' and added.err then").unwrap();
        assert!(lead < entry && entry < undo);
        assert_eq!(text.matches("redis.pcall(").count(), 1, "only the change entry is caught");
        assert!(!text.contains("'XLEN'"), "no read of the stream");
        assert!(!text.contains("'op', op, 'ops'"), "the newest op id is not stored twice");
        assert!(!text.contains("cjson"), "scripts never build or parse JSON");
        let (text, _) = delete_script(&SPEC);
        assert!(text.contains("'deleted'"));
    }

    #[test]
    fn versions_are_checked_as_text_before_any_arithmetic() {
        for text in [put_script(&SPEC).0, delete_script(&SPEC).0] {
            let check = text.find("string.find(vs, '^[1-9][0-9]*$')").expect("stored version checked");
            let first_tonumber = text.find("tonumber(").expect("one conversion");
            assert!(check < first_tonumber, "a conversion before the check:\n{text}");
            assert!(!text.contains("tonumber(expect)"), "the expectation is compared as text");
            assert!(text.contains(&MAX_VERSION.to_string()));
        }
        assert!(put_script(&SPEC).0.contains(&format!("if v >= {MAX_VERSION} then return {{6, 'v', 'limit'}} end")));
    }

    #[test]
    fn a_later_schema_stamps_and_every_schema_checks_the_stamp() {
        let first = put_script(&SPEC).0;
        let writes_stamp =
            |t: &str| t.lines().any(|l| (l.contains("'HSET'") || l.contains("local h =")) && l.contains("'sv'"));
        assert!(!writes_stamp(&first), "schema 1 writes no stamp:\n{first}");
        assert!(first.contains("if tonumber(sv) > 1 then return {9, tonumber(sv)} end"), "{first}");
        let second = DocumentSpec { schema: 2, ..SPEC };
        let (text, _) = put_script(&second);
        // Both hash writes (every index indexed, and not) carry the stamp.
        assert_eq!(text.matches("'sv', '2'").count(), 2, "{text}");
        assert!(writes_stamp(&text));
        assert!(text.contains("if tonumber(sv) > 2 then return {9, tonumber(sv)} end"), "{text}");
        // Checked after the op-history lookup: a retry of a write applied
        // before a newer writer came is still recognised.
        let lookup = text.find("return {7, ").unwrap();
        assert!(lookup < text.find("return {9, ").unwrap());
        let (delete, _) = delete_script(&second);
        assert!(delete.contains("if tonumber(sv) > 2 then return {9, tonumber(sv)} end"), "{delete}");
        assert!(!delete.contains("'sv', '2'"), "a delete stamps nothing");
    }

    #[test]
    fn only_a_scoped_type_stores_its_scope() {
        let scoped = put_script(&SPEC).0;
        assert!(scoped.contains("'scope', scope"), "{scoped}");
        assert!(scoped.contains("if cur[2] == false then return {6, 'scope'} end"), "{scoped}");
        let unscoped = DocumentSpec { unscoped: true, ..DocumentSpec::new("U", "u", "u:{id}") };
        for text in [put_script(&unscoped).0, delete_script(&unscoped).0] {
            assert!(!text.contains("= 'scope'") && !text.contains("'scope', scope"), "scope written:\n{text}");
            // Still read: a hash of an earlier release holds `_`, and another value is damage.
            assert!(text.contains("if cur[2] == false then cur[2] = scope end"), "{text}");
            assert!(text.contains("if cur[2] ~= scope then return {3, cur[2]} end"), "{text}");
        }
    }
}
