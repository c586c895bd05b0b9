//! Finding the differences between the indexes and the documents, in two
//! passes: [`documents`] reads every document and checks the entries it
//! should have; [`entries`] walks every index entry and checks that its
//! document exists and claims it (orphans and entries in the wrong place).

use std::collections::HashMap;

use microdcs_schema::Document;

use super::{IndexFilter, IndexRef};
use crate::codec::Codec;
use crate::store::Store;

mod documents;
mod entries;

pub(super) use documents::{group_score, holds_entry};

/// Counts from the document pass that let the entry pass skip reads: a key
/// that holds no more entries than the documents were found in has no
/// orphans, so its members need not be read.
#[derive(Debug, Default)]
pub(super) struct Shortcuts {
    /// Entries found present, per list or group key. Memory: one counter per
    /// distinct key; past the cap the entry pass reads every member instead.
    present: HashMap<String, u64>,
    /// The cap was reached: `present` is incomplete.
    overflow: bool,
    /// Keys found held (by the right or a wrong id), per unique index.
    unique_held: Vec<u64>,
}

impl Shortcuts {
    const MAX_KEYS: usize = 100_000;

    pub(super) fn new(unique_indexes: usize) -> Self {
        Shortcuts { unique_held: vec![0; unique_indexes], ..Shortcuts::default() }
    }

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

impl<D: Document, C: Codec<D>> Store<D, C> {
    /// The name of a family's index, as reports and filters use it.
    pub(super) fn family_name(&self, family: IndexRef) -> &'static str {
        match family {
            IndexRef::List => "list",
            IndexRef::Unique(n) => D::SPEC.unique[n].name,
            IndexRef::Group(n) => D::SPEC.groups[n].name,
        }
    }

    /// The Valkey type of a family's keys.
    fn family_type(&self, family: IndexRef) -> &'static str {
        match family {
            IndexRef::List if self.plan.sorted_list => "zset",
            IndexRef::Group(n) if D::SPEC.groups[n].kind().is_sorted() => "zset",
            IndexRef::List | IndexRef::Group(_) => "set",
            IndexRef::Unique(_) => "string",
        }
    }

    /// The index that keeps hash field number `i`, for reporting.
    fn field_owner(&self, i: usize) -> &'static str {
        self.plan.field_users.get(i).and_then(|u| u.first()).copied().unwrap_or("document")
    }

    /// Whether the run covers an index that keeps hash field number `i`.
    fn field_owner_wanted(&self, i: usize, filter: IndexFilter<'_>) -> bool {
        self.plan.field_users.get(i).is_some_and(|u| u.iter().any(|n| filter.wants(n)))
    }
}
