//! Index verification and rebuild.
//!
//! Indexes are derived data. [`Store::verify`] compares every index of a
//! document type with a scan of its documents, using the same generated
//! index-entry code the writes use, and returns the differences;
//! [`Store::rebuild`] repairs them. Both scan with `SCAN` (escaped `MATCH`,
//! `TYPE`, and a parse-back filter so `joborder:list:*` never counts as a
//! document) in batches of `batch` keys, so memory is bounded by the batch
//! size and the number of differences, not by the keyspace.
//!
//! This is maintenance, not a hot path: run `rebuild` while no writer is
//! active. It uses plain commands in pipelines plus one tiny compare-and-delete
//! script, so no script runs long enough to make other clients wait (`BUSY`).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use redis::{Pipeline, Script, Value};

use microdcs_schema::{Document, IndexEntries, KeyTemplate};

use super::{Store, Stored};
use crate::codec::Codec;
use crate::error::{Error, Result};

mod fingerprint;
mod report;

pub use fingerprint::{fingerprint_family, fingerprints};
pub use report::{DiffKind, Difference, MaintenanceOptions, Report};

/// Deletes a unique key only if it still holds the given id.
const DELETE_IF_EQUALS: &str = "\
-- KEYS[1] unique index key; ARGV[1] the id it must hold. Returns 1 if deleted.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";

struct Diffs<'o> {
    out: Vec<Difference>,
    truncated: u64,
    max: usize,
    only: Option<&'o str>,
}

impl Diffs<'_> {
    fn push(&mut self, d: Difference) {
        if self.only.is_some_and(|i| i != d.index && d.index != "document") {
            return;
        }
        if self.out.len() >= self.max {
            self.truncated += 1;
        } else {
            self.out.push(d);
        }
    }
}

async fn scan_batch(
    con: &mut redis::aio::ConnectionManager,
    cursor: u64,
    pattern: &str,
    ty: &str,
    count: usize,
) -> Result<(u64, Vec<String>)> {
    Ok(redis::cmd("SCAN")
        .arg(cursor)
        .arg("MATCH")
        .arg(pattern)
        .arg("COUNT")
        .arg(count)
        .arg("TYPE")
        .arg(ty)
        .query_async(con)
        .await?)
}

fn as_str(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Double(d) => Some(*d),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        Value::Int(i) => Some(*i as f64),
        _ => None,
    }
}

fn as_bool(v: &Value) -> bool {
    matches!(v, Value::Int(1) | Value::Boolean(true))
}

/// The expected hash fields of a document's index entries, by field name.
fn expected_fields(entries: &IndexEntries) -> HashMap<&'static str, String> {
    let mut m = HashMap::new();
    for e in entries.unique.iter().chain(&entries.groups).flatten() {
        for (f, v) in &e.fields {
            m.insert(*f, v.clone());
        }
    }
    m
}

impl<D: Document, C: Codec<D>> Store<D, C> {
    /// Compares every index of `D` with the documents and returns the
    /// differences. Read-only.
    ///
    /// # Errors
    /// Connection errors. Damaged documents are differences, not errors.
    pub async fn verify(&self, opts: &MaintenanceOptions<'_>) -> Result<Report> {
        self.scan_and_diff(opts, false).await
    }

    /// Rewrites the indexes of `D` (or only `opts.index`) from the
    /// documents: adds what is missing, removes orphans and wrong entries,
    /// corrects scores and index hash fields, in batches of plain commands.
    /// Idempotent; after an interruption run it again. Records the index
    /// layout's fingerprint when done (see [`Store::needs_rebuild`]).
    /// Maintenance: run it while no writer is active.
    ///
    /// # Errors
    /// Connection errors.
    pub async fn rebuild(&self, opts: &MaintenanceOptions<'_>) -> Result<Report> {
        let report = self.scan_and_diff(opts, true).await?;
        self.record_fingerprint(opts.index).await?;
        Ok(report)
    }

    fn index_names(&self) -> Vec<&'static str> {
        let spec = &D::SPEC;
        let mut v = Vec::new();
        if spec.list.is_some() {
            v.push("list");
        }
        v.extend(spec.unique.iter().map(|i| i.name));
        v.extend(spec.groups.iter().map(|i| i.name));
        v
    }

    async fn scan_and_diff(&self, opts: &MaintenanceOptions<'_>, fix: bool) -> Result<Report> {
        let start = Instant::now();
        if let Some(i) = opts.index
            && !self.index_names().contains(&i)
        {
            return Err(Error::Protocol {
                script: "rebuild",
                reply: format!(
                    "`{}` has no index `{i}` (indexes: {})",
                    D::SPEC.type_name,
                    self.index_names().join(", ")
                ),
            });
        }
        let batch = opts.batch.max(1);
        let mut diffs = Diffs { out: Vec::new(), truncated: 0, max: opts.max_differences, only: opts.index };
        let mut report = Report::default();
        let mut con = self.valkey.connection();
        let prefix = self.valkey.prefix().clone();
        let want = |name: &str| opts.index.is_none_or(|i| i == name);
        // Unique keys already reported as holding a wrong id (not orphans too).
        let mut wrong_id_keys: HashSet<String> = HashSet::new();
        // Documents whose stored index fields differ from the document: the
        // reverse pass judges entries by those fields, so (when not fixing)
        // it leaves these documents to the field difference already reported.
        let mut drifted: HashSet<String> = HashSet::new();
        // Entries the document pass found present, per list/group key, and
        // per unique index: if a key holds no more than these, it has no
        // orphans and the reverse pass need not read its members. (Memory:
        // one counter per distinct list/group key; past the cap the reverse
        // pass reads every member instead.)
        let mut shortcuts = Shortcuts::default();
        let mut fixed = 0u64;

        // Pass 1: every document -> its expected entries, checked in one pipeline per batch.
        let pattern = self.plan.doc.scan_pattern(&prefix, &[None]).map_err(super::render_err)?;
        shortcuts.unique_held = vec![0; self.plan.unique.len()];
        let mut cursor = 0;
        loop {
            let (next, keys) = scan_batch(&mut con, cursor, &pattern, "hash", batch).await?;
            let docs: Vec<(String, String)> = keys
                .into_iter()
                .filter_map(|k| self.plan.doc.parse_key(&prefix, &k).map(|mut v| (k, v.remove(0))))
                .collect();
            if !docs.is_empty() {
                let mut p = redis::pipe();
                for (k, _) in &docs {
                    p.cmd("HGETALL").arg(k);
                }
                let maps: Vec<HashMap<String, Vec<u8>>> = p.query_async(&mut con).await?;
                let mut checks = redis::pipe();
                let mut pending: Vec<(usize, Check)> = Vec::new();
                let mut fixes = redis::pipe();
                let mut n_fixes = 0;
                let mut analysed: Vec<(String, Stored<D>, IndexEntries)> = Vec::new();
                for ((key, id), map) in docs.into_iter().zip(maps) {
                    if map.is_empty() {
                        continue; // deleted since the scan
                    }
                    let stored = match self.decode_hash(&key, &id, map) {
                        Ok(s) => s,
                        Err(e) => {
                            if opts.scope.is_none() {
                                diffs.push(Difference {
                                    index: "document".into(),
                                    key,
                                    id,
                                    kind: DiffKind::Corrupt { reason: e.to_string() },
                                });
                            }
                            continue;
                        }
                    };
                    if opts.scope.is_some_and(|s| s != stored.scope) {
                        continue;
                    }
                    report.documents += 1;
                    let entries = match stored.doc.index_entries(&prefix) {
                        Ok(e) if e.id == id && e.scope == stored.scope => e,
                        Ok(e) => {
                            let reason = format!(
                                "the document says id `{}` scope `{}`, the hash id `{id}` scope `{}`",
                                e.id, e.scope, stored.scope
                            );
                            diffs.push(Difference {
                                index: "document".into(),
                                key,
                                id,
                                kind: DiffKind::Corrupt { reason },
                            });
                            continue;
                        }
                        Err(e) => {
                            diffs.push(Difference {
                                index: "document".into(),
                                key,
                                id,
                                kind: DiffKind::Corrupt { reason: e.to_string() },
                            });
                            continue;
                        }
                    };
                    // Hash fields kept for the indexes.
                    let expected = expected_fields(&entries);
                    for (i, f) in self.plan.fields.iter().enumerate() {
                        let owner_wanted = self.field_owner_wanted(f, &want);
                        if !owner_wanted {
                            continue;
                        }
                        let exp = expected.get(f.as_str()).cloned();
                        let found = stored.state.fields.get(i).cloned().flatten();
                        if exp != found {
                            if !fix {
                                drifted.insert(id.clone());
                            }
                            let index = self.field_owner(f).to_owned();
                            diffs.push(Difference {
                                index,
                                key: key.clone(),
                                id: id.clone(),
                                kind: DiffKind::Field { field: f.clone(), expected: exp.clone(), found },
                            });
                            if fix {
                                match exp {
                                    Some(v) => fixes.cmd("HSET").arg(&key).arg(f).arg(v).ignore(),
                                    None => fixes.cmd("HDEL").arg(&key).arg(f).ignore(),
                                };
                                n_fixes += 1;
                            }
                        }
                    }
                    if let (Some(l), true) = (&entries.list, want("list")) {
                        match l.score {
                            Some(_) => checks.cmd("ZSCORE").arg(&l.key).arg(&id),
                            None => checks.cmd("SISMEMBER").arg(&l.key).arg(&id),
                        };
                        pending.push((analysed.len(), Check::List));
                    }
                    for (n, e) in entries.unique.iter().enumerate() {
                        if let (Some(e), true) = (e, want(D::SPEC.unique[n].name)) {
                            checks.cmd("GET").arg(&e.key);
                            pending.push((analysed.len(), Check::Unique(n)));
                        }
                    }
                    for (n, e) in entries.groups.iter().enumerate() {
                        if let (Some(e), true) = (e, want(D::SPEC.groups[n].name)) {
                            checks.cmd("SISMEMBER").arg(&e.key).arg(&id);
                            pending.push((analysed.len(), Check::Group(n)));
                        }
                    }
                    analysed.push((id, stored, entries));
                }
                if !pending.is_empty() {
                    let answers: Vec<Value> = checks.query_async(&mut con).await?;
                    // Unique keys held by others: does the holder claim the key too?
                    let mut conflicts: Vec<(usize, String, String)> = Vec::new();
                    for ((doc, check), answer) in pending.iter().zip(&answers) {
                        let (id, _, entries) = &analysed[*doc];
                        match check {
                            Check::List => {
                                let l = entries.list.as_ref().expect("checked");
                                match l.score {
                                    Some(expected) => match as_f64(answer) {
                                        None => {
                                            diffs.push(Difference {
                                                index: "list".into(),
                                                key: l.key.clone(),
                                                id: id.clone(),
                                                kind: DiffKind::Missing,
                                            });
                                            if fix {
                                                fixes.cmd("ZADD").arg(&l.key).arg(expected).arg(id).ignore();
                                                n_fixes += 1;
                                            }
                                        }
                                        Some(found) if found != expected => {
                                            shortcuts.present(&l.key);
                                            diffs.push(Difference {
                                                index: "list".into(),
                                                key: l.key.clone(),
                                                id: id.clone(),
                                                kind: DiffKind::WrongScore { expected, found },
                                            });
                                            if fix {
                                                fixes.cmd("ZADD").arg(&l.key).arg(expected).arg(id).ignore();
                                                n_fixes += 1;
                                            }
                                        }
                                        Some(_) => shortcuts.present(&l.key),
                                    },
                                    None if !as_bool(answer) => {
                                        diffs.push(Difference {
                                            index: "list".into(),
                                            key: l.key.clone(),
                                            id: id.clone(),
                                            kind: DiffKind::Missing,
                                        });
                                        if fix {
                                            fixes.cmd("SADD").arg(&l.key).arg(id).ignore();
                                            n_fixes += 1;
                                        }
                                    }
                                    None => shortcuts.present(&l.key),
                                }
                            }
                            Check::Unique(n) => {
                                let e = entries.unique[*n].as_ref().expect("checked");
                                let name = D::SPEC.unique[*n].name;
                                match as_str(answer) {
                                    None => {
                                        diffs.push(Difference {
                                            index: name.into(),
                                            key: e.key.clone(),
                                            id: id.clone(),
                                            kind: DiffKind::Missing,
                                        });
                                        if fix {
                                            fixes.cmd("SET").arg(&e.key).arg(id).arg("NX").ignore();
                                            n_fixes += 1;
                                        }
                                    }
                                    Some(found) if found != *id => {
                                        wrong_id_keys.insert(e.key.clone());
                                        diffs.push(Difference {
                                            index: name.into(),
                                            key: e.key.clone(),
                                            id: id.clone(),
                                            kind: DiffKind::WrongId { found: found.clone() },
                                        });
                                        conflicts.push((*n, e.key.clone(), found));
                                        shortcuts.unique_held[*n] += 1;
                                    }
                                    Some(_) => shortcuts.unique_held[*n] += 1,
                                }
                            }
                            Check::Group(n) => {
                                let e = entries.groups[*n].as_ref().expect("checked");
                                if as_bool(answer) {
                                    shortcuts.present(&e.key);
                                } else {
                                    diffs.push(Difference {
                                        index: D::SPEC.groups[*n].name.into(),
                                        key: e.key.clone(),
                                        id: id.clone(),
                                        kind: DiffKind::Missing,
                                    });
                                    if fix {
                                        fixes.cmd("SADD").arg(&e.key).arg(id).ignore();
                                        n_fixes += 1;
                                    }
                                }
                            }
                        }
                    }
                    if fix {
                        // Give a unique key to its rightful document unless the
                        // holder claims it too (a real conflict: left as reported).
                        for (n, key, holder) in conflicts {
                            let claims = match self.expected_entries(&holder).await? {
                                Some(e) => e.unique[n].as_ref().is_some_and(|x| x.key == key),
                                None => false,
                            };
                            if !claims {
                                let rightful = analysed
                                    .iter()
                                    .find(|(_, _, e)| e.unique[n].as_ref().is_some_and(|x| x.key == key));
                                if let Some((id, _, _)) = rightful {
                                    fixes.cmd("SET").arg(&key).arg(id).ignore();
                                    n_fixes += 1;
                                }
                            }
                        }
                    }
                }
                if fix && n_fixes > 0 {
                    let _: () = fixes.query_async(&mut con).await?;
                    fixed += n_fixes;
                }
            }
            if let Some(p) = opts.progress {
                p(report.documents, report.entries);
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
        }

        // Pass 2: every index entry -> does its document exist and claim it?
        let mut ctx = Reverse {
            fix,
            scope: opts.scope,
            batch,
            diffs: &mut diffs,
            report: &mut report,
            wrong_id_keys: &wrong_id_keys,
            drifted: &drifted,
            shortcuts: &shortcuts,
            delete_if_equals: Script::new(DELETE_IF_EQUALS),
            progress: opts.progress,
        };
        fixed += self.reverse_pass(&mut con, &mut ctx, &want).await?;

        // A document missing from its group and present in another is one
        // difference: "in the wrong group".
        let mut out = diffs.out;
        let moved: Vec<(String, String, Option<String>)> = out
            .iter()
            .filter_map(|d| match &d.kind {
                DiffKind::WrongGroup { expected } => Some((d.index.clone(), d.id.clone(), expected.clone())),
                _ => None,
            })
            .collect();
        out.retain(|d| {
            !(d.kind == DiffKind::Missing
                && moved
                    .iter()
                    .any(|(ix, id, exp)| *ix == d.index && *id == d.id && exp.as_deref() == Some(d.key.as_str())))
        });
        report.differences = out;
        report.truncated = diffs.truncated;
        report.fixed = fixed;
        report.elapsed = start.elapsed();
        Ok(report)
    }

    /// The hash field's index, for reporting.
    fn field_owner(&self, field: &str) -> &'static str {
        let spec = &D::SPEC;
        spec.unique
            .iter()
            .chain(spec.groups)
            .find(|ix| microdcs_schema::lua::index_fields(ix).iter().any(|f| f == field))
            .map_or("document", |ix| ix.name)
    }

    fn field_owner_wanted(&self, field: &str, want: &(dyn Fn(&str) -> bool + Sync)) -> bool {
        let spec = &D::SPEC;
        spec.unique
            .iter()
            .chain(spec.groups)
            .filter(|ix| microdcs_schema::lua::index_fields(ix).iter().any(|f| f == field))
            .any(|ix| want(ix.name))
    }

    /// The expected entries of the document `id`, or `None` if it is missing
    /// or cannot be indexed.
    async fn expected_entries(&self, id: &str) -> Result<Option<IndexEntries>> {
        Ok(match self.get_once(id).await {
            Ok(Some(s)) => s.doc.index_entries(self.valkey.prefix()).ok(),
            Ok(None) | Err(Error::Corrupt { .. } | Error::Codec(_) | Error::WrongType { .. } | Error::Key(_)) => None,
            Err(e) => return Err(e),
        })
    }

    /// The families of `D` the pass covers: (family, template, index name).
    fn families(&self, want: &(dyn Fn(&str) -> bool + Sync)) -> Vec<(Family, &KeyTemplate, &'static str)> {
        let mut v = Vec::new();
        if let (Some(t), true) = (&self.plan.list, want("list")) {
            v.push((Family::List, t, "list"));
        }
        for (n, ix) in self.plan.unique.iter().enumerate() {
            if want(D::SPEC.unique[n].name) {
                v.push((Family::Unique(n), &ix.template, D::SPEC.unique[n].name));
            }
        }
        for (n, ix) in self.plan.groups.iter().enumerate() {
            if want(D::SPEC.groups[n].name) {
                v.push((Family::Group(n), &ix.template, D::SPEC.groups[n].name));
            }
        }
        v
    }

    /// Walks each index family with `SCAN ... TYPE` (the server filters by
    /// type, so a walk returns only that family's keys): list and group keys
    /// are checked as they come; unique keys are first only counted, and a
    /// unique family whose count differs from the keys the document pass
    /// found held is walked again entry by entry.
    async fn reverse_pass(
        &self,
        con: &mut redis::aio::ConnectionManager,
        ctx: &mut Reverse<'_, '_>,
        want: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<u64> {
        let prefix = self.valkey.prefix().clone();
        let mut fixed = 0;
        for (family, template, index) in self.families(want) {
            let values: Vec<Option<&str>> =
                template.placeholders().map(|p| if p == "scope" { ctx.scope } else { None }).collect();
            let pattern = template.scan_pattern(&prefix, &values).map_err(super::render_err)?;
            let ty = match family {
                Family::List if self.plan.sorted_list => "zset",
                Family::List | Family::Group(_) => "set",
                Family::Unique(_) => "string",
            };
            if let (Family::Unique(n), None) = (family, ctx.scope) {
                let mut count = 0u64;
                let mut c = 0;
                loop {
                    let (next, keys) = scan_batch(con, c, &pattern, ty, ctx.batch).await?;
                    count += keys.iter().filter(|k| template.parse_key(&prefix, k).is_some()).count() as u64;
                    c = next;
                    if c == 0 {
                        break;
                    }
                }
                if count == ctx.shortcuts.unique_held[n] {
                    ctx.report.entries += count;
                    continue;
                }
            }
            let mut c = 0;
            loop {
                let (next, keys) = scan_batch(con, c, &pattern, ty, ctx.batch).await?;
                let keys: Vec<String> = keys.into_iter().filter(|k| template.parse_key(&prefix, k).is_some()).collect();
                if !keys.is_empty() {
                    fixed += self.check_keys(con, ctx, keys, family, index).await?;
                }
                if let Some(p) = ctx.progress {
                    p(ctx.report.documents, ctx.report.entries);
                }
                c = next;
                if c == 0 {
                    break;
                }
            }
        }
        Ok(fixed)
    }

    /// Checks the entries of these index keys of one family.
    async fn check_keys(
        &self,
        con: &mut redis::aio::ConnectionManager,
        ctx: &mut Reverse<'_, '_>,
        keys: Vec<String>,
        family: Family,
        index: &str,
    ) -> Result<u64> {
        let expected_type = match family {
            Family::List if self.plan.sorted_list => "zset",
            Family::List | Family::Group(_) => "set",
            Family::Unique(_) => "string",
        };
        let mut fixed = 0;
        let mut pairs: Vec<(String, String)> = Vec::new();
        match family {
            Family::Unique(_) => {
                if !keys.is_empty() {
                    let mut p = redis::pipe();
                    for k in &keys {
                        p.cmd("GET").arg(k);
                    }
                    let ids: Vec<Option<String>> = p.query_async(con).await?;
                    pairs.extend(keys.iter().cloned().zip(ids).filter_map(|(k, id)| id.map(|id| (k, id))));
                }
            }
            Family::List | Family::Group(_) => {
                let zset = expected_type == "zset";
                let mut cards: Vec<u64> = Vec::new();
                if !keys.is_empty() && !ctx.shortcuts.overflow {
                    let mut p = redis::pipe();
                    for k in &keys {
                        p.cmd(if zset { "ZCARD" } else { "SCARD" }).arg(k);
                    }
                    cards = p.query_async(con).await?;
                }
                for (i, k) in keys.iter().enumerate() {
                    if let Some(card) = cards.get(i)
                        && *card == ctx.shortcuts.present.get(k).copied().unwrap_or(0)
                    {
                        ctx.report.entries += card;
                        continue;
                    }
                    let mut c = 0u64;
                    loop {
                        let (n, members): (u64, Vec<Value>) = redis::cmd(if zset { "ZSCAN" } else { "SSCAN" })
                            .arg(k)
                            .arg(c)
                            .arg("COUNT")
                            .arg(ctx.batch)
                            .query_async(con)
                            .await?;
                        for m in members.iter().step_by(if zset { 2 } else { 1 }) {
                            if let Some(id) = as_str(m) {
                                pairs.push((k.clone(), id));
                            }
                        }
                        if pairs.len() >= ctx.batch {
                            fixed += self.judge(con, ctx, &mut pairs, index, family).await?;
                        }
                        c = n;
                        if c == 0 {
                            break;
                        }
                    }
                }
            }
        }
        fixed += self.judge(con, ctx, &mut pairs, index, family).await?;
        Ok(fixed)
    }

    /// Checks `(index key, id)` pairs against their documents; drains `pairs`.
    async fn judge(
        &self,
        con: &mut redis::aio::ConnectionManager,
        ctx: &mut Reverse<'_, '_>,
        pairs: &mut Vec<(String, String)>,
        index: &str,
        family: Family,
    ) -> Result<u64> {
        if pairs.is_empty() {
            return Ok(0);
        }
        ctx.report.entries += pairs.len() as u64;
        let prefix = self.valkey.prefix().clone();
        let opts_scope = ctx.scope;
        let (fix, wrong_id_keys, drifted) = (ctx.fix, ctx.wrong_id_keys, ctx.drifted);
        // Read what each distinct document's stored index fields say (the
        // document pass has checked them against the document itself).
        let mut ids: Vec<&str> = pairs.iter().map(|(_, id)| id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut p = redis::pipe();
        for id in &ids {
            p.cmd("HMGET").arg(self.key(id).unwrap_or_default()).arg("v").arg("scope").arg(&self.plan.fields);
        }
        let rows: Vec<Vec<Option<String>>> = p.query_async(con).await?;
        // None: no document. Some(None): a corrupt document or one outside
        // the scope filter (its entries are left alone). Some(Some(key)): the
        // key this family should hold for it (None inside: not indexed).
        let mut claims: HashMap<&str, Option<Option<Option<String>>>> = HashMap::new();
        for (id, row) in ids.iter().zip(rows) {
            let mut it = row.into_iter();
            let (v, scope) = (it.next().flatten(), it.next().flatten());
            let claim = if v.is_none() && scope.is_none() {
                None
            } else if super::parse_version(v.as_deref()).is_none()
                || scope.is_none()
                || opts_scope.is_some_and(|s| scope.as_deref() != Some(s))
            {
                Some(None)
            } else {
                let state = super::ReadState {
                    exists: true,
                    version: 0,
                    scope: scope.clone(),
                    fields: it.collect(),
                    ops: String::new(),
                };
                let key = match family {
                    Family::List => self
                        .plan
                        .list
                        .as_ref()
                        .and_then(|t| t.render(&prefix, &[scope.as_deref().unwrap_or_default()]).ok())
                        .map(Some),
                    Family::Unique(n) => self.plan.old_key(&self.plan.unique[n], &self.valkey, id, &state).ok(),
                    Family::Group(n) => self.plan.old_key(&self.plan.groups[n], &self.valkey, id, &state).ok(),
                };
                Some(key)
            };
            claims.insert(id, claim);
        }
        let mut fixes: Pipeline = redis::pipe();
        let mut unique_dels: Vec<(String, String)> = Vec::new();
        let mut n_fixes = 0;
        for (key, id) in pairs.iter() {
            if drifted.contains(id) {
                continue;
            }
            let kind = match claims.get(id.as_str()) {
                // No document: an orphan (unless scoped: then it cannot be attributed).
                None | Some(None) if opts_scope.is_some() && matches!(family, Family::Unique(_)) => continue,
                None | Some(None) => DiffKind::Orphan,
                Some(Some(None)) => continue,
                Some(Some(Some(claimed))) => match claimed {
                    Some(k) if k == key => continue,
                    other => match family {
                        Family::Group(_) => DiffKind::WrongGroup { expected: other.clone() },
                        Family::Unique(_) if wrong_id_keys.contains(key) => continue,
                        _ => DiffKind::Orphan,
                    },
                },
            };
            ctx.diffs.push(Difference { index: index.to_owned(), key: key.clone(), id: id.clone(), kind });
            if fix {
                match family {
                    Family::List if self.plan.sorted_list => {
                        fixes.cmd("ZREM").arg(key).arg(id).ignore();
                    }
                    Family::List | Family::Group(_) => {
                        fixes.cmd("SREM").arg(key).arg(id).ignore();
                    }
                    Family::Unique(_) => unique_dels.push((key.clone(), id.clone())),
                }
                n_fixes += 1;
            }
        }
        pairs.clear();
        if fix {
            if n_fixes > unique_dels.len() as u64 {
                let _: () = fixes.query_async(con).await?;
            }
            for (key, id) in unique_dels {
                let _: i64 = ctx.delete_if_equals.key(&key).arg(&id).invoke_async(con).await?;
            }
        }
        Ok(n_fixes)
    }
}

/// The state the reverse pass works with.
struct Reverse<'a, 'o> {
    fix: bool,
    scope: Option<&'a str>,
    batch: usize,
    diffs: &'a mut Diffs<'o>,
    report: &'a mut Report,
    wrong_id_keys: &'a HashSet<String>,
    drifted: &'a HashSet<String>,
    shortcuts: &'a Shortcuts,
    delete_if_equals: Script,
    progress: Option<&'a (dyn Fn(u64, u64) + Sync)>,
}

/// Counts from the document pass that let the reverse pass skip reads.
#[derive(Debug, Default)]
struct Shortcuts {
    present: HashMap<String, u64>,
    overflow: bool,
    unique_held: Vec<u64>,
}

impl Shortcuts {
    const MAX_KEYS: usize = 100_000;

    fn present(&mut self, key: &str) {
        if let Some(n) = self.present.get_mut(key) {
            *n += 1;
        } else if self.present.len() < Self::MAX_KEYS {
            self.present.insert(key.to_owned(), 1);
        } else {
            self.overflow = true;
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Check {
    List,
    Unique(usize),
    Group(usize),
}

#[derive(Debug, Clone, Copy)]
enum Family {
    List,
    Unique(usize),
    Group(usize),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>(_: T) {}

    /// Never run: it only has to compile. A maintenance run can take long,
    /// so callers hand it to `tokio::spawn`, which needs `Send` futures for
    /// any document type and codec that are themselves `Send`.
    #[allow(dead_code)]
    fn maintenance_futures_are_send<D: Document + Send, C: Codec<D>>(
        store: &Store<D, C>,
        opts: &MaintenanceOptions<'_>,
    ) {
        assert_send(store.verify(opts));
        assert_send(store.rebuild(opts));
        assert_send(store.needs_rebuild());
    }
}
