//! What verify and rebuild report: the differences between the indexes and
//! the documents, and the options of a run.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// What is wrong with one index entry.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum DiffKind {
    /// The document should have this entry and does not.
    Missing,
    /// The entry points at no document, or at one that does not qualify for it.
    Orphan,
    /// The id is in this group, but the document belongs in `expected` (or in none).
    WrongGroup {
        /// The group the document belongs in, if any.
        expected: Option<String>,
    },
    /// The list score differs from the document's.
    WrongScore {
        /// From the document.
        expected: f64,
        /// Stored.
        found: f64,
    },
    /// The unique key holds another id.
    WrongId {
        /// Another document's id found at the key.
        found: String,
    },
    /// A hash field an index keeps differs from the document's value.
    Field {
        /// Field name.
        field: String,
        /// From the document (`None`: should be absent).
        expected: Option<String>,
        /// Stored.
        found: Option<String>,
    },
    /// The key holds a value of another Valkey type than its family keeps
    /// (a string where a set belongs, or anything but a hash at a document
    /// key, anything but a set at the scope registry, index `scopes`).
    /// Rebuild deletes and rewrites an index key and the registry; it
    /// leaves a document key alone, since the value there is not the
    /// index's to throw away.
    WrongType {
        /// The type found (`string`, `list`, `set`, `zset`, `hash`, `stream`).
        found: String,
    },
    /// The document cannot be indexed (corrupt hash, codec failure, invalid
    /// index value).
    Corrupt {
        /// Why.
        reason: String,
    },
}

impl DiffKind {
    /// Short name for summaries.
    pub fn name(&self) -> &'static str {
        match self {
            DiffKind::Missing => "missing",
            DiffKind::Orphan => "orphan",
            DiffKind::WrongGroup { .. } => "wrong group",
            DiffKind::WrongScore { .. } => "wrong score",
            DiffKind::WrongId { .. } => "wrong id",
            DiffKind::Field { .. } => "field",
            DiffKind::WrongType { .. } => "wrong type",
            DiffKind::Corrupt { .. } => "corrupt",
        }
    }
}

/// One difference between an index and the documents.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// `list`, an index name, or `document`.
    pub index: String,
    /// The key concerned.
    pub key: String,
    /// The document id concerned.
    pub id: String,
    /// What is wrong.
    pub kind: DiffKind,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} `{}` at `{}`", self.index, self.kind.name(), self.id, self.key)?;
        match &self.kind {
            DiffKind::WrongGroup { expected } => write!(f, " (belongs in {expected:?})"),
            DiffKind::WrongScore { expected, found } => write!(f, " (score {found}, expected {expected})"),
            DiffKind::WrongId { found } => write!(f, " (holds `{found}`)"),
            DiffKind::Field { field, expected, found } => {
                write!(f, " (field `{field}` {found:?}, expected {expected:?})")
            }
            DiffKind::WrongType { found } => write!(f, " (holds a {found})"),
            DiffKind::Corrupt { reason } => write!(f, " ({reason})"),
            _ => Ok(()),
        }
    }
}

/// What a verify or rebuild found (and, for rebuild, fixed).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Documents scanned.
    pub documents: u64,
    /// Index entries scanned in the reverse (orphan) pass.
    pub entries: u64,
    /// The differences (for rebuild: found, and fixed unless `Corrupt`, a
    /// document key of the wrong type, or a conflict).
    pub differences: Vec<Difference>,
    /// More differences than `max_differences` were found; the rest were counted only.
    pub truncated: u64,
    /// Fixes applied (rebuild only).
    pub fixed: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// `ok` whatever was found: the differences are the report's, and the
/// operation did its work.
impl crate::observe::Outcome for Report {
    fn outcome(&self) -> &'static str {
        "ok"
    }
}

impl Report {
    /// Differences counted per (index, kind).
    pub fn summary(&self) -> BTreeMap<(String, &'static str), u64> {
        let mut m = BTreeMap::new();
        for d in &self.differences {
            *m.entry((d.index.clone(), d.kind.name())).or_insert(0) += 1;
        }
        m
    }

    /// Whether nothing differs.
    pub fn is_clean(&self) -> bool {
        self.differences.is_empty() && self.truncated == 0
    }
}

/// Options of [`crate::Store::verify`] and [`crate::Store::rebuild`].
#[derive(Clone)]
pub struct MaintenanceOptions<'a> {
    /// Only documents (and index keys) of this scope.
    pub scope: Option<&'a str>,
    /// Only this index (`list` or an index name); the others are not touched.
    pub index: Option<&'a str>,
    /// Keys per `SCAN` batch and per pipeline: from 1 to
    /// [`MaintenanceOptions::MAX_BATCH`] (10,000); a larger value is taken
    /// as the maximum. The walks over index keys, which the server filters
    /// by type, examine 8 x this many slots per step (at most `MAX_BATCH`)
    /// and check what they return a batch at a time.
    pub batch: usize,
    /// Differences kept in the report (the rest are counted).
    pub max_differences: usize,
    /// Called after each batch with the documents and entries scanned so far.
    pub progress: Option<&'a (dyn Fn(u64, u64) + Sync)>,
}

/// The largest batch a run uses: the server refuses counts near the integer
/// limits, and a bigger pipeline only holds the shared connection longer.
pub(super) const MAX_BATCH: usize = 10_000;

impl MaintenanceOptions<'_> {
    /// The largest `batch` a run uses (10,000).
    pub const MAX_BATCH: usize = MAX_BATCH;
}

impl Default for MaintenanceOptions<'_> {
    fn default() -> Self {
        MaintenanceOptions { scope: None, index: None, batch: 500, max_differences: 100_000, progress: None }
    }
}

impl fmt::Debug for MaintenanceOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaintenanceOptions")
            .field("scope", &self.scope)
            .field("index", &self.index)
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}
