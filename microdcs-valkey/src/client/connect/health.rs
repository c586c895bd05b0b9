//! Whether the server answers: `ping` and `health`.

use std::time::{Duration, Instant};

use crate::client::Valkey;

impl Valkey {
    /// One `PING`; the round-trip time. Waits at most the response timeout,
    /// also while the connection is being re-established.
    ///
    /// # Errors
    /// The server did not answer (in time).
    pub async fn ping(&self) -> crate::Result<Duration> {
        let timeout = self.response_timeout();
        match tokio::time::timeout(timeout, self.ping_once()).await {
            Ok(r) => r,
            Err(_) => Err(self.no_answer(timeout)),
        }
    }

    async fn ping_once(&self) -> crate::Result<Duration> {
        let mut con = self.connection();
        let start = Instant::now();
        // On a cluster, the island's primary: a keyless PING would go to
        // every primary, and one down elsewhere is not this island's trouble.
        let _: String = con.query_near(&redis::cmd("PING"), self.prefix().slot()).await?;
        Ok(start.elapsed())
    }

    fn no_answer(&self, timeout: Duration) -> crate::Error {
        let text = match self.endpoint() {
            Some(ep) => format!("no answer from {ep} within {timeout:?}"),
            None => format!("no answer within {timeout:?}"),
        };
        crate::Error::Redis(std::io::Error::new(std::io::ErrorKind::TimedOut, text).into())
    }

    /// A health check for any health framework: pings and reports the
    /// round-trip time, or why the server is unhealthy. Answers within the
    /// response timeout, however long reconnecting takes.
    pub async fn health(&self) -> Health {
        let timeout = self.response_timeout();
        let mut last = None;
        let checked = tokio::time::timeout(timeout, async {
            // A dropped connection is replaced after the first command that
            // fails on it; a second ping then tells the truth.
            for _ in 0..2 {
                match self.ping_once().await {
                    Ok(rtt) => return Some(rtt),
                    Err(e) => last = Some(e),
                }
            }
            None
        })
        .await;
        match checked {
            Ok(Some(rtt)) => Health::Healthy { rtt },
            _ => {
                let detail = last.map_or_else(|| format!("no answer within {timeout:?}"), |e| e.to_string());
                let reason = match self.endpoint() {
                    Some(ep) => format!("{ep}: {detail}"),
                    None => detail,
                };
                Health::Unhealthy { reason }
            }
        }
    }
}

/// The result of [`Valkey::health`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// The server answered.
    Healthy {
        /// Round-trip time of a `PING`.
        rtt: Duration,
    },
    /// The server did not answer.
    Unhealthy {
        /// Why (no secrets).
        reason: String,
    },
}

impl Health {
    /// Whether the server answered.
    pub fn is_healthy(&self) -> bool {
        matches!(self, Health::Healthy { .. })
    }
}
