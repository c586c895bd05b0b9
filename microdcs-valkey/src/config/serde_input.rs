//! Reading the configuration with serde: every value goes through the same
//! parsing and validation as the environment, and unknown fields are
//! refused, so a misspelt setting is an error rather than a silent default.

use super::load::{SettingText, unknown_setting};
#[allow(clippy::wildcard_imports)]
use super::*;
use serde::Deserialize;

/// Section `MicroDcs:Valkey` as written, before parsing. Unknown fields are
/// refused: the section belongs to this crate, as `APP_MicroDcs__Valkey__*`
/// variables do, and a misspelt name would otherwise silently keep a default.
/// They are collected rather than refused by serde, so each is reported
/// as the environment reports it, with the closest known name.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawValkey {
    #[serde(flatten)]
    unknown: std::collections::BTreeMap<String, serde::de::IgnoredAny>,
    connection_string: Option<SettingText>,
    user: Option<SettingText>,
    password_file: Option<SettingText>,
    tls_ca_file: Option<SettingText>,
    tls_cert_file: Option<SettingText>,
    tls_key_file: Option<SettingText>,
    require_tls: Option<SettingText>,
    key_prefix: Option<SettingText>,
    poll_interval: Option<SettingText>,
    scope_refresh_interval: Option<SettingText>,
    write_attempts: Option<SettingText>,
    write_retry_delay: Option<SettingText>,
    change_stream_max_length: Option<SettingText>,
    consumer_scopes_at_once: Option<SettingText>,
    consumer_lag_limit: Option<SettingText>,
    op_history_length: Option<SettingText>,
    tombstone_retention: Option<SettingText>,
    writer_heartbeat: Option<SettingText>,
    writer_lifetime: Option<SettingText>,
    backfill_rate: Option<SettingText>,
    write_replicas: Option<SettingText>,
    write_replica_timeout: Option<SettingText>,
    write_wait_aof: Option<SettingText>,
    sentinel_user: Option<SettingText>,
    sentinel_password_file: Option<SettingText>,
    sentinel_tls: Option<SettingText>,
    connect_timeout: Option<SettingText>,
    response_timeout: Option<SettingText>,
    trace_scopes: Option<SettingText>,
    placement: Option<SettingText>,
}

impl RawValkey {
    /// Each setting by its name below `MicroDcs`.
    fn settings(self) -> impl Iterator<Item = (String, Option<SettingText>)> {
        [
            ("ConnectionString", self.connection_string),
            ("User", self.user),
            ("PasswordFile", self.password_file),
            ("TlsCaFile", self.tls_ca_file),
            ("TlsCertFile", self.tls_cert_file),
            ("TlsKeyFile", self.tls_key_file),
            ("RequireTls", self.require_tls),
            ("KeyPrefix", self.key_prefix),
            ("PollInterval", self.poll_interval),
            ("ScopeRefreshInterval", self.scope_refresh_interval),
            ("WriteAttempts", self.write_attempts),
            ("WriteRetryDelay", self.write_retry_delay),
            ("ChangeStreamMaxLength", self.change_stream_max_length),
            ("ConsumerScopesAtOnce", self.consumer_scopes_at_once),
            ("ConsumerLagLimit", self.consumer_lag_limit),
            ("OpHistoryLength", self.op_history_length),
            ("TombstoneRetention", self.tombstone_retention),
            ("WriterHeartbeat", self.writer_heartbeat),
            ("WriterLifetime", self.writer_lifetime),
            ("BackfillRate", self.backfill_rate),
            ("WriteReplicas", self.write_replicas),
            ("WriteReplicaTimeout", self.write_replica_timeout),
            ("WriteWaitAof", self.write_wait_aof),
            ("SentinelUser", self.sentinel_user),
            ("SentinelPasswordFile", self.sentinel_password_file),
            ("SentinelTls", self.sentinel_tls),
            ("ConnectTimeout", self.connect_timeout),
            ("ResponseTimeout", self.response_timeout),
            ("TraceScopes", self.trace_scopes),
            ("Placement", self.placement),
        ]
        .into_iter()
        .map(|(name, v)| (format!("Valkey:{name}"), v))
    }
}

/// Section `MicroDcs` as written, before parsing; unknown fields refused
/// for the same reason, and reported the same way, as in [`RawValkey`].
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawMicroDcs {
    #[serde(flatten)]
    unknown: std::collections::BTreeMap<String, serde::de::IgnoredAny>,
    valkey: Option<RawValkey>,
    dedupe_lease: Option<SettingText>,
    dedupe_retention: Option<SettingText>,
}

/// A problem for each unknown name (below `MicroDcs`), never passed to
/// `set`: its case-insensitive match would take a name serde refuses.
fn unknown_problems(names: impl IntoIterator<Item = impl AsRef<str>>) -> Vec<ConfigProblem> {
    names
        .into_iter()
        .map(|name| ConfigProblem {
            setting: format!("MicroDcs:{}", name.as_ref()),
            problem: unknown_setting(name.as_ref()),
        })
        .collect()
}

#[cfg_attr(docsrs, doc(cfg(feature = "config")))]
impl<'de> Deserialize<'de> for MicroDcsConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = RawMicroDcs::deserialize(d)?;
        let mut c = MicroDcsConfig::default();
        let mut unknown = unknown_problems(raw.unknown.keys().map(String::as_str));
        if let Some(v) = &raw.valkey {
            unknown.extend(unknown_problems(v.unknown.keys().map(|name| format!("Valkey:{name}"))));
        }
        let settings = raw.valkey.into_iter().flat_map(RawValkey::settings).chain([
            ("DedupeLease".to_owned(), raw.dedupe_lease),
            ("DedupeRetention".to_owned(), raw.dedupe_retention),
        ]);
        let mut problems = c.set_all(settings);
        problems.extend(unknown);
        c.checked(problems).map_err(serde::de::Error::custom)
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "config")))]
impl<'de> Deserialize<'de> for ValkeyConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = RawValkey::deserialize(d)?;
        let mut c = MicroDcsConfig::default();
        let unknown = unknown_problems(raw.unknown.keys().map(|name| format!("Valkey:{name}")));
        let mut problems = c.set_all(raw.settings());
        problems.extend(unknown);
        if let Err(e) = c.valkey.validate() {
            problems.extend(e.problems);
        }
        if problems.is_empty() { Ok(c.valkey) } else { Err(serde::de::Error::custom(ConfigError { problems })) }
    }
}
