//! Layout fingerprints: a hash of each index's key template, type and
//! bindings, recorded by a rebuild, so an application can tell at start which
//! indexes changed shape (or are new) and need a rebuild before use.
//!
//! # The baseline: a first deploy flags nothing
//!
//! A fingerprint answers "was this layout covered?". Before anything is
//! recorded for a kind, that has two readings, and the store tells them
//! apart by whether the kind has documents:
//! - **no fingerprint of the kind and no document of it**: a first deploy.
//!   Every index is complete (there is nothing to index), and every
//!   document written from now on is indexed by its write, so
//!   [`Store::needs_rebuild`] records the current layouts as the baseline
//!   and flags nothing. Only a change after it is flagged.
//! - **no fingerprint and documents stored**: a kind deployed before
//!   layouts were recorded. Whether its indexes follow the current layouts
//!   is unknown, so every index is flagged until a rebuild, or
//!   [`Store::accept_layouts`] (a verify that records the layouts when it
//!   finds nothing wrong), settles it.
//!
//! The choice over the alternatives: recording at every store's start
//! (without looking at documents) would take a deployment that upgrades the
//! library and changes a layout in the same release as its baseline, with
//! stale entries, and flag nothing: silently wrong. Recording only through
//! an operator's step would flag every index of every new kind, which is
//! the noise that makes the answer useless. The baseline is written field
//! by field with `HSETNX`, so two releases starting at once on an empty kind
//! never overwrite each other's record: the first one's layouts are the
//! baseline, and the other's differences are flagged.
//!
//! The document check is a keyspace walk (`SCAN` with the document key's
//! pattern) that stops at the first document: on an empty kind it walks the
//! whole keyspace once, step by step, each step bounded as a read; it runs
//! only while no fingerprint of the kind is recorded.

use microdcs_schema::{Document, DocumentSpec};

use crate::codec::Codec;
use crate::error::{Error, Result};
use crate::store::Store;

#[cfg_attr(docsrs, doc(cfg(feature = "maintenance")))]
impl<D: Document, C: Codec<D>> Store<D, C> {
    /// `(index, field, fingerprint)` per index of `D`.
    fn fingerprint_fields(&self) -> Vec<(&'static str, String, String)> {
        D::SPEC.index_layouts().into_iter().map(|l| (l.index, l.field, digest(&l.text))).collect()
    }

    /// Records the fingerprints of the indexes just rebuilt (all of them, or
    /// only `only`), so [`Store::needs_rebuild`] stops flagging them. Safe to
    /// repeat: ends within `WriteAttempts x (ResponseTimeout +
    /// WriteRetryDelay)`; a key of another type is [`Error::WrongType`].
    pub(super) async fn record_fingerprint(&self, only: Option<&str>) -> Result<()> {
        let key = fingerprint_key(&self.valkey)?;
        let fields: Vec<(String, String)> = self
            .fingerprint_fields()
            .into_iter()
            .filter(|(index, _, _)| only.is_none_or(|i| i == *index))
            .map(|(_, field, fp)| (field, fp))
            .collect();
        if fields.is_empty() {
            return Ok(());
        }
        let mut cmd = redis::cmd("HSET");
        cmd.arg(&key).arg(fields);
        let cmd = &cmd;
        // Setting the same fields again changes nothing, so the write rule applies.
        crate::retry::repeatable(&self.valkey, "fingerprint record", &key, |mut con| async move {
            cmd.query_async::<()>(&mut con).await
        })
        .await
        .map_err(|f| f.into_error(&key))
    }

    /// Records the layout of `index` as migrated, so [`Store::needs_rebuild`]
    /// stops flagging it, without a rebuild: for an index a backfill made
    /// ready (complete, and kept by every live writer), which a rebuild
    /// beside live writers could only make wrong.
    #[cfg_attr(not(feature = "admin"), allow(dead_code, reason = "used by the admin tool"))]
    pub(crate) async fn record_layout(&self, index: &str) -> Result<()> {
        self.record_fingerprint(Some(index)).await
    }

    /// The indexes of `D` whose layout changed since the last migration
    /// (a rebuild or [`Store::accept_layouts`]) or the first deploy, from
    /// the fingerprints hash (`schema:fingerprints`, the built-in family
    /// `builtin::FINGERPRINTS`): a new index, or one whose template,
    /// bindings, score or document key changed.
    ///
    /// # The baseline: a first deploy flags nothing
    ///
    /// Before anything is recorded for a kind, "never recorded" has two
    /// readings, told apart by whether the kind has documents:
    /// - **no fingerprint of the kind and no document of it**: a first
    ///   deploy. Every index is complete (there is nothing to index) and
    ///   every document written from now on is indexed by its write, so
    ///   this records the current layouts as the baseline and answers
    ///   none. Only a change after it is flagged.
    /// - **no fingerprint and documents stored**: a kind deployed before
    ///   layouts were recorded. Whether its indexes follow the current
    ///   layouts is unknown, so every index is answered until a rebuild or
    ///   [`Store::accept_layouts`] (a verify that records the layouts when
    ///   it finds nothing wrong) settles it.
    ///
    /// Why not the alternatives: recording at every store's start without
    /// looking at documents would take a deployment that upgrades the
    /// library and changes a layout in the same release as its baseline,
    /// stale entries and all, and flag nothing; recording only through an
    /// operator's step flags every index of every new kind, the noise that
    /// makes the answer useless. The baseline is written field by field with
    /// `HSETNX`, so two releases starting at once on an empty kind never
    /// overwrite each other: the first one's layouts are the baseline and
    /// the other's differences are flagged. The document check walks the
    /// keyspace (`SCAN` with the document key's pattern) up to the first
    /// document: on an empty kind the whole keyspace once, step by step,
    /// and only while nothing of the kind is recorded.
    ///
    /// A read: ends within `ResponseTimeout`, plus one `WriteRetryDelay` and
    /// a quick second read after a dropped connection; on a kind with no
    /// record, a keyspace walk to its first document and, on a first
    /// deploy, one write (within `WriteAttempts x (ResponseTimeout +
    /// WriteRetryDelay)`).
    ///
    /// # Errors
    /// Connection errors; [`crate::Error::WrongType`] when the fingerprints
    /// key holds another type.
    pub async fn needs_rebuild(&self) -> Result<Vec<String>> {
        crate::observe::observed("needs_rebuild", D::SPEC.kind, self.needs_rebuild_inner()).await
    }

    async fn needs_rebuild_inner(&self) -> Result<Vec<String>> {
        let key = fingerprint_key(&self.valkey)?;
        let want = self.fingerprint_fields();
        if want.is_empty() {
            return Ok(Vec::new());
        }
        let names: Vec<&str> = want.iter().map(|(_, f, _)| f.as_str()).collect();
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(&key).arg(&names);
        let cmd = &cmd;
        let stored: Vec<Option<String>> =
            crate::retry::read(&self.valkey, |mut con| async move { cmd.query_async(&mut con).await })
                .await
                .map_err(|e| Error::from_redis(e, &key))?;
        if stored.iter().all(Option::is_none) && !self.has_documents().await? {
            self.record_baseline(&key, &want).await?;
            return Ok(Vec::new());
        }
        Ok(want
            .iter()
            .zip(stored)
            .filter(|((_, _, fp), s)| s.as_deref() != Some(fp.as_str()))
            .map(|((index, _, _), _)| (*index).to_owned())
            .collect())
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "maintenance")))]
impl<D: Document, C: Codec<D>> Store<D, C> {
    /// Whether any document of `D` is stored: a walk over its document key
    /// pattern that stops at the first key that parses back as a document.
    async fn has_documents(&self) -> Result<bool> {
        let prefix = self.valkey.prefix();
        let pattern = self.plan.doc_pattern(prefix)?;
        let mut cursor = 0;
        loop {
            let (next, keys) = crate::retry::scan_step(&self.valkey, cursor, &pattern, BASELINE_SCAN, "hash").await?;
            if keys.iter().any(|k| self.plan.doc_of_key(prefix, k).is_some()) {
                return Ok(true);
            }
            if next == 0 {
                return Ok(false);
            }
            cursor = next;
        }
    }

    /// Records `want` as the baseline, each field only if none is there
    /// (`HSETNX`): a record another process made first is kept.
    async fn record_baseline(&self, key: &str, want: &[(&'static str, String, String)]) -> Result<()> {
        let mut pipe = redis::pipe();
        for (_, field, fp) in want {
            pipe.cmd("HSETNX").arg(key).arg(field).arg(fp).ignore();
        }
        let pipe = &pipe;
        // Setting a field only when absent leaves the same state when repeated.
        crate::retry::repeatable(&self.valkey, "fingerprint baseline", key, |mut con| async move {
            pipe.query_async::<()>(&mut con).await
        })
        .await
        .map_err(|f| f.into_error(key))
    }
}

/// Keys per `SCAN` step of the baseline's document check.
const BASELINE_SCAN: usize = 1000;

/// `(field, fingerprint)` per index of a document type: the field of its
/// [`IndexLayout`](microdcs_schema::IndexLayout), the first 16 hex digits of
/// SHA-256 over its layout text.
pub fn fingerprints(spec: &DocumentSpec<'_>) -> Vec<(String, String)> {
    spec.index_layouts().into_iter().map(|l| (l.field, digest(&l.text))).collect()
}

fn digest(text: &str) -> String {
    crate::store::layout_digest(text)
}

/// The fingerprints hash: always the built-in family, so recording and
/// reading can never disagree on where fingerprints live.
fn fingerprint_key(valkey: &crate::Valkey) -> Result<String> {
    crate::family::FamilyKey::builtin(microdcs_schema::builtin::FINGERPRINTS).render(valkey.prefix(), &[])
}
