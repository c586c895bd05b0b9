//! The one retry rule for script calls whose outcome can be unknown, and
//! the one way a script is run.
//!
//! A lost connection or a timeout leaves it open whether the server ran the
//! script. Every script that writes is built so that running it again is
//! safe (the store's scripts recognise an applied operation id, the lease
//! scripts return a request's cached result), so the rule is: wait the
//! configured retry delay and run the same call again, up to the configured
//! number of attempts. Every attempt waits at most the response timeout,
//! also while the connection is being re-established, so a call ends within
//! `attempts x (response timeout + retry delay)` whatever the server does.
//! Answers that prove the call was never sent (a refused connection) and a
//! call cut off by a switch of primary spend that time, not attempts: they
//! are sent again while the bound allows (see `resend_in_time`).
//! Any other error ends the call at once.
//!
//! A script missing from the server's cache (`NOSCRIPT`) is never the
//! caller's problem: another client may flush the cache at any moment, also
//! between our `SCRIPT LOAD` and the `EVALSHA` after it, and after a
//! failover the load and the call may reach different servers. So a call
//! loads the script and runs it again, and when the cache misses a second
//! time sends the script's text with `EVAL`, which cannot miss.
//!
//! Over 600 lines on purpose: the rule, the attempts it counts and the
//! answers that prove nothing ran are read together, and splitting them
//! would scatter the one place a reviewer checks exactly-once. The walk of
//! a multi-step call is already apart, in `retry/walk.rs`.

use std::future::Future;

use crate::client::Connection;
use redis::{Cmd, RedisError, RedisResult, Script, Value};

use crate::client::Valkey;
use crate::error::{did_not_run, is_unknown_outcome};

/// A script's reply. Whether an earlier attempt ran is for the script to
/// tell (by its operation id), not the caller: a lost reply proves nothing.
pub(crate) struct Invoked {
    /// The script's reply.
    pub(crate) value: Value,
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
    /// The caller's error for a call about `key`: an outcome still unknown
    /// after every attempt is [`crate::Error::UnknownOutcome`], a server
    /// error is mapped by its code ([`crate::Error::from_redis`]).
    pub(crate) fn into_error(self, key: &str) -> crate::Error {
        match self {
            Failure::Unknown { source, attempts } => {
                crate::Error::UnknownOutcome { key: key.to_owned(), attempts, source }
            }
            Failure::Failed(e) => crate::Error::from_redis(e, key),
        }
    }
}

/// A Lua script with its text kept, so a call can fall back to `EVAL`.
///
/// Every script goes to the server with a `#!lua` first line, which makes
/// the server check it whole before it runs: on a cluster a script that
/// touches a key of another slot than its declared ones is refused (the
/// server itself backs the co-location the keyspaces are built for), and a
/// script that may write is refused before its first command while the
/// server is over `maxmemory`, where a script without the line would stop
/// at its first write and leave what it wrote before in place. Scripts
/// that only read say so (`flags=no-writes`) and still run then.
#[derive(Debug, Clone)]
pub(crate) struct LuaScript {
    hash: String,
    code: String,
}

/// The first line of a script that may write.
const WRITES: &str = "#!lua\n";
/// The first line of a script that only reads.
const READS: &str = "#!lua flags=no-writes\n";

impl LuaScript {
    /// A script that may write.
    pub(crate) fn new(body: &str) -> Self {
        Self::with_first_line(WRITES, body)
    }

    /// A script that only reads (a write command in it is refused).
    pub(crate) fn read_only(body: &str) -> Self {
        Self::with_first_line(READS, body)
    }

    fn with_first_line(line: &str, body: &str) -> Self {
        let code = format!("{line}{body}");
        LuaScript { hash: Script::new(&code).get_hash().to_owned(), code }
    }

    /// A call of this script with no keys or arguments yet.
    pub(crate) fn call(&self) -> ScriptCall<'_> {
        ScriptCall { script: self, keys: Vec::new(), args: Vec::new() }
    }
}

/// One call of a [`LuaScript`]: its KEYS and ARGV, borrowed.
pub(crate) struct ScriptCall<'a> {
    script: &'a LuaScript,
    keys: Vec<&'a [u8]>,
    args: Vec<&'a [u8]>,
}

impl<'a> ScriptCall<'a> {
    pub(crate) fn key(mut self, k: &'a str) -> Self {
        self.keys.push(k.as_bytes());
        self
    }

    pub(crate) fn arg(mut self, a: &'a [u8]) -> Self {
        self.args.push(a);
        self
    }

    /// `EVALSHA hash` or `EVAL text`, with the keys and arguments.
    fn cmd(&self, name: &str, first: &[u8]) -> Cmd {
        let mut cmd = redis::cmd(name);
        cmd.arg(first).arg(self.keys.len());
        for k in &self.keys {
            cmd.arg(*k);
        }
        for a in &self.args {
            cmd.arg(*a);
        }
        cmd
    }

    /// Runs the call once: `EVALSHA`; on a cache miss `SCRIPT LOAD` and
    /// `EVALSHA` again (the steady state stays one round trip); on a second
    /// miss `EVAL` of the text. Never returns `NOSCRIPT`.
    pub(crate) async fn run(&self, con: &mut Connection) -> RedisResult<Value> {
        Ok(self.run_then(con, &After::Nothing).await?.0)
    }

    /// Runs the call and `wait` right after it in one pipeline on the
    /// primary of `slot`, so the wait is for this connection's write
    /// (`WAIT` counts replicas that have everything its connection wrote).
    /// The script's cache is handled as by [`ScriptCall::run`]. The script's
    /// reply, and the wait's own answer.
    pub(crate) async fn run_waiting(
        &self,
        con: &mut Connection,
        slot: u16,
        wait: &Cmd,
    ) -> RedisResult<(Value, RedisResult<Value>)> {
        let (value, waited) = self.run_then(con, &After::Wait { slot, cmd: wait }).await?;
        Ok((value, waited.unwrap_or_else(|| Err(no_reply()))))
    }

    /// The one cache rule of both: `EVALSHA`, on a miss `SCRIPT LOAD` and
    /// `EVALSHA` again, on a second miss (or a refused load) `EVAL` of the
    /// text, each form sent with what comes `after` it.
    async fn run_then(
        &self,
        con: &mut Connection,
        after: &After<'_>,
    ) -> RedisResult<(Value, Option<RedisResult<Value>>)> {
        let evalsha = self.cmd("EVALSHA", self.script.hash.as_bytes());
        match send(con, &evalsha, after).await {
            Err(e) if is_noscript(&e) => {}
            other => return other,
        }
        metrics::counter!(crate::observe::SCRIPT_RELOADS).increment(1);
        let load = redis::cmd("SCRIPT").arg("LOAD").arg(&self.script.code).clone();
        let loaded: RedisResult<String> = match after {
            // On a cluster this goes to every primary.
            After::Nothing => load.query_async(con).await,
            // Where the call goes: the waiting connection sends nothing else.
            After::Wait { slot, .. } => con.query_on_slot(&load, *slot).await,
        };
        match loaded {
            // On a cluster any one node down fails a load sent to all: the
            // text, sent to the island's node, needs no load.
            Err(e) if is_unknown_outcome(&e) && con.is_cluster() => {
                tracing::debug!(error = %e, "SCRIPT LOAD failed on some cluster node; sending the text");
            }
            // A lost connection fails the text as well: report it as such.
            Err(e) if is_unknown_outcome(&e) => return Err(e),
            // Refused (a renamed command, an ACL without `SCRIPT`): the text
            // needs no load.
            Err(e) => tracing::debug!(error = %e, "SCRIPT LOAD refused; sending the text"),
            Ok(_) => match send(con, &evalsha, after).await {
                Err(e) if is_noscript(&e) => {
                    tracing::debug!("script cache missed again right after the load; sending the text");
                }
                other => return other,
            },
        }
        send(con, &self.cmd("EVAL", self.script.code.as_bytes()), after).await
    }
}

/// What goes right after a script call, on the same connection.
enum After<'a> {
    Nothing,
    /// A wait for replicas, in one pipeline with the call on the primary of `slot`.
    Wait {
        slot: u16,
        cmd: &'a Cmd,
    },
}

/// Sends `cmd` and what comes after it: the script's reply, and the
/// answer of the command after it, if any. A script error is the error.
async fn send(con: &mut Connection, cmd: &Cmd, after: &After<'_>) -> RedisResult<(Value, Option<RedisResult<Value>>)> {
    match after {
        After::Nothing => Ok((cmd.query_async(con).await?, None)),
        After::Wait { slot, cmd: wait } => {
            let mut replies = con.pipeline_on_slot(&[cmd, wait], *slot).await?;
            let waited = replies.pop().unwrap_or_else(|| Err(no_reply()));
            let script = replies.pop().unwrap_or_else(|| Err(no_reply()));
            script.map(|v| (v, Some(waited)))
        }
    }
}

/// A pipeline that answered fewer commands than it sent.
fn no_reply() -> RedisError {
    RedisError::from((redis::ErrorKind::UnexpectedReturnType, "a pipeline answered fewer commands than it sent"))
}

/// What a write that waits for replicas got back: the script's reply and
/// the wait's answer (`WAIT`: replicas; `WAITAOF`: `[local, replicas]`).
pub(crate) struct Waited {
    /// The script's reply.
    pub(crate) value: Value,
    /// The wait's answer, or its refusal.
    pub(crate) wait: RedisResult<Value>,
}

/// Runs `call` and the wait of `durability` after it on the connection for
/// waiting writes, under the rule of [`invoke_call`]; every attempt waits
/// at most the response timeout plus the wait's own timeout.
pub(crate) async fn invoke_waiting(
    valkey: &Valkey,
    call: &ScriptCall<'_>,
    what: &'static str,
    key: &str,
    durability: &crate::config::Durability,
) -> Result<Waited, Failure> {
    let mut wait = if durability.aof { redis::cmd("WAITAOF") } else { redis::cmd("WAIT") };
    if durability.aof {
        wait.arg(1);
    }
    wait.arg(durability.replicas).arg(durability.timeout_ms());
    let slot = microdcs_schema::slot::key_slot(key.as_bytes());
    let con = valkey.waiting_connection().await.map_err(Failure::Failed)?;
    let bound = valkey.response_timeout().saturating_add(durability.bound());
    let wait = &wait;
    let (value, wait) =
        attempts_with(
            valkey,
            what,
            key,
            con,
            bound,
            |mut con| async move { call.run_waiting(&mut con, slot, wait).await },
        )
        .await?;
    Ok(Waited { value, wait })
}

fn is_noscript(e: &RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

pub(crate) use crate::client::{bounded, no_answer};

/// Runs `call`; while its outcome is unknown, waits the retry delay and runs
/// it again, up to the configured write attempts. `what` and `key` name the
/// call in the log.
pub(crate) async fn invoke_call(
    valkey: &Valkey,
    call: &ScriptCall<'_>,
    what: &'static str,
    key: &str,
) -> Result<Invoked, Failure> {
    attempts(valkey, what, key, |mut con| async move { call.run(&mut con).await }).await
}

async fn attempts<F, Fut>(valkey: &Valkey, what: &'static str, key: &str, run: F) -> Result<Invoked, Failure>
where
    F: FnMut(Connection) -> Fut,
    Fut: Future<Output = RedisResult<Value>>,
{
    let value = attempts_with(valkey, what, key, valkey.connection(), valkey.response_timeout(), run).await?;
    Ok(Invoked { value })
}

/// The retry rule of [`invoke_call`] on connection `con`, each attempt
/// bounded by `timeout` (the healing bound counts attempts of that length).
async fn attempts_with<T, F, Fut>(
    valkey: &Valkey,
    what: &'static str,
    key: &str,
    con: Connection,
    timeout: std::time::Duration,
    mut run: F,
) -> Result<T, Failure>
where
    F: FnMut(Connection) -> Fut,
    Fut: Future<Output = RedisResult<T>>,
{
    let opts = valkey.write_options();
    let mut healing = Healing::with_per_try(valkey, timeout);
    let mut attempt = 1;
    loop {
        match noting_timeout(&con, bounded(timeout, run(con.clone())).await) {
            Ok(value) => return Ok(value),
            Err(e) if resend_in_time(&e, &mut healing, opts.retry_delay, what, key).await => {}
            Err(e) if is_unknown_outcome(&e) => {
                if attempt >= opts.attempts || !healing.allows_after_unknown(opts.retry_delay) {
                    return Err(Failure::Unknown { source: e, attempts: attempt });
                }
                tracing::warn!(key = valkey.shown(key), attempt, error = %e, "{what} outcome unknown; running the same call again");
                crate::observe::retried("unknown_outcome");
                valkey.metrics().add_write_retry();
                attempt += 1;
                tokio::time::sleep(opts.retry_delay).await;
            }
            // A cluster still healing (a failover, a slot on the move) after
            // the cluster client's own resends: the call did not run, so it
            // is sent again for as long as the call's bound allows.
            Err(e) if did_not_run(&e) && healing.allows(opts.retry_delay) => {
                tracing::warn!(key = valkey.shown(key), attempt, error = %e, "{what} refused by a cluster in change; running it again");
                crate::observe::retried("cluster_change");
                healing.used = true;
                tokio::time::sleep(opts.retry_delay).await;
            }
            Err(e) => return Err(Failure::Failed(e)),
        }
    }
}

/// `out`, an attempt's result on `con`; when it got no answer in time, the
/// connection is told first: on a cluster the node may hang while its
/// replica has taken over, which the connection then learns from the
/// others (see [`Connection::timed_out`]) before the next attempt.
fn noting_timeout<T>(con: &Connection, out: RedisResult<T>) -> RedisResult<T> {
    if let Err(e) = &out
        && e.is_timeout()
    {
        con.timed_out();
    }
    out
}

/// After a read on cluster connection `con` timed out (the connection is
/// learning the slot map from the other nodes meanwhile): waits the retry
/// delay, and answers whether the connection learnt a changed map since
/// `seen`, its count before the read. Then the node that did not answer was
/// replaced (a hung primary whose replica the cluster promoted), and a read
/// again goes to its successor.
async fn relearned_after_timeout(valkey: &Valkey, con: &Connection, seen: u64) -> bool {
    tokio::time::sleep(valkey.write_options().retry_delay).await;
    con.relearned() != seen
}

/// A script reply as `T`; a reply of another shape is a parse error.
pub(crate) fn reply<T: redis::FromRedisValue>(v: Value) -> RedisResult<T> {
    redis::from_redis_value(v).map_err(RedisError::from)
}

/// Runs a command that only reads (or that is harmless to send twice and
/// whose answer the caller can take either way), bounded like the store's
/// reads: each run waits at most the response timeout, also for a
/// reconnect; after a lost connection it waits the retry delay and runs
/// once more. A timeout is read again only on a cluster whose slot map
/// changed meanwhile (see [`relearned_after_timeout`]): a server that did
/// not answer in time will not answer the same question sooner. Ends
/// within two response timeouts plus one retry delay.
pub(crate) async fn read<T, F, Fut>(valkey: &Valkey, mut run: F) -> RedisResult<T>
where
    F: FnMut(Connection) -> Fut,
    Fut: Future<Output = RedisResult<T>>,
{
    let timeout = valkey.response_timeout();
    let healing = Healing::start(valkey);
    let mut reconnected = false;
    loop {
        let con = valkey.connection();
        let seen = con.relearned();
        match noting_timeout(&con, bounded(timeout, run(con.clone())).await) {
            Err(e) if e.is_timeout() && !reconnected && con.is_cluster() => {
                if !relearned_after_timeout(valkey, &con, seen).await {
                    return Err(e);
                }
                tracing::debug!(error = %e, "read timed out on a node the cluster replaced; reading again");
                crate::observe::retried("cluster_change");
                reconnected = true;
            }
            Err(e) if is_unknown_outcome(&e) && !e.is_timeout() && !reconnected => {
                tracing::debug!(error = %e, "read lost its connection; reading again");
                crate::observe::retried("connection_lost");
                reconnected = true;
                tokio::time::sleep(valkey.write_options().retry_delay).await;
            }
            // A cluster in change (see `Healing`): read again while the
            // write bound allows.
            Err(e) if did_not_run(&e) && healing.allows(valkey.write_options().retry_delay) => {
                tracing::debug!(error = %e, "read refused by a cluster in change; reading again");
                crate::observe::retried("cluster_change");
                tokio::time::sleep(valkey.write_options().retry_delay).await;
            }
            other => return other,
        }
    }
}

/// Runs a read of ours; after a lost connection runs it once more (see
/// [`read`]'s rule, answers of a cluster in change included), for reads
/// that return our own [`crate::Result`]: the one bounded-read rule of the
/// crate's typed reads.
pub(crate) async fn read_bounded<T, F, Fut>(valkey: &Valkey, f: F) -> crate::Result<T>
where
    F: Fn() -> Fut,
    Fut: Future<Output = crate::Result<T>>,
{
    let timeout = valkey.response_timeout();
    let once = || async {
        let out =
            tokio::time::timeout(timeout, f()).await.unwrap_or_else(|_| Err(crate::Error::Redis(no_answer(timeout))));
        if matches!(&out, Err(e) if e.is_timeout()) {
            valkey.connection().timed_out();
        }
        out
    };
    let healing = Healing::start(valkey);
    let mut reconnected = false;
    loop {
        let seen = valkey.connection().relearned();
        match once().await {
            Err(crate::Error::Redis(e)) if e.is_timeout() && !reconnected && valkey.connection().is_cluster() => {
                if !relearned_after_timeout(valkey, &valkey.connection(), seen).await {
                    return Err(crate::Error::Redis(e));
                }
                tracing::debug!(error = %e, "read timed out on a node the cluster replaced; reading again");
                crate::observe::retried("cluster_change");
                reconnected = true;
            }
            Err(e) if e.is_connection() && !e.is_timeout() && !reconnected => {
                tracing::debug!(error = %e, "read lost its connection; reading again");
                crate::observe::retried("connection_lost");
                reconnected = true;
                tokio::time::sleep(valkey.write_options().retry_delay).await;
            }
            Err(crate::Error::Redis(e)) if did_not_run(&e) && healing.allows(valkey.write_options().retry_delay) => {
                tracing::debug!(error = %e, "read refused by a cluster in change; reading again");
                crate::observe::retried("cluster_change");
                tokio::time::sleep(valkey.write_options().retry_delay).await;
            }
            other => return other,
        }
    }
}

/// Runs a command at most once, waiting at most the response timeout
/// (also for a reconnect): for writes that must not be sent twice. A
/// failure to get an answer is a connection error (a timeout or a lost
/// connection). On a cluster it goes over the connection that never resends
/// by itself, and only an answer that proves it did not run (a moved slot,
/// a cluster healing) sends it again, after the retry delay, up to the
/// configured attempts.
pub(crate) async fn once<T, F, Fut>(valkey: &Valkey, mut run: F) -> RedisResult<T>
where
    F: FnMut(Connection) -> Fut,
    Fut: Future<Output = RedisResult<T>>,
{
    let opts = valkey.write_options();
    let healing = Healing::start(valkey);
    let mut asked: Option<(String, u16)> = None;
    loop {
        let con = match asked.take() {
            // `ASK`: the key has moved to the target of a migration; this
            // connection does not follow redirects, so we do: the command
            // goes to the target after `ASKING`.
            Some((host, port)) => valkey.once_connection().asking(host, port),
            None => valkey.once_connection(),
        };
        match noting_timeout(&con, bounded(valkey.response_timeout(), run(con.clone())).await) {
            Err(e) if did_not_run(&e) && healing.allows(opts.retry_delay) => {
                tracing::debug!(error = %e, "refused by a cluster in change; sending it again");
                crate::observe::retried("cluster_change");
                if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::Ask)
                    && let Some((addr, _)) = e.redirect_node()
                    && let Some((host, port)) = addr.rsplit_once(':')
                    && let Ok(port) = port.parse()
                {
                    asked = Some((host.trim_start_matches('[').trim_end_matches(']').to_owned(), port));
                    continue;
                }
                tokio::time::sleep(opts.retry_delay).await;
            }
            other => return other,
        }
    }
}

/// The time a call may spend waiting for a cluster to heal: the bound of
/// the write rule, `attempts x (response timeout + retry delay)`, from the
/// call's start. A failover takes a cluster's node timeout and more
/// (about 1.5 s at 1 s) to promote a replica; until then every answer is
/// a redirect to the dead node, each proving the call did not run.
struct Healing {
    deadline: tokio::time::Instant,
    /// Whether a did-not-run answer was sent again: from then on an
    /// unknown outcome is tried again only within the deadline too.
    used: bool,
    /// The longest one more try may wait for its answer.
    per_try: std::time::Duration,
}

impl Healing {
    fn start(valkey: &Valkey) -> Self {
        Self::with_per_try(valkey, valkey.response_timeout())
    }

    /// For calls whose every try may wait `per_try` (a write that waits
    /// for replicas: the response timeout plus its wait).
    fn with_per_try(valkey: &Valkey, per_try: std::time::Duration) -> Self {
        let opts = valkey.write_options();
        let per = per_try.saturating_add(opts.retry_delay);
        Healing {
            deadline: tokio::time::Instant::now() + per.saturating_mul(opts.attempts.max(1)),
            per_try,
            used: false,
        }
    }

    /// Whether an unknown outcome may be tried again: always (up to the
    /// attempts) on a call that never waited for a cluster to heal, else
    /// only within the deadline, so the two kinds of retry together keep
    /// the one bound.
    fn allows_after_unknown(&self, delay: std::time::Duration) -> bool {
        !self.used || self.allows(delay)
    }

    /// Whether a pause of `delay` and another try, waiting its whole
    /// response timeout, still end within the bound.
    fn allows(&self, delay: std::time::Duration) -> bool {
        tokio::time::Instant::now() + delay + self.per_try <= self.deadline
    }
}

/// For a write that is safe to send again: whether `e` is an answer that
/// spends the call's time rather than one of its attempts, and if so the
/// pause before it is sent again (taken here) while the bound allows
/// another try. A refused connection proves the call was never sent (a
/// dead primary's port, while the Sentinels promote a replica): after the
/// retry delay. A switch of primary ended the wait for the old one's
/// answer: at once, to the new one. Either way the call goes on until the
/// bound, `attempts x (response timeout + retry delay)`, not until a count
/// of such answers, which a dead node gives in quick succession.
async fn resend_in_time(
    e: &RedisError,
    healing: &mut Healing,
    delay: std::time::Duration,
    what: &'static str,
    key: &str,
) -> bool {
    let pause = if crate::client::is_switch(e) {
        std::time::Duration::ZERO
    } else if e.is_connection_refusal() {
        delay
    } else {
        return false;
    };
    if !healing.allows(pause) {
        return false;
    }
    tracing::warn!(key, error = %e, "{what} not answered by the primary; sending it again");
    crate::observe::retried("primary_change");
    healing.used = true;
    tokio::time::sleep(pause).await;
    true
}

/// Runs a write that is safe to repeat (its effect does not change when it
/// runs twice) under the one retry rule of this module: while its outcome
/// is unknown, wait the retry delay and run it again, up to the configured
/// attempts. Ends within `attempts x (response timeout + retry delay)`.
pub(crate) async fn repeatable<T, F, Fut>(
    valkey: &Valkey,
    what: &'static str,
    key: &str,
    mut run: F,
) -> Result<T, Failure>
where
    F: FnMut(Connection) -> Fut,
    Fut: Future<Output = RedisResult<T>>,
{
    let opts = valkey.write_options();
    let timeout = valkey.response_timeout();
    let mut healing = Healing::start(valkey);
    let mut attempt = 1;
    loop {
        let con = valkey.connection();
        match noting_timeout(&con, bounded(timeout, run(con.clone())).await) {
            Ok(value) => return Ok(value),
            Err(e) if resend_in_time(&e, &mut healing, opts.retry_delay, what, key).await => {}
            Err(e) if is_unknown_outcome(&e) => {
                if attempt >= opts.attempts || !healing.allows_after_unknown(opts.retry_delay) {
                    return Err(Failure::Unknown { source: e, attempts: attempt });
                }
                tracing::warn!(key = valkey.shown(key), attempt, error = %e, "{what} outcome unknown; running it again");
                crate::observe::retried("unknown_outcome");
                valkey.metrics().add_write_retry();
                attempt += 1;
                tokio::time::sleep(opts.retry_delay).await;
            }
            Err(e) if did_not_run(&e) && healing.allows(opts.retry_delay) => {
                tracing::warn!(key = valkey.shown(key), attempt, error = %e, "{what} refused by a cluster in change; running it again");
                crate::observe::retried("cluster_change");
                healing.used = true;
                tokio::time::sleep(opts.retry_delay).await;
            }
            Err(e) => return Err(Failure::Failed(e)),
        }
    }
}

/// One read command of ours, bounded by [`read`]'s rule, its error mapped
/// by code for `key` (a key of another type is `WrongType`).
pub(crate) async fn read_cmd<T: redis::FromRedisValue>(valkey: &Valkey, cmd: &Cmd, key: &str) -> crate::Result<T> {
    read(valkey, |mut con| async move { cmd.query_async(&mut con).await })
        .await
        .map_err(|e| crate::Error::from_redis(e, key))
}

mod walk;
pub(crate) use walk::scan_step;

/// The server's clock in Unix milliseconds (`TIME`), bounded like a read:
/// the one clock heartbeats, sweeps and ages are measured on.
pub(crate) async fn server_time_ms(valkey: &Valkey) -> crate::Result<u64> {
    let (s, us): (u64, u64) = read_cmd(valkey, &redis::cmd("TIME"), "TIME").await?;
    Ok(s.saturating_mul(1000).saturating_add(us / 1000))
}

#[cfg(test)]
mod tests {
    use super::LuaScript;

    #[test]
    fn every_script_is_sent_with_its_first_line_and_hashed_with_it() {
        // Pinned (SHA-1 computed independently): the text the server caches.
        let writes = LuaScript::new("return 1\n");
        assert_eq!(writes.code, "#!lua\nreturn 1\n");
        assert_eq!(writes.hash, "e356ad04f5c29929224ceba4c2d6da0f2b3a0875");
        let reads = LuaScript::read_only("return 1\n");
        assert_eq!(reads.code, "#!lua flags=no-writes\nreturn 1\n");
        assert_eq!(reads.hash, "b0da8027415520ad0bb1e254cbe8d962363adcc4");
    }
}
