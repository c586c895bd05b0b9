//! The schema lock of a keyspace: a committed file, checked by a test that
//! needs no server, that fails when a change would break stored data.
//!
//! A keyspace's stored data depends on more than the code says at a glance:
//! a document stored with `CompactJson` holds its values by field
//! position, a document key template names where every stored document
//! is, an index's layout says what its entries mean. The lock
//! ([`microdcs_schema::lock`]) writes those facts down, one a line, and
//! [`check`] compares them with the build:
//!
//! ```no_run
//! # microdcs_valkey::keyspace! { pub Plant { documents: [] , seen: hash("seen:{pod}") } }
//! #[test]
//! fn schema_lock() {
//!     microdcs_valkey::lock::assert_current::<Plant>("microdcs.lock");
//! }
//! ```
//!
//! The test fails while the lock and the code differ, with every change,
//! its class and its fix:
//! - **safe** (a new type, an appended field, a new family, a lifetime):
//!   re-bless with `BLESS=1`;
//! - **rebuild** (a new index, a changed index layout): re-bless with
//!   `BLESS=1`, and rebuild the index after the deploy;
//! - **breaking** (a reordered, inserted or removed field, a changed
//!   document key or family template, a removed type): `BLESS=1` refuses to
//!   rewrite the lock; do the fix named (append fields instead, or a copy
//!   migration), then `BLESS=force` records the new shape.
//!
//! A relative path is taken from the working directory, which under
//! `cargo test` is the crate's directory. A missing lock fails too (with
//! `BLESS=1` it is written), so a keyspace cannot lose its lock unnoticed.
//!
//! The codec is a store's choice at open time, not the type's, so the lock
//! cannot see which types are stored by position: it treats the field order
//! of every type as stored. For a type only ever stored as [`Json`]
//! (`crate::store::Json`), a reorder is harmless and `BLESS=force` accepts it.
//!
//! [`Json`]: crate::store::Json

use std::path::{Path, PathBuf};

use microdcs_schema::{Keyspace, KeyspaceSpec};

pub use microdcs_schema::lock::{
    ChangeClass, LOCK_FORMAT, Lock, LockChange, LockDiff, LockParseError, LockedFamily, LockedKind,
};

/// Whether a check may rewrite the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bless {
    /// Only compare.
    No,
    /// Rewrite the lock unless a change breaks stored data (`BLESS=1`).
    Safe,
    /// Rewrite the lock whatever changed (`BLESS=force`): after the fix a
    /// breaking change names is done.
    Force,
}

impl Bless {
    /// From the `BLESS` environment variable: unset, empty or `0` is
    /// [`Bless::No`], `force` is [`Bless::Force`], anything else
    /// [`Bless::Safe`] (as the workspace's snapshot tests read it).
    pub fn from_env() -> Self {
        match std::env::var("BLESS") {
            Err(_) => Bless::No,
            Ok(v) if v.is_empty() || v == "0" => Bless::No,
            Ok(v) if v.eq_ignore_ascii_case("force") => Bless::Force,
            Ok(_) => Bless::Safe,
        }
    }
}

/// What a passing check found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockStatus {
    /// The lock matches the code.
    Current,
    /// The lock was (re)written, with these changes from what it held
    /// (empty for a new lock).
    Written(LockDiff),
}

/// Why a check failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// No lock at the path.
    #[error("no schema lock at {}: write it with BLESS=1 and commit it", path.display())]
    Missing {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The lock could not be read or written.
    #[error("schema lock {}: {source}", path.display())]
    Io {
        /// The lock's path.
        path: PathBuf,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a lock this version reads (it is rewritten only with
    /// `BLESS=force`).
    #[error("{} is no schema lock this version reads: {source}", path.display())]
    Corrupt {
        /// The lock's path.
        path: PathBuf,
        /// Where and why.
        #[source]
        source: LockParseError,
    },
    /// The lock and the code differ ([`LockDiff::report`] says how and
    /// what to do).
    #[error("schema lock {} is not the code's:\n{}", path.display(), diff.report())]
    Outdated {
        /// The lock's path.
        path: PathBuf,
        /// Every change, with its class and fix.
        diff: LockDiff,
    },
}

/// Compares the lock at `path` with keyspace `K`, rewriting it as the
/// `BLESS` environment variable allows ([`Bless::from_env`]).
///
/// # Errors
/// [`LockError::Outdated`] when the lock and the code differ (and the
/// change was not blessed), [`LockError::Missing`], [`LockError::Corrupt`],
/// [`LockError::Io`].
pub fn check<K: Keyspace>(path: impl AsRef<Path>) -> Result<LockStatus, LockError> {
    check_spec(&K::SPEC, path.as_ref(), Bless::from_env())
}

/// [`check`], panicking with the report: the one line of a user's test.
///
/// # Panics
/// When [`check`] fails; the message lists every change and its fix.
pub fn assert_current<K: Keyspace>(path: impl AsRef<Path>) {
    if let Err(e) = check::<K>(path) {
        panic!("{e}");
    }
}

/// Compares the lock at `path` with `spec`, rewriting it as `bless` allows.
///
/// # Errors
/// As [`check`].
pub fn check_spec(spec: &KeyspaceSpec<'_>, path: &Path, bless: Bless) -> Result<LockStatus, LockError> {
    let code = Lock::of(spec);
    let io = |source| LockError::Io { path: path.to_owned(), source };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(e)),
    };
    let diff = match text.as_deref().map(Lock::parse) {
        None if bless == Bless::No => return Err(LockError::Missing { path: path.to_owned() }),
        None => LockDiff::default(),
        Some(Err(source)) if bless != Bless::Force => {
            return Err(LockError::Corrupt { path: path.to_owned(), source });
        }
        Some(Err(_)) => LockDiff::default(),
        Some(Ok(locked)) => {
            let diff = LockDiff::between(&locked, &code);
            // A lock that reads as the code but is not its text (comments
            // edited, lines moved) is rewritten by a bless only.
            if diff.is_empty() && (bless == Bless::No || text.as_deref() == Some(code.render().as_str())) {
                return Ok(LockStatus::Current);
            }
            diff
        }
    };
    let allowed = match bless {
        Bless::No => false,
        Bless::Safe => diff.worst() != Some(ChangeClass::Breaking),
        Bless::Force => true,
    };
    if !allowed {
        return Err(LockError::Outdated { path: path.to_owned(), diff });
    }
    write(path, &code.render()).map_err(io)?;
    Ok(LockStatus::Written(diff))
}

/// Writes through a file beside the lock and a rename, so an interrupted
/// bless leaves the old lock or the new one, never half of one.
fn write(path: &Path, text: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}
