//! The values the store takes and returns.

use std::fmt;

use microdcs_schema::lua::MAX_VERSION;

/// What the writer expects to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// The document must not exist yet.
    Create,
    /// The stored version must be this one.
    Version(u64),
    /// Overwrite whatever is stored (still within the document's scope).
    Any,
}

/// What a delete expects to find: a delete has no `Create` (there is
/// nothing to delete that must not exist), so that cannot be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteExpect {
    /// The stored version must be this one.
    Version(u64),
    /// Delete whatever version is stored.
    Any,
}

/// The outcome of a put. Errors (wrong scope, unique violation, corrupt
/// hash) are [`Error`](crate::Error)s; these are the expected outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum PutOutcome {
    /// Written; the document now has this version.
    Written {
        /// The new version: 1 after the first create; a document created
        /// again while the tombstone of its delete lasts goes on from the
        /// deleted version, so a read of the old one never matches it.
        version: u64,
    },
    /// The expected version did not match; nothing was written.
    Conflict {
        /// The stored version.
        current: u64,
    },
    /// `Expect::Version` of a document that does not exist.
    NotFound,
}

/// The outcome of a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum DeleteOutcome {
    /// Deleted; this was its last version.
    Deleted {
        /// The version the document had.
        version: u64,
    },
    /// The expected version did not match; nothing was deleted.
    Conflict {
        /// The stored version.
        current: u64,
    },
    /// No such document.
    NotFound,
}

pub(crate) use crate::page::PageAt;
pub use crate::page::{IdPage, Page};

/// What was read of a stored document: enough to update or delete it in one
/// round trip (its version and the index fields the next write must remove).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct ReadState {
    pub(super) exists: bool,
    pub(super) version: u64,
    pub(super) scope: Option<String>,
    /// Aligned with `Plan::fields`.
    pub(super) fields: Vec<Option<String>>,
    pub(super) ops: String,
}

impl ReadState {
    /// The state of a document that does not exist, with `fields` index fields.
    pub(super) fn missing(fields: usize) -> Self {
        ReadState { fields: vec![None; fields], ..ReadState::default() }
    }
}

/// A document as read from the store.
#[derive(Clone, PartialEq)]
pub struct Stored<D> {
    /// The document.
    pub doc: D,
    /// Its version.
    pub version: u64,
    /// Its id.
    pub id: String,
    /// Its scope.
    pub scope: String,
    pub(super) state: ReadState,
}

/// Who a read is of, as a write that takes it checks: the id and scope
/// the caller holds, and the scope the store actually read.
#[derive(Debug, Clone, Copy)]
pub(super) struct ReadIdentity<'a> {
    id: &'a str,
    scope: &'a str,
    stored_scope: Option<&'a str>,
}

impl ReadIdentity<'_> {
    /// Refuses a write of document (`id`, `scope`) with this read: another
    /// id is [`Error::ReadMismatch`]; another scope (the caller's or the
    /// one stored) is [`Error::InvalidArgument`], since for ids unique per
    /// scope the same id names another tenant's document.
    pub(super) fn check(&self, id: &str, scope: &str) -> crate::error::Result<()> {
        if self.id != id {
            return Err(crate::error::Error::ReadMismatch { read: self.id.to_owned(), doc: id.to_owned() });
        }
        let stored = self.stored_scope.unwrap_or(self.scope);
        if self.scope != scope || stored != scope {
            return Err(crate::error::Error::InvalidArgument(format!(
                "the read of `{id}` is of scope `{stored}`, the document of scope `{scope}`: \
                 pass the read of the same document in the same scope"
            )));
        }
        Ok(())
    }
}

impl<D> Stored<D> {
    pub(super) fn identity(&self) -> ReadIdentity<'_> {
        ReadIdentity {
            id: &self.id,
            scope: &self.scope,
            stored_scope: self.state.exists.then_some(self.state.scope.as_deref()).flatten(),
        }
    }
}

impl<D: fmt::Debug> fmt::Debug for Stored<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stored")
            .field("id", &self.id)
            .field("scope", &self.scope)
            .field("version", &self.version)
            .field("doc", &self.doc)
            .finish_non_exhaustive()
    }
}

/// A stored version, or `None` when `v` is not one: `1 ..= 2^53 - 1`
/// ([`MAX_VERSION`]) in decimal, without sign, leading zero or anything
/// else. The one reading of a version in the crate (reads, writes and index
/// verification), and the same grammar the scripts check, so a hash the
/// scripts call corrupt is never read as a document and the other way round.
pub(crate) fn parse_version(v: Option<&str>) -> Option<u64> {
    let v = v?;
    let b = v.as_bytes();
    if b.is_empty() || b.len() > MAX_DIGITS || b[0] == b'0' || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    v.parse::<u64>().ok().filter(|n| *n <= MAX_VERSION)
}

/// Digits of [`MAX_VERSION`].
const MAX_DIGITS: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(MAX_VERSION.to_string().len(), MAX_DIGITS);
        assert_eq!(parse_version(Some("3")), Some(3));
        assert_eq!(parse_version(Some("10")), Some(10));
        assert_eq!(parse_version(Some("9007199254740991")), Some(MAX_VERSION));
        for bad in [
            "0",
            "x",
            "",
            "007",
            "+5",
            "-1",
            " 5",
            "5 ",
            "5.0",
            "1e3",
            "9007199254740992",
            "18446744073709551615",
            "99999999999999999999",
            "\u{0663}",
        ] {
            assert_eq!(parse_version(Some(bad)), None, "{bad:?}");
        }
        assert_eq!(parse_version(None), None);
    }
}
