//! Turning differences into repairs, and applying them.
//!
//! A rebuild diagnoses exactly as a verify does; each batch's findings are
//! then mapped to [`Repair`]s and applied in one pipeline (plus one small
//! compare-and-delete script call per released unique key) before the next
//! batch is read.

use crate::retry::{LuaScript, reply};

use microdcs_schema::{Document, IndexEntries};

use super::diagnose::{group_score, holds_entry};
use super::{DiffKind, Finding, IndexRef};
use crate::codec::Codec;
use crate::error::{Error, Result};
use crate::store::Store;

/// Deletes a unique key only if it still holds the given id.
const DELETE_IF_EQUALS: &str = "\
-- KEYS[1] unique index key; ARGV[1] the id it must hold. Returns 1 if deleted.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";

/// The script of [`Repair::UniqueRelease`].
pub(super) fn delete_if_equals() -> LuaScript {
    LuaScript::new(DELETE_IF_EQUALS)
}

/// One change that brings an index, or a hash field an index keeps, in line
/// with the documents.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Repair {
    /// Write the hash field an index keeps on the document, or remove it (`None`).
    SetField { key: String, field: String, value: Option<String> },
    /// Add the id to a sorted list with its score, or correct its score.
    SortedAdd { key: String, id: String, score: f64 },
    /// Add the id to a plain set: an unsorted list or a group.
    SetAdd { key: String, id: String },
    /// Remove the id from a sorted list.
    SortedRemove { key: String, id: String },
    /// Remove the id from a plain set.
    SetRemove { key: String, id: String },
    /// Point a free unique key at the id; a key taken meanwhile is left alone.
    UniqueClaim { key: String, id: String },
    /// Give a unique key to the document that claims it, replacing a holder
    /// that does not.
    UniqueReassign { key: String, id: String },
    /// Delete a unique key, but only if it still holds the id it was judged
    /// by: a document may have taken it since.
    UniqueRelease { key: String, id: String },
    /// Delete an index key that holds the wrong type; the entries that
    /// belong there are written again after it.
    Delete { key: String },
}

impl<D: Document, C: Codec<D>> Store<D, C> {
    /// The repairs of one batch's findings, in the order found. `documents`
    /// are the batch's readable documents and their expected entries: a
    /// missing list entry needs its score, and a unique key held by another
    /// id goes to the batch's document that claims it, unless the holder
    /// claims it too (a real conflict, left as reported).
    pub(super) async fn plan_repairs(
        &self,
        findings: &[Finding],
        documents: &[(String, IndexEntries)],
    ) -> Result<Vec<Repair>> {
        // The document whose entry a finding is about: by its id and the
        // entry's key, since ids unique per scope repeat across scopes.
        let entries_for = |id: &str, family: IndexRef, key: &str| {
            documents.iter().find(|(d, e)| d == id && holds_entry(e, family, key)).map(|(_, e)| e)
        };
        // A score nobody can vouch for is never guessed as a set member: a
        // sorted key would refuse it, or an absent one become a set.
        let sorted_list = self.plan.sorted_list;
        let sorted_group = |n: usize| D::SPEC.groups.get(n).is_some_and(|g| g.kind().is_sorted());
        let mut repairs = Vec::with_capacity(findings.len());
        let mut conflicts: Vec<(usize, &str, &str)> = Vec::new();
        for Finding { family, diff } in findings {
            let (key, id) = (diff.key.clone(), diff.id.clone());
            let repair = match (*family, &diff.kind) {
                (_, DiffKind::Corrupt { .. }) | (None, DiffKind::WrongType { .. }) => continue,
                (Some(family), DiffKind::WrongType { .. }) => {
                    // The key is ours: replace it by what the batch's
                    // documents say belongs there. Documents of later batches
                    // then find their entry missing and add it.
                    repairs.push(Repair::Delete { key: key.clone() });
                    for (id, entries) in documents.iter().filter(|(_, e)| holds_entry(e, family, &key)) {
                        let (key, id) = (key.clone(), id.clone());
                        repairs.push(match family {
                            IndexRef::List => match entries.list.as_ref().and_then(|l| l.score) {
                                Some(score) => Repair::SortedAdd { key, id, score },
                                None if !sorted_list => Repair::SetAdd { key, id },
                                None => continue,
                            },
                            IndexRef::Unique(_) => Repair::UniqueClaim { key, id },
                            IndexRef::Group(n) => match group_score::<D>(entries, n) {
                                Some(score) => Repair::SortedAdd { key, id, score },
                                None if !sorted_group(n) => Repair::SetAdd { key, id },
                                None => continue,
                            },
                        });
                    }
                    continue;
                }
                (_, DiffKind::Field { field, expected, .. }) => {
                    Repair::SetField { key, field: field.clone(), value: expected.clone() }
                }
                (Some(IndexRef::List), DiffKind::Missing) => {
                    let Some(entries) = entries_for(&id, IndexRef::List, &key) else { continue };
                    match entries.list.as_ref().and_then(|l| l.score) {
                        Some(score) => Repair::SortedAdd { key, id, score },
                        None if !sorted_list => Repair::SetAdd { key, id },
                        None => continue,
                    }
                }
                (Some(IndexRef::List), DiffKind::WrongScore { expected, .. }) => {
                    Repair::SortedAdd { key, id, score: *expected }
                }
                (Some(IndexRef::Group(n)), DiffKind::Missing) => {
                    let Some(entries) = entries_for(&id, IndexRef::Group(n), &key) else { continue };
                    match group_score::<D>(entries, n) {
                        Some(score) => Repair::SortedAdd { key, id, score },
                        None if !sorted_group(n) => Repair::SetAdd { key, id },
                        None => continue,
                    }
                }
                (Some(IndexRef::Group(_)), DiffKind::WrongScore { expected, .. }) => {
                    Repair::SortedAdd { key, id, score: *expected }
                }
                (Some(IndexRef::Group(n)), DiffKind::Orphan | DiffKind::WrongGroup { .. })
                    if D::SPEC.groups[n].kind().is_sorted() =>
                {
                    Repair::SortedRemove { key, id }
                }
                (Some(IndexRef::Unique(_)), DiffKind::Missing) => Repair::UniqueClaim { key, id },
                (Some(IndexRef::Unique(n)), DiffKind::WrongId { found }) => {
                    conflicts.push((n, &diff.key, found));
                    continue;
                }
                (Some(IndexRef::List), DiffKind::Orphan) if self.plan.sorted_list => Repair::SortedRemove { key, id },
                (Some(IndexRef::List | IndexRef::Group(_)), DiffKind::Orphan | DiffKind::WrongGroup { .. }) => {
                    Repair::SetRemove { key, id }
                }
                (Some(IndexRef::Unique(_)), DiffKind::Orphan) => Repair::UniqueRelease { key, id },
                // Diagnosis reports no other combination.
                _ => continue,
            };
            repairs.push(repair);
        }
        for (n, key, holder) in conflicts {
            let holder_key = self.entry_doc_key(IndexRef::Unique(n), key, holder);
            let holder_claims = match self.expected_entries(&holder_key, holder).await? {
                Some(e) => e.unique[n].as_ref().is_some_and(|x| x.key == key),
                None => false,
            };
            if holder_claims {
                continue;
            }
            let rightful = documents.iter().find(|(_, e)| e.unique[n].as_ref().is_some_and(|x| x.key == key));
            if let Some((id, _)) = rightful {
                repairs.push(Repair::UniqueReassign { key: key.to_owned(), id: id.clone() });
            }
        }
        Ok(repairs)
    }

    /// The expected entries of the document `id` at `key`, or `None` if it
    /// is missing or cannot be indexed.
    async fn expected_entries(&self, key: &str, id: &str) -> Result<Option<IndexEntries>> {
        let read = self.read(|| self.get_at(key, id));
        Ok(match read.await {
            Ok(Some(s)) => s.doc.index_entries(self.valkey.prefix()).ok(),
            Ok(None) | Err(Error::Corrupt { .. } | Error::Codec { .. } | Error::WrongType { .. } | Error::Key(_)) => {
                None
            }
            Err(e) => return Err(e),
        })
    }
}

/// Applies repairs: one pipeline of plain commands, then the unique-key
/// releases. Returns how many repairs were applied.
///
/// `ttl_ms`: the type's document lifetime; a unique key it writes gets it
/// too, so it cannot outlive the document it names by more than that.
pub(super) async fn apply(
    valkey: &crate::Valkey,
    delete_if_equals: &LuaScript,
    repairs: Vec<Repair>,
    ttl_ms: Option<u64>,
) -> Result<u64> {
    let count = repairs.len() as u64;
    let mut pipe = redis::pipe();
    let mut queued = 0;
    let mut releases = Vec::new();
    // Named in errors: the first key the pipeline touches.
    let mut first: Option<String> = None;
    for repair in repairs {
        if first.is_none() {
            first = Some(repair_key(&repair).to_owned());
        }
        match repair {
            Repair::SetField { key, field, value: Some(v) } => pipe.cmd("HSET").arg(key).arg(field).arg(v),
            Repair::SetField { key, field, value: None } => pipe.cmd("HDEL").arg(key).arg(field),
            Repair::SortedAdd { key, id, score } => pipe.cmd("ZADD").arg(key).arg(score).arg(id),
            Repair::SetAdd { key, id } => pipe.cmd("SADD").arg(key).arg(id),
            Repair::SortedRemove { key, id } => pipe.cmd("ZREM").arg(key).arg(id),
            Repair::SetRemove { key, id } => pipe.cmd("SREM").arg(key).arg(id),
            Repair::UniqueClaim { key, id } => {
                let c = pipe.cmd("SET").arg(key).arg(id).arg("NX");
                if let Some(ms) = ttl_ms {
                    c.arg("PX").arg(ms);
                }
                c
            }
            Repair::UniqueReassign { key, id } => {
                let c = pipe.cmd("SET").arg(key).arg(id);
                if let Some(ms) = ttl_ms {
                    c.arg("PX").arg(ms);
                }
                c
            }
            Repair::Delete { key } => pipe.cmd("DEL").arg(key),
            Repair::UniqueRelease { key, id } => {
                releases.push((key, id));
                continue;
            }
        }
        .ignore();
        queued += 1;
    }
    if queued > 0 {
        let _: () = super::write_pipe(valkey, &pipe, first.as_deref().unwrap_or_default()).await?;
    }
    for (key, id) in releases {
        let call = delete_if_equals.call().key(&key).arg(id.as_bytes());
        let call = &call;
        // Compare-and-delete: a second run finds the key gone or taken and does nothing.
        let v =
            crate::retry::repeatable(valkey, "unique release", &key, |mut con| async move { call.run(&mut con).await })
                .await
                .map_err(|f| f.into_error(&key))?;
        let _: i64 = reply(v).map_err(|e| Error::from_redis(e, &key))?;
    }
    Ok(count)
}

/// The key a repair writes.
fn repair_key(r: &Repair) -> &str {
    match r {
        Repair::SetField { key, .. }
        | Repair::SortedAdd { key, .. }
        | Repair::SetAdd { key, .. }
        | Repair::SortedRemove { key, .. }
        | Repair::SetRemove { key, .. }
        | Repair::UniqueClaim { key, .. }
        | Repair::UniqueReassign { key, .. }
        | Repair::UniqueRelease { key, .. }
        | Repair::Delete { key } => key,
    }
}
