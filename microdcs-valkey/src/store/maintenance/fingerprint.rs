//! Layout fingerprints: a hash of each index's key template, type and
//! bindings, recorded by a rebuild, so an application can tell at start which
//! indexes changed shape (or are new) and need a rebuild before use.

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

    /// The indexes of `D` whose layout changed since the last rebuild (or
    /// that were never rebuilt), from the fingerprints hash
    /// (`schema:fingerprints`, the built-in family `builtin::FINGERPRINTS`).
    ///
    /// A read: ends within `ResponseTimeout`, plus one `WriteRetryDelay` and
    /// a quick second read after a dropped connection.
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
        Ok(want
            .iter()
            .zip(stored)
            .filter(|((_, _, fp), s)| s.as_deref() != Some(fp.as_str()))
            .map(|((index, _, _), _)| (*index).to_owned())
            .collect())
    }
}

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
