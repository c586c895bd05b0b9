//! The traits the derive implements and relies on, and the index entries of a
//! document (the one computation used by writes and by verification).

use std::borrow::Cow;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;

use crate::prefix::KeyPrefix;
use crate::spec::{DocumentSpec, KeyspaceSpec};
use crate::template::KeyError;

/// A value that can be written into a key segment (ids, scopes, index values).
///
/// Implemented for text, `char` and the integer types. For an enum without
/// fields, `#[derive(microdcs_valkey::KeySegment)]` writes each variant as
/// its name (or as `#[microdcs(rename_all = "snake_case")]` and
/// `#[microdcs(rename = "...")]` say).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be used as a key segment",
    label = "used in a key template, so it must be text or an integer",
    note = "key segments are text: use `String`, `&str`, `Cow<str>`, `char` or an integer type",
    note = "for an enum without fields, add `#[derive(microdcs_valkey::KeySegment)]`; for another type, implement `microdcs_valkey::KeySegment` for it"
)]
pub trait KeySegment {
    /// The text written (encoded) into the key.
    fn key_segment(&self) -> Cow<'_, str>;
}

impl KeySegment for str {
    fn key_segment(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}
impl KeySegment for String {
    fn key_segment(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}
impl KeySegment for Cow<'_, str> {
    fn key_segment(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}
impl KeySegment for Box<str> {
    fn key_segment(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}
impl KeySegment for Rc<str> {
    fn key_segment(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}
impl KeySegment for Arc<str> {
    fn key_segment(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}
impl KeySegment for char {
    fn key_segment(&self) -> Cow<'_, str> {
        Cow::Owned(self.to_string())
    }
}
impl<T: KeySegment + ?Sized> KeySegment for &T {
    fn key_segment(&self) -> Cow<'_, str> {
        (**self).key_segment()
    }
}
macro_rules! int_segment {
    ($($t:ty)*) => {$(
        impl KeySegment for $t {
            fn key_segment(&self) -> Cow<'_, str> {
                Cow::Owned(self.to_string())
            }
        }
    )*};
}
int_segment!(u8 u16 u32 u64 u128 usize i8 i16 i32 i64 i128 isize);

/// A value an index placeholder can take: any [`KeySegment`] (indexed unless
/// empty) or an `Option` of one (`None` means not indexed).
///
/// "Empty means not indexed": a document whose state has not been reported
/// yet (an empty normalized state) belongs to no state group.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be an index value",
    label = "bound to an index placeholder",
    note = "an index value is a key segment (`String`, `&str`, an integer, an enum with `#[derive(KeySegment)]`) or an `Option` of one; empty text or `None` means the document is not in that index",
    note = "for an enum without fields, add `#[derive(microdcs_valkey::KeySegment)]`",
    note = "for a `Vec` or a set whose items should each find the document (\"documents containing X\"), declare a multi-valued index instead: `each(key = \"...:{{scope}}:{{tag}}\", tag = tags, name = \"by_tag\")` keeps the id in one set per item",
    note = "for any other type, bind the placeholder to a `&self` method that returns text; to index a `Vec`'s items as one value, one that joins them, e.g. `state = normalized_state()` returning `self.state.join(\"_\")`"
)]
pub trait IndexValue {
    /// The value, or `None` when the document is not indexed.
    fn index_value(&self) -> Option<Cow<'_, str>>;
}

impl<T: KeySegment + ?Sized> IndexValue for T {
    fn index_value(&self) -> Option<Cow<'_, str>> {
        let v = self.key_segment();
        (!v.is_empty()).then_some(v)
    }
}

impl<T: KeySegment> IndexValue for Option<T> {
    fn index_value(&self) -> Option<Cow<'_, str>> {
        self.as_ref().and_then(IndexValue::index_value)
    }
}

/// The values of a multi-valued index (`each(...)`): a collection of
/// [`IndexValue`]s (`Vec`, slice, `BTreeSet`, `HashSet`, an `Option` of one),
/// whose empty and `None` items are left out. An empty collection means
/// "in no set of the index".
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot give the values of an `each` index",
    label = "bound to the value placeholder of an `each(...)` index",
    note = "an `each` index takes a collection of index values: `Vec<T>`, `[T]`, `BTreeSet<T>`, `HashSet<T>` (or an `Option` of one) where `T` is text, an integer or an enum with `#[derive(KeySegment)]`",
    note = "for a single value, declare a `group(...)` instead"
)]
pub trait IndexValues {
    /// Every value, in any order, possibly repeated; empties left out.
    fn index_values(&self) -> Vec<Cow<'_, str>>;
}

impl<T: IndexValue> IndexValues for [T] {
    fn index_values(&self) -> Vec<Cow<'_, str>> {
        self.iter().filter_map(IndexValue::index_value).collect()
    }
}
impl<T: IndexValue> IndexValues for Vec<T> {
    fn index_values(&self) -> Vec<Cow<'_, str>> {
        self.as_slice().index_values()
    }
}
impl<T: IndexValue, const N: usize> IndexValues for [T; N] {
    fn index_values(&self) -> Vec<Cow<'_, str>> {
        self.as_slice().index_values()
    }
}
impl<T: IndexValue> IndexValues for std::collections::BTreeSet<T> {
    fn index_values(&self) -> Vec<Cow<'_, str>> {
        self.iter().filter_map(IndexValue::index_value).collect()
    }
}
impl<T: IndexValue, S> IndexValues for std::collections::HashSet<T, S> {
    fn index_values(&self) -> Vec<Cow<'_, str>> {
        self.iter().filter_map(IndexValue::index_value).collect()
    }
}
impl<C: IndexValues> IndexValues for Option<C> {
    fn index_values(&self) -> Vec<Cow<'_, str>> {
        self.as_ref().map(IndexValues::index_values).unwrap_or_default()
    }
}
impl<C: IndexValues + ?Sized> IndexValues for &C {
    fn index_values(&self) -> Vec<Cow<'_, str>> {
        (**self).index_values()
    }
}

pub use crate::spec::MAX_EACH_VALUES;

/// A numeric list score (sorted-set scores are `f64`; integers beyond 2^53
/// lose precision).
#[diagnostic::on_unimplemented(
    message = "the list score `{Self}` is not numeric",
    label = "used as the score of a sorted-set list",
    note = "a score is an integer or floating-point number (sorted-set scores are f64); use `list(key = ...)` without `score` for a plain set"
)]
pub trait Score {
    /// The score.
    fn score(&self) -> f64;
}

macro_rules! num_score {
    ($($t:ty)*) => {$(
        impl Score for $t {
            #[allow(clippy::cast_lossless, clippy::cast_precision_loss, reason = "sorted-set scores are f64")]
            fn score(&self) -> f64 {
                *self as f64
            }
        }
    )*};
}
num_score!(u8 u16 u32 u64 usize i8 i16 i32 i64 isize f32 f64);

impl<T: Score + ?Sized> Score for &T {
    fn score(&self) -> f64 {
        (**self).score()
    }
}

/// The score of a sorted index: a number, or an `Option` of one where
/// `None` leaves the document out of the index (a due date that is unset).
#[diagnostic::on_unimplemented(
    message = "the sorted-index score `{Self}` is not numeric",
    label = "used as the score of a sorted index",
    note = "a score is an integer or floating-point number, or an `Option` of one (`None`: not in the index)"
)]
pub trait IndexScore {
    /// The score, or `None` for "not in the index".
    fn index_score(&self) -> Option<f64>;
}

macro_rules! index_score {
    ($($t:ty)*) => {$(
        impl IndexScore for $t {
            fn index_score(&self) -> Option<f64> {
                Some(Score::score(self))
            }
        }
        impl IndexScore for Option<$t> {
            fn index_score(&self) -> Option<f64> {
                self.as_ref().map(Score::score)
            }
        }
    )*};
}
index_score!(u8 u16 u32 u64 usize i8 i16 i32 i64 isize f32 f64);

impl<T: IndexScore + ?Sized> IndexScore for &T {
    fn index_score(&self) -> Option<f64> {
        (**self).index_score()
    }
}

/// Why a document's index entries could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// The id, the scope or an index value cannot be written into a key.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The list score is NaN or infinite: a sorted set cannot order NaN, and
    /// an infinite score would be indexed while the document text cannot
    /// store it, so nothing is written.
    #[error("the list score of `{type_name}` is {score}; a score must be a finite number")]
    NonFiniteScore {
        /// Document type.
        type_name: &'static str,
        /// The score.
        score: f64,
    },
    /// A multi-valued index was given more distinct values than
    /// [`MAX_EACH_VALUES`]; nothing is written.
    #[error(
        "`{type_name}` gives its index `{index}` {count} values; at most {MAX_EACH_VALUES} are indexed per document"
    )]
    TooManyValues {
        /// Document type.
        type_name: &'static str,
        /// The index.
        index: &'static str,
        /// The distinct values given.
        count: usize,
    },
}

/// One entry of a unique or group index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// The index key (for a multi-valued index, the key of its first value).
    pub key: String,
    /// Hash fields stored with the document for this index (placeholder name,
    /// raw value) so the next write knows which entry to remove.
    pub fields: Vec<(&'static str, String)>,
    /// For a multi-valued index (`each(...)`): the keys of its other values,
    /// in the order of their encoded values; empty for any other index.
    pub more: Vec<String>,
}

impl IndexEntry {
    /// Every key of the entry: one, or one per value of a multi-valued index.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.key.as_str()).chain(self.more.iter().map(String::as_str))
    }

    /// The entry of multi-valued index `index` (whose hash field is named
    /// after it) for `values`: their keys by `key` (given each raw value),
    /// in the order of their encoded values, repeats merged; `None` for no
    /// values. The hash field keeps the encoded values joined by `|`, which
    /// an encoded value never holds, so the keys follow from it alone.
    ///
    /// # Errors
    /// A value that cannot be a key segment; more than [`MAX_EACH_VALUES`]
    /// distinct values.
    pub fn each(
        type_name: &'static str,
        index: &'static str,
        values: Vec<Cow<'_, str>>,
        key: impl Fn(&str) -> Result<String, KeyError>,
    ) -> Result<Option<IndexEntry>, IndexError> {
        // Each value's key first: rendering it checks the value.
        let mut pairs: Vec<(String, String)> = Vec::with_capacity(values.len());
        for v in values {
            let k = key(&v)?;
            let e = crate::encode::encode(&v).map_or_else(|_| v.clone().into_owned(), Cow::into_owned);
            pairs.push((e, k));
        }
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        pairs.dedup_by(|a, b| a.0 == b.0);
        if pairs.len() > MAX_EACH_VALUES {
            return Err(IndexError::TooManyValues { type_name, index, count: pairs.len() });
        }
        let text = pairs.iter().map(|(e, _)| e.as_str()).collect::<Vec<_>>().join("|");
        let mut keys = pairs.into_iter().map(|(_, k)| k);
        let Some(first) = keys.next() else { return Ok(None) };
        Ok(Some(IndexEntry { key: first, fields: vec![(index, text)], more: keys.collect() }))
    }
}

/// The list entry of a document.
#[derive(Debug, Clone, PartialEq)]
pub struct ListEntry {
    /// The list key.
    pub key: String,
    /// Score for a sorted-set list, `None` for a plain set.
    pub score: Option<f64>,
}

/// Every key a document occupies, computed from its fields.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexEntries {
    /// Document key.
    pub key: String,
    /// Document id.
    pub id: String,
    /// Scope.
    pub scope: String,
    /// List entry, if the type has a list.
    pub list: Option<ListEntry>,
    /// One per unique index of the spec, in order; `None`: not indexed.
    pub unique: Vec<Option<IndexEntry>>,
    /// One per group index of the spec, in order; `None`: not indexed.
    pub groups: Vec<Option<IndexEntry>>,
}

/// A keyspace: implemented by `keyspace!`.
pub trait Keyspace: Copy + Send + Sync + 'static {
    /// Its document types and key families.
    const SPEC: KeyspaceSpec<'static>;
}

/// A document type listed in the `documents` of keyspace `K`: implemented by
/// `keyspace!`. Stores come from a keyspace handle and only for its members,
/// so every document type in use had its keys checked against the others.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a document type of keyspace `{K}`",
    label = "not listed in the `documents` of `{K}`",
    note = "add `{Self}` to `documents: [...]` in the `keyspace!` of `{K}`, so its keys are checked against every other family"
)]
pub trait InKeyspace<K: Keyspace>: Document {}

/// A document type with a per-scope list (`list(key = ...)`): implemented
/// by `#[derive(Document)]` for those types only.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no list",
    label = "declared without `list(key = ...)`",
    note = "declare a per-scope list on `{Self}` with `#[microdcs(list(key = \"...:{{scope}}\"))]` (add `score = field` for a sorted set)"
)]
pub trait HasList: Document {}

/// A document type whose writes append change entries (every type but
/// those with `changes = none`): implemented by `#[derive(Document)]` for
/// those types only, so consuming the changes of a type without any is a
/// compile error.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no change stream",
    label = "declared with `changes = none`",
    note = "remove `changes = none` from `{Self}` (or give it `changes = \"...:{{scope}}\"`) to consume its changes"
)]
pub trait HasChanges: Document {}

/// A document type with a workflow step (`outbox(stream = "...")`):
/// implemented by `#[derive(Document)]` for those types only, so a step of
/// a type without an outbox is a compile error.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no outbox, so it has no step",
    label = "declared without `outbox(...)`",
    note = "declare the work stream on `{Self}` with `#[microdcs(outbox(stream = \"...:{{scope}}\"))]` (add `events = \"...{{id}}\"` for events applied once)",
    note = "for a write with family effects only (counters, hashes, sets), use `Store::write`, which every document type has"
)]
pub trait HasOutbox: Document {}

/// A document type: implemented by `#[derive(Document)]`. `Send + Sync`, so
/// every store future is `Send` and a store can be shared across tasks.
pub trait Document: Send + Sync {
    /// The spec, checked at compile time.
    const SPEC: DocumentSpec<'static>;

    /// The put (compare-and-set) script, generated from `SPEC` by [`crate::lua::put_script`].
    const PUT_SCRIPT: &'static str;

    /// The delete script, generated by [`crate::lua::delete_script`].
    const DELETE_SCRIPT: &'static str;

    /// The unique-lookup read script, generated by [`crate::lua::find_script`].
    const FIND_SCRIPT: &'static str;

    /// The generated step script (empty for a type without an `outbox`).
    const STEP_SCRIPT: &'static str = "";

    /// The id.
    fn id(&self) -> Cow<'_, str>;

    /// The scope.
    fn scope(&self) -> Cow<'_, str>;

    /// Every key the document occupies (document key, list, indexes).
    ///
    /// # Errors
    /// An id, scope or index value that cannot be a key segment (empty id,
    /// too long), or a score that is not a finite number.
    fn index_entries(&self, prefix: &KeyPrefix) -> Result<IndexEntries, IndexError>;
}

/// A lookup through a unique index of `D`: built by the generated
/// `D::by_<index>(...)` functions, run by the store.
#[derive(Debug, PartialEq, Eq)]
pub struct UniqueQuery<D> {
    index: usize,
    values: Vec<String>,
    _doc: PhantomData<fn() -> D>,
}

// By hand: a query is cloneable whatever `D` is (a derive would ask `D: Clone`).
impl<D> Clone for UniqueQuery<D> {
    fn clone(&self) -> Self {
        UniqueQuery { index: self.index, values: self.values.clone(), _doc: PhantomData }
    }
}

impl<D> UniqueQuery<D> {
    /// For the generated `by_<index>` functions only: they pair the index
    /// position with values of the right number and types, which a
    /// hand-built query could get wrong.
    #[doc(hidden)]
    pub fn new(index: usize, values: Vec<String>) -> Self {
        UniqueQuery { index, values, _doc: PhantomData }
    }

    /// Position of the index in `D::SPEC.unique`.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Placeholder values in template order.
    pub fn values(&self) -> &[String] {
        &self.values
    }
}

/// A query of a group index of `D`: built by the generated
/// `D::by_<index>(...)` functions, run by the store.
#[derive(Debug, PartialEq, Eq)]
pub struct GroupQuery<D> {
    index: usize,
    values: Vec<String>,
    _doc: PhantomData<fn() -> D>,
}

// By hand: a query is cloneable whatever `D` is (a derive would ask `D: Clone`).
impl<D> Clone for GroupQuery<D> {
    fn clone(&self) -> Self {
        GroupQuery { index: self.index, values: self.values.clone(), _doc: PhantomData }
    }
}

impl<D> GroupQuery<D> {
    /// For the generated `by_<index>` functions only: they pair the index
    /// position with values of the right number and types, which a
    /// hand-built query could get wrong.
    #[doc(hidden)]
    pub fn new(index: usize, values: Vec<String>) -> Self {
        GroupQuery { index, values, _doc: PhantomData }
    }

    /// Position of the index in `D::SPEC.groups`.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Placeholder values in template order.
    pub fn values(&self) -> &[String] {
        &self.values
    }
}

/// Closest candidate to `name` by edit distance, for "did you mean" hints.
pub fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.len() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (levenshtein(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Edit distance counting a swap of two neighbours as one edit (`kidn` -> `kind`).
fn levenshtein(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j - 1] + cost).min(d[i - 1][j] + 1).min(d[i][j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_values() {
        assert_eq!("".index_value(), None);
        assert_eq!(String::from("Running").index_value().as_deref(), Some("Running"));
        assert_eq!(None::<String>.index_value(), None);
        assert_eq!(Some(7_u32).index_value().as_deref(), Some("7"));
    }

    #[test]
    fn a_multi_valued_entry_keeps_its_values_encoded_sorted_and_once() {
        use crate::entry::stored_entry_keys;
        use crate::spec::{Binding, IndexSpec, Source};
        use crate::template::{KeyTemplate, RenderError};
        const BY_TAG: &[Binding<'static>] = &[
            Binding { placeholder: "scope", source: Source::Scope },
            Binding { placeholder: "tag", source: Source::Field("tags") },
        ];
        let ix = IndexSpec {
            name: "by_tag",
            key: "t:tag:{scope}:{tag}",
            bindings: BY_TAG,
            when: None,
            score: None,
            max: None,
            each: true,
        };
        let t = KeyTemplate::parse(ix.key).unwrap();
        let p = KeyPrefix::new("p").unwrap();
        let key = |v: &str| {
            t.render(&p, &["s1", v]).map_err(|e| match e {
                RenderError::Value(k) => k,
                other => panic!("{other}"),
            })
        };
        let e = IndexEntry::each("T", "by_tag", vec!["b:c".into(), "a".into(), "a".into()], key).unwrap().unwrap();
        assert_eq!(e.fields, [("by_tag", "a|b%3Ac".to_owned())]);
        // Its keys are what the stored text gives back.
        let stored = stored_entry_keys(&ix, &t, &p, "d1", "s1", |n| (n == "by_tag").then_some("a|b%3Ac")).unwrap();
        assert_eq!(e.keys().collect::<Vec<_>>(), stored);
        assert_eq!(stored, ["p:t:tag:s1:a", "p:t:tag:s1:b%3Ac"]);
        assert_eq!(IndexEntry::each("T", "by_tag", vec![], key).unwrap(), None);
        let many = (0..=MAX_EACH_VALUES).map(|i| i.to_string().into()).collect();
        assert!(matches!(IndexEntry::each("T", "by_tag", many, key), Err(IndexError::TooManyValues { .. })));
    }

    #[test]
    fn suggestions() {
        assert_eq!(suggest("stat", ["state", "scope", "order"]), Some("state"));
        assert_eq!(suggest("xyz", ["state", "scope"]), None);
        assert_eq!(suggest("kidn", ["kind", "key"]), Some("kind"));
    }
}
