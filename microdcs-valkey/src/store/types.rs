//! The values the store takes and returns.

use std::fmt;

use microdcs_schema::lua::{MAX_VERSION, OP_ID_ALPHABET, OP_ID_LEN};

/// What the writer expects to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// The document must not exist yet.
    Create,
    /// The stored version must be this one.
    ///
    /// A number alone can be ambiguous after a failover: a write the old
    /// primary acknowledged but no replica had received is gone, and the
    /// next write produces the same version number again, for another
    /// document. Prefer [`Expect::Revision`] (what [`Store::update`] and
    /// [`Store::delete`] use), which a lost write can never match.
    ///
    /// [`Store::update`]: crate::Store::update
    /// [`Store::delete`]: crate::Store::delete
    Version(u64),
    /// The stored document must be this revision: this version, written by
    /// this write ([`Stored::revision`]).
    Revision(Revision),
    /// Overwrite whatever is stored (still within the document's scope).
    Any,
}

/// What a delete expects to find: a delete has no `Create` (there is
/// nothing to delete that must not exist), so that cannot be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteExpect {
    /// The stored version must be this one (see [`Expect::Version`] for
    /// why a [`DeleteExpect::Revision`] is safer).
    Version(u64),
    /// The stored document must be this revision.
    Revision(Revision),
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

/// Which write produced a document: its version and the operation id of
/// that write, the compare-and-set token of [`Expect::Revision`].
///
/// The version alone names a document only while no acknowledged write is
/// lost: after a failover that dropped version `n`, the next writer makes
/// a different version `n`, and a client still holding a read of the lost
/// one would overwrite it unseen. Two writes never share an operation id
/// (a caller's id is recognised as a repeat of itself), so a revision of a
/// lost write matches nothing stored.
///
/// Its text (`Display`, [`str::parse`]) is `<version>.<op>`, or the version
/// alone for a document stored without an operation history (written
/// before histories were kept): fit for an HTTP `ETag`. A revision without
/// an operation compares the version only.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Revision {
    version: u64,
    op: Option<[u8; OP_ID_LEN]>,
}

impl Revision {
    /// The revision of `version`, written by the write whose stored
    /// operation id is `op` (`None` for no history): `None` when either is
    /// not a stored form.
    pub(crate) fn new(version: u64, op: Option<&str>) -> Option<Self> {
        if version == 0 || version > MAX_VERSION {
            return None;
        }
        let op = match op {
            None => None,
            Some(op) => {
                let bytes: [u8; OP_ID_LEN] = op.as_bytes().try_into().ok()?;
                bytes.iter().all(|b| OP_ID_ALPHABET.contains(b)).then_some(bytes)?;
                Some(bytes)
            }
        };
        Some(Revision { version, op })
    }

    /// The revision a stored history ends with: the last id of `ops` wrote
    /// `version`. An empty history (or one the store could not read as
    /// whole ids) gives the version alone.
    pub(crate) fn of_history(version: u64, ops: &str) -> Self {
        let tail = ops.len().checked_sub(OP_ID_LEN).and_then(|at| ops.get(at..));
        Revision::new(version, tail).or_else(|| Revision::new(version, None)).unwrap_or(Revision { version, op: None })
    }

    /// The version.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The stored operation id of the write that produced it (12
    /// characters), if the document keeps a history.
    pub fn op(&self) -> Option<&str> {
        // Only alphabet bytes are ever stored, so this is always UTF-8.
        self.op.as_ref().and_then(|b| std::str::from_utf8(b).ok())
    }

    /// Whether a stored document of this revision meets the expectation
    /// `want`: the same version and, when `want` names its write, the same
    /// write (as the scripts compare).
    pub(crate) fn satisfies(&self, want: &Revision) -> bool {
        self.version == want.version && (want.op.is_none() || self.op == want.op)
    }

    /// The expectation as the scripts take it: `<version>` or
    /// `<version>:<op>`.
    pub(crate) fn script_arg(&self) -> String {
        microdcs_schema::lua::revision_arg(self.version, self.op())
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.op() {
            Some(op) => write!(f, "{}.{op}", self.version),
            None => write!(f, "{}", self.version),
        }
    }
}

impl fmt::Debug for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Revision({self})")
    }
}

/// A text that is not a [`Revision`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a revision (`<version>` or `<version>.<12-character operation id>`)")]
pub struct RevisionParseError;

impl std::str::FromStr for Revision {
    type Err = RevisionParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (v, op) = match s.split_once('.') {
            Some((v, op)) => (v, Some(op)),
            None => (s, None),
        };
        let version = parse_version(Some(v)).ok_or(RevisionParseError)?;
        Revision::new(version, op).ok_or(RevisionParseError)
    }
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
    /// The schema stamp as stored (`sv`; `None`: none, schema 1).
    pub(super) stamp: Option<String>,
}

impl ReadState {
    /// The state of a document that does not exist, with `fields` index fields.
    pub(super) fn missing(fields: usize) -> Self {
        ReadState { fields: vec![None; fields], ..ReadState::default() }
    }

    /// The revision read.
    pub(super) fn revision(&self) -> Revision {
        Revision::of_history(self.version, &self.ops)
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
    /// The revision read: the version and the write that produced it, the
    /// token [`Store::update`](crate::Store::update) and
    /// [`Store::delete`](crate::Store::delete) compare.
    pub fn revision(&self) -> Revision {
        if self.state.exists && self.state.version == self.version {
            self.state.revision()
        } else {
            // The public version was changed by hand: it is what the
            // caller asks for, with no operation to vouch for it.
            Revision::of_history(self.version, "")
        }
    }

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

impl crate::observe::Outcome for PutOutcome {
    fn outcome(&self) -> &'static str {
        match self {
            PutOutcome::Written { .. } => "written",
            PutOutcome::Conflict { .. } => "conflict",
            PutOutcome::NotFound => "not_found",
        }
    }
}

impl crate::observe::Outcome for DeleteOutcome {
    fn outcome(&self) -> &'static str {
        match self {
            DeleteOutcome::Deleted { .. } => "deleted",
            DeleteOutcome::Conflict { .. } => "conflict",
            DeleteOutcome::NotFound => "not_found",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_read_and_print_one_text() {
        let r: Revision = "7.yNNnc5IT1P2r".parse().unwrap();
        assert_eq!((r.version(), r.op()), (7, Some("yNNnc5IT1P2r")));
        assert_eq!(r.to_string(), "7.yNNnc5IT1P2r");
        assert_eq!(r.script_arg(), "7:yNNnc5IT1P2r");
        assert_eq!(format!("{r:?}"), "Revision(7.yNNnc5IT1P2r)");
        let bare: Revision = "12".parse().unwrap();
        assert_eq!(
            (bare.version(), bare.op(), bare.to_string(), bare.script_arg()),
            (12, None, "12".into(), "12".into())
        );
        for bad in [
            "",
            "0",
            "07.yNNnc5IT1P2r",
            "7.",
            "7.short",
            "7.yNNnc5IT1P2r1",
            "7.yNNnc5IT1P2!",
            "7:yNNnc5IT1P2r",
            "x.yNNnc5IT1P2r",
            "9007199254740992",
            " 7",
            "7.yNNnc5IT1P2r.",
        ] {
            assert_eq!(bad.parse::<Revision>(), Err(RevisionParseError), "{bad:?}");
        }
    }

    #[test]
    fn a_revision_is_the_last_write_of_the_history() {
        let ops = "aaaaaaaaaaa1bbbbbbbbbbb2";
        let r = Revision::of_history(5, ops);
        assert_eq!(r.op(), Some("bbbbbbbbbbb2"));
        assert!(r.satisfies(&r));
        assert!(r.satisfies(&Revision::of_history(5, "")), "a bare version compares the version");
        assert!(!r.satisfies(&Revision::of_history(5, "aaaaaaaaaaa1")), "another write of version 5");
        assert!(!r.satisfies(&Revision::of_history(4, ops)));
        assert!(!Revision::of_history(5, "").satisfies(&r), "no history cannot vouch for a write");
        assert_eq!(Revision::of_history(5, "not whole ids").op(), None);
    }

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
