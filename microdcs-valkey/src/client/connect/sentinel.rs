//! Connecting through Sentinel: the endpoints of the connection string are
//! Sentinels, which name the service's primary; every connection of the
//! handle then follows the primary they name (see `client::sentinel`).

use std::path::PathBuf;
use std::time::Instant;

use super::{ConnectError, ConnectPlan, Opened, PubSub, is_auth};
use crate::client::Connection;
use crate::client::sentinel::{AskFailure, Follower, SentinelSetup, Sentinels};
use crate::config::{ConfigError, Endpoint, ValkeyConfig};

/// What the configuration says about the Sentinels.
pub(crate) struct SentinelPlan {
    service: String,
    sentinels: Vec<(String, u16)>,
    user: Option<String>,
    password_file: Option<PathBuf>,
    tls: bool,
}

impl SentinelPlan {
    /// The plan when the connection string names a service; the
    /// Sentinels speak TLS as the data nodes do unless `SentinelTls` says
    /// otherwise.
    pub(super) fn from_config(config: &ValkeyConfig, ep: &Endpoint, data_tls: bool) -> Option<SentinelPlan> {
        let service = ep.service_name.clone()?;
        Some(SentinelPlan {
            service,
            sentinels: std::iter::once((ep.host.clone(), ep.port)).chain(ep.seeds.iter().cloned()).collect(),
            user: config.sentinel_user.clone(),
            password_file: config.sentinel_password_file.clone(),
            tls: config.sentinel_tls.unwrap_or(data_tls),
        })
    }

    /// How the handle names its server in messages.
    pub(super) fn describe(&self, first: &str) -> String {
        let more = self.sentinels.len() - 1;
        if more == 0 {
            format!("`{}` via Sentinel {first}", self.service)
        } else {
            format!("`{}` via Sentinel {first} (+{more})", self.service)
        }
    }
}

impl ConnectPlan {
    /// The steps of [`ConnectPlan::open`] through Sentinel: ask for the
    /// primary (refused credentials and a service no Sentinel knows end the
    /// start at once; no answer is asked again until the deadline), then
    /// the handle's connection to it.
    pub(super) async fn establish_sentinel(
        &self,
        plan: &SentinelPlan,
        last: &mut Option<String>,
    ) -> Result<Opened, ConnectError> {
        let setup = SentinelSetup {
            service: plan.service.clone(),
            sentinels: plan.sentinels.clone(),
            user: plan.user.clone(),
            password_file: plan.password_file.clone(),
            tls: plan.tls,
            data: self.info.redis_settings().clone(),
            data_tls: self.tls,
            tls_files: self.tls_files.clone(),
            probe: self.probe_config(),
            connect_timeout: self.connect_timeout,
            response_timeout: self.response_timeout,
        };
        let sentinels = Sentinels::start(setup, last).await.map_err(|e| match e {
            AskFailure::Auth { endpoint, user, reason } => ConnectError::Auth { endpoint, user, reason },
            AskFailure::UnknownService { reasons } => ConnectError::Config(ConfigError::connection_string(format!(
                "no Sentinel monitors serviceName `{}`: {reasons}",
                plan.service
            ))),
            AskFailure::NoAnswer { reasons } => self.unreachable(reasons),
        })?;
        let fail =
            |e: redis::RedisError| if is_auth(&e) { self.auth_error(&e) } else { self.unreachable(e.to_string()) };
        let config = self.manager_config();
        let protocol = self.info.redis_settings().protocol();
        let mut con: Connection =
            Follower::open(sentinels.clone(), config.clone(), protocol, None).await.map_err(fail)?.into();
        let start = Instant::now();
        let _: String = redis::cmd("PING").query_async(&mut con).await.map_err(fail)?;
        tracing::info!(service = %plan.service, primary = %sentinels.primary().endpoint(), "primary named by sentinel");
        Ok(Opened { once: con.clone(), con, pubsub: PubSub::Sentinel { sentinels, config }, rtt: start.elapsed() })
    }
}
