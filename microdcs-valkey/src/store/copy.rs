//! A copy between two layouts of a type: the migration for what cannot
//! change online (a document key template, a `CompactJson` field order, a
//! field's type), run with the writers of both layouts stopped.

use microdcs_schema::Document;

use super::{PutOutcome, Store};
use crate::codec::Codec;
use crate::error::{Error, Result};

/// What a copy did ([`Store::copy_from`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// Documents of the old layout read.
    pub seen: u64,
    /// Documents created in the new layout.
    pub copied: u64,
    /// Documents the new layout already held (a second run, or one written
    /// there meanwhile): left as they are, never overwritten.
    pub present: u64,
    /// Documents the conversion declined (it answered `None`).
    pub declined: u64,
    /// Documents of the old layout that could not be read (corrupt, a text
    /// the codec refuses): counted and stepped over; `verify` of the old
    /// type names them.
    pub damaged: u64,
}

impl crate::observe::Outcome for CopyReport {
    fn outcome(&self) -> &'static str {
        if self.damaged == 0 { "ok" } else { "damaged" }
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "maintenance")))]
impl<D: Document, C: Codec<D>> Store<D, C> {
    /// Copies every document of `from` (the old layout of a type: another
    /// key template, field order or field type) into this store (the new
    /// layout), converted by `convert`, each with `create`: it enters every
    /// index of the new layout, gets version 1 and a change entry
    /// (`created`), and the type's default lifetime. A document the new
    /// layout already holds is left as it is, so a run that stopped (a
    /// crash, a lost connection) is resumed by running it again. At most
    /// `BackfillRate` documents a second, `page` (1 to
    /// [`Store::MAX_MANY`]) read at a time.
    ///
    /// Run it with the writers of both layouts stopped: a write to the old
    /// layout after its document was copied is not carried over. Then
    /// `verify` the new type, and delete the old keys by their template.
    /// The old documents are not touched.
    ///
    /// # Errors
    /// Connection errors, and a write the new layout refuses (a unique
    /// value taken, too few replicas): the documents copied so far stay,
    /// run it again after the fix. [`Error::InvalidArgument`], before
    /// anything is read, when both layouts have the same document key
    /// template on the same prefix (nothing could be copied).
    pub async fn copy_from<O, OC, F>(&self, from: &Store<O, OC>, convert: F, page: usize) -> Result<CopyReport>
    where
        O: Document,
        OC: Codec<O>,
        F: Fn(O) -> Option<D> + Send + Sync,
    {
        crate::observe::observed("copy", D::SPEC.kind, self.copy_inner(from, convert, page)).await
    }

    async fn copy_inner<O, OC, F>(&self, from: &Store<O, OC>, convert: F, page: usize) -> Result<CopyReport>
    where
        O: Document,
        OC: Codec<O>,
        F: Fn(O) -> Option<D> + Send + Sync,
    {
        // The same document keys on the same prefix: every document would
        // count as present, and nothing be copied.
        if O::SPEC.key == D::SPEC.key && from.valkey().prefix() == self.valkey.prefix() {
            return Err(Error::InvalidArgument(format!(
                "copy_from: {} and {} store their documents under the same keys (`{}`); a copy needs the new \
                 layout's own key template (or another key prefix)",
                O::SPEC.type_name,
                D::SPEC.type_name,
                D::SPEC.key
            )));
        }
        let mut report = CopyReport::default();
        let page = page.clamp(1, Self::MAX_MANY);
        let pace = crate::limits::Pace::new(self.valkey.write_options().backfill_rate);
        let mut cursor = 0;
        loop {
            let read = from.scan(cursor, page).await?;
            report.damaged += read.damaged.len() as u64;
            for old in read.documents {
                report.seen += 1;
                let Some(doc) = convert(old.doc) else {
                    report.declined += 1;
                    continue;
                };
                match self.create(&doc).await? {
                    PutOutcome::Written { .. } => report.copied += 1,
                    PutOutcome::Conflict { .. } | PutOutcome::NotFound => report.present += 1,
                }
                pace.after(report.seen).await;
            }
            match read.next {
                Some(next) => cursor = next,
                None => return Ok(report),
            }
        }
    }
}
