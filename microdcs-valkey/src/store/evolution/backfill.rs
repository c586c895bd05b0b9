//! The online backfill: walking every document of a kind and writing
//! again what an older release wrote, so the building indexes fill, and
//! recording them ready (also after an offline rebuild).

use microdcs_schema::Document;

use super::super::{PutOutcome, Store};
use super::IndexState;
use crate::codec::Codec;
use crate::error::{Error, Result};
use crate::retry::LuaScript;

static MARK_READY: std::sync::LazyLock<LuaScript> =
    std::sync::LazyLock::new(|| LuaScript::new(include_str!("mark_ready.lua")));

/// The field of the index-state hash that holds a backfill's cursor (the
/// document walk's, `0` at the start of a pass): index names never start
/// with `@`.
const CURSOR_FIELD: &str = "@cursor";

/// The fields of the index-state hash that count the announcements of
/// each schema's writers (`@announced:<schema>`).
const ANNOUNCED_FIELD: &str = "@announced:";

/// What recording an index ready did.
enum Marked {
    Ready,
    /// Its state was another (a newer schema recorded another layout).
    Other,
    /// A writer of an older schema announced since the pass started.
    OlderAnnounced,
}

/// How many times a backfill re-reads a document a concurrent write moved
/// before it leaves it for the next pass.
const BACKFILL_REREADS: u32 = 8;

/// How a backfill runs ([`Store::backfill`]).
#[derive(Debug, Clone)]
pub struct BackfillOptions {
    /// Document keys read per page (1 to [`Store::MAX_MANY`]; default 100).
    pub page: usize,
    /// Passes at most (default 3): a pass rewrites what needs it, and a
    /// pass that rewrote nothing with no older writer live makes the
    /// indexes ready, so two suffice without concurrent older writers.
    pub max_passes: u32,
}

impl Default for BackfillOptions {
    fn default() -> Self {
        BackfillOptions { page: 100, max_passes: 3 }
    }
}

/// What a backfill did ([`Store::backfill`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackfillReport {
    /// Passes over the documents started (a resumed one counts).
    pub passes: u32,
    /// The cursor the first pass resumed from (`None`: it started at the
    /// beginning).
    pub resumed_from: Option<u64>,
    /// Documents seen.
    pub seen: u64,
    /// Documents written again through this release (compare-and-set), so
    /// that every index of this release holds them.
    pub rewritten: u64,
    /// Documents a newer schema wrote meanwhile (left to it).
    pub newer: u64,
    /// Documents whose rewrite a unique index of this release refused (a
    /// value another document holds, which the older release did not
    /// check): logged, counted and stepped over; while any is left the
    /// indexes stay building. Resolve the duplicate, then run it again.
    pub unique_held: u64,
    /// Documents that could not be read (corrupt and the like): counted
    /// and stepped over; `verify` names them.
    pub damaged: u64,
    /// Documents other writers kept moving for every re-read; left for the
    /// next pass.
    pub contended: u64,
    /// Indexes recorded ready by this backfill.
    pub ready: Vec<String>,
    /// Indexes still building when it ended (an older writer is live, or
    /// the passes ran out: run it again).
    pub building: Vec<String>,
    /// Whether a writer of an older schema was live at the end, or
    /// announced itself during the last pass.
    pub older_writers: bool,
}

impl crate::observe::Outcome for BackfillReport {
    fn outcome(&self) -> &'static str {
        if self.building.is_empty() { "ready" } else { "building" }
    }
}

impl<D: Document, C: Codec<D>> Store<D, C> {
    /// Completes the building indexes of this release online: walks every
    /// document of the kind, page by page, and writes each one an older
    /// release wrote again through this release's script, a compare-and-set
    /// on the version read (a concurrent write wins, and the document is
    /// read again), which stamps it and puts it in every index of this
    /// release. The walk's cursor is kept in the index-state hash after
    /// every page, so a backfill that stopped (a crash, a lost connection)
    /// resumes where it was. At most `BackfillRate` documents a second.
    ///
    /// The indexes are recorded ready only after a pass over every
    /// document that started at the beginning, found nothing to write, and
    /// with no writer of an older schema live at its start or its end, or
    /// announcing itself at any time during the pass (such a writer does
    /// not keep them; checked in the same step that records them ready).
    /// Otherwise they stay building and the report says why: run it again.
    /// A pass that met documents a newer release wrote (`newer`: this
    /// release cannot write them, and that release may not keep these
    /// indexes, as after a rollback over one that dropped or changed them)
    /// leaves them building too: run [`Store::rebuild`] with every writer
    /// stopped, which makes them exact and ready, or roll forward.
    ///
    /// Each document written again gets a new version and a change entry
    /// (`updated`), as any write, and keeps the lifetime it has left.
    ///
    /// # Errors
    /// Connection errors, and a rewrite that waited for replicas and fell
    /// short ([`Error::NotReplicated`]): the progress so far is kept, run it
    /// again. A key of another type is [`Error::WrongType`].
    pub async fn backfill(&self, opts: &BackfillOptions) -> Result<BackfillReport> {
        crate::observe::observed("backfill", D::SPEC.kind, self.backfill_inner(opts)).await
    }

    async fn backfill_inner(&self, opts: &BackfillOptions) -> Result<BackfillReport> {
        // Counted as a writer of this schema for the whole run.
        self.announce().await?;
        let key = self.index_states_key()?;
        let mut report = BackfillReport::default();
        let building = |states: &[(&'static str, IndexState)]| -> Vec<String> {
            states.iter().filter(|(_, s)| *s == IndexState::Building).map(|(n, _)| (*n).to_owned()).collect()
        };
        let fps = Self::index_fingerprints();
        let rate = self.valkey.write_options().backfill_rate;
        let page = opts.page.clamp(1, Self::MAX_MANY);
        let mut cursor = self.stored_cursor(&key).await?;
        if cursor != 0 {
            report.resumed_from = Some(cursor);
        }
        while report.passes < opts.max_passes.max(1) {
            report.passes += 1;
            let whole = cursor == 0;
            let older_at_start = self.writers().await?.older_remain();
            let announced_at_start = self.older_announcements(&key).await?;
            let mut wrote = 0u64;
            let pace = crate::limits::Pace::new(rate);
            let mut done_in_pass = 0u64;
            let mut newer_in_pass = 0u64;
            loop {
                self.announce_if_due().await?;
                let batch = self.scan(cursor, page).await?;
                report.damaged += batch.damaged.len() as u64;
                for stored in batch.documents {
                    report.seen += 1;
                    done_in_pass += 1;
                    match self.backfill_one(stored).await? {
                        Backfilled::Current => {}
                        Backfilled::Rewritten => {
                            report.rewritten += 1;
                            wrote += 1;
                        }
                        Backfilled::Newer => {
                            report.newer += 1;
                            newer_in_pass += 1;
                        }
                        Backfilled::Contended => {
                            report.contended += 1;
                            wrote += 1;
                        }
                        Backfilled::Damaged => report.damaged += 1,
                        Backfilled::UniqueHeld => {
                            report.unique_held += 1;
                            // Not in the unique index: not ready.
                            wrote += 1;
                        }
                    }
                }
                cursor = batch.next.unwrap_or(0);
                self.store_cursor(&key, cursor).await?;
                // The rate bound: this pass's documents take at least
                // `done / rate` seconds.
                pace.after(done_in_pass).await;
                if cursor == 0 {
                    break;
                }
            }
            let older_at_end = self.writers().await?.older_remain();
            report.older_writers = older_at_end;
            if newer_in_pass > 0 {
                // Documents a newer release wrote cannot be written by this
                // one, and that release may not keep these indexes (one
                // rolled back from, which dropped or changed them): they
                // stay building; another pass cannot change that.
                break;
            }
            if whole && wrote == 0 && !older_at_start && !older_at_end {
                let mut older_announced = false;
                for name in building(&self.index_states().await?) {
                    let fp = fps.iter().find(|(n, _)| *n == name).map(|(_, f)| f.clone()).unwrap_or_default();
                    match self.mark_ready(&key, &name, &fp, announced_at_start).await? {
                        Marked::Ready => report.ready.push(name),
                        Marked::Other => {}
                        Marked::OlderAnnounced => older_announced = true,
                    }
                }
                if older_announced {
                    // Only a pass that starts after it can be trusted.
                    report.older_writers = true;
                    continue;
                }
                break;
            }
            if older_at_end {
                // Another pass cannot make the indexes ready while an
                // older writer lives.
                break;
            }
        }
        report.building = building(&self.index_states().await?);
        Ok(report)
    }

    /// One document of a backfill: written again through this release
    /// unless this or a newer release wrote it last.
    async fn backfill_one(&self, mut stored: super::super::Stored<D>) -> Result<Backfilled> {
        for _ in 0..BACKFILL_REREADS {
            match stored.state.stamp.as_deref().map(|s| microdcs_schema::parse_stamp(Some(s))) {
                None => {}
                Some(Ok(s)) if s == D::SPEC.schema => return Ok(Backfilled::Current),
                Some(Ok(s)) if s > D::SPEC.schema => return Ok(Backfilled::Newer),
                Some(Ok(_)) => {}
                Some(Err(_)) => return Ok(Backfilled::Damaged),
            }
            if D::SPEC.schema <= 1 && stored.state.stamp.is_none() {
                return Ok(Backfilled::Current);
            }
            // A document with a lifetime keeps what it has left: a backfill
            // is no reason to live longer.
            match self.update(&stored, &stored.doc).keep_lifetime().await {
                Ok(PutOutcome::Written { .. }) => return Ok(Backfilled::Rewritten),
                Ok(PutOutcome::NotFound) => return Ok(Backfilled::Current),
                Ok(PutOutcome::Conflict { .. }) => {}
                Err(Error::SchemaBehind { .. }) => return Ok(Backfilled::Newer),
                Err(e) if e.is_corrupt() => return Ok(Backfilled::Damaged),
                Err(e @ Error::UniqueViolation { .. }) => {
                    tracing::warn!(kind = D::SPEC.kind, id = %stored.id, error = %e, "backfill: a unique value another document holds; stepped over");
                    return Ok(Backfilled::UniqueHeld);
                }
                Err(e) => return Err(e),
            }
            // Moved since it was read: read it again.
            match self.get_in(&stored.scope, &stored.id).await {
                Ok(Some(s)) => stored = s,
                Ok(None) => return Ok(Backfilled::Current),
                Err(e) if e.is_corrupt() => return Ok(Backfilled::Damaged),
                Err(e) => return Err(e),
            }
        }
        Ok(Backfilled::Contended)
    }

    async fn stored_cursor(&self, key: &str) -> Result<u64> {
        let mut cmd = redis::cmd("HGET");
        cmd.arg(key).arg(CURSOR_FIELD);
        let cmd = &cmd;
        let v: Option<String> =
            crate::retry::read(&self.valkey, |mut con| async move { cmd.query_async(&mut con).await })
                .await
                .map_err(|e| Error::from_redis(e, key))?;
        match v {
            None => Ok(0),
            Some(t) => t.parse().map_err(|_| Error::Corrupt {
                key: key.to_owned(),
                reason: format!("the backfill cursor `{CURSOR_FIELD}` is not a whole number"),
            }),
        }
    }

    async fn store_cursor(&self, key: &str, cursor: u64) -> Result<()> {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(key).arg(CURSOR_FIELD).arg(cursor.to_string());
        let cmd = &cmd;
        crate::retry::repeatable(&self.valkey, "backfill progress", key, |mut con| async move {
            cmd.query_async::<()>(&mut con).await
        })
        .await
        .map_err(|f| f.into_error(key))
    }

    /// How many times writers of a schema older than this one announced
    /// (the `@announced:<schema>` fields the announcement counts in).
    async fn older_announcements(&self, key: &str) -> Result<u64> {
        self.announcements_below(key, D::SPEC.schema).await
    }

    /// After an offline rebuild of the indexes (or only `only`): records
    /// those still building as ready, when no writer was live at the
    /// rebuild's start (`quiet_at_start`: the announcements counted then,
    /// `None` when one was live) nor announced since. A rebuild makes an
    /// index exact from the documents as stored, whichever release wrote
    /// them, which a backfill cannot do for documents a newer release
    /// wrote (after a rollback over a release that dropped or changed the
    /// index). The indexes recorded ready.
    #[cfg_attr(not(feature = "maintenance"), allow(dead_code, reason = "used by rebuild"))]
    pub(crate) async fn ready_after_rebuild(
        &self,
        only: Option<&str>,
        quiet_at_start: Option<u64>,
    ) -> Result<Vec<String>> {
        let Some(at_start) = quiet_at_start else { return Ok(Vec::new()) };
        if !self.writers().await?.schemas.is_empty() {
            return Ok(Vec::new());
        }
        let key = self.index_states_key()?;
        let mut ready = Vec::new();
        let fps = Self::index_fingerprints();
        for (name, state) in self.index_states().await? {
            if state != IndexState::Building || only.is_some_and(|o| o != name) {
                continue;
            }
            let fp = fps.iter().find(|(n, _)| *n == name).map(|(_, f)| f.clone()).unwrap_or_default();
            if let Marked::Ready = self.mark_ready_below(&key, name, &fp, u32::MAX, at_start, true).await? {
                ready.push(name.to_owned());
            }
        }
        Ok(ready)
    }

    /// Before an offline rebuild: the announcements of every schema so
    /// far, or `None` when a writer is live (see [`Store::ready_after_rebuild`]).
    #[cfg_attr(not(feature = "maintenance"), allow(dead_code, reason = "used by rebuild"))]
    pub(crate) async fn quiet_before_rebuild(&self) -> Result<Option<u64>> {
        if !self.writers().await?.schemas.is_empty() {
            return Ok(None);
        }
        let key = self.index_states_key()?;
        Ok(Some(self.announcements_below(&key, u32::MAX).await?))
    }

    /// How many times writers of a schema below `bound` announced.
    async fn announcements_below(&self, key: &str, bound: u32) -> Result<u64> {
        let mut cmd = redis::cmd("HGETALL");
        cmd.arg(key);
        let cmd = &cmd;
        let all: Vec<(String, String)> =
            crate::retry::read(&self.valkey, |mut con| async move { cmd.query_async(&mut con).await })
                .await
                .map_err(|e| Error::from_redis(e, key))?;
        let mut older = 0u64;
        for (field, count) in all {
            let Some(schema) = field.strip_prefix(ANNOUNCED_FIELD) else { continue };
            if schema.parse::<u32>().is_ok_and(|s| s < bound) {
                older += count.parse::<u64>().map_err(|_| Error::Corrupt {
                    key: key.to_owned(),
                    reason: format!("the announcement count `{field}` is not a whole number"),
                })?;
            }
        }
        Ok(older)
    }

    async fn mark_ready(&self, key: &str, index: &str, fp: &str, older_announced: u64) -> Result<Marked> {
        self.mark_ready_below(key, index, fp, D::SPEC.schema, older_announced, false).await
    }

    /// [`Store::mark_ready`] counting the announcements of schemas below `bound`.
    async fn mark_ready_below(
        &self,
        key: &str,
        index: &str,
        fp: &str,
        bound: u32,
        older_announced: u64,
        rebuilt: bool,
    ) -> Result<Marked> {
        // The layout fingerprint of a value of the index-state hash (key
        // from `builtin::INDEX_STATES`), `building:<schema>:<fingerprint>`.
        let (schema, older) = (bound.to_string(), older_announced.to_string());
        let own = if rebuilt { D::SPEC.schema.to_string() } else { String::new() };
        let call = MARK_READY
            .call()
            .key(key)
            .arg(index.as_bytes())
            .arg(fp.as_bytes())
            .arg(schema.as_bytes())
            .arg(older.as_bytes())
            .arg(own.as_bytes());
        let call = &call;
        let v =
            crate::retry::repeatable(
                &self.valkey,
                "index ready",
                key,
                |mut con| async move { call.run(&mut con).await },
            )
            .await
            .map_err(|f| f.into_error(key))?;
        let marked: i64 = crate::retry::reply(v).map_err(|e| Error::from_redis(e, key))?;
        Ok(match marked {
            1 => Marked::Ready,
            2 => Marked::OlderAnnounced,
            _ => Marked::Other,
        })
    }
}

/// What the backfill did with one document.
enum Backfilled {
    /// Written by this release already (or gone): nothing to do.
    Current,
    /// Written again through this release.
    Rewritten,
    /// A newer release wrote it.
    Newer,
    /// Moved by other writers at every re-read.
    Contended,
    /// Unreadable or with a damaged stamp.
    Damaged,
    /// Refused by a unique index of this release: another document holds
    /// the value.
    UniqueHeld,
}
