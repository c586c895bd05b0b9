//! The KEYS/ARGV contract of the write scripts (all positions 1-based).
//!
//! The generator writes the scripts from these layouts and the runtime fills
//! the arguments from the same layouts, so the two cannot disagree. Each
//! operation has its own layout type: a delete has no document text, no list
//! score and no new index entries, so its layout has no slot for them.

use crate::spec::{DocumentSpec, IndexSpec, Source};
use crate::template::KeyTemplate;

/// The positions of one index entry: its key in KEYS and its "present" flag
/// in ARGV, followed in ARGV by one value per index field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntrySlots {
    /// KEYS position of the entry's key (the document key when absent).
    pub key: usize,
    /// ARGV position of the flag: `1` if the entry is present, else `0`.
    pub flag: usize,
}

impl EntrySlots {
    /// ARGV position of the value of the `k`-th index field (0-based `k`).
    pub fn value(&self, k: usize) -> usize {
        self.flag + 1 + k
    }
}

/// One hash field of an index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexField {
    /// The hash field (the placeholder name).
    pub name: String,
    /// Its position in the layout's distinct `fields`.
    pub at: usize,
}

/// One index as both write scripts see it: its fields and the entry the
/// caller read.
///
/// A multi-valued index (`each`) has no fixed KEYS: its entry's `key`
/// positions name the document key, and its keys follow the fixed ones
/// (from the position in ARGV `tail` of the layout), for each such index
/// in order the keys read, then (a put) the new ones, as many as its counts
/// say. Its one field is the index's own: the encoded values joined by `|`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSlots {
    /// Index name.
    pub name: String,
    /// Unique (string key -> id) or group (set of ids).
    pub unique: bool,
    /// ARGV: for a multi-valued index, how many keys of the values the
    /// caller read follow in KEYS.
    pub old_count: Option<usize>,
    /// A sorted index (a sorted set scored by its last field), with its
    /// bound when it keeps only the highest scores.
    pub sorted: Option<Option<u64>>,
    /// Hash fields holding the index values, in placeholder order.
    pub fields: Vec<IndexField>,
    /// The entry as the caller read it (old key, old flag and values).
    pub old: EntrySlots,
}

/// One index in a put script: the caller's read plus the entry to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutIndexSlots {
    /// Name, fields and the entry read.
    pub index: IndexSlots,
    /// The new entry (new key, new flag and values).
    pub new: EntrySlots,
    /// ARGV: for a multi-valued index, how many keys of the new values
    /// follow in KEYS (after those read).
    pub new_count: Option<usize>,
}

/// The positions both write scripts of a type share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommonSlots {
    /// KEYS: the document hash (1).
    pub doc_key: usize,
    /// KEYS: the change stream (2).
    pub changes_key: usize,
    /// KEYS: the scope registry (3); `None` for a sharded type, whose
    /// registry (one set for all scopes) lives in another slot: the runtime
    /// adds the scope to it before the write, outside the script.
    pub registry_key: Option<usize>,
    /// KEYS: the list, when the type has one.
    pub list_key: Option<usize>,
    /// ARGV: expected version (`create`, `any` or a number).
    pub expect: usize,
    /// ARGV: operation id.
    pub op: usize,
    /// ARGV: document id.
    pub id: usize,
    /// ARGV: scope.
    pub scope: usize,
    /// ARGV: kind.
    pub kind: usize,
    /// ARGV: nudge channel name.
    pub channel: usize,
    /// ARGV: change stream approximate max length.
    pub maxlen: usize,
}

/// The KEYS/ARGV layout of a put script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutLayout {
    /// Distinct index hash fields, in the order the script reads them.
    pub fields: Vec<String>,
    /// The positions shared with the delete script.
    pub common: CommonSlots,
    /// ARGV: document text.
    pub doc: usize,
    /// ARGV: list score, for a sorted-set list.
    pub score: Option<usize>,
    /// Per index (unique first, then groups).
    pub indexes: Vec<PutIndexSlots>,
    /// ARGV: how many operation ids the `ops` history keeps (a write
    /// option, so the script never fixes the count).
    pub history: usize,
    /// KEYS: the document's tombstone, read when the document is missing.
    pub tomb_key: usize,
    /// ARGV: the document's lifetime in milliseconds, for a type with a
    /// `ttl` (a write option over the type's default).
    pub ttl: Option<usize>,
    /// ARGV: for a type with a multi-valued index, the KEYS position of
    /// the first key of those indexes (after every other key, the step's
    /// effects included).
    pub tail: Option<usize>,
    /// Number of KEYS.
    pub num_keys: usize,
    /// Number of ARGV.
    pub num_args: usize,
}

/// The KEYS/ARGV layout of a step script: a put's, then, for a type with an
/// outbox, the outbox's; then the variable part. A type without an outbox
/// has a step script too, a put with family effects (`Store::write`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepLayout {
    /// Everything a put has, at the same positions.
    pub put: PutLayout,
    /// The outbox's positions, for a type with an outbox.
    pub outbox: Option<OutboxSlots>,
    /// Number of fixed KEYS (the effects' keys come after them: effect `i`,
    /// from 1, acts on `KEYS[num_keys + i]`).
    pub num_keys: usize,
    /// Number of fixed ARGV. After them, for a type with an outbox, the
    /// work entries (see [`OutboxSlots::entries`]); then how many family
    /// effects follow, and four ARGV per effect (operation, two operands,
    /// the family's lifetime in milliseconds or empty).
    pub num_args: usize,
}

/// The outbox's positions in a step script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxSlots {
    /// KEYS: the work stream.
    pub work_key: usize,
    /// KEYS: the applied-event marker (the document key when the step
    /// carries no event).
    pub marker_key: usize,
    /// ARGV: `1` when the step carries an event, else `0`.
    pub marker_flag: usize,
    /// ARGV: the marker's lifetime in milliseconds.
    pub marker_ttl: usize,
    /// ARGV: how many work entries follow (the last fixed position). Each
    /// is its field count `n`, then `n` name/value pairs.
    pub entries: usize,
}

impl StepLayout {
    /// The layout of `spec`'s step script.
    pub fn new(spec: &DocumentSpec<'_>) -> Self {
        let put = PutLayout::new(spec);
        let (k, a) = (put.num_keys, put.num_args);
        match spec.outbox {
            Some(_) => StepLayout {
                outbox: Some(OutboxSlots {
                    work_key: k + 1,
                    marker_key: k + 2,
                    marker_flag: a + 1,
                    marker_ttl: a + 2,
                    entries: a + 3,
                }),
                num_keys: k + 2,
                num_args: a + 3,
                put,
            },
            None => StepLayout { outbox: None, num_keys: k, num_args: a, put },
        }
    }
}

/// The KEYS/ARGV layout of a delete script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteLayout {
    /// Distinct index hash fields, in the order the script reads them.
    pub fields: Vec<String>,
    /// The positions shared with the put script.
    pub common: CommonSlots,
    /// Per index (unique first, then groups).
    pub indexes: Vec<IndexSlots>,
    /// KEYS: the tombstone the delete leaves.
    pub tomb_key: usize,
    /// ARGV: how long the tombstone is kept, in milliseconds.
    pub tomb_ttl: usize,
    /// ARGV: for a type with a multi-valued index, the KEYS position of
    /// the first key of those indexes.
    pub tail: Option<usize>,
    /// Number of KEYS.
    pub num_keys: usize,
    /// Number of ARGV.
    pub num_args: usize,
}

/// The hash fields of one index: its field and method placeholders, in
/// template order (the order the generated index entries use), then for a
/// conditional group its membership marker, for a sorted index its score
/// (both in the field named after the index).
pub fn index_fields(ix: &IndexSpec<'_>) -> Vec<String> {
    // A multi-valued index keeps its values in its own field only.
    if ix.kind().is_each() {
        return vec![ix.name.to_owned()];
    }
    let Ok(t) = KeyTemplate::parse(ix.key) else { return Vec::new() };
    let mut fields: Vec<String> = t
        .placeholders()
        .filter(|p| matches!(ix.binding(p).map(|b| b.source), Some(Source::Field(_) | Source::Method(_))))
        .map(str::to_owned)
        .collect();
    if ix.kind().has_marker() {
        fields.push(ix.name.to_owned());
    }
    fields
}

/// The distinct hash fields of all indexes of `spec`, in index order.
pub fn all_index_fields(spec: &DocumentSpec<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for ix in spec.unique.iter().chain(spec.groups) {
        for f in index_fields(ix) {
            intern(&mut out, f);
        }
    }
    out
}

/// The position of `f` in `all`, appending it when new.
fn intern(all: &mut Vec<String>, f: String) -> usize {
    match all.iter().position(|g| *g == f) {
        Some(at) => at,
        None => {
            all.push(f);
            all.len() - 1
        }
    }
}

/// One index as the layout needs it: name, unique or not, sorted (with its
/// bound) or not, multi-valued or not, and its fields.
type IndexShape<'a> = (&'a str, bool, Option<Option<u64>>, bool, Vec<IndexField>);

/// Hands out KEYS and ARGV positions in order.
#[derive(Default)]
struct Positions {
    keys: usize,
    args: usize,
    /// The distinct index fields seen so far.
    fields: Vec<String>,
}

impl Positions {
    fn key(&mut self) -> usize {
        self.keys += 1;
        self.keys
    }

    fn arg(&mut self) -> usize {
        self.args += 1;
        self.args
    }

    /// A flag and one value per field; the flag's position.
    fn entry_args(&mut self, fields: usize) -> usize {
        let flag = self.arg();
        self.args += fields;
        flag
    }

    /// The shared positions; `between` allocates what an operation puts
    /// between the scope and the kind (the put's document text).
    fn common<T>(&mut self, spec: &DocumentSpec<'_>, between: impl FnOnce(&mut Self) -> T) -> (CommonSlots, T) {
        let (doc_key, changes_key) = (self.key(), self.key());
        let registry_key = (!spec.is_sharded()).then(|| self.key());
        let list_key = spec.list.map(|_| self.key());
        let (expect, op, id, scope) = (self.arg(), self.arg(), self.arg(), self.arg());
        let extra = between(self);
        let (kind, channel, maxlen) = (self.arg(), self.arg(), self.arg());
        let common =
            CommonSlots { doc_key, changes_key, registry_key, list_key, expect, op, id, scope, kind, channel, maxlen };
        (common, extra)
    }

    /// Every index with its fields (unique first, then groups).
    fn indexes<'a>(&mut self, spec: &DocumentSpec<'a>) -> Vec<IndexShape<'a>> {
        let all = spec.unique.iter().map(|x| (x, true)).chain(spec.groups.iter().map(|x| (x, false)));
        all.map(|(ix, unique)| {
            let fields = index_fields(ix)
                .into_iter()
                .map(|name| IndexField { at: intern(&mut self.fields, name.clone()), name })
                .collect();
            (ix.name, unique, ix.score.map(|_| ix.max), ix.kind().is_each(), fields)
        })
        .collect()
    }
}

impl PutLayout {
    /// The layout of `spec`'s put script.
    pub fn new(spec: &DocumentSpec<'_>) -> Self {
        let mut p = Positions::default();
        let (common, doc) = p.common(spec, Positions::arg);
        let score = spec.list.and_then(|l| l.score).map(|_| p.arg());
        let mut indexes: Vec<PutIndexSlots> = p
            .indexes(spec)
            .into_iter()
            .map(|(name, unique, sorted, each, fields)| {
                // A multi-valued index's keys follow the fixed ones.
                let (new_key, old_key) = if each { (common.doc_key, common.doc_key) } else { (p.key(), p.key()) };
                let new_flag = p.entry_args(fields.len());
                let old_flag = p.entry_args(fields.len());
                PutIndexSlots {
                    index: IndexSlots {
                        name: name.to_owned(),
                        unique,
                        old_count: None,
                        sorted,
                        fields,
                        old: EntrySlots { key: old_key, flag: old_flag },
                    },
                    new: EntrySlots { key: new_key, flag: new_flag },
                    new_count: None,
                }
            })
            .collect();
        // Last, so the positions before them stay where they were.
        let history = p.arg();
        let tomb_key = p.key();
        let ttl = spec.ttl_ms.map(|_| p.arg());
        let mut tail = None;
        for ix in indexes.iter_mut().filter(|ix| spec.groups.iter().any(|g| g.name == ix.index.name && g.each)) {
            ix.index.old_count = Some(p.arg());
            ix.new_count = Some(p.arg());
            tail.get_or_insert_with(|| p.arg());
        }
        PutLayout {
            fields: p.fields,
            common,
            doc,
            score,
            indexes,
            history,
            tomb_key,
            ttl,
            tail,
            num_keys: p.keys,
            num_args: p.args,
        }
    }
}

impl DeleteLayout {
    /// The layout of `spec`'s delete script.
    pub fn new(spec: &DocumentSpec<'_>) -> Self {
        let mut p = Positions::default();
        let (common, ()) = p.common(spec, |_| ());
        let mut indexes: Vec<IndexSlots> = p
            .indexes(spec)
            .into_iter()
            .map(|(name, unique, sorted, each, fields)| {
                let key = if each { common.doc_key } else { p.key() };
                let flag = p.entry_args(fields.len());
                IndexSlots {
                    name: name.to_owned(),
                    unique,
                    old_count: None,
                    sorted,
                    fields,
                    old: EntrySlots { key, flag },
                }
            })
            .collect();
        let (tomb_key, tomb_ttl) = (p.key(), p.arg());
        let mut tail = None;
        for ix in indexes.iter_mut().filter(|ix| spec.groups.iter().any(|g| g.name == ix.name && g.each)) {
            ix.old_count = Some(p.arg());
            tail.get_or_insert_with(|| p.arg());
        }
        DeleteLayout { fields: p.fields, common, indexes, tomb_key, tomb_ttl, tail, num_keys: p.keys, num_args: p.args }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lua::tests_spec::SPEC;

    #[test]
    fn put_layout_positions() {
        let l = PutLayout::new(&SPEC);
        let c = l.common;
        assert_eq!(l.fields, ["order", "state"]);
        assert_eq!(c.list_key, Some(4));
        assert_eq!((l.indexes[0].new.key, l.indexes[0].index.old.key), (5, 6));
        assert_eq!((l.indexes[1].new.key, l.indexes[1].index.old.key), (7, 8));
        assert_eq!((c.expect, c.op, c.id, c.scope, l.doc, c.kind, c.channel, c.maxlen), (1, 2, 3, 4, 5, 6, 7, 8));
        assert_eq!(l.score, Some(9));
        // by_order: new flag 10, value 11, old flag 12, value 13; by_state: 14..17
        assert_eq!((l.indexes[0].new.flag, l.indexes[0].index.old.flag), (10, 12));
        assert_eq!((l.indexes[1].new.flag, l.indexes[1].index.old.flag), (14, 16));
        assert_eq!(l.history, 18);
        assert_eq!(l.num_args, 18);
        assert_eq!(l.tomb_key, 9);
        assert_eq!(l.num_keys, 9);
    }

    #[test]
    fn delete_layout_positions() {
        // A delete layout has no document text, score or new entries: no such fields.
        let l = DeleteLayout::new(&SPEC);
        assert_eq!((l.indexes[0].old.key, l.indexes[1].old.key), (5, 6));
        assert_eq!((l.indexes[0].old.flag, l.indexes[1].old.flag), (8, 10));
        assert_eq!((l.tomb_key, l.tomb_ttl), (7, 12));
        assert_eq!(l.num_keys, 7);
        assert_eq!(l.num_args, 12);
    }

    #[test]
    fn index_fields_point_into_the_distinct_fields() {
        let l = PutLayout::new(&SPEC);
        for ix in &l.indexes {
            for f in &ix.index.fields {
                assert_eq!(l.fields[f.at], f.name);
            }
        }
        assert_eq!(l.fields, all_index_fields(&SPEC));
    }
}
