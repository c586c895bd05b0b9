//! A keyspace's spec: its document types and declared families, and the
//! enumeration of every family (document, declared, implicit shared) the
//! compile-time checks walk.

use super::{DocumentSpec, Family, FamilySpec, KeyType, Role, SHARED, str_eq};

/// All document types and other key families of one application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyspaceSpec<'a> {
    /// Keyspace name, for messages.
    pub name: &'a str,
    /// Document types.
    pub documents: &'a [DocumentSpec<'a>],
    /// Non-document families (dedupe, locks, streams, counters, channels, ...).
    pub families: &'a [FamilySpec<'a>],
    /// `Some("scope")` for a keyspace sharded by scope (`shard: scope`):
    /// every document type in it must be sharded
    /// ([`DocumentSpec::is_sharded`]), so no generated script spans slots.
    pub shard: Option<&'a str>,
}

impl<'a> KeyspaceSpec<'a> {
    /// Number of families: every document family, then the declared ones.
    pub const fn family_count(&self) -> usize {
        let mut n = self.families.len();
        let mut d = 0;
        while d < self.documents.len() {
            n += self.documents[d].family_count();
            d += 1;
        }
        let mut b = 0;
        while b < SHARED.len() {
            if self.implicit(b) {
                n += 1;
            }
            b += 1;
        }
        n
    }

    /// Family number `i` (`0..family_count()`): every document family, the
    /// declared families, then the implicit shared ones.
    pub const fn family(&self, mut i: usize) -> Family<'a> {
        let mut d = 0;
        while d < self.documents.len() {
            let n = self.documents[d].family_count();
            if i < n {
                return self.documents[d].family(i);
            }
            i -= n;
            d += 1;
        }
        if i < self.families.len() {
            let f = &self.families[i];
            return Family {
                owner: self.name,
                role: Role::Declared(f.name),
                key: f.key,
                key_type: f.key_type,
                name: f.name,
            };
        }
        i -= self.families.len();
        let mut b = 0;
        loop {
            if self.implicit(b) {
                if i == 0 {
                    let f = &SHARED[b];
                    return Family {
                        owner: self.name,
                        role: Role::Declared(f.name),
                        key: f.key,
                        key_type: f.key_type,
                        name: f.name,
                    };
                }
                i -= 1;
            }
            b += 1;
        }
    }

    /// Whether shared family `SHARED[b]` (the default change stream, nudge
    /// channel, scope registry, or the tombstones) belongs to the keyspace without being
    /// declared: a document type uses it and no declared family is it.
    /// A keyspace of document types on the defaults is then one line, and
    /// the overlap check still covers those keys.
    const fn implicit(&self, b: usize) -> bool {
        let shared = &SHARED[b];
        let mut f = 0;
        while f < self.families.len() {
            if str_eq(self.families[f].key, shared.key) && self.families[f].key_type as u8 == shared.key_type as u8 {
                return false;
            }
            f += 1;
        }
        let mut d = 0;
        while d < self.documents.len() {
            let doc = &self.documents[d];
            let used = match b {
                0 | 4 => doc.changes_text(),
                1 | 6 => doc.nudge_text(),
                2 => doc.registry,
                3 if !doc.is_sharded() => return true,
                5 if doc.is_sharded() => return true,
                _ => "",
            };
            if str_eq(used, shared.key) {
                return true;
            }
            d += 1;
        }
        false
    }

    /// Whether the keyspace holds a family with exactly this template and
    /// type, declared or implicit.
    pub const fn has_family(&self, template: &str, key_type: KeyType) -> bool {
        let mut f = 0;
        while f < self.families.len() {
            let fam = &self.families[f];
            if str_eq(fam.key, template) && fam.key_type as u8 == key_type as u8 {
                return true;
            }
            f += 1;
        }
        let mut b = 0;
        while b < SHARED.len() {
            if self.implicit(b) && str_eq(SHARED[b].key, template) && SHARED[b].key_type as u8 == key_type as u8 {
                return true;
            }
            b += 1;
        }
        false
    }

    /// All families.
    pub fn all_families(&self) -> impl Iterator<Item = Family<'a>> + '_ {
        (0..self.family_count()).map(|i| self.family(i))
    }

    /// The declared family with this name.
    pub fn declared(&self, name: &str) -> Option<&FamilySpec<'a>> {
        self.families.iter().find(|f| f.name == name)
    }
}
