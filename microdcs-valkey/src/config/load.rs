//! Loading the settings from the environment, from `(name, value)` pairs
//! and (in `serde_input`) from any serde format: the `config` feature.

#[allow(clippy::wildcard_imports, reason = "the settings' module, split in two files")]
use super::*;
use serde::Deserialize;

/// A setting's value as text, whatever scalar the format gave, so it is
/// parsed exactly as from the environment.
pub(super) struct SettingText(pub(super) String);

impl<'de> Deserialize<'de> for SettingText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = SettingText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, number or boolean")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<SettingText, E> {
                Ok(SettingText(v.to_owned()))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<SettingText, E> {
                Ok(SettingText(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<SettingText, E> {
                Ok(SettingText(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<SettingText, E> {
                Ok(SettingText(v.to_string()))
            }
            fn visit_i128<E: serde::de::Error>(self, v: i128) -> Result<SettingText, E> {
                Ok(SettingText(v.to_string()))
            }
            fn visit_u128<E: serde::de::Error>(self, v: u128) -> Result<SettingText, E> {
                Ok(SettingText(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<SettingText, E> {
                Ok(SettingText(v.to_string()))
            }
        }
        d.deserialize_any(Text)
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "config")))]
impl MicroDcsConfig {
    /// Reads `APP_MicroDcs__Valkey__*`, `APP_MicroDcs__DedupeLease` and
    /// `APP_MicroDcs__DedupeRetention` from the environment (names compared
    /// without regard to case, as .NET configuration does), on top of the
    /// defaults, and validates the result.
    ///
    /// # Errors
    /// Every invalid or unknown setting, by name.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(std::env::vars())
    }

    /// Like [`MicroDcsConfig::from_env`] over any `(name, value)` pairs.
    ///
    /// # Errors
    /// Every invalid or unknown setting, by name.
    pub fn from_vars<K: AsRef<str>, V: AsRef<str>>(
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, ConfigError> {
        let mut c = MicroDcsConfig::default();
        let mut problems = Vec::new();
        for (k, v) in vars {
            let (k, v) = (k.as_ref(), v.as_ref());
            let Some(rest) = strip_prefix_ci(k, "APP_MicroDcs__") else { continue };
            let name = rest.replace("__", ":");
            if let Err(problem) = c.set(&name, v) {
                problems.push(ConfigProblem { setting: format!("MicroDcs:{name}"), problem });
            }
        }
        c.checked(problems)
    }

    /// `self` after validation, with `problems` found while reading it first.
    pub(super) fn checked(self, mut problems: Vec<ConfigProblem>) -> Result<Self, ConfigError> {
        if let Err(e) = self.validate() {
            problems.extend(e.problems);
        }
        if problems.is_empty() { Ok(self) } else { Err(ConfigError { problems }) }
    }

    /// Sets each present setting by its name below `MicroDcs`, collecting
    /// every problem by the setting's full name.
    pub(super) fn set_all(
        &mut self,
        settings: impl IntoIterator<Item = (String, Option<SettingText>)>,
    ) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        for (name, value) in settings {
            if let Some(SettingText(v)) = value
                && let Err(problem) = self.set(&name, &v)
            {
                problems.push(ConfigProblem { setting: format!("MicroDcs:{name}"), problem });
            }
        }
        problems
    }

    /// Every setting's name below `MicroDcs`, as [`MicroDcsConfig::set`]
    /// takes it (and as an unknown name's closest match is suggested).
    pub const SETTINGS: &'static [&'static str] = &[
        "DedupeLease",
        "DedupeRetention",
        "Valkey:ConnectionString",
        "Valkey:User",
        "Valkey:PasswordFile",
        "Valkey:TlsCaFile",
        "Valkey:TlsCertFile",
        "Valkey:TlsKeyFile",
        "Valkey:RequireTls",
        "Valkey:KeyPrefix",
        "Valkey:PollInterval",
        "Valkey:ScopeRefreshInterval",
        "Valkey:WriteAttempts",
        "Valkey:WriteRetryDelay",
        "Valkey:ChangeStreamMaxLength",
        "Valkey:ConsumerScopesAtOnce",
        "Valkey:ConsumerLagLimit",
        "Valkey:OpHistoryLength",
        "Valkey:TombstoneRetention",
        "Valkey:WriterHeartbeat",
        "Valkey:WriterLifetime",
        "Valkey:BackfillRate",
        "Valkey:WriteReplicas",
        "Valkey:WriteReplicaTimeout",
        "Valkey:WriteWaitAof",
        "Valkey:SentinelUser",
        "Valkey:SentinelPasswordFile",
        "Valkey:SentinelTls",
        "Valkey:ConnectTimeout",
        "Valkey:ResponseTimeout",
        "Valkey:TraceScopes",
        "Valkey:Placement",
    ];

    /// Sets one setting by its name below `MicroDcs` (`Valkey:KeyPrefix`,
    /// `DedupeLease`), case-insensitively, from text.
    ///
    /// # Errors
    /// Unknown name or a value that does not parse (the message never
    /// contains the value of a secret setting).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let dur = |v: &str| parse_duration(v);
        let lower = name.to_ascii_lowercase();
        let v = &mut self.valkey;
        match lower.as_str() {
            "dedupelease" => self.dedupe_lease = dur(value)?,
            "deduperetention" => self.dedupe_retention = dur(value)?,
            "valkey:connectionstring" => v.connection_string = Secret::new(value),
            "valkey:user" => v.user = Some(value.to_owned()).filter(|s| !s.is_empty()),
            "valkey:passwordfile" => v.password_file = Some(PathBuf::from(value)).filter(|p| !p.as_os_str().is_empty()),
            "valkey:tlscafile" => v.tls_ca_file = Some(PathBuf::from(value)).filter(|p| !p.as_os_str().is_empty()),
            "valkey:tlscertfile" => v.tls_cert_file = Some(PathBuf::from(value)).filter(|p| !p.as_os_str().is_empty()),
            "valkey:tlskeyfile" => v.tls_key_file = Some(PathBuf::from(value)).filter(|p| !p.as_os_str().is_empty()),
            "valkey:requiretls" => v.require_tls = parse_bool(value)?,
            "valkey:tracescopes" => v.trace_scopes = parse_bool(value)?,
            "valkey:placement" => v.placement = value.parse()?,
            "valkey:keyprefix" => v.key_prefix = value.to_owned(),
            "valkey:pollinterval" => v.poll_interval = dur(value)?,
            "valkey:scoperefreshinterval" => v.scope_refresh_interval = dur(value)?,
            "valkey:writeattempts" => {
                v.write_attempts = value.trim().parse().map_err(|_| format!("`{value}` is not a whole number"))?;
            }
            "valkey:writeretrydelay" => v.write_retry_delay = dur(value)?,
            "valkey:changestreammaxlength" => {
                v.change_stream_max_length =
                    value.trim().parse().map_err(|_| format!("`{value}` is not a whole number"))?;
            }
            "valkey:consumerscopesatonce" => {
                v.consumer_scopes_at_once =
                    value.trim().parse().map_err(|_| format!("`{value}` is not a whole number"))?;
            }
            "valkey:consumerlaglimit" => {
                v.consumer_lag_limit = if value.trim().is_empty() {
                    None
                } else {
                    Some(value.trim().parse().map_err(|_| format!("`{value}` is not a whole number"))?)
                };
            }
            "valkey:ophistorylength" => {
                v.op_history_length = value.trim().parse().map_err(|_| format!("`{value}` is not a whole number"))?;
            }
            "valkey:tombstoneretention" => v.tombstone_retention = dur(value)?,
            "valkey:writerheartbeat" => v.writer_heartbeat = dur(value)?,
            "valkey:writerlifetime" => v.writer_lifetime = dur(value)?,
            "valkey:backfillrate" => {
                v.backfill_rate = value.trim().parse().map_err(|_| format!("`{value}` is not a whole number"))?;
            }
            "valkey:writereplicas" => {
                if value.trim().eq_ignore_ascii_case("all") {
                    v.write_replicas = 0;
                    v.write_every_replica = true;
                } else {
                    v.write_replicas =
                        value.trim().parse().map_err(|_| format!("`{value}` is neither a whole number nor `all`"))?;
                    v.write_every_replica = false;
                }
            }
            "valkey:writereplicatimeout" => v.write_replica_timeout = dur(value)?,
            "valkey:writewaitaof" => v.write_wait_aof = parse_bool(value)?,
            "valkey:sentineluser" => v.sentinel_user = Some(value.to_owned()).filter(|s| !s.is_empty()),
            "valkey:sentinelpasswordfile" => {
                v.sentinel_password_file = Some(PathBuf::from(value)).filter(|p| !p.as_os_str().is_empty());
            }
            "valkey:sentineltls" => {
                v.sentinel_tls = if value.trim().is_empty() { None } else { Some(parse_bool(value)?) };
            }
            "valkey:connecttimeout" => v.connect_timeout = dur(value)?,
            "valkey:responsetimeout" => v.response_timeout = dur(value)?,
            _ => return Err(unknown_setting(name)),
        }
        Ok(())
    }
}

/// The problem of an unknown setting `name`, with the closest known name
/// when one is near (by the derive's own rule, [`microdcs_schema::suggest`]):
/// a typo (`ConectionString`), or a known setting's name outside its
/// section (`PollInterval` for `Valkey:PollInterval`).
pub(super) fn unknown_setting(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let known: Vec<(String, &str)> = MicroDcsConfig::SETTINGS.iter().map(|k| (k.to_ascii_lowercase(), *k)).collect();
    let last = |s: &'_ str| -> String { s.rsplit(':').next().unwrap_or_default().to_owned() };
    let near = microdcs_schema::suggest(&lower, known.iter().map(|(l, _)| l.as_str()))
        .and_then(|l| known.iter().find(|(k, _)| k == l))
        .or_else(|| {
            let parts: Vec<String> = known.iter().map(|(l, _)| last(l)).collect();
            let part = microdcs_schema::suggest(&last(&lower), parts.iter().map(String::as_str))?;
            known.iter().find(|(k, _)| last(k) == part)
        });
    match near {
        Some((_, known)) => format!("unknown setting; did you mean `{known}`?"),
        None => "unknown setting".to_owned(),
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    (s.len() >= prefix.len() && s.is_char_boundary(prefix.len()) && s[..prefix.len()].eq_ignore_ascii_case(prefix))
        .then(|| &s[prefix.len()..])
}
