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
//!
//! The work is cut in three: [`diagnose`] finds the differences (a pass over
//! the documents, then a pass over the index entries), [`repair`] turns
//! differences into repairs and applies them, and [`fingerprint`] records
//! which index layouts a rebuild has covered. A verify is diagnosis alone; a
//! rebuild is the same diagnosis with each batch's differences repaired
//! before the next batch is read, so the entry pass judges the fixed state
//! and memory stays bounded by the batch.

use std::collections::{BTreeSet, HashSet};
use std::time::Instant;

use redis::{FromRedisValue, Value};

use crate::client::Valkey;

use microdcs_schema::{Document, IndexEntries};

use crate::codec::Codec;
use crate::error::{Error, Result};
use crate::store::Store;

mod diagnose;
mod fingerprint;
mod repair;
mod report;

use super::pipe::{Answer, answer, read_pipe};

pub use fingerprint::fingerprints;
pub use report::{DiffKind, Difference, MaintenanceOptions, Report};

use diagnose::Shortcuts;

use crate::observe::observed;

/// Whether a run only reports, or also repairs what it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Verify,
    Rebuild,
}

/// The indexes a run covers: all of them, or the one named in the options.
#[derive(Debug, Clone, Copy)]
struct IndexFilter<'a> {
    only: Option<&'a str>,
}

impl IndexFilter<'_> {
    fn wants(self, index: &str) -> bool {
        self.only.is_none_or(|i| i == index)
    }
}

/// One index family of a document type: its list, or its n-th unique or
/// group index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IndexRef {
    List,
    Unique(usize),
    Group(usize),
}

/// A difference, with the index family of the entry it is about (`None` when
/// it is about the document's own hash: a corrupt document or an index field
/// that differs from the document). Repairs need the family; the report does
/// not.
#[derive(Debug)]
struct Finding {
    family: Option<IndexRef>,
    diff: Difference,
}

impl Finding {
    fn new(family: Option<IndexRef>, index: &str, key: &str, id: &str, kind: DiffKind) -> Self {
        Finding { family, diff: Difference { index: index.to_owned(), key: key.to_owned(), id: id.to_owned(), kind } }
    }
}

/// The differences kept for the report: those of the covered indexes (and of
/// the documents themselves), up to the maximum; the rest are only counted.
struct Diffs<'o> {
    out: Vec<Difference>,
    truncated: u64,
    max: usize,
    filter: IndexFilter<'o>,
}

impl Diffs<'_> {
    fn push(&mut self, d: Difference) {
        if d.index != "document" && !self.filter.wants(&d.index) {
            return;
        }
        if self.out.len() >= self.max {
            self.truncated += 1;
        } else {
            self.out.push(d);
        }
    }
}

/// The state of one verify or rebuild run, shared by its two passes.
struct Pass<'o> {
    mode: Mode,
    filter: IndexFilter<'o>,
    /// Only documents (and index keys) of this scope.
    scope: Option<&'o str>,
    /// Keys per `SCAN` batch and per pipeline.
    batch: usize,
    progress: Option<&'o (dyn Fn(u64, u64) + Sync)>,
    report: Report,
    diffs: Diffs<'o>,
    /// Unique keys already reported as holding a wrong id (not orphans too).
    wrong_id_keys: HashSet<String>,
    /// Keys already reported as holding the wrong Valkey type: each is one
    /// difference, however many documents lead to it. A rebuild has deleted
    /// such an index key, so the entries it then finds missing there are
    /// part of that one repair, not differences of their own.
    wrong_type_keys: HashSet<String>,
    /// Documents whose stored index fields differ from the document: the
    /// entry pass judges entries by those fields, so a verify leaves these
    /// documents to the field difference already reported (a rebuild has
    /// rewritten the fields by then, so it judges them normally).
    drifted: HashSet<String>,
    /// Counts from the document pass that let the entry pass skip reads.
    shortcuts: Shortcuts,
    delete_if_equals: crate::retry::LuaScript,
}

impl<'o> Pass<'o> {
    fn new(opts: &MaintenanceOptions<'o>, mode: Mode, unique_indexes: usize) -> Self {
        let filter = IndexFilter { only: opts.index };
        Pass {
            mode,
            filter,
            scope: opts.scope,
            batch: opts.batch.clamp(1, report::MAX_BATCH),
            progress: opts.progress,
            report: Report::default(),
            diffs: Diffs { out: Vec::new(), truncated: 0, max: opts.max_differences, filter },
            wrong_id_keys: HashSet::new(),
            wrong_type_keys: HashSet::new(),
            drifted: HashSet::new(),
            shortcuts: Shortcuts::new(unique_indexes),
            delete_if_equals: repair::delete_if_equals(),
        }
    }

    fn report_progress(&self) {
        if let Some(p) = self.progress {
            p(self.report.documents, self.report.entries);
        }
    }

    fn finish(self, start: Instant) -> Report {
        let mut report = self.report;
        report.differences = merge_moved(self.diffs.out);
        report.truncated = self.diffs.truncated;
        report.elapsed = start.elapsed();
        report
    }
}

/// The name of the ACL role whose rules `verify` and `rebuild` need
/// (`AclRole::Maintenance`, a layer above this one, checked by a test).
const MAINTENANCE_ROLE: &str = "maintenance";

#[cfg_attr(docsrs, doc(cfg(feature = "maintenance")))]
impl<D: Document, C: Codec<D>> Store<D, C> {
    /// Compares every index of `D` with the documents and returns the
    /// differences. Read-only.
    ///
    /// # Errors
    /// Connection errors; [`Error::NoPermission`] for a user without the
    /// maintenance role's rules. Damaged documents are differences, not
    /// errors.
    pub async fn verify(&self, opts: &MaintenanceOptions<'_>) -> Result<Report> {
        observed("verify", D::SPEC.kind, async {
            self.run_maintenance(opts, Mode::Verify).await.map_err(|e| e.needing_role("verify", MAINTENANCE_ROLE))
        })
        .await
    }

    /// Rewrites the indexes of `D` (or only `opts.index`) from the
    /// documents: adds what is missing, removes orphans and wrong entries,
    /// corrects scores and index hash fields, in batches of plain commands.
    /// Idempotent; after an interruption run it again. Records the index
    /// layout's fingerprint when done (see [`Store::needs_rebuild`]), and,
    /// when no writer was live or announced itself during it, records its
    /// building indexes ready (the way to complete an index after a
    /// rollback over a release that dropped or changed it, whose documents
    /// a backfill cannot write again). Maintenance: run it while no writer
    /// is active.
    ///
    /// # Errors
    /// Connection errors; [`Error::NoPermission`] for a user without the
    /// maintenance role's rules.
    pub async fn rebuild(&self, opts: &MaintenanceOptions<'_>) -> Result<Report> {
        observed("rebuild", D::SPEC.kind, async {
            let needing = |e: Error| e.needing_role("rebuild", MAINTENANCE_ROLE);
            let quiet = self.quiet_before_rebuild().await.map_err(needing)?;
            let report = self.run_maintenance(opts, Mode::Rebuild).await.map_err(needing)?;
            self.record_fingerprint(opts.index).await.map_err(needing)?;
            let ready = self.ready_after_rebuild(opts.index, quiet).await.map_err(needing)?;
            if !ready.is_empty() {
                tracing::info!(kind = D::SPEC.kind, ?ready, "rebuild: indexes recorded ready");
            }
            Ok(report)
        })
        .await
    }

    /// Verifies every index of `D` (or only `opts.index`) and, when
    /// nothing differs, records the current layouts as covered, so
    /// [`Store::needs_rebuild`] stops flagging them: the last step of a
    /// migration, and how a kind stored before layouts were recorded gets
    /// its baseline. Records nothing when the report is not clean (return
    /// it, rebuild, and call again). Read-only but for the fingerprints.
    ///
    /// # Errors
    /// As [`Store::verify`].
    pub async fn accept_layouts(&self, opts: &MaintenanceOptions<'_>) -> Result<Report> {
        observed("accept_layouts", D::SPEC.kind, async {
            let needing = |e: Error| e.needing_role("accept_layouts", MAINTENANCE_ROLE);
            let report = self.run_maintenance(opts, Mode::Verify).await.map_err(needing)?;
            if report.is_clean() {
                self.record_fingerprint(opts.index).await.map_err(needing)?;
            }
            Ok(report)
        })
        .await
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

    async fn run_maintenance(&self, opts: &MaintenanceOptions<'_>, mode: Mode) -> Result<Report> {
        let start = Instant::now();
        if let Some(i) = opts.index
            && !self.index_names().contains(&i)
        {
            return Err(Error::InvalidArgument(format!(
                "`{}` has no index `{i}` (indexes: {})",
                D::SPEC.type_name,
                self.index_names().join(", ")
            )));
        }
        if let Some(scope) = opts.scope {
            self.valkey.span_scope(scope);
        }
        let mut pass = Pass::new(opts, mode, self.plan.unique.len());
        // Every document -> its expected entries; then every index entry ->
        // does its document exist and claim it?
        let (filter, batch) = (pass.filter, pass.batch);
        let counts = match (mode, opts.scope) {
            // A scope-limited run walks its unique entries (their keys carry
            // no scope to count by).
            (_, Some(_)) => {
                self.document_pass(&mut pass).await?;
                None
            }
            (Mode::Verify, None) => {
                let (done, counts) = tokio::join!(self.document_pass(&mut pass), self.unique_counts(filter, batch));
                done?;
                Some(counts?)
            }
            (Mode::Rebuild, None) => {
                self.document_pass(&mut pass).await?;
                Some(self.unique_counts(filter, batch).await?)
            }
        };
        self.entry_pass(&mut pass, counts).await?;
        Ok(pass.finish(start))
    }

    /// Hands on one batch's findings: a rebuild repairs them at once (so the
    /// reads that follow see the fixed state), and the report keeps them.
    /// `documents` are the batch's readable documents with their expected
    /// entries (empty for the entry pass).
    async fn settle(
        &self,
        pass: &mut Pass<'_>,
        findings: Vec<Finding>,
        documents: &[(String, IndexEntries)],
    ) -> Result<()> {
        self.settle_registry(pass, documents).await?;
        match pass.mode {
            Mode::Rebuild => {
                let repairs = self.plan_repairs(&findings, documents).await?;
                pass.report.fixed +=
                    repair::apply(&self.valkey, &pass.delete_if_equals, repairs, D::SPEC.ttl_ms).await?;
            }
            Mode::Verify => {
                let drifted = findings.iter().filter(|f| matches!(f.diff.kind, DiffKind::Field { .. }));
                // By document key: ids unique per scope repeat across scopes.
                pass.drifted.extend(drifted.map(|f| f.diff.key.clone()));
            }
        }
        for f in findings {
            if f.diff.kind == DiffKind::Missing && pass.wrong_type_keys.contains(&f.diff.key) {
                continue;
            }
            pass.diffs.push(f.diff);
        }
        Ok(())
    }

    /// The scope registry lists the scope of every document of the batch:
    /// a verify reports a scope it lacks (`scopes`, `missing`, naming one
    /// of the scope's documents), a rebuild adds it (`SADD`, safe to
    /// repeat). A sharded type adds its scope before its write, outside the
    /// script, so a failover can lose the one and keep the other; the
    /// poller and `Store::scopes` see a scope only through the registry.
    ///
    /// A registry key of another type is one difference (`scopes`, `wrong
    /// type`), and the run goes on: a verify checks nothing more against
    /// it, a rebuild deletes it and registers the batch's scopes in a new
    /// set, and later batches add theirs. The registry is derived data,
    /// like an index key: a registry shared by several types gets the
    /// other types' scopes back from their own rebuilds.
    async fn settle_registry(&self, pass: &mut Pass<'_>, documents: &[(String, IndexEntries)]) -> Result<()> {
        let mut scopes: Vec<(&str, &str)> = Vec::new();
        for (_, e) in documents {
            if !scopes.iter().any(|(s, _)| *s == e.scope) {
                scopes.push((e.scope.as_str(), e.id.as_str()));
            }
        }
        let key = self.plan.registry_key.as_str();
        if scopes.is_empty() || pass.filter.only.is_some() {
            return Ok(());
        }
        if pass.mode == Mode::Verify && pass.wrong_type_keys.contains(key) {
            return Ok(());
        }
        let mut cmd = redis::cmd(if pass.mode == Mode::Rebuild { "SADD" } else { "SMISMEMBER" });
        cmd.arg(key);
        for (scope, _) in &scopes {
            cmd.arg(*scope);
        }
        if pass.mode == Mode::Rebuild {
            let added: Result<i64> = crate::retry::repeatable(&self.valkey, "scope registration", key, |mut con| {
                let cmd = cmd.clone();
                async move { cmd.query_async(&mut con).await }
            })
            .await
            .map_err(|f| f.into_error(key));
            let added = match added {
                Err(Error::WrongType { .. }) => {
                    self.registry_wrong_type(pass, key, scopes[0].1).await?;
                    // Deleted and written again in one pipeline; repeated
                    // after a lost answer it leaves the same set (a rebuild
                    // runs while no writer is active).
                    let mut p = redis::pipe();
                    p.cmd("DEL").arg(key).ignore();
                    p.add_command(cmd).ignore();
                    let () = write_pipe(&self.valkey, &p, key).await?;
                    pass.report.fixed += 1;
                    scopes.len() as i64
                }
                added => added?,
            };
            pass.report.fixed += u64::try_from(added).unwrap_or(0);
            return Ok(());
        }
        let listed: Vec<i64> = match read_cmd(&self.valkey, &cmd, key).await {
            Ok(listed) => listed,
            Err(Error::WrongType { .. }) => {
                self.registry_wrong_type(pass, key, scopes[0].1).await?;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        for ((_, id), there) in scopes.iter().zip(listed) {
            if there == 0 {
                pass.diffs.push(Finding::new(None, "scopes", key, id, DiffKind::Missing).diff);
            }
        }
        Ok(())
    }

    /// Reports the registry `key` as holding another type (once per run),
    /// naming the document `id` whose scope led to it; a key deleted since
    /// is no difference.
    async fn registry_wrong_type(&self, pass: &mut Pass<'_>, key: &str, id: &str) -> Result<()> {
        let found: String = read_cmd(&self.valkey, redis::cmd("TYPE").arg(key), key).await?;
        if found != "none" && pass.wrong_type_keys.insert(key.to_owned()) {
            pass.diffs.push(Finding::new(None, "scopes", key, id, DiffKind::WrongType { found }).diff);
        }
        Ok(())
    }

    /// One `WrongType` finding per key the server refused to read as its
    /// family's type, naming the type it holds now: `(family, key, id)`,
    /// where `family` is `None` for a document key. A key that no longer
    /// exists (deleted since) is no difference.
    async fn wrong_type_findings(&self, damaged: Vec<(Option<IndexRef>, String, String)>) -> Result<Vec<Finding>> {
        if damaged.is_empty() {
            return Ok(Vec::new());
        }
        let mut p = redis::pipe();
        for (_, key, _) in &damaged {
            p.cmd("TYPE").arg(key);
        }
        let types: Vec<String> = read_pipe(&self.valkey, &p, &damaged[0].1).await?;
        Ok(damaged
            .into_iter()
            .zip(types)
            .filter(|(_, found)| found != "none")
            .map(|((family, key, id), found)| {
                let index = family.map_or("document", |f| self.family_name(f));
                Finding::new(family, index, &key, &id, DiffKind::WrongType { found })
            })
            .collect())
    }
}

/// A document missing from its group and present in another is one
/// difference, "in the wrong group": drops the `Missing` of such a document.
fn merge_moved(mut out: Vec<Difference>) -> Vec<Difference> {
    let moved: BTreeSet<(String, String, String)> = out
        .iter()
        .filter_map(|d| match &d.kind {
            DiffKind::WrongGroup { expected: Some(expected) } => {
                Some((d.index.clone(), d.id.clone(), expected.clone()))
            }
            _ => None,
        })
        .collect();
    if !moved.is_empty() {
        out.retain(|d| {
            !(d.kind == DiffKind::Missing && moved.contains(&(d.index.clone(), d.id.clone(), d.key.clone())))
        });
    }
    out
}

/// One `SCAN` step, bounded like every read. `count` is at most
/// [`report::MAX_BATCH`] (the options are clamped when a run starts).
async fn scan_batch(valkey: &Valkey, cursor: u64, pattern: &str, ty: &str, count: usize) -> Result<(u64, Vec<String>)> {
    crate::retry::scan_step(valkey, cursor, pattern, count, ty).await
}

// Every command of a maintenance run waits at most the response timeout
// (also for a reconnect): a run against a server that is gone fails within
// one read or write bound instead of waiting out the reconnect backoff at
// each step. A key of the wrong type is `Error::WrongType` (by its code);
// `key` names the key, or the first of a pipeline's keys.

// A read command: within `ResponseTimeout`, plus one `WriteRetryDelay` and
// a quick second read after a dropped connection (the one helper of all reads).
use crate::retry::read_cmd;

/// A pipeline of repairs. Each repair leaves the same state when applied
/// twice (a rebuild runs while no writer is active), so it runs under the
/// write rule: within `WriteAttempts x (ResponseTimeout + WriteRetryDelay)`,
/// [`Error::UnknownOutcome`] when no attempt got an answer.
async fn write_pipe<T: FromRedisValue>(valkey: &Valkey, pipe: &redis::Pipeline, key: &str) -> Result<T> {
    crate::retry::repeatable(valkey, "index repair", key, |mut con| async move { con.query_pipe(pipe, false).await })
        .await
        .map_err(|f| f.into_error(key))
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

    fn diff(index: &str, key: &str, id: &str, kind: DiffKind) -> Difference {
        Difference { index: index.into(), key: key.into(), id: id.into(), kind }
    }

    #[test]
    fn a_moved_document_is_one_difference() {
        let out = merge_moved(vec![
            diff("by_state", "g:Running", "r-0", DiffKind::Missing),
            diff("by_state", "g:Held", "r-0", DiffKind::WrongGroup { expected: Some("g:Running".into()) }),
            diff("by_state", "g:Running", "r-1", DiffKind::Missing),
            diff("list", "g:Running", "r-0", DiffKind::Missing),
        ]);
        let ids: Vec<(&str, &str, &str)> =
            out.iter().map(|d| (d.index.as_str(), d.id.as_str(), d.kind.name())).collect();
        assert_eq!(
            ids,
            [("by_state", "r-0", "wrong group"), ("by_state", "r-1", "missing"), ("list", "r-0", "missing")]
        );
    }

    #[test]
    fn kept_differences_are_filtered_and_capped() {
        let mut diffs = Diffs { out: Vec::new(), truncated: 0, max: 2, filter: IndexFilter { only: Some("by_state") } };
        diffs.push(diff("list", "k", "a", DiffKind::Missing));
        diffs.push(diff("document", "k", "b", DiffKind::Corrupt { reason: "x".into() }));
        diffs.push(diff("by_state", "k", "c", DiffKind::Missing));
        diffs.push(diff("by_state", "k", "d", DiffKind::Missing));
        let ids: Vec<&str> = diffs.out.iter().map(|d| d.id.as_str()).collect();
        assert_eq!((ids.as_slice(), diffs.truncated), (["b", "c"].as_slice(), 1));
    }
}
