//! The document pass: every document -> the entries its indexes should hold,
//! checked in one pipeline per batch.

use std::collections::HashMap;

use redis::Value;

use microdcs_schema::{Document, IndexEntries};

use super::super::{
    Answer, DiffKind, Finding, IndexRef, Mode, Pass, answer, as_bool, as_f64, as_str, read_pipe, scan_batch,
};
use crate::codec::Codec;
use crate::error::{Error, Result};
use crate::store::Store;

/// A fetched batch: the next `SCAN` cursor, the `(key, id)` documents and
/// their `HGETALL` replies.
type Fetched = (u64, Vec<(String, String)>, Vec<Value>);

/// What the document pass makes of one document hash.
enum Examined {
    /// Deleted since the scan, or outside the scope filter: not this run's business.
    Skipped,
    /// Cannot be indexed, and why.
    Corrupt(String),
    /// Readable: its stored index fields (aligned with the store's field
    /// list) and the entries its indexes should hold.
    Indexed(Vec<Option<String>>, IndexEntries),
}

impl<D: Document, C: Codec<D>> Store<D, C> {
    /// Scans every document key and diagnoses the documents batch by batch.
    /// A verify reads the next batch while it checks the current one (the
    /// server answers while the client decodes; at most two batches are
    /// held); a rebuild reads a batch only after the previous one's repairs
    /// landed, so a key the scan returns twice is never judged stale.
    pub(in crate::store::maintenance) async fn document_pass(&self, pass: &mut Pass<'_>) -> Result<()> {
        let prefix = self.valkey.prefix().clone();
        let pattern = self.plan.doc_pattern(&prefix)?;
        let batch = pass.batch;
        let mut fetched = self.fetch_documents(&pattern, 0, batch).await?;
        loop {
            let (next, docs, replies) = fetched;
            if next != 0 && matches!(pass.mode, Mode::Verify) {
                let (following, checked) =
                    tokio::join!(self.fetch_documents(&pattern, next, batch), self.check_batch(pass, docs, replies));
                checked?;
                fetched = following?;
            } else {
                self.check_batch(pass, docs, replies).await?;
                if next == 0 {
                    break;
                }
                fetched = self.fetch_documents(&pattern, next, batch).await?;
            }
        }
        Ok(())
    }

    /// One `SCAN` step over the document keys and the `HGETALL` of each
    /// document it returns: the next cursor, the `(key, id)` documents and
    /// their replies.
    async fn fetch_documents(&self, pattern: &str, cursor: u64, batch: usize) -> Result<Fetched> {
        let prefix = self.valkey.prefix();
        let (next, keys) = scan_batch(&self.valkey, cursor, pattern, "hash", batch).await?;
        // The parse-back drops keys that only look like documents (`joborder:list:s1`).
        let docs: Vec<(String, String)> =
            keys.into_iter().filter_map(|k| self.plan.doc_of_key(prefix, &k).map(|(id, _)| (k, id))).collect();
        if docs.is_empty() {
            return Ok((next, docs, Vec::new()));
        }
        // Errors are answers here: a key of the wrong type is a difference.
        let mut p = redis::pipe();
        p.ignore_errors();
        for (k, _) in &docs {
            p.cmd("HGETALL").arg(k);
        }
        let replies: Vec<Value> = read_pipe(&self.valkey, &p, &docs[0].0).await?;
        Ok((next, docs, replies))
    }

    /// Diagnoses one fetched batch and settles its findings.
    async fn check_batch(&self, pass: &mut Pass<'_>, docs: Vec<(String, String)>, replies: Vec<Value>) -> Result<()> {
        if !docs.is_empty() {
            let (findings, documents) = self.diagnose_documents(pass, docs, replies).await?;
            self.settle(pass, findings, &documents).await?;
        }
        pass.report_progress();
        Ok(())
    }

    /// Checks one batch of `(key, id)` documents, with their `HGETALL`
    /// replies: each one's index fields and index entries. Returns the
    /// findings and the documents that could be indexed, with their
    /// expected entries.
    async fn diagnose_documents(
        &self,
        pass: &mut Pass<'_>,
        docs: Vec<(String, String)>,
        replies: Vec<Value>,
    ) -> Result<(Vec<Finding>, Vec<(String, IndexEntries)>)> {
        let mut found = Vec::new();
        let mut damaged: Vec<(Option<IndexRef>, String, String)> = Vec::new();
        // Per check: the document, the family and which of its keys (a
        // multi-valued index has one per value).
        let mut pending: Vec<(usize, IndexRef, usize)> = Vec::new();
        let mut documents: Vec<(String, IndexEntries)> = Vec::new();
        for ((key, id), reply) in docs.into_iter().zip(replies) {
            let map: HashMap<String, Vec<u8>> = match answer(&reply)? {
                // The scan saw a hash; the key was overwritten since.
                Answer::WrongType(_) => {
                    if pass.wrong_type_keys.insert(key.clone()) {
                        damaged.push((None, key, id));
                    }
                    continue;
                }
                Answer::Reply(_) => match redis::from_redis_value(reply) {
                    Ok(map) => map,
                    // A field name that is not text: damage to report, not
                    // a reason to end the run.
                    Err(e) => {
                        let reason = format!("the hash cannot be read as fields: {e}");
                        found.push(Finding::new(None, "document", &key, &id, DiffKind::Corrupt { reason }));
                        continue;
                    }
                },
            };
            let (stored_fields, entries) = match self.examine(pass, &key, &id, map) {
                Examined::Skipped => continue,
                Examined::Corrupt(reason) => {
                    found.push(Finding::new(None, "document", &key, &id, DiffKind::Corrupt { reason }));
                    continue;
                }
                Examined::Indexed(fields, entries) => (fields, entries),
            };
            self.check_fields(pass, &key, &id, &stored_fields, &entries, &mut found);
            // One check per entry the document should have.
            if entries.list.is_some() && pass.filter.wants("list") {
                pending.push((documents.len(), IndexRef::List, 0));
            }
            for (n, e) in entries.unique.iter().enumerate() {
                if e.is_some() && pass.filter.wants(D::SPEC.unique[n].name) {
                    pending.push((documents.len(), IndexRef::Unique(n), 0));
                }
            }
            for (n, e) in entries.groups.iter().enumerate() {
                if let Some(e) = e.as_ref().filter(|_| pass.filter.wants(D::SPEC.groups[n].name)) {
                    for k in 0..e.keys().count() {
                        pending.push((documents.len(), IndexRef::Group(n), k));
                    }
                }
            }
            documents.push((id, entries));
        }
        if !pending.is_empty() {
            let answers = self.entry_answers(&pending, &documents).await?;
            for ((doc, family, k), reply) in pending.iter().zip(&answers) {
                let (id, entries) = &documents[*doc];
                match answer(reply)? {
                    Answer::WrongType(_) => {
                        let key = entry_key(entries, *family, *k).unwrap_or_default();
                        if pass.wrong_type_keys.insert(key.to_owned()) {
                            damaged.push((Some(*family), key.to_owned(), id.clone()));
                        }
                    }
                    Answer::Reply(reply) => {
                        if let Some((key, kind)) = self.judge_entry(pass, id, entries, (*family, *k), reply) {
                            found.push(Finding::new(Some(*family), self.family_name(*family), key, id, kind));
                        }
                    }
                }
            }
        }
        found.extend(self.wrong_type_findings(damaged).await?);
        Ok((found, documents))
    }

    /// The answer to each pending entry check, in `pending` order, as the
    /// single-entry command would give it (`ZSCORE`, `SISMEMBER`, `GET`).
    /// Asked with one command per key, not per entry: `ZMSCORE` or
    /// `SMISMEMBER` with every id of the batch that key should hold, and
    /// one `MGET` for the unique keys. `MGET` answers nil for a key of the
    /// wrong type as for a missing one, so only its nils are asked again
    /// with `GET`, which tells the two apart (a clean keyspace has none).
    async fn entry_answers(
        &self,
        pending: &[(usize, IndexRef, usize)],
        documents: &[(String, IndexEntries)],
    ) -> Result<Vec<Value>> {
        // Per key: the command, and the pending checks it answers.
        let mut keyed: Vec<(&'static str, &str, Vec<usize>)> = Vec::new();
        let mut at: HashMap<&str, usize> = HashMap::new();
        let mut unique: Vec<(usize, &str)> = Vec::new();
        for (i, (doc, family, k)) in pending.iter().enumerate() {
            let entries = &documents[*doc].1;
            let key = entry_key(entries, *family, *k).unwrap_or_default();
            let cmd = match family {
                IndexRef::Unique(_) => {
                    unique.push((i, key));
                    continue;
                }
                IndexRef::List if self.plan.sorted_list => "ZMSCORE",
                IndexRef::Group(n) if D::SPEC.groups[*n].kind().is_sorted() => "ZMSCORE",
                IndexRef::List | IndexRef::Group(_) => "SMISMEMBER",
            };
            let slot = *at.entry(key).or_insert_with(|| {
                keyed.push((cmd, key, Vec::new()));
                keyed.len() - 1
            });
            keyed[slot].2.push(i);
        }
        let mut p = redis::pipe();
        p.ignore_errors();
        for (cmd, key, checks) in &keyed {
            let c = p.cmd(cmd).arg(*key);
            for i in checks {
                c.arg(&documents[pending[*i].0].0);
            }
        }
        // One MGET per slot on a cluster (a multi-key command must stay in
        // one slot; a sharded type's unique keys are in their scopes').
        let mut mgets: Vec<Vec<(usize, &str)>> = Vec::new();
        if self.valkey.is_cluster() {
            let mut by_slot: std::collections::BTreeMap<u16, Vec<(usize, &str)>> = std::collections::BTreeMap::new();
            for u in &unique {
                by_slot.entry(microdcs_schema::slot::key_slot(u.1.as_bytes())).or_default().push(*u);
            }
            mgets.extend(by_slot.into_values());
        } else if !unique.is_empty() {
            mgets.push(unique.clone());
        }
        for group in &mgets {
            let c = p.cmd("MGET");
            for (_, key) in group {
                c.arg(*key);
            }
        }
        let mut replies: Vec<Value> = read_pipe(&self.valkey, &p, "the index keys of the batch").await?;
        let mut out = vec![Value::Nil; pending.len()];
        let mget_replies = replies.split_off(replies.len().saturating_sub(mgets.len()));
        for ((_, _, checks), reply) in keyed.iter().zip(replies) {
            match reply {
                Value::Array(items) if items.len() == checks.len() => {
                    for (i, item) in checks.iter().zip(items) {
                        out[*i] = item;
                    }
                }
                // An error (a key of the wrong type) answers each check of the key.
                other => {
                    for i in checks {
                        out[*i] = other.clone();
                    }
                }
            }
        }
        for (group, reply) in mgets.iter().zip(mget_replies) {
            let items = match reply {
                Value::Array(items) if items.len() == group.len() => items,
                other => {
                    return Err(Error::Protocol { script: "MGET", reply: crate::error::short(&other) });
                }
            };
            let mut again = Vec::new();
            for ((i, key), item) in group.iter().zip(items) {
                if item == Value::Nil {
                    again.push((*i, *key));
                }
                out[*i] = item;
            }
            if !again.is_empty() {
                let mut p = redis::pipe();
                p.ignore_errors();
                for (_, key) in &again {
                    p.cmd("GET").arg(*key);
                }
                let replies: Vec<Value> = read_pipe(&self.valkey, &p, again[0].1).await?;
                for ((i, _), reply) in again.iter().zip(replies) {
                    out[*i] = reply;
                }
            }
        }
        Ok(out)
    }

    /// Decodes one document hash and computes its expected index entries.
    fn examine(&self, pass: &mut Pass<'_>, key: &str, id: &str, map: HashMap<String, Vec<u8>>) -> Examined {
        if map.is_empty() {
            return Examined::Skipped; // deleted since the scan
        }
        // The hash's own `scope` field decides a scope filter for a document
        // that does not decode: skipping it would make a damaged document
        // of the scope asked for look clean. A hash whose scope is missing
        // or unreadable belongs to no scope we can tell, so it is reported.
        let raw_scope =
            D::SPEC.stored_scope(map.get("scope").and_then(|v| std::str::from_utf8(v).ok())).map(str::to_owned);
        let stored = match self.decode_hash(key, id, map) {
            Ok(s) => s,
            Err(_) if pass.scope.is_some() && raw_scope.is_some() && raw_scope.as_deref() != pass.scope => {
                return Examined::Skipped;
            }
            Err(e) => return Examined::Corrupt(e.to_string()),
        };
        if pass.scope.is_some_and(|s| s != stored.scope) {
            return Examined::Skipped;
        }
        pass.report.documents += 1;
        match stored.doc.index_entries(self.valkey.prefix()) {
            Ok(e) if e.id == id && e.scope == stored.scope => Examined::Indexed(stored.state.fields, e),
            Ok(e) => Examined::Corrupt(format!(
                "the document says id `{}` scope `{}`, the hash id `{id}` scope `{}`",
                e.id, e.scope, stored.scope
            )),
            Err(e) => Examined::Corrupt(e.to_string()),
        }
    }

    /// Compares the hash fields kept for the indexes with the document's values.
    fn check_fields(
        &self,
        pass: &Pass<'_>,
        key: &str,
        id: &str,
        stored_fields: &[Option<String>],
        entries: &IndexEntries,
        found: &mut Vec<Finding>,
    ) {
        for (i, f) in self.plan.fields.iter().enumerate() {
            if !self.field_owner_wanted(i, pass.filter) {
                continue;
            }
            // The value the document's entries give the field (indexes that
            // share a field share its source, so any one of them will do;
            // the last, as before).
            let exp = entries
                .unique
                .iter()
                .chain(&entries.groups)
                .flatten()
                .flat_map(|e| &e.fields)
                .filter(|(name, _)| *name == f.as_str())
                .map(|(_, v)| v.as_str())
                .next_back();
            let stored_value = stored_fields.get(i).and_then(Option::as_deref);
            if exp != stored_value {
                let kind = DiffKind::Field {
                    field: f.clone(),
                    expected: exp.map(str::to_owned),
                    found: stored_value.map(str::to_owned),
                };
                found.push(Finding::new(None, self.field_owner(i), key, id, kind));
            }
        }
    }

    /// Judges the answer to one entry check: the entry's key and what is
    /// wrong with it, or `None` if it is right. Counts what it finds present.
    fn judge_entry<'e>(
        &self,
        pass: &mut Pass<'_>,
        id: &str,
        entries: &'e IndexEntries,
        (family, k): (IndexRef, usize),
        answer: &Value,
    ) -> Option<(&'e str, DiffKind)> {
        match family {
            IndexRef::List => {
                let l = entries.list.as_ref().expect("checked");
                let kind = match l.score {
                    Some(expected) => match as_f64(answer) {
                        None => Some(DiffKind::Missing),
                        Some(found) => {
                            pass.shortcuts.present(&l.key);
                            (found != expected).then_some(DiffKind::WrongScore { expected, found })
                        }
                    },
                    None if as_bool(answer) => {
                        pass.shortcuts.present(&l.key);
                        None
                    }
                    None => Some(DiffKind::Missing),
                };
                kind.map(|k| (l.key.as_str(), k))
            }
            IndexRef::Unique(n) => {
                let e = entries.unique[n].as_ref().expect("checked");
                let kind = match as_str(answer) {
                    None => Some(DiffKind::Missing),
                    Some(holder) => {
                        pass.shortcuts.unique_held[n] += 1;
                        (holder != id).then(|| {
                            pass.wrong_id_keys.insert(e.key.clone());
                            DiffKind::WrongId { found: holder }
                        })
                    }
                };
                kind.map(|k| (e.key.as_str(), k))
            }
            IndexRef::Group(n) if D::SPEC.groups[n].kind().is_sorted() => {
                let e = entries.groups[n].as_ref().expect("checked");
                let expected = group_score::<D>(entries, n).unwrap_or(f64::NAN);
                let kind = match as_f64(answer) {
                    // A bounded index evicts its lowest scores: an entry
                    // missing there is not a difference.
                    None if D::SPEC.groups[n].max.is_some() => None,
                    None => Some(DiffKind::Missing),
                    Some(found) => {
                        pass.shortcuts.present(&e.key);
                        (found != expected).then_some(DiffKind::WrongScore { expected, found })
                    }
                };
                kind.map(|k| (e.key.as_str(), k))
            }
            IndexRef::Group(_) => {
                let key = entry_key(entries, family, k).expect("checked");
                if as_bool(answer) {
                    pass.shortcuts.present(key);
                    None
                } else {
                    Some((key, DiffKind::Missing))
                }
            }
        }
    }
}

/// Key `k` of a document's entry in one family, if it has one (`k` is 0
/// but for a multi-valued index, which has a key per value).
pub(in crate::store::maintenance) fn entry_key(entries: &IndexEntries, family: IndexRef, k: usize) -> Option<&str> {
    match family {
        IndexRef::List => entries.list.as_ref().map(|l| l.key.as_str()).filter(|_| k == 0),
        IndexRef::Unique(n) => entries.unique.get(n)?.as_ref().map(|e| e.key.as_str()).filter(|_| k == 0),
        IndexRef::Group(n) => entries.groups.get(n)?.as_ref()?.keys().nth(k),
    }
}

/// Whether a document's entry in one family is at `key`.
pub(in crate::store::maintenance) fn holds_entry(entries: &IndexEntries, family: IndexRef, key: &str) -> bool {
    (0..).map_while(|k| entry_key(entries, family, k)).any(|k| k == key)
}

/// The score of a document's entry in sorted group index `n` (its last
/// field), `None` for a plain group or no entry.
pub(in crate::store::maintenance) fn group_score<D: Document>(entries: &IndexEntries, n: usize) -> Option<f64> {
    D::SPEC.groups.get(n)?.score?;
    let e = entries.groups.get(n)?.as_ref()?;
    e.fields.last()?.1.parse().ok()
}
