//! The delete script.

use super::ret::{ALREADY_APPLIED, NOT_FOUND, WRITTEN};
use std::fmt::Write as _;

use super::common::{
    Slots, check_read, describe_common_argv, describe_common_keys, describe_read, each_ranges, each_reads, history,
    nudge_line, prologue, revision_check, stamp_check, tomb_read, tomb_rewrite,
};
use super::layout::DeleteLayout;
use super::text::header;
use crate::spec::DocumentSpec;

const DELETE_RETURNS: &str = "\
--   {1, version}          deleted; `version` was the last version
--   {0, current}          the expected version does not match
--   {2}                   no such document
--   {3, stored_scope}     the id belongs to another scope; nothing deleted
--   {5, v, scope, ops, ...} stored index fields differ from the caller's read: what is
--                         stored (`v`, `scope`, `ops`, then every index field) to try again with
--   {6, field}            corrupt hash (`v` not a version, `scope` or `doc` missing, `ops`
--                         not a history) or `{6, 'tomb'}`, a corrupt tombstone
--   {7, version}          this operation id already deleted the document at `version`
--   {9, stored_schema}    a newer schema of the type wrote the document (its stamp `sv`);
--                         nothing deleted
";

/// The delete script of `spec`, with its layout. Same order as the put
/// script: checks, validation reads, then writes starting with the change
/// entry. The last write leaves the tombstone: the version, this delete's
/// op id and the document's history, for the retention the caller passes.
/// A delete that finds its own op id there was already applied.
pub fn delete_script(spec: &DocumentSpec<'_>) -> (String, DeleteLayout) {
    let l = DeleteLayout::new(spec);
    let c = &l.common;
    let slots = Slots::new(&l.fields, true, false, spec.stores_scope());
    let mut out = String::new();
    let mut keys = describe_common_keys(spec, c);
    let mut argv = describe_common_argv(
        spec,
        c,
        "expected version: `any`, the version number, or `<version>:<op id>` (a revision)",
    );
    for ix in &l.indexes {
        let (k, a) = describe_read(ix);
        keys.extend(k);
        argv.extend(a);
    }
    if let Some(t) = l.tail {
        argv.push((t, "KEYS position of the multi-valued keys: per such index, the keys of the values read".into()));
    }
    keys.push((l.tomb_key, format!("tombstone `{}`", spec.tombstones().key)));
    argv.push((l.tomb_ttl, "how long the tombstone is kept, in milliseconds".into()));
    header(&mut out, "delete", spec, keys, argv, DELETE_RETURNS);
    prologue(&mut out, &slots, c);
    history(&mut out);
    tomb_read(&mut out, l.tomb_key, "");
    // Written again unchanged before the answer, for a caller that waits
    // for replicas (see `lookup`).
    let _ = writeln!(
        out,
        "if tomb and tomb_op == op then\n  {}\n  return {{{ALREADY_APPLIED}, tomb_v}}\nend",
        tomb_rewrite(l.tomb_key)
    );
    // A delete of an older schema would leave the document in the indexes
    // only the newer one knows.
    stamp_check(&mut out, &slots, spec.schema);
    let _ = write!(
        out,
        "\
if not exists then return {{{NOT_FOUND}}} end
local expect = ARGV[{expect}]
if expect ~= 'any' then
",
        expect = c.expect
    );
    revision_check(&mut out, "  ");
    out.push_str("end\n");
    if let Some(t) = l.tail {
        let each: Vec<_> =
            l.indexes.iter().enumerate().filter_map(|(i, ix)| Some((i + 1, ix.old_count?, None))).collect();
        each_ranges(&mut out, t, l.num_keys, &each);
    }
    for (i, ix) in l.indexes.iter().enumerate() {
        check_read(&mut out, &slots, i + 1, ix);
    }
    out.push_str("-- validation reads (a wrong type aborts here, before any write)\n");
    for (i, ix) in l.indexes.iter().enumerate() {
        let (n, old_key) = (i + 1, ix.old.key);
        if ix.old_count.is_some() {
            each_reads(&mut out, n, false);
        } else if ix.unique {
            let _ = writeln!(out, "local drop_{n} = was_{n} and redis.call('GET', KEYS[{old_key}]) == id");
        } else if ix.sorted.is_some() {
            let _ = writeln!(out, "if was_{n} then redis.call('ZSCORE', KEYS[{old_key}], id) end");
        } else {
            let _ = writeln!(out, "if was_{n} then redis.call('SISMEMBER', KEYS[{old_key}], id) end");
        }
    }
    let list_remove = match (c.list_key, spec.list) {
        (Some(k), Some(list)) => {
            let (check, rm) = if list.score.is_some() { ("ZSCORE", "ZREM") } else { ("SISMEMBER", "SREM") };
            let _ = writeln!(out, "redis.call('{check}', KEYS[{k}], id)");
            format!("redis.call('{rm}', KEYS[{k}], id)\n")
        }
        _ => String::new(),
    };
    out.push_str("-- writes\n");
    let notify = spec.changes.is_some();
    if notify {
        let _ = writeln!(
            out,
            "redis.call('XADD', KEYS[{changes}], 'MAXLEN', '~', ARGV[{maxlen}], '*', 'id', id, 'v', string.format('%d', v), 'op', op, 'change', 'deleted', 'kind', ARGV[{kind}])",
            changes = c.changes_key,
            maxlen = c.maxlen,
            kind = c.kind,
        );
    }
    for (i, ix) in l.indexes.iter().enumerate() {
        let (n, old_key) = (i + 1, ix.old.key);
        if ix.old_count.is_some() {
            let _ = writeln!(
                out,
                "for i = each_{n}_o, each_{n}_o + each_{n}_on - 1 do redis.call('SREM', KEYS[i], id) end"
            );
        } else if ix.unique {
            let _ = writeln!(out, "if drop_{n} then redis.call('DEL', KEYS[{old_key}]) end");
        } else if ix.sorted.is_some() {
            let _ = writeln!(out, "if was_{n} then redis.call('ZREM', KEYS[{old_key}], id) end");
        } else {
            let _ = writeln!(out, "if was_{n} then redis.call('SREM', KEYS[{old_key}], id) end");
        }
    }
    out.push_str(&list_remove);
    let _ = write!(
        out,
        "\
redis.call('DEL', doc_key)
redis.call('SET', KEYS[{tomb}], string.format('%d', v) .. ':' .. op .. ops, 'PX', ARGV[{ttl}])
{publish}return {{{WRITTEN}, v}}
",
        publish = if notify { nudge_line(spec, c) } else { String::new() },
        tomb = l.tomb_key,
        ttl = l.tomb_ttl,
    );
    (out, l)
}
