//! Pipelines of reads whose answers are sorted one by one: the key of the
//! wrong type is a finding, not the end of the run. Shared by `verify` and
//! the inspector.

use redis::{FromRedisValue, Value};

use crate::client::Valkey;
use crate::error::{Error, Result};

/// What one answer of a pipeline run with `ignore_errors` says about its key.
pub(crate) enum Answer<'v> {
    /// The command ran; its reply.
    Reply(&'v Value),
    /// The server refused because the key holds another type: a difference
    /// to report, not a reason to stop. The server's error, as text.
    #[cfg_attr(
        not(feature = "inspect"),
        allow(dead_code, reason = "the inspector shows the text; verify needs only the kind")
    )]
    WrongType(String),
}

/// Sorts one pipeline answer: the server's wrong-type refusal (matched by
/// its error code) is a damaged key; any other server error ends the run.
pub(crate) fn answer(v: &Value) -> Result<Answer<'_>> {
    match v {
        Value::ServerError(e) if e.code() == "WRONGTYPE" => {
            Ok(Answer::WrongType(redis::RedisError::from(e.clone()).to_string()))
        }
        Value::ServerError(e) => Err(Error::Redis(e.clone().into())),
        v => Ok(Answer::Reply(v)),
    }
}

/// A pipeline of reads, bounded like every read (`crate::retry::read`).
pub(crate) async fn read_pipe<T: FromRedisValue>(valkey: &Valkey, pipe: &redis::Pipeline, key: &str) -> Result<T> {
    // Split by slot, a command's error is its answer (`answer` sorts them
    // for the pipelines that ask for that); where a pipeline did not, the
    // error still fails the read, as the conversion of its answer.
    let v: Value = crate::retry::read(valkey, |mut con| async move { con.query_pipe(pipe, true).await })
        .await
        .map_err(|e| Error::from_redis(e, key))?;
    // A command the user's ACL refuses is answered `NOPERM` in its place
    // (the pipelines keep each command's error): no answer about the key,
    // and the same for every key after it, so the run ends with the
    // refusal itself, which `verify` and `rebuild` name by their role.
    if let Value::Array(items) = &v
        && let Some(e) = items.iter().find_map(|r| match r {
            Value::ServerError(e) if e.code() == "NOPERM" => Some(e),
            _ => None,
        })
    {
        return Err(Error::Redis(e.clone().into()));
    }
    redis::from_redis_value(v).map_err(|e| Error::from_redis(e.into(), key))
}
