//! The runtime's error type.

use std::fmt;

use microdcs_schema::{IndexError, KeyError, PrefixError};

/// Errors of the runtime. Expected outcomes of a compare-and-set (stale
/// version, missing document) are not errors: see [`crate::PutOutcome`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A command failed (server error or connection problem).
    #[error("valkey: {0}")]
    Redis(#[from] redis::RedisError),
    /// A write's outcome stayed unknown after every attempt.
    #[error("the outcome of a write to `{key}` is unknown after {attempts} attempt(s): {source}")]
    UnknownOutcome {
        /// Document key.
        key: String,
        /// Attempts made.
        attempts: u32,
        /// The last connection error.
        source: redis::RedisError,
    },
    /// A write that waited for replicas ([`crate::config::Durability`]) *was*
    /// applied, at `version`, but fewer copies than asked acknowledged it:
    /// it is on the primary and may be lost if the primary fails before
    /// the replicas catch up. A repeat with the same operation id is
    /// recognised (it does not write again) and waits once more.
    #[error("`{key}` was written at version {version}, but {reason}: a failover now may lose the write")]
    NotReplicated {
        /// Document key.
        key: String,
        /// The version the write produced (for a delete, the version deleted).
        version: u64,
        /// Replicas that acknowledged it.
        acked: u32,
        /// Replicas asked for.
        wanted: u32,
        /// What fell short, in words (the count and the timeout, or the
        /// server's refusal of the wait).
        reason: String,
    },
    /// The primary refused the write because too few replicas are in
    /// reach (`min-replicas-to-write`, server code `NOREPLICAS`); nothing
    /// was written.
    #[error("`{key}` not written: the server has too few replicas in reach (min-replicas-to-write): {source}")]
    NoReplicas {
        /// Document key.
        key: String,
        /// The server's refusal.
        source: redis::RedisError,
    },
    /// The document id is stored under another scope; nothing was written.
    #[error("document `{id}` belongs to scope `{stored}`, not `{given}`; nothing was written")]
    WrongScope {
        /// Document id.
        id: String,
        /// The scope it is stored under.
        stored: String,
        /// The scope of this write.
        given: String,
    },
    /// A unique index key is held by another document; nothing was written.
    #[error("unique index `{index}` of `{type_name}`: key `{key}` is held by `{holder}`; nothing was written")]
    UniqueViolation {
        /// Document type.
        type_name: &'static str,
        /// Index name.
        index: String,
        /// The contested key.
        key: String,
        /// The id holding it.
        holder: String,
    },
    /// The document was last written by a newer release of its type (its
    /// schema stamp is `stored`, this release's `#[microdcs(schema)]` is
    /// `ours`); nothing was written. That release stores fields and index
    /// entries this one does not know, and a write from here would erase
    /// them. Finish the rolling deploy (or route writes of this document to
    /// the new release); reads are unaffected. See the guide's "Evolving a
    /// type".
    #[error(
        "a document of kind `{kind}` was written by schema {stored}, newer than this release's schema {ours}; \
         nothing was written"
    )]
    SchemaBehind {
        /// The document kind.
        kind: &'static str,
        /// The schema that last wrote the document.
        stored: u32,
        /// This release's schema.
        ours: u32,
    },
    /// A query through an index that is building: a release added or
    /// changed it, and no backfill has completed it yet
    /// ([`crate::Store::backfill`]). It is refused rather than answered from
    /// a partial index; nothing was read.
    #[error("index `{index}` of kind `{kind}` is building (added or changed by this release): run a backfill")]
    IndexBuilding {
        /// The document kind.
        kind: &'static str,
        /// The index name.
        index: String,
    },
    /// A stored hash is not a valid document.
    #[error("corrupt document at `{key}`: {reason}")]
    Corrupt {
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A key holds the wrong Valkey type for its family.
    #[error("wrong type at `{key}`: {detail}")]
    WrongType {
        /// The key (the document key for script errors: the script names the key it failed on).
        key: String,
        /// The server's message.
        detail: String,
    },
    /// The codec could not encode or decode a document.
    #[error("cannot {action} {kind} `{id}`: {source}")]
    Codec {
        /// `encode` or `decode`.
        action: &'static str,
        /// The document kind.
        kind: &'static str,
        /// The document id.
        id: String,
        /// The codec's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A key could not be built (empty or over-long value).
    #[error(transparent)]
    Key(#[from] KeyError),
    /// A document's index entries could not be computed.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// An invalid key prefix.
    #[error(transparent)]
    Prefix(#[from] PrefixError),
    /// A caller-supplied operation id is not 1 to 64 of `[A-Za-z0-9_.:-]`.
    #[error("invalid operation id {0:?}: use 1 to 64 of [A-Za-z0-9_.:-]")]
    InvalidOpId(String),
    /// Index fields kept changing under a write (another writer moved the
    /// document between every read and write).
    #[error("`{key}`: index fields changed under the write {attempts} times in a row")]
    Contention {
        /// Document key.
        key: String,
        /// Reads tried.
        attempts: u32,
    },
    #[cfg(feature = "coordination")]
    #[cfg_attr(docsrs, doc(cfg(feature = "coordination")))]
    /// The lease expired or was taken over; it cannot be renewed.
    #[error("lease `{name}` (token {token}) is no longer held")]
    LeaseLost {
        /// Lease name.
        name: String,
        /// The token of the lost grant.
        token: u64,
    },
    #[cfg(feature = "coordination")]
    #[cfg_attr(docsrs, doc(cfg(feature = "coordination")))]
    /// Release of a lease this grant does not hold.
    #[error("lease `{name}` (token {token}) is not held by this grant")]
    LeaseNotHeld {
        /// Lease name.
        name: String,
        /// The token of the grant.
        token: u64,
    },
    #[cfg(feature = "coordination")]
    #[cfg_attr(docsrs, doc(cfg(feature = "coordination")))]
    /// A fenced write with a token older than the newest issued.
    #[error("write to `{name}` with token {token} refused: token {highest} was issued since")]
    Fenced {
        /// Lease name.
        name: String,
        /// The stale token.
        token: u64,
        /// The highest token issued.
        highest: u64,
    },
    #[cfg(feature = "coordination")]
    #[cfg_attr(docsrs, doc(cfg(feature = "coordination")))]
    /// The lease state is corrupt; nothing was changed (fails closed).
    #[error("lease `{name}` state is corrupt: {reason}; nothing changed (release cleans it up)")]
    LeaseCorrupt {
        /// Lease name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    #[cfg(feature = "coordination")]
    #[cfg_attr(docsrs, doc(cfg(feature = "coordination")))]
    /// A request id reused with different arguments.
    #[error("request id `{request_id}` was used before with different arguments")]
    RequestConflict {
        /// The request id.
        request_id: String,
    },
    /// An argument outside its allowed range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A document type used on a handle whose placement does not suit it
    /// (the `Placement` setting and the key prefix): a type sharded by
    /// scope on an island, where every scope would share the island's one
    /// slot, or a type that is not sharded on a handle with
    /// `Placement=sharded`, whose scripts' keys would span slots. Refused
    /// before anything is sent.
    #[error("document type `{type_name}` does not suit this handle's placement: {reason}")]
    Placement {
        /// The document type.
        type_name: &'static str,
        /// Why, and the setting that fixes it.
        reason: String,
    },
    /// The server refused a command an operation needs (`NOPERM`): the
    /// user lacks the rules of the role that operation belongs to. Nothing
    /// was written.
    #[error(
        "{operation} needs the {role} role: connect as a user with its ACL rules (`AclRole`); the server said: {source}"
    )]
    NoPermission {
        /// The operation refused (`verify`, `rebuild`).
        operation: &'static str,
        /// The role whose rules it needs, by name (`maintenance`).
        role: &'static str,
        /// The server's refusal.
        source: redis::RedisError,
    },
    /// `update` was given the read of another document.
    #[error("update of `{doc}` with the read of `{read}`: pass the read of the same document")]
    ReadMismatch {
        /// Id of the read document.
        read: String,
        /// Id of the document being written.
        doc: String,
    },
    /// A script replied with something the runtime does not understand.
    #[error("unexpected reply from the {script} script: {reply}")]
    Protocol {
        /// Which script.
        script: &'static str,
        /// The reply, shortened.
        reply: String,
    },
    #[cfg(feature = "consumers")]
    #[cfg_attr(docsrs, doc(cfg(feature = "consumers")))]
    /// A callback of yours failed (the due sweep's, for one scope).
    #[error("the {what} callback failed for scope `{scope}`: {source}")]
    Callback {
        /// Which callback.
        what: &'static str,
        /// The scope it was called for.
        scope: String,
        /// Its error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl Error {
    /// Whether the connection was lost, refused or timed out (the command
    /// may or may not have run); [`Error::UnknownOutcome`] included.
    pub fn is_connection(&self) -> bool {
        match self {
            Error::Redis(e) | Error::UnknownOutcome { source: e, .. } => {
                is_unknown_outcome(e) || e.kind() == redis::ErrorKind::ClusterConnectionNotFound
            }
            _ => false,
        }
    }

    /// Whether a reply did not come within the response timeout.
    pub fn is_timeout(&self) -> bool {
        match self {
            Error::Redis(e) | Error::UnknownOutcome { source: e, .. } => e.is_timeout(),
            _ => false,
        }
    }

    /// Whether a write's outcome stayed unknown after every attempt: it may
    /// or may not have been applied (read the document to find out, or
    /// repeat it with the same operation id).
    pub fn is_unknown_outcome(&self) -> bool {
        matches!(self, Error::UnknownOutcome { .. })
    }

    /// Whether the server refused the credentials or their permissions:
    /// also a command the ACL refuses inside one of our scripts, which the
    /// server reports as an `ERR` whose message starts `ACL failure in
    /// script`. Scripts do not roll back: a refused read fails a write
    /// script before its first write, but a refused write command (a
    /// `PUBLISH` the user's channel rules refuse comes last) may follow
    /// writes that stay. Give the user every command and channel of its
    /// [`AclRole`](crate::acl::AclRole); read the document to learn what a
    /// refused write left.
    pub fn is_auth(&self) -> bool {
        match self {
            Error::Redis(e) => {
                e.kind() == redis::ErrorKind::AuthenticationFailed
                    || matches!(e.code(), Some("NOAUTH" | "WRONGPASS" | "NOPERM"))
                    || is_acl_failure_in_script(e)
            }
            Error::NoPermission { .. } => true,
            _ => false,
        }
    }

    /// `self`, or [`Error::NoPermission`] naming `operation` and `role`
    /// when the server refused a command for the user's ACL (its `NOPERM`,
    /// matched by code, or a refusal inside a script).
    #[cfg(feature = "maintenance")]
    pub(crate) fn needing_role(self, operation: &'static str, role: &'static str) -> Self {
        match self {
            Error::Redis(e) if e.code() == Some("NOPERM") || is_acl_failure_in_script(&e) => {
                Error::NoPermission { operation, role, source: e }
            }
            other => other,
        }
    }

    /// Whether someone else's state refused the call: a unique key held by
    /// another document, index fields that kept moving, a newer fencing
    /// token, a lease taken over, a request id reused.
    pub fn is_conflict(&self) -> bool {
        match self {
            Error::UniqueViolation { .. } | Error::Contention { .. } => true,
            #[cfg(feature = "coordination")]
            Error::Fenced { .. }
            | Error::LeaseLost { .. }
            | Error::LeaseNotHeld { .. }
            | Error::RequestConflict { .. } => true,
            _ => false,
        }
    }

    /// Whether stored data is damaged (a hash that is no valid document, a
    /// document text the codec cannot decode, a key of the wrong type,
    /// corrupt lease state); nothing was written.
    pub fn is_corrupt(&self) -> bool {
        match self {
            Error::Corrupt { .. } | Error::WrongType { .. } | Error::Codec { action: "decode", .. } => true,
            #[cfg(feature = "coordination")]
            Error::LeaseCorrupt { .. } => true,
            _ => false,
        }
    }

    /// Whether the caller passed something invalid (an argument, an id, an
    /// operation id, a read of another document, an id of another scope).
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            Error::InvalidArgument(_)
                | Error::Placement { .. }
                | Error::InvalidOpId(_)
                | Error::Key(_)
                | Error::Prefix(_)
                | Error::ReadMismatch { .. }
                | Error::WrongScope { .. }
                | Error::Index(_)
        )
    }

    /// Maps a server error about `key`: a wrong-type key (recognised by the
    /// error code, never by the message) is [`Error::WrongType`], and a
    /// reply that does not parse as what the key should hold (bytes that
    /// are not UTF-8 text, say) is [`Error::Corrupt`].
    pub(crate) fn from_redis(e: redis::RedisError, key: &str) -> Self {
        if matches!(e.kind(), redis::ErrorKind::Parse | redis::ErrorKind::UnexpectedReturnType) {
            return Error::Corrupt { key: key.to_owned(), reason: format!("a stored value cannot be read: {e}") };
        }
        if e.code() == Some("WRONGTYPE") {
            Error::WrongType { key: key.to_owned(), detail: e.to_string() }
        } else if e.code() == Some("NOREPLICAS") {
            Error::NoReplicas { key: key.to_owned(), source: e }
        } else {
            Error::Redis(e)
        }
    }

    /// A codec failure on document `id` of `kind`; `action` is `encode`
    /// or `decode`.
    pub(crate) fn codec(
        action: &'static str,
        kind: &'static str,
        id: &str,
    ) -> impl FnOnce(Box<dyn std::error::Error + Send + Sync>) -> Self {
        move |source| Error::Codec { action, kind, id: id.to_owned(), source }
    }
}

/// The server's refusal of a command inside a script by the ACL: code
/// `ERR`, message prefix `ACL failure in script` (the form Valkey and Redis
/// document for `redis.call` under ACL rules).
pub(crate) fn is_acl_failure_in_script(e: &redis::RedisError) -> bool {
    const PREFIX: &str = "ACL failure in script";
    match e.code() {
        Some("ERR") | None => e.detail().is_some_and(|d| d.trim_start().starts_with(PREFIX)),
        _ => false,
    }
}

/// A template that could not be rendered: a bad value is [`Error::Key`],
/// the wrong number of values the caller's [`Error::InvalidArgument`].
pub(crate) fn render_err(e: microdcs_schema::RenderError) -> Error {
    match e {
        microdcs_schema::RenderError::Value(k) => Error::Key(k),
        // The wrong number of values for a template: a caller's mistake.
        other => Error::InvalidArgument(other.to_string()),
    }
}

/// Whether a failed command may or may not have run on the server.
pub(crate) fn is_unknown_outcome(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_timeout() || e.is_connection_dropped()
}

/// Whether a server's answer proves the command did not run, so sending it
/// again is safe even for a command that must run at most once: the key's
/// slot is served elsewhere (`MOVED`, `ASK`) or being moved (`TRYAGAIN`),
/// the cluster or the node's primary is down (`CLUSTERDOWN`,
/// `MASTERDOWN`), the node is a replica (`READONLY`, as after a failover)
/// or still loading its data (`LOADING`). Judged by the error's code. A
/// cluster connection with no connection to the slot's node (right after
/// the node died) did not send the command either.
pub(crate) fn did_not_run(e: &redis::RedisError) -> bool {
    use redis::ServerErrorKind as K;
    matches!(
        e.kind(),
        redis::ErrorKind::Server(
            K::Moved | K::Ask | K::TryAgain | K::ClusterDown | K::MasterDown | K::ReadOnly | K::BusyLoading
        ) | redis::ErrorKind::ClusterConnectionNotFound
    )
}

/// Shortens a reply for an error message.
pub(crate) fn short(v: &impl fmt::Debug) -> String {
    let mut s = format!("{v:?}");
    if s.len() > 200 {
        let mut cut = 200;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The error of a write sent once: a lost answer is an unknown outcome
/// (it may have run), anything else is mapped by its code.
pub(crate) fn once_error(e: redis::RedisError, key: &str) -> Error {
    if is_unknown_outcome(&e) {
        Error::UnknownOutcome { key: key.to_owned(), attempts: 1, source: e }
    } else {
        Error::from_redis(e, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predicates_sort_errors_by_what_to_do() {
        let auth = Error::Redis(redis::RedisError::from((redis::ErrorKind::AuthenticationFailed, "refused")));
        assert!(auth.is_auth() && !auth.is_connection() && !auth.is_conflict());
        let io = Error::Redis(redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset)));
        assert!(io.is_connection() && !io.is_unknown_outcome() && !io.is_auth());
        let unknown = Error::UnknownOutcome {
            key: "k".into(),
            attempts: 4,
            source: redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut)),
        };
        assert!(unknown.is_unknown_outcome() && unknown.is_connection());
        let held = Error::UniqueViolation { type_name: "T", index: "by_x".into(), key: "k".into(), holder: "h".into() };
        assert!(held.is_conflict() && !held.is_corrupt());
        assert!(Error::Corrupt { key: "k".into(), reason: "r".into() }.is_corrupt());
        assert!(Error::InvalidArgument("x".into()).is_invalid_input());
        let in_script = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
            "An error was signalled by the server",
            "ACL failure in script: User u has no permissions to run the 'exists' command".to_owned(),
        ));
        assert!(Error::Redis(in_script).is_auth());
        let other = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
            "An error was signalled by the server",
            "user_script:1: Script attempted to access nonexistent global variable".to_owned(),
        ));
        assert!(!Error::Redis(other).is_auth());
    }
}
