//! A connection that follows the primary the Sentinels name: replaced by
//! one to the new primary before its next command once the generation has
//! moved, its subscriptions carried over.

#[allow(clippy::wildcard_imports)]
use super::*;

/// A connection that follows the primary (see the module text). Cheap to
/// clone; clones share it.
#[derive(Clone)]
pub(crate) struct Follower {
    inner: Arc<FollowerInner>,
}

/// Called after a pub/sub follower moved to a new primary: messages
/// published meanwhile may be lost.
pub(crate) type OnSwitch = Box<dyn Fn() + Send + Sync>;

struct FollowerInner {
    sentinels: Arc<Sentinels>,
    config: ConnectionManagerConfig,
    protocol: redis::ProtocolVersion,
    /// The generation the manager was made for, and the manager.
    current: Mutex<(u64, ConnectionManager)>,
    /// Held while a new manager is made, so one is made per switch.
    switching: tokio::sync::Mutex<()>,
    /// What was subscribed (each call's arguments), for the new primary.
    channels: Mutex<Vec<Vec<Vec<u8>>>>,
    /// The shard channels subscribed, for the new primary.
    shard_channels: Mutex<Vec<String>>,
    on_switch: Option<OnSwitch>,
    db: i64,
    /// The task that moves a pub/sub follower without waiting for a command.
    mover: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Drop for FollowerInner {
    fn drop(&mut self) {
        if let Some(h) = self.mover.lock().unwrap_or_else(PoisonError::into_inner).take() {
            h.abort();
        }
    }
}

impl Follower {
    /// A connection to the current primary with `config`. With
    /// `on_switch` (a pub/sub connection, which may send no command for a
    /// long time) it also moves as soon as the primary changes.
    pub(crate) async fn open(
        sentinels: Arc<Sentinels>,
        config: ConnectionManagerConfig,
        protocol: redis::ProtocolVersion,
        on_switch: Option<OnSwitch>,
    ) -> RedisResult<Follower> {
        let primary = sentinels.primary();
        let manager = sentinels.manager_for(&primary, protocol, &config).await?;
        let moves = on_switch.is_some();
        let inner = Arc::new(FollowerInner {
            db: sentinels.setup.data.db(),
            sentinels,
            config,
            protocol,
            current: Mutex::new((primary.generation, manager)),
            switching: tokio::sync::Mutex::new(()),
            channels: Mutex::new(Vec::new()),
            shard_channels: Mutex::new(Vec::new()),
            on_switch,
            mover: Mutex::new(None),
        });
        if moves {
            let mut changes = inner.sentinels.current.subscribe();
            let weak = Arc::downgrade(&inner);
            let task = tokio::spawn(async move {
                while changes.changed().await.is_ok() {
                    let Some(inner) = weak.upgrade() else { return };
                    if let Err(e) = inner.manager().await {
                        tracing::warn!(error = %e, "cannot reach the new primary yet; the next command tries again");
                    }
                }
            });
            *inner.mover.lock().unwrap_or_else(PoisonError::into_inner) = Some(task.abort_handle());
        }
        Ok(Follower { inner })
    }

    /// How many replicas the Sentinels know for the service.
    pub(crate) fn known_replicas(&self) -> u32 {
        self.inner.sentinels.known_replicas()
    }

    /// Subscribes on the current primary and remembers it for the next.
    pub(crate) async fn subscribe(&mut self, channel: impl redis::ToRedisArgs + Send) -> RedisResult<()> {
        let args = channel.to_redis_args();
        let (_, mut manager) = self.inner.manager().await?;
        for a in &args {
            manager.subscribe(a.as_slice()).await?;
        }
        self.inner.channels.lock().unwrap_or_else(PoisonError::into_inner).push(args);
        Ok(())
    }

    /// Subscribes to a shard channel on the current primary and remembers
    /// it for the next.
    #[cfg(feature = "consumers")]
    pub(crate) async fn ssubscribe(&mut self, channel: &str) -> RedisResult<()> {
        // Remembered first: a switch while this subscribes then carries
        // it to the new primary (a second subscription does no harm).
        {
            let mut known = self.inner.shard_channels.lock().unwrap_or_else(PoisonError::into_inner);
            if !known.iter().any(|c| c == channel) {
                known.push(channel.to_owned());
            }
        }
        let (_, mut manager) = self.inner.manager().await?;
        redis::cmd("SSUBSCRIBE").arg(channel).exec_async(&mut manager).await
    }
}

impl FollowerInner {
    /// The manager for the primary named last, made now if it changed,
    /// with the generation it was made for.
    async fn manager(&self) -> RedisResult<(u64, ConnectionManager)> {
        let made_for = |me: &Self| {
            let current = me.current.lock().unwrap_or_else(PoisonError::into_inner);
            (current.0, current.1.clone())
        };
        let (generation, manager) = made_for(self);
        if generation == self.sentinels.current.borrow().generation {
            return Ok((generation, manager));
        }
        let _one = self.switching.lock().await;
        let primary = self.sentinels.primary();
        let (generation, manager) = made_for(self);
        if generation == primary.generation {
            return Ok((generation, manager));
        }
        let mut manager = self.sentinels.manager_for(&primary, self.protocol, &self.config).await?;
        let channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner).clone();
        for args in channels.iter().flatten() {
            manager.subscribe(args.as_slice()).await?;
        }
        let shard_channels = self.shard_channels.lock().unwrap_or_else(PoisonError::into_inner).clone();
        for channel in &shard_channels {
            redis::cmd("SSUBSCRIBE").arg(channel).exec_async(&mut manager).await?;
        }
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = (primary.generation, manager.clone());
        tracing::info!(service = %self.sentinels.service(), primary = %primary.endpoint(), "connected to the new primary");
        if let Some(f) = &self.on_switch {
            f();
        }
        Ok((primary.generation, manager))
    }

    /// After a command's outcome: whether it was refused by a replica and
    /// the Sentinels now name another primary. A command a replica refused
    /// did not run, so sending it again there is safe. A lost connection,
    /// or a primary refusing writes for want of replicas (`NOREPLICAS`: it
    /// may be cut off from them, and the Sentinels may have promoted one),
    /// makes us ask the Sentinels in the background (at most once per ask
    /// gap, see `Sentinels::refresh`).
    async fn moved_after(&self, made_for: u64, readonly: bool, ask: bool) -> bool {
        if readonly {
            self.sentinels.refresh(true).await;
            return self.sentinels.current.borrow().generation != made_for;
        }
        if ask {
            self.sentinels.refresh_in_background();
        }
        false
    }
}

impl FollowerInner {
    /// `reply`, unless the primary changes first: a connection to the old
    /// one may wait for a reconnect that never succeeds (a dead primary)
    /// until the response timeout, while the new one is ready. The
    /// outcome of what was sent is then unknown, as after a lost
    /// connection, which the caller's retry rule handles.
    async fn unless_moved<T>(&self, made_for: u64, reply: impl Future<Output = RedisResult<T>>) -> RedisResult<T> {
        let mut changes = self.sentinels.current.subscribe();
        let moved = async {
            loop {
                if changes.borrow_and_update().generation != made_for {
                    return;
                }
                if changes.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::select! {
            r = reply => r,
            () = moved => Err(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, PrimaryChanged).into()),
        }
    }
}

/// Why a call ended early: the primary changed before its reply came
/// (the outcome is unknown; the next try goes to the new primary).
#[derive(Debug)]
pub(crate) struct PrimaryChanged;

impl std::fmt::Display for PrimaryChanged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the primary changed (Sentinel failover) before the reply came")
    }
}

impl std::error::Error for PrimaryChanged {}

/// Whether `e` is a call ended by a switch of primary ([`PrimaryChanged`]).
/// `redis` keeps the I/O error behind a type of its own that cannot be
/// looked into from here, so the error is known by its own words, which
/// only this module writes.
pub(crate) fn is_switch(e: &redis::RedisError) -> bool {
    e.is_io_error() && e.to_string().contains(&PrimaryChanged.to_string())
}

fn is_readonly(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
}

fn is_noreplicas(e: &redis::RedisError) -> bool {
    e.code() == Some("NOREPLICAS")
}

fn value_is_noreplicas(v: &Value) -> bool {
    matches!(v, Value::ServerError(e) if e.code() == "NOREPLICAS")
}

fn value_is_readonly(v: &Value) -> bool {
    matches!(v, Value::ServerError(e) if e.code() == "READONLY")
}

impl ConnectionLike for Follower {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (made_for, mut con) = self.inner.manager().await?;
            let reply = self.inner.unless_moved(made_for, con.req_packed_command(cmd)).await;
            let readonly = match &reply {
                Ok(v) => value_is_readonly(v),
                Err(e) => is_readonly(e),
            };
            let ask = match &reply {
                Ok(v) => value_is_noreplicas(v),
                Err(e) => is_unknown_outcome(e) || is_noreplicas(e),
            };
            if self.inner.moved_after(made_for, readonly, ask).await {
                let (_, mut con) = self.inner.manager().await?;
                return con.req_packed_command(cmd).await;
            }
            reply
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (made_for, mut con) = self.inner.manager().await?;
            let reply = self.inner.unless_moved(made_for, con.req_packed_commands(pipeline, offset, count)).await;
            let readonly = match &reply {
                Ok(values) => values.iter().any(value_is_readonly),
                Err(e) => is_readonly(e),
            };
            let ask = match &reply {
                Ok(values) => values.iter().any(value_is_noreplicas),
                Err(e) => is_unknown_outcome(e) || is_noreplicas(e),
            };
            // Not sent again here: the node may have turned replica in the
            // middle of the pipeline, after earlier commands ran. The
            // caller's retry rule knows which of its commands may go twice;
            // its next attempt reaches the new primary.
            self.inner.moved_after(made_for, readonly, ask).await;
            reply
        })
    }

    fn get_db(&self) -> i64 {
        self.inner.db
    }
}
