//! Which pairs of a keyspace's families the overlap rule has to look at.
//!
//! Comparing every family with every other grows with the square of the
//! keyspace, and `keyspace!` does it in constant evaluation, where each step
//! is slow: a keyspace of 20 document types spent seconds of every build
//! there. Yet two templates can only render the same key if their atoms line
//! up (the same separators in the same places, hash tags in the same places)
//! and, where both start with a literal, the literals agree. So each family
//! gets a bucket key, the families are sorted by it, and only families in the
//! same bucket meet `templates_overlap`, which still decides every pair that
//! is compared.
//!
//! The rule stays complete: everything the bucket key is made of is
//! something `templates_overlap` requires to be equal, and equal inputs hash
//! equally, so a pair the rule would flag is always compared. Unequal inputs
//! that happen to hash alike only cost an extra comparison.
//!
//! Everything is `const`, with storage from the caller (arrays sized by the
//! family count in constant evaluation, vectors at run time), so the
//! compile-time check and [`super::check_keyspace`] share one enumeration.

use crate::spec::{Family, KeyType, KeyspaceSpec, Role};

/// A family and its bucket key.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot<'a> {
    pub(crate) family: Family<'a>,
    /// Hash of the template's layout: its separators and which atoms are hash
    /// tags, and whether it is a channel (channels only meet channels).
    shape: u64,
    /// Hash of the leading literal, never 0; 0 when the template starts with
    /// a placeholder, which can render any leading literal.
    lead: u64,
}

impl Slot<'_> {
    /// Filler for the caller's storage before [`Table::build`] writes it.
    pub(crate) const EMPTY: Slot<'static> = Slot {
        family: Family { owner: "", role: Role::Document, key: "", key_type: KeyType::String, name: "" },
        shape: 0,
        lead: 0,
    };
}

/// The families of a keyspace in declaration order, and the same families
/// sorted by bucket key.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Table<'s, 'a> {
    slots: &'s [Slot<'a>],
    /// Family numbers sorted by `(shape, lead, number)`: a bucket's
    /// placeholder-led families come first, then each leading literal's, each
    /// run in declaration order.
    order: &'s [usize],
    /// Where family `i` is in `order`.
    pos: &'s [usize],
}

/// Where the walk over candidate pairs stands, for family `i`: the next
/// family number to look at in a scan (`i` placeholder-led), or the next
/// positions in `order` of the two runs being merged (`i` literal-led).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PairCursor {
    i: usize,
    started: bool,
    a: usize,
    b: usize,
}

pub(crate) const PAIRS_START: PairCursor = PairCursor { i: 0, started: false, a: 0, b: 0 };

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

const fn fnv(h: u64, byte: u8) -> u64 {
    (h ^ byte as u64).wrapping_mul(FNV_PRIME)
}

/// `(shape, lead)` of a template, read atom by atom exactly as
/// `templates_overlap` reads it (split on `:` and `|`, an atom starting with
/// `{` is a placeholder, `{#` a hash tag), so that any two templates it
/// could find overlapping get the same shape and compatible leads.
const fn bucket_key(template: &str, channel: bool) -> (u64, u64) {
    let t = template.as_bytes();
    let mut shape = fnv(FNV_OFFSET, channel as u8);
    let mut lead = 0;
    let mut i = 0;
    let mut first = true;
    loop {
        let start = i;
        while i < t.len() && t[i] != b':' && t[i] != b'|' {
            i += 1;
        }
        let placeholder = i > start && t[start] == b'{';
        let tag = placeholder && i > start + 1 && t[start + 1] == b'#';
        if first && !placeholder {
            let mut h = FNV_OFFSET;
            let mut k = start;
            while k < i {
                h = fnv(h, t[k]);
                k += 1;
            }
            lead = h | 1;
        }
        first = false;
        let sep = if i < t.len() { t[i] } else { 0 };
        shape = fnv(fnv(shape, tag as u8), sep);
        if sep == 0 {
            return (shape, lead);
        }
        i += 1;
    }
}

impl<'s, 'a> Table<'s, 'a> {
    /// Fills the caller's storage (each at least `ks.family_count()` long)
    /// with the keyspace's families and sorts them into buckets.
    pub(crate) const fn build(
        ks: &KeyspaceSpec<'a>,
        slots: &'s mut [Slot<'a>],
        order: &'s mut [usize],
        pos: &'s mut [usize],
    ) -> Table<'s, 'a> {
        let n = ks.family_count();
        assert!(slots.len() >= n && order.len() >= n && pos.len() >= n, "storage smaller than the family count");
        // Document families in one walk: `ks.family(i)` would walk the
        // documents again for each of them.
        let mut i = 0;
        let mut d = 0;
        while d < ks.documents.len() {
            let doc = &ks.documents[d];
            let mut k = 0;
            while k < doc.family_count() {
                slots[i].family = doc.family(k);
                i += 1;
                k += 1;
            }
            d += 1;
        }
        while i < n {
            slots[i].family = ks.family(i);
            i += 1;
        }
        i = 0;
        while i < n {
            let f = &slots[i].family;
            let (shape, lead) = bucket_key(f.key, matches!(f.key_type, KeyType::Channel));
            slots[i].shape = shape;
            slots[i].lead = lead;
            order[i] = i;
            i += 1;
        }
        heap_sort(slots, order, n);
        i = 0;
        while i < n {
            pos[order[i]] = i;
            i += 1;
        }
        let slots: &'s [Slot<'a>] = slots;
        let order: &'s [usize] = order;
        let pos: &'s [usize] = pos;
        let (slots, _) = slots.split_at(n);
        let (order, _) = order.split_at(n);
        let (pos, _) = pos.split_at(n);
        Table { slots, order, pos }
    }

    /// Family number `i`.
    pub(crate) const fn family(&self, i: usize) -> Family<'a> {
        self.slots[i].family
    }

    /// The next pair `(i, j)`, `i < j`, that could overlap, in the order of
    /// a walk over all pairs (by `i`, then `j`), and the cursor after it.
    /// Families in other buckets are skipped without being looked at; a
    /// returned pair still has to pass `templates_overlap`.
    pub(crate) const fn next_pair(&self, mut c: PairCursor) -> Option<(usize, usize, PairCursor)> {
        let n = self.slots.len();
        while c.i < n {
            let me = &self.slots[c.i];
            if me.lead == 0 {
                // A placeholder-led template can match any template of its
                // shape whatever that one starts with: scan them all.
                if !c.started {
                    c.started = true;
                    c.a = c.i + 1;
                }
                while c.a < n {
                    let j = c.a;
                    c.a += 1;
                    if self.slots[j].shape == me.shape {
                        return Some((c.i, j, c));
                    }
                }
            } else {
                // A literal-led one only those of its shape that start with a
                // placeholder or the same literal: two sorted runs, merged so
                // that pairs come in the same order as in a full walk.
                if !c.started {
                    c.started = true;
                    c.a = self.first_after(me.shape, c.i);
                    c.b = self.pos[c.i] + 1;
                }
                let ja = self.run_member(c.a, me.shape, 0);
                let jb = self.run_member(c.b, me.shape, me.lead);
                if ja < jb {
                    c.a += 1;
                    return Some((c.i, ja, c));
                }
                if jb < n {
                    c.b += 1;
                    return Some((c.i, jb, c));
                }
            }
            c.i += 1;
            c.started = false;
        }
        None
    }

    /// The family at position `p` of `order` if it is in bucket
    /// `(shape, lead)`, else `usize::MAX`.
    const fn run_member(&self, p: usize, shape: u64, lead: u64) -> usize {
        if p < self.order.len() {
            let j = self.order[p];
            if self.slots[j].shape == shape && self.slots[j].lead == lead {
                return j;
            }
        }
        usize::MAX
    }

    /// The first position in `order` at or after which come the
    /// placeholder-led families of `shape` numbered above `i`.
    const fn first_after(&self, shape: u64, i: usize) -> usize {
        let (mut lo, mut hi) = (0, self.order.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let s = &self.slots[self.order[mid]];
            if !less((shape, 0, i), (s.shape, s.lead, self.order[mid])) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

const fn less(a: (u64, u64, usize), b: (u64, u64, usize)) -> bool {
    a.0 < b.0 || (a.0 == b.0 && (a.1 < b.1 || (a.1 == b.1 && a.2 < b.2)))
}

const fn key_of(slots: &[Slot<'_>], i: usize) -> (u64, u64, usize) {
    (slots[i].shape, slots[i].lead, i)
}

/// Sorts `order[..n]` by `(shape, lead, number)`, in place and in
/// `n log n` steps (constant evaluation has no library sort).
const fn heap_sort(slots: &[Slot<'_>], order: &mut [usize], n: usize) {
    let mut start = n / 2;
    while start > 0 {
        start -= 1;
        sift_down(slots, order, start, n);
    }
    let mut end = n;
    while end > 1 {
        end -= 1;
        let top = order[0];
        order[0] = order[end];
        order[end] = top;
        sift_down(slots, order, 0, end);
    }
}

const fn sift_down(slots: &[Slot<'_>], order: &mut [usize], mut root: usize, end: usize) {
    loop {
        let mut child = 2 * root + 1;
        if child >= end {
            return;
        }
        if child + 1 < end && less(key_of(slots, order[child]), key_of(slots, order[child + 1])) {
            child += 1;
        }
        if !less(key_of(slots, order[root]), key_of(slots, order[child])) {
            return;
        }
        let top = order[root];
        order[root] = order[child];
        order[child] = top;
        root = child;
    }
}

#[cfg(test)]
mod tests {
    use super::{PAIRS_START, Slot, Table};
    use crate::spec::{Binding, DocumentSpec, IndexSpec, KeyspaceSpec, ListSpec, Source};

    /// Pairs handed to `templates_overlap`.
    fn compared(ks: &KeyspaceSpec<'_>) -> Vec<(usize, usize)> {
        let n = ks.family_count();
        let (mut slots, mut order, mut pos) = (vec![Slot::EMPTY; n], vec![0; n], vec![0; n]);
        let t = Table::build(ks, &mut slots, &mut order, &mut pos);
        let mut pairs = Vec::new();
        let mut c = PAIRS_START;
        while let Some((i, j, next)) = t.next_pair(c) {
            pairs.push((i, j));
            c = next;
        }
        pairs
    }

    #[test]
    fn twenty_document_types_compare_only_pairs_of_one_type() {
        // The compile-time benchmark's keyspace: 20 types with a list, a
        // unique and a group index each, 84 families (with the tombstones)
        // and 3,486 pairs. Only
        // each type's list and unique index share a shape and a leading
        // literal; everything else is told apart by its bucket.
        let texts: Vec<[String; 5]> = (0..20)
            .map(|i| {
                let k = format!("doc{i:02}");
                [
                    format!("{k}:{{id}}"),
                    format!("{k}:list:{{scope}}"),
                    format!("{k}:bycode:{{code}}"),
                    format!("{k}:bystate:{{scope}}:{{state}}"),
                    k,
                ]
            })
            .collect();
        const CODE: [Binding<'static>; 1] = [Binding { placeholder: "code", source: Source::Field("code") }];
        const STATE: [Binding<'static>; 2] = [
            Binding { placeholder: "scope", source: Source::Scope },
            Binding { placeholder: "state", source: Source::Field("state") },
        ];
        let unique: Vec<[IndexSpec<'_>; 1]> = texts
            .iter()
            .map(|t| {
                [IndexSpec {
                    name: "by_code",
                    key: &t[2],
                    bindings: &CODE,
                    when: None,
                    score: None,
                    max: None,
                    each: false,
                }]
            })
            .collect();
        let groups: Vec<[IndexSpec<'_>; 1]> = texts
            .iter()
            .map(|t| {
                [IndexSpec {
                    name: "by_state",
                    key: &t[3],
                    bindings: &STATE,
                    when: None,
                    score: None,
                    max: None,
                    each: false,
                }]
            })
            .collect();
        let docs: Vec<DocumentSpec<'_>> = texts
            .iter()
            .zip(unique.iter().zip(&groups))
            .map(|(t, (u, g))| DocumentSpec {
                list: Some(ListSpec { key: &t[1], score: None }),
                unique: u,
                groups: g,
                ..DocumentSpec::new(&t[4], &t[4], &t[0])
            })
            .collect();
        let ks = KeyspaceSpec { name: "Bench", documents: &docs, families: &[], shard: None };
        assert_eq!(ks.family_count(), 84);
        let pairs = compared(&ks);
        assert_eq!(pairs, (0..20).map(|d| (4 * d + 1, 4 * d + 2)).collect::<Vec<_>>());
    }
}
