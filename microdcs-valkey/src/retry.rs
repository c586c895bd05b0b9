//! The one retry rule for script calls whose outcome can be unknown.
//!
//! A lost connection or a timeout leaves it open whether the server ran the
//! script. Every script that writes is built so that running it again is
//! safe (the store's scripts recognise an applied operation id, the lease
//! scripts return a request's cached result), so the rule is: wait the
//! configured retry delay and run the same call again, up to the configured
//! number of attempts. Any other error ends the call at once.

use redis::{RedisError, ScriptInvocation, Value};

use crate::client::Valkey;
use crate::error::is_unknown_outcome;

/// A reply, and whether an earlier attempt of the same call may have run.
pub(crate) struct Invoked {
    /// The script's reply.
    pub(crate) value: Value,
    /// `true` when an earlier attempt's outcome was unknown: its effect may
    /// already be in place.
    pub(crate) after_unknown: bool,
}

/// Why a call gave up.
pub(crate) enum Failure {
    /// Every attempt lost its connection or timed out.
    Unknown {
        /// The last attempt's error.
        source: RedisError,
        /// How many attempts were made.
        attempts: u32,
    },
    /// The server answered with an error (or the connection failed in a way
    /// that proves the call did not run).
    Failed(RedisError),
}

impl Failure {
    /// The last error, whatever the kind of failure.
    pub(crate) fn into_source(self) -> RedisError {
        match self {
            Failure::Unknown { source, .. } | Failure::Failed(source) => source,
        }
    }
}

/// Runs `inv`; while its outcome is unknown, waits the retry delay and runs
/// it again, up to the configured write attempts. `what` and `key` name the
/// call in the log.
pub(crate) async fn invoke(
    valkey: &Valkey,
    inv: &ScriptInvocation<'_>,
    what: &'static str,
    key: &str,
) -> Result<Invoked, Failure> {
    let opts = valkey.write_options();
    let mut con = valkey.connection();
    let mut attempt = 1;
    loop {
        match inv.invoke_async::<Value>(&mut con).await {
            Ok(value) => return Ok(Invoked { value, after_unknown: attempt > 1 }),
            Err(e) if is_unknown_outcome(&e) => {
                if attempt >= opts.attempts {
                    return Err(Failure::Unknown { source: e, attempts: attempt });
                }
                tracing::warn!(key, attempt, error = %e, "{what} outcome unknown; running the same call again");
                valkey.metrics().add_write_retry();
                attempt += 1;
                tokio::time::sleep(opts.retry_delay).await;
            }
            Err(e) => return Err(Failure::Failed(e)),
        }
    }
}
