//! What every public operation reports, in one place: a `tracing` span
//! with the database-client attributes, and through the `metrics` facade
//! a count and a duration, labelled by operation, target (the document
//! kind or the family) and outcome. The names follow OpenTelemetry's
//! database-client conventions where one exists; every label has a small,
//! fixed set of values (never an id, a key, a scope or a secret), so a
//! dashboard's series stay bounded.

use std::future::Future;
use std::time::Instant;

use tracing::Instrument;

use crate::error::{Error, Result};

/// `db.client.operation.duration`: seconds per public operation (a
/// histogram), labelled `db.system.name`, `db.operation.name`,
/// `microdcs.target`, `microdcs.outcome` and `error.type`.
pub const OPERATION_DURATION: &str = "db.client.operation.duration";
/// `microdcs.valkey.operations`: public operations (a counter), labelled
/// `db.operation.name`, `microdcs.target` and `microdcs.outcome`.
pub const OPERATIONS: &str = "microdcs.valkey.operations";
/// `microdcs.valkey.script.reloads`: script calls that found the
/// server's script cache empty and loaded the script again.
pub const SCRIPT_RELOADS: &str = "microdcs.valkey.script.reloads";
/// `microdcs.valkey.retries`: calls sent again by the runtime, by
/// `microdcs.reason`: `unknown_outcome` (a write whose answer was lost, sent
/// again under its op id), `connection_lost` (a read whose connection
/// dropped, read again after the reconnect) and `cluster_change` (refused by
/// a cluster moving a slot or failing over: it did not run).
pub const RETRIES: &str = "microdcs.valkey.retries";
/// `microdcs.valkey.contention.retries`: writes sent again because another
/// writer moved the document's index fields between the read and the
/// script, and claims that lost a document to another claimer, by
/// `microdcs.target` (the document kind).
pub const CONTENTION_RETRIES: &str = "microdcs.valkey.contention.retries";
/// `microdcs.valkey.sentinel.switches`: new primaries a handle followed.
pub const SENTINEL_SWITCHES: &str = "microdcs.valkey.sentinel.switches";
/// `microdcs.valkey.cluster.relearned`: changed slot maps a cluster
/// connection learnt from the other nodes after a call timed out (a hung
/// primary replaced by its replica).
pub const TOPOLOGY_RELEARNED: &str = "microdcs.valkey.cluster.relearned";

/// `microdcs.valkey.poller.entries`: stream entries handed to consumers,
/// by `microdcs.target` (the feed's kind) and `microdcs.outcome`
/// (`handled`, `failed`).
pub const POLLER_ENTRIES: &str = "microdcs.valkey.poller.entries";
/// `microdcs.valkey.poller.nudges`: nudges received.
pub const POLLER_NUDGES: &str = "microdcs.valkey.poller.nudges";
/// `microdcs.valkey.poller.fallback_found`: fallback polls of a stream
/// that found work: nudges were lost or came late.
pub const POLLER_FALLBACK_FOUND: &str = "microdcs.valkey.poller.fallback_found";
/// `microdcs.valkey.poller.errors`: the poller loop's failures by
/// `error.type` (`read`, `ack`, `registry`, `autoclaim`, `group`, `task`,
/// `backlog`, `subscribe`).
pub const POLLER_ERRORS: &str = "microdcs.valkey.poller.errors";
/// `microdcs.valkey.poller.pending`: entries delivered to a consumer's
/// group and not acknowledged (a gauge), summed over the scopes, by
/// `microdcs.target` (the feed's kind) and `messaging.consumer.group.name`;
/// sampled each fallback poll.
pub const POLLER_PENDING: &str = "microdcs.valkey.poller.pending";
/// `microdcs.valkey.poller.lag`: entries not yet delivered to a consumer's
/// group (a gauge), labelled and sampled like
/// `microdcs.valkey.poller.pending`; streams whose lag the server cannot
/// tell add nothing.
pub const POLLER_LAG: &str = "microdcs.valkey.poller.lag";

/// Records the scope of the operation on its span (the caller decides
/// whether scopes may be shown: `TraceScopes`).
pub(crate) fn record_scope(scope: &str) {
    tracing::Span::current().record("microdcs.scope", scope);
}

/// Counts one call the runtime sends again, by why.
pub(crate) fn retried(reason: &'static str) {
    metrics::counter!(RETRIES, "microdcs.reason" => reason).increment(1);
}

/// How an operation ended, as the `microdcs.outcome` label says it; each
/// result type says it beside its own definition.
pub(crate) trait Outcome {
    fn outcome(&self) -> &'static str;
}

impl<T> Outcome for Option<T> {
    fn outcome(&self) -> &'static str {
        if self.is_some() { "found" } else { "not_found" }
    }
}

impl Outcome for () {
    fn outcome(&self) -> &'static str {
        "ok"
    }
}

impl Outcome for std::time::Duration {
    fn outcome(&self) -> &'static str {
        "ok"
    }
}

impl<T> Outcome for Vec<T> {
    fn outcome(&self) -> &'static str {
        "ok"
    }
}

/// Answers that carry no outcome of their own (a count, a flag, a page).
macro_rules! plain_outcome {
    ($($t:ty),*) => {$(
        impl Outcome for $t {
            fn outcome(&self) -> &'static str {
                "ok"
            }
        }
    )*};
}
plain_outcome!(u64, i64, bool);

/// Runs `op` on `target` inside its span and records its count and
/// duration by outcome (`error` with the error's class for a failure).
///
/// The operation's own future goes on the heap at once: operations nest
/// (a claim's update, a docs page's ids read, a flow of many calls in one
/// task), and each layer holding its inner future inline made a caller's
/// future large enough to overflow a 2 MiB thread stack in a debug build.
/// One allocation per call is nothing beside its round trip.
pub(crate) fn observed<T: Outcome>(
    op: &'static str,
    target: &'static str,
    fut: impl Future<Output = Result<T>>,
) -> impl Future<Output = Result<T>> {
    let fut = Box::pin(fut);
    observed_boxed(op, target, fut)
}

async fn observed_boxed<T: Outcome, F: Future<Output = Result<T>>>(
    op: &'static str,
    target: &'static str,
    fut: std::pin::Pin<Box<F>>,
) -> Result<T> {
    let span = tracing::info_span!(
        "microdcs.valkey",
        "otel.name" = op,
        "db.system.name" = "valkey",
        "db.operation.name" = op,
        "microdcs.target" = target,
        "microdcs.scope" = tracing::field::Empty,
        "microdcs.outcome" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
    );
    let started = Instant::now();
    let result = fut.instrument(span.clone()).await;
    let (outcome, error) = match &result {
        Ok(v) => (v.outcome(), ""),
        Err(e) => ("error", e.class()),
    };
    span.record("microdcs.outcome", outcome);
    if !error.is_empty() {
        span.record("error.type", error);
    }
    metrics::counter!(OPERATIONS, "db.operation.name" => op, "microdcs.target" => target, "microdcs.outcome" => outcome)
        .increment(1);
    metrics::histogram!(
        OPERATION_DURATION,
        "db.system.name" => "valkey",
        "db.operation.name" => op,
        "microdcs.target" => target,
        "microdcs.outcome" => outcome,
        "error.type" => error,
    )
    .record(started.elapsed().as_secs_f64());
    result
}

impl Error {
    /// A short, stable name of the kind of failure, for metrics and logs:
    /// `conflict`, `unknown_outcome`, `not_replicated`, `no_replicas`,
    /// `timeout`, `connection`, `auth`, `corrupt`, `wrong_type`,
    /// `invalid_input`, `lease`, `server` or `other`.
    pub fn class(&self) -> &'static str {
        match self {
            Error::UnknownOutcome { .. } => "unknown_outcome",
            Error::NotReplicated { .. } => "not_replicated",
            Error::NoReplicas { .. } => "no_replicas",
            Error::WrongType { .. } => "wrong_type",
            #[cfg(feature = "coordination")]
            Error::LeaseLost { .. } | Error::LeaseNotHeld { .. } | Error::Fenced { .. } => "lease",
            e if e.is_conflict() => "conflict",
            e if e.is_timeout() => "timeout",
            e if e.is_connection() => "connection",
            e if e.is_auth() => "auth",
            e if e.is_corrupt() => "corrupt",
            e if e.is_invalid_input() => "invalid_input",
            Error::Redis(_) => "server",
            _ => "other",
        }
    }
}
