//! The entry pass: every index entry -> does its document exist and claim
//! it? Finds orphans and documents listed in the wrong group.

use std::collections::HashMap;

use redis::Value;

use microdcs_schema::{Document, KeyTemplate};

use super::super::{
    Answer, DiffKind, Finding, IndexFilter, IndexRef, Pass, answer, as_str, read_cmd, read_pipe, scan_batch,
};
use crate::codec::Codec;
use crate::error::Result;
use crate::store::{ReadState, Store, parse_version, render_err};

/// What the document an index entry names says about that entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Claim {
    /// No document has this id.
    NoDocument,
    /// The document cannot be judged: it is corrupt, outside the scope
    /// filter, or its stored index fields cannot form a key. Its entries are
    /// left alone.
    Unjudged,
    /// The document is not indexed in this family.
    NotIndexed,
    /// The keys of this family that should hold the document: one, or one
    /// per value of a multi-valued index.
    Keys(Vec<String>),
    /// The document key holds something other than a hash: reported once as
    /// the document's difference; its entries are left alone, as for a
    /// corrupt document (the value may be restored, and it is not the
    /// index's to judge).
    Foreign,
}

/// How many slots one step of an index-family walk examines: a multiple of
/// the batch, because the server returns only keys of the family's type
/// and most slots hold documents, so a step of `batch` slots would return
/// a fraction of a batch for a full round trip. Still one short command
/// (bounded by [`crate::store::MaintenanceOptions::MAX_BATCH`]); the keys it
/// returns are checked a batch at a time.
fn walk_step(batch: usize) -> usize {
    (batch * 8).clamp(1, crate::store::MaintenanceOptions::MAX_BATCH)
}

impl<D: Document, C: Codec<D>> Store<D, C> {
    /// The families of `D` the run covers: (family, template, index name).
    fn families(&self, filter: IndexFilter<'_>) -> Vec<(IndexRef, &KeyTemplate, &'static str)> {
        let mut v = Vec::new();
        if let (Some(t), true) = (&self.plan.list, filter.wants("list")) {
            v.push((IndexRef::List, t, "list"));
        }
        for (n, ix) in self.plan.unique.iter().enumerate() {
            if filter.wants(D::SPEC.unique[n].name) {
                v.push((IndexRef::Unique(n), &ix.template, D::SPEC.unique[n].name));
            }
        }
        for (n, ix) in self.plan.groups.iter().enumerate() {
            if filter.wants(D::SPEC.groups[n].name) {
                v.push((IndexRef::Group(n), &ix.template, D::SPEC.groups[n].name));
            }
        }
        v
    }

    /// The number of keys of each unique family the run covers (`None` for
    /// the other families), walked with `SCAN ... TYPE string`. A verify
    /// takes it while the document pass runs; a rebuild after it, since its
    /// repairs change the keys.
    pub(in crate::store::maintenance) async fn unique_counts(
        &self,
        filter: IndexFilter<'_>,
        batch: usize,
    ) -> Result<Vec<Option<u64>>> {
        let prefix = self.valkey.prefix();
        let mut out = Vec::new();
        for (family, template, _) in self.families(filter) {
            if !matches!(family, IndexRef::Unique(_)) {
                out.push(None);
                continue;
            }
            let values: Vec<Option<&str>> = template.placeholders().map(|_| None).collect();
            let pattern = template.scan_pattern(prefix, &values).map_err(render_err)?;
            let (mut count, mut c) = (0u64, 0);
            loop {
                let (next, keys) = scan_batch(&self.valkey, c, &pattern, "string", walk_step(batch)).await?;
                count += keys.iter().filter(|k| template.parse_key(prefix, k).is_some()).count() as u64;
                c = next;
                if c == 0 {
                    break;
                }
            }
            out.push(Some(count));
        }
        Ok(out)
    }

    /// Walks each index family with `SCAN ... TYPE` (the server filters by
    /// type, so a walk returns only that family's keys): list and group keys
    /// are checked as they come. A unique family is first only counted
    /// (`counts`, from [`Store::unique_counts`], when the run is not limited
    /// to a scope), and walked entry by entry only when its count differs
    /// from the keys the document pass found held.
    pub(in crate::store::maintenance) async fn entry_pass(
        &self,
        pass: &mut Pass<'_>,
        counts: Option<Vec<Option<u64>>>,
    ) -> Result<()> {
        let prefix = self.valkey.prefix().clone();
        for (i, (family, template, index)) in self.families(pass.filter).into_iter().enumerate() {
            let values: Vec<Option<&str>> =
                template.placeholders().map(|p| if p == "scope" { pass.scope } else { None }).collect();
            let pattern = template.scan_pattern(&prefix, &values).map_err(render_err)?;
            let ty = self.family_type(family);
            if let (IndexRef::Unique(n), Some(Some(count))) =
                (family, counts.as_ref().map(|c| c.get(i).copied().flatten()))
                && count == pass.shortcuts.unique_held[n]
            {
                pass.report.entries += count;
                continue;
            }
            let mut c = 0;
            loop {
                let (next, keys) = scan_batch(&self.valkey, c, &pattern, ty, walk_step(pass.batch)).await?;
                let keys: Vec<String> = keys.into_iter().filter(|k| template.parse_key(&prefix, k).is_some()).collect();
                for chunk in keys.chunks(pass.batch) {
                    self.check_keys(pass, chunk.to_vec(), family, index).await?;
                }
                pass.report_progress();
                c = next;
                if c == 0 {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Checks the entries of these index keys of one family.
    async fn check_keys(&self, pass: &mut Pass<'_>, keys: Vec<String>, family: IndexRef, index: &str) -> Result<()> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        match family {
            IndexRef::Unique(_) => {
                let mut p = redis::pipe();
                for k in &keys {
                    p.cmd("GET").arg(k);
                }
                let ids: Vec<Option<String>> = read_pipe(&self.valkey, &p, &keys[0]).await?;
                pairs.extend(keys.into_iter().zip(ids).filter_map(|(k, id)| id.map(|id| (k, id))));
            }
            IndexRef::List | IndexRef::Group(_) => {
                let zset = self.family_type(family) == "zset";
                let mut cards: Vec<u64> = Vec::new();
                if !pass.shortcuts.overflow {
                    let mut p = redis::pipe();
                    for k in &keys {
                        p.cmd(if zset { "ZCARD" } else { "SCARD" }).arg(k);
                    }
                    cards = read_pipe(&self.valkey, &p, &keys[0]).await?;
                }
                for (i, k) in keys.iter().enumerate() {
                    // As many members as documents found present: no orphans here.
                    if let Some(card) = cards.get(i)
                        && *card == pass.shortcuts.present.get(k).copied().unwrap_or(0)
                    {
                        pass.report.entries += card;
                        continue;
                    }
                    let mut c = 0u64;
                    loop {
                        let mut cmd = redis::cmd(if zset { "ZSCAN" } else { "SSCAN" });
                        cmd.arg(k).arg(c).arg("COUNT").arg(pass.batch);
                        let (n, members): (u64, Vec<Value>) = read_cmd(&self.valkey, &cmd, k).await?;
                        // A sorted set's scan interleaves members and scores.
                        for m in members.iter().step_by(if zset { 2 } else { 1 }) {
                            if let Some(id) = as_str(m) {
                                pairs.push((k.clone(), id));
                            }
                        }
                        if pairs.len() >= pass.batch {
                            self.judge_and_settle(pass, &mut pairs, index, family).await?;
                        }
                        c = n;
                        if c == 0 {
                            break;
                        }
                    }
                }
            }
        }
        self.judge_and_settle(pass, &mut pairs, index, family).await
    }

    /// Judges `(index key, id)` pairs and settles the findings; drains `pairs`.
    async fn judge_and_settle(
        &self,
        pass: &mut Pass<'_>,
        pairs: &mut Vec<(String, String)>,
        index: &str,
        family: IndexRef,
    ) -> Result<()> {
        if pairs.is_empty() {
            return Ok(());
        }
        let findings = self.judge(pass, pairs, index, family).await?;
        pairs.clear();
        self.settle(pass, findings, &[]).await
    }

    /// Checks `(index key, id)` pairs against their documents.
    async fn judge(
        &self,
        pass: &mut Pass<'_>,
        pairs: &[(String, String)],
        index: &str,
        family: IndexRef,
    ) -> Result<Vec<Finding>> {
        pass.report.entries += pairs.len() as u64;
        // The document each entry names (for ids per scope, in the scope
        // its key holds), judged once per document.
        let doc_keys: Vec<String> = pairs.iter().map(|(key, id)| self.entry_doc_key(family, key, id)).collect();
        let mut targets: Vec<(&str, &str)> =
            pairs.iter().zip(&doc_keys).map(|((_, id), dk)| (dk.as_str(), id.as_str())).collect();
        targets.sort_unstable();
        targets.dedup();
        let claims = self.read_claims(pass.scope, &targets, family).await?;
        let claims: HashMap<&str, Claim> = targets.iter().map(|(dk, _)| *dk).zip(claims).collect();
        let mut found = Vec::new();
        let mut damaged = Vec::new();
        for ((key, id), doc_key) in pairs.iter().zip(&doc_keys) {
            if pass.drifted.contains(doc_key) {
                continue;
            }
            let kind = match claims.get(doc_key.as_str()) {
                Some(Claim::Foreign) => {
                    if pass.wrong_type_keys.insert(doc_key.clone()) {
                        damaged.push((None, doc_key.clone(), id.clone()));
                    }
                    continue;
                }
                // A unique key has no scope: under a scope filter an entry
                // without a document cannot be attributed to the scope.
                None | Some(Claim::NoDocument) if pass.scope.is_some() && matches!(family, IndexRef::Unique(_)) => {
                    continue;
                }
                None | Some(Claim::NoDocument) => DiffKind::Orphan,
                Some(Claim::Unjudged) => continue,
                Some(Claim::Keys(ks)) if ks.iter().any(|k| k == key) => continue,
                Some(claim) => match family {
                    IndexRef::Group(_) => DiffKind::WrongGroup {
                        expected: match claim {
                            // A multi-valued document's sets are several:
                            // none of them is "the" right one.
                            Claim::Keys(ks) if ks.len() == 1 => Some(ks[0].clone()),
                            _ => None,
                        },
                    },
                    // Already reported as the wrong id of its rightful document.
                    IndexRef::Unique(_) if pass.wrong_id_keys.contains(key) => continue,
                    _ => DiffKind::Orphan,
                },
            };
            found.push(Finding::new(Some(family), index, key, id, kind));
        }
        found.extend(self.wrong_type_findings(damaged).await?);
        Ok(found)
    }

    /// The key of the document an index entry names: for ids unique per
    /// scope, in the scope the entry's key holds. `""` when it cannot be
    /// named (its claim is then "no document").
    pub(in crate::store::maintenance) fn entry_doc_key(&self, family: IndexRef, index_key: &str, id: &str) -> String {
        let prefix = self.valkey.prefix();
        let scope = self.plan.doc_scope_at.and_then(|_| {
            let ix = match family {
                // A list's one placeholder is the scope.
                IndexRef::List => return self.plan.list.as_ref()?.parse_key(prefix, index_key)?.into_iter().next(),
                IndexRef::Unique(n) => &self.plan.unique[n],
                IndexRef::Group(n) => &self.plan.groups[n],
            };
            let values = ix.template.parse_key(prefix, index_key)?;
            self.plan.query_scope(ix, &values).map(str::to_owned)
        });
        self.plan.doc_key(prefix, scope.as_deref(), id).unwrap_or_default()
    }

    /// Reads what each document's stored index fields say (the document pass
    /// has checked them against the document itself): per id, its claim on
    /// this family.
    async fn read_claims(
        &self,
        scope_filter: Option<&str>,
        targets: &[(&str, &str)],
        family: IndexRef,
    ) -> Result<Vec<Claim>> {
        let prefix = self.valkey.prefix();
        // Errors are answers here: a document key of the wrong type is a difference.
        let mut p = redis::pipe();
        p.ignore_errors();
        for (doc_key, _) in targets {
            p.cmd("HMGET").arg(*doc_key).arg("v").arg("scope").arg(&self.plan.fields);
        }
        let replies: Vec<Value> = read_pipe(&self.valkey, &p, targets.first().map_or("", |t| t.0)).await?;
        let mut claims = Vec::with_capacity(replies.len());
        for ((_, id), reply) in targets.iter().zip(replies) {
            let row: Vec<Option<String>> = match answer(&reply)? {
                Answer::WrongType(_) => {
                    claims.push(Claim::Foreign);
                    continue;
                }
                Answer::Reply(_) => match redis::from_redis_value(reply) {
                    Ok(row) => row,
                    // Fields that are not text: the document pass reports
                    // the damage; its entries cannot be judged by them.
                    Err(_) => {
                        claims.push(Claim::Unjudged);
                        continue;
                    }
                },
            };
            let mut it = row.into_iter();
            let (v, scope) = (it.next().flatten(), it.next().flatten());
            if v.is_none() && scope.is_none() {
                claims.push(Claim::NoDocument);
                continue;
            }
            let scope = D::SPEC.stored_scope(scope.as_deref()).map(str::to_owned);
            if parse_version(v.as_deref()).is_none()
                || scope.is_none()
                || scope_filter.is_some_and(|s| scope.as_deref() != Some(s))
            {
                claims.push(Claim::Unjudged);
                continue;
            }
            let state = ReadState {
                exists: true,
                version: 0,
                scope: scope.clone(),
                fields: it.collect(),
                ops: String::new(),
                stamp: None,
            };
            let claim_by = |ix| match self.plan.old_keys(ix, &self.valkey, id, &state) {
                Ok(ks) if ks.is_empty() => Claim::NotIndexed,
                Ok(ks) => Claim::Keys(ks),
                Err(_) => Claim::Unjudged,
            };
            claims.push(match family {
                IndexRef::List => match self.plan.list_key(prefix, scope.as_deref().unwrap_or_default()) {
                    Some(Ok(k)) => Claim::Keys(vec![k]),
                    _ => Claim::Unjudged,
                },
                IndexRef::Unique(n) => claim_by(&self.plan.unique[n]),
                IndexRef::Group(n) => claim_by(&self.plan.groups[n]),
            });
        }
        Ok(claims)
    }
}
