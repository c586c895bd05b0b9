//! Configuration of section `MicroDcs:Valkey` (seed `001`, "Configuration").
//!
//! Load it from environment variables (`APP_MicroDcs__Valkey__KeyPrefix`,
//! ...; see [`MicroDcsConfig::from_env`]) or from any serde format (the
//! `MicroDcs` section of a file; see [`MicroDcsConfig`]'s field names).
//! Durations are written `1s`, `100ms`, `2m`, `1h`, `1m30s`, or as a .NET
//! `TimeSpan` (`00:00:01.5`). Secrets never reach `Debug`, `Display`, logs or
//! error texts.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::KeyPrefix;

/// Defaults of the seed's configuration table.
pub mod defaults {
    use std::time::Duration;

    /// `ConnectionString`.
    pub const CONNECTION_STRING: &str = "localhost:6379";
    /// `KeyPrefix`.
    pub const KEY_PREFIX: &str = "microdcs";
    /// `PollInterval`.
    pub const POLL_INTERVAL: Duration = Duration::from_secs(1);
    /// `ScopeRefreshInterval`.
    pub const SCOPE_REFRESH_INTERVAL: Duration = Duration::from_secs(5);
    /// `WriteAttempts`.
    pub const WRITE_ATTEMPTS: u32 = 4;
    /// `WriteRetryDelay`.
    pub const WRITE_RETRY_DELAY: Duration = Duration::from_millis(100);
    /// `ChangeStreamMaxLength`.
    pub const CHANGE_STREAM_MAX_LENGTH: u64 = 5000;
    /// `ConnectTimeout` (not in the seed table: how long start may wait).
    pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
    /// `ResponseTimeout` (not in the seed table: a reply slower than this is an unknown outcome).
    pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
    /// `MicroDcs:DedupeLease` (not given by the seed).
    pub const DEDUPE_LEASE: Duration = Duration::from_secs(30);
    /// `MicroDcs:DedupeRetention` (not given by the seed).
    pub const DEDUPE_RETENTION: Duration = Duration::from_secs(24 * 3600);
}

/// A string that never shows in `Debug` or `Display`.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The secret itself; do not log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Secret)
    }
}

/// Section `MicroDcs:Valkey`.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields, default)]
pub struct ValkeyConfig {
    /// `host:port`, a `redis://`/`rediss://`/`valkey://`/`valkeys://` URL,
    /// or a StackExchange.Redis string (`host:port,user=u,password=p,ssl=true`).
    /// May contain the password; never shown. Prefer `PasswordFile`.
    pub connection_string: Secret,
    /// ACL user; overrides the user of the connection string.
    pub user: Option<String>,
    /// File holding the password, read before every connect attempt (one
    /// trailing line break removed). Not together with a password in the
    /// connection string.
    pub password_file: Option<PathBuf>,
    /// PEM file of the CA of the server certificate: turns TLS on and trusts
    /// this CA besides the system store. Must exist.
    pub tls_ca_file: Option<PathBuf>,
    /// Fail at start when TLS is off.
    pub require_tls: bool,
    /// Prefix of every key.
    pub key_prefix: String,
    /// Fallback read of all streams when no nudge arrives.
    #[serde(deserialize_with = "de_duration")]
    pub poll_interval: Duration,
    /// Read of the scope registry.
    #[serde(deserialize_with = "de_duration")]
    pub scope_refresh_interval: Duration,
    /// Attempts of a write whose outcome is unknown after a connection error.
    pub write_attempts: u32,
    /// Pause before such a write is checked and repeated.
    #[serde(deserialize_with = "de_duration")]
    pub write_retry_delay: Duration,
    /// Approximate length of the change streams.
    pub change_stream_max_length: u64,
    /// How long connecting at start may take.
    #[serde(deserialize_with = "de_duration")]
    pub connect_timeout: Duration,
    /// How long a reply may take before the command counts as failed.
    #[serde(deserialize_with = "de_duration")]
    pub response_timeout: Duration,
}

impl Default for ValkeyConfig {
    fn default() -> Self {
        ValkeyConfig {
            connection_string: Secret::new(defaults::CONNECTION_STRING),
            user: None,
            password_file: None,
            tls_ca_file: None,
            require_tls: false,
            key_prefix: defaults::KEY_PREFIX.to_owned(),
            poll_interval: defaults::POLL_INTERVAL,
            scope_refresh_interval: defaults::SCOPE_REFRESH_INTERVAL,
            write_attempts: defaults::WRITE_ATTEMPTS,
            write_retry_delay: defaults::WRITE_RETRY_DELAY,
            change_stream_max_length: defaults::CHANGE_STREAM_MAX_LENGTH,
            connect_timeout: defaults::CONNECT_TIMEOUT,
            response_timeout: defaults::RESPONSE_TIMEOUT,
        }
    }
}

impl fmt::Debug for ValkeyConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValkeyConfig")
            .field("connection_string", &redact_connection_string(self.connection_string.expose()))
            .field("user", &self.user)
            .field("password_file", &self.password_file)
            .field("tls_ca_file", &self.tls_ca_file)
            .field("require_tls", &self.require_tls)
            .field("key_prefix", &self.key_prefix)
            .field("poll_interval", &self.poll_interval)
            .field("scope_refresh_interval", &self.scope_refresh_interval)
            .field("write_attempts", &self.write_attempts)
            .field("write_retry_delay", &self.write_retry_delay)
            .field("change_stream_max_length", &self.change_stream_max_length)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .finish()
    }
}

impl fmt::Display for ValkeyConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "valkey {} (prefix `{}`{}{})",
            redact_connection_string(self.connection_string.expose()),
            self.key_prefix,
            if self.password_file.is_some() { ", password file" } else { "" },
            if self.tls_ca_file.is_some() { ", TLS with CA file" } else { "" },
        )
    }
}

/// Section `MicroDcs`: the Valkey section plus the dedupe settings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct MicroDcsConfig {
    /// `MicroDcs:Valkey`.
    pub valkey: ValkeyConfig,
    /// `MicroDcs:DedupeLease`: how long a dedupe claim holds.
    #[serde(deserialize_with = "de_duration")]
    pub dedupe_lease: Duration,
    /// `MicroDcs:DedupeRetention`: how long `done` is kept.
    #[serde(deserialize_with = "de_duration")]
    pub dedupe_retention: Duration,
}

impl Default for MicroDcsConfig {
    fn default() -> Self {
        MicroDcsConfig {
            valkey: ValkeyConfig::default(),
            dedupe_lease: defaults::DEDUPE_LEASE,
            dedupe_retention: defaults::DEDUPE_RETENTION,
        }
    }
}

/// One invalid setting: its full name and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// Setting, e.g. `MicroDcs:Valkey:KeyPrefix`.
    pub setting: String,
    /// What is wrong (never contains a secret).
    pub problem: String,
}

/// Every problem found in a configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The problems, in setting order.
    pub problems: Vec<ConfigProblem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid configuration:")?;
        for p in &self.problems {
            write!(f, "\n  {}: {}", p.setting, p.problem)?;
        }
        Ok(())
    }
}

impl ConfigError {
    fn one(setting: &str, problem: impl Into<String>) -> Self {
        ConfigError { problems: vec![ConfigProblem { setting: setting.to_owned(), problem: problem.into() }] }
    }
}

const SECTION: &str = "MicroDcs:Valkey";

fn setting(name: &str) -> String {
    format!("{SECTION}:{name}")
}

/// Parses `1s`, `100ms`, `250us`, `2m`, `1h`, `1d`, combinations (`1m30s`),
/// or a .NET `TimeSpan` `[d.]hh:mm:ss[.fff]`.
///
/// # Errors
/// A text that is none of these, with what was expected.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty duration; write e.g. `1s` or `100ms`".into());
    }
    if t.contains(':') {
        return parse_timespan(t).ok_or_else(|| format!("`{t}` is not a duration like `00:00:01.5`"));
    }
    let mut total = Duration::ZERO;
    let mut rest = t;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (num, after) = rest.split_at(num_len);
        let unit_len = after.find(|c: char| c.is_ascii_digit()).unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let value: f64 =
            num.parse().map_err(|_| format!("`{t}` is not a duration; write e.g. `1s`, `100ms`, `1m30s`"))?;
        let scale = match unit.trim() {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            "" => return Err(format!("`{t}` has no unit; write e.g. `{num}s` or `{num}ms`")),
            u => return Err(format!("`{t}`: unknown unit `{u}` (use ns, us, ms, s, m, h, d)")),
        };
        total += Duration::from_secs_f64(value * scale);
        rest = next;
    }
    Ok(total)
}

fn parse_timespan(t: &str) -> Option<Duration> {
    let (days, clock) = match t.split_once('.') {
        Some((d, c)) if c.contains(':') && !d.contains(':') => (d.parse::<u64>().ok()?, c),
        _ => (0, t),
    };
    let parts: Vec<&str> = clock.split(':').collect();
    if parts.len() != 3 {
        return None;
    }
    let h: u64 = parts[0].parse().ok()?;
    let m: u64 = parts[1].parse().ok()?;
    let s: f64 = parts[2].parse().ok()?;
    if m >= 60 || !(0.0..60.0).contains(&s) {
        return None;
    }
    Some(Duration::from_secs(days * 86400 + h * 3600 + m * 60) + Duration::from_secs_f64(s))
}

fn de_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    parse_duration(&s).map_err(serde::de::Error::custom)
}

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
        if let Err(e) = c.validate() {
            problems.extend(e.problems);
        }
        if problems.is_empty() { Ok(c) } else { Err(ConfigError { problems }) }
    }

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
            "valkey:requiretls" => v.require_tls = parse_bool(value)?,
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
            "valkey:connecttimeout" => v.connect_timeout = dur(value)?,
            "valkey:responsetimeout" => v.response_timeout = dur(value)?,
            _ => return Err("unknown setting".to_owned()),
        }
        Ok(())
    }

    /// Checks every setting; see [`ValkeyConfig::validate`].
    ///
    /// # Errors
    /// Every problem, by setting name.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = self.valkey.validate().err().map(|e| e.problems).unwrap_or_default();
        if self.dedupe_lease.is_zero() {
            problems.push(ConfigProblem {
                setting: "MicroDcs:DedupeLease".into(),
                problem: "must be longer than zero".into(),
            });
        }
        if self.dedupe_retention.is_zero() {
            problems.push(ConfigProblem {
                setting: "MicroDcs:DedupeRetention".into(),
                problem: "must be longer than zero".into(),
            });
        }
        if problems.is_empty() { Ok(()) } else { Err(ConfigError { problems }) }
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    (s.len() >= prefix.len() && s.is_char_boundary(prefix.len()) && s[..prefix.len()].eq_ignore_ascii_case(prefix))
        .then(|| &s[prefix.len()..])
}

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(format!("`{v}` is not true or false")),
    }
}

/// Where and how to connect, parsed from `ConnectionString`.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: u16,
    /// TLS requested by the string (`rediss://`, `ssl=true`).
    pub tls: bool,
    /// ACL user from the string.
    pub user: Option<String>,
    /// Password from the string.
    pub password: Option<Secret>,
    /// Database number.
    pub db: i64,
    /// `connectTimeout=` of a StackExchange string.
    pub connect_timeout: Option<Duration>,
    /// `syncTimeout=`/`asyncTimeout=` of a StackExchange string.
    pub response_timeout: Option<Duration>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("db", &self.db)
            .finish_non_exhaustive()
    }
}

/// StackExchange.Redis options that change nothing here (accepted, ignored).
const IGNORED_OPTIONS: &[&str] = &[
    "abortconnect",
    "allowadmin",
    "connectretry",
    "keepalive",
    "resolvedns",
    "tiebreaker",
    "version",
    "checkcertificaterevocation",
    "configcheckseconds",
    "name",
];

/// Parses a connection string (see [`ValkeyConfig::connection_string`]).
///
/// # Errors
/// What is wrong, never quoting a password.
pub fn parse_connection_string(cs: &str) -> Result<Endpoint, String> {
    let cs = cs.trim();
    if cs.is_empty() {
        return Err("empty; write `host:port`".into());
    }
    let lower = cs.to_ascii_lowercase();
    if ["redis://", "rediss://", "valkey://", "valkeys://"].iter().any(|s| lower.starts_with(s)) {
        return parse_url(cs);
    }
    if lower.contains("://") {
        return Err("unknown URL scheme; use redis://, rediss://, valkey:// or valkeys://".into());
    }
    let mut ep = Endpoint {
        host: String::new(),
        port: 6379,
        tls: false,
        user: None,
        password: None,
        db: 0,
        connect_timeout: None,
        response_timeout: None,
    };
    let mut endpoints = 0;
    for part in cs.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((key, value)) = part.split_once('=') {
            let key = key.trim().to_ascii_lowercase();
            let value = value.trim();
            let ms = |v: &str| -> Result<Duration, String> {
                v.parse::<u64>().map(Duration::from_millis).map_err(|_| format!("`{key}` must be milliseconds"))
            };
            match key.as_str() {
                "user" => ep.user = Some(value.to_owned()),
                "password" => ep.password = Some(Secret::new(value)),
                "ssl" => ep.tls = parse_bool(value).map_err(|e| format!("ssl: {e}"))?,
                "defaultdatabase" => {
                    ep.db = value.parse().map_err(|_| "defaultDatabase must be a number".to_owned())?
                }
                "connecttimeout" => ep.connect_timeout = Some(ms(value)?),
                "synctimeout" | "asynctimeout" => ep.response_timeout = Some(ms(value)?),
                k if IGNORED_OPTIONS.contains(&k) => {}
                "servicename" => return Err("Sentinel (serviceName) is not supported: one Valkey per island".into()),
                other => return Err(format!("unknown option `{other}`")),
            }
        } else {
            endpoints += 1;
            if endpoints > 1 {
                return Err("more than one endpoint; an island has one Valkey (no cluster)".into());
            }
            let (host, port) = split_host_port(part)?;
            ep.host = host;
            ep.port = port;
        }
    }
    if endpoints == 0 {
        return Err("no `host:port` endpoint".into());
    }
    Ok(ep)
}

fn split_host_port(part: &str) -> Result<(String, u16), String> {
    // [::1]:6379, host:6379, host
    if let Some(rest) = part.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or("unclosed `[` in the host")?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| format!("port `{p}` is not a number"))?,
            None => 6379,
        };
        return Ok((host.to_owned(), port));
    }
    match part.rsplit_once(':') {
        Some((host, port)) => {
            if host.is_empty() {
                return Err("no host before `:`".into());
            }
            Ok((host.to_owned(), port.parse().map_err(|_| format!("port `{port}` is not a number"))?))
        }
        None => Ok((part.to_owned(), 6379)),
    }
}

fn parse_url(cs: &str) -> Result<Endpoint, String> {
    use redis::IntoConnectionInfo;
    let info = cs.into_connection_info().map_err(|e| {
        // redis-rs does not put the password in its URL errors, but be sure.
        let msg = e.to_string();
        if msg.contains(cs) { "not a valid URL".to_owned() } else { format!("not a valid URL: {msg}") }
    })?;
    let (host, port, tls) = match info.addr() {
        redis::ConnectionAddr::Tcp(h, p) => (h.clone(), *p, false),
        redis::ConnectionAddr::TcpTls { host, port, .. } => (host.clone(), *port, true),
        _ => return Err("unix sockets are not supported".into()),
    };
    let r = info.redis_settings();
    Ok(Endpoint {
        host,
        port,
        tls,
        user: r.username().map(str::to_owned),
        password: r.password().map(Secret::new),
        db: r.db(),
        connect_timeout: None,
        response_timeout: None,
    })
}

/// A connection string with any password replaced by `***`.
pub fn redact_connection_string(cs: &str) -> String {
    let lower = cs.to_ascii_lowercase();
    if let Some(scheme_end) = lower.find("://") {
        let rest = &cs[scheme_end + 3..];
        let auth_end = rest.find('/').unwrap_or(rest.len());
        if let Some(at) = rest[..auth_end].rfind('@') {
            let userinfo = &rest[..at];
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            let masked = if userinfo.contains(':') { format!("{user}:***") } else { "***".to_owned() };
            return format!("{}{masked}{}", &cs[..scheme_end + 3], &rest[at..]);
        }
        return cs.to_owned();
    }
    cs.split(',')
        .map(|part| match part.split_once('=') {
            Some((k, _)) if k.trim().eq_ignore_ascii_case("password") => format!("{k}=***"),
            _ => part.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

impl ValkeyConfig {
    /// Checks every setting: the connection string parses, `PasswordFile` is
    /// not combined with a password in the string, `TlsCaFile` exists,
    /// `RequireTls` is met, the key prefix is valid, counts and intervals are
    /// above zero.
    ///
    /// # Errors
    /// Every problem, by setting name.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        let mut bad = |name: &str, problem: String| problems.push(ConfigProblem { setting: setting(name), problem });
        match parse_connection_string(self.connection_string.expose()) {
            Ok(ep) => {
                if ep.password.is_some() && self.password_file.is_some() {
                    bad("PasswordFile", "set together with a password in ConnectionString; use one of them".into());
                }
                if self.require_tls && !ep.tls && self.tls_ca_file.is_none() {
                    bad(
                        "RequireTls",
                        "TLS is off: set TlsCaFile, or use rediss:// or ssl=true in ConnectionString".into(),
                    );
                }
            }
            Err(e) => bad("ConnectionString", e),
        }
        if let Some(f) = &self.tls_ca_file
            && !f.is_file()
        {
            bad("TlsCaFile", format!("`{}` does not exist or is not a file", f.display()));
        }
        if let Some(f) = &self.password_file
            && !f.is_file()
        {
            bad("PasswordFile", format!("`{}` does not exist or is not a file", f.display()));
        }
        if let Err(e) = KeyPrefix::new(self.key_prefix.clone()) {
            bad("KeyPrefix", e.to_string());
        }
        for (name, d) in [
            ("PollInterval", self.poll_interval),
            ("ScopeRefreshInterval", self.scope_refresh_interval),
            ("ConnectTimeout", self.connect_timeout),
            ("ResponseTimeout", self.response_timeout),
        ] {
            if d.is_zero() {
                bad(name, "must be longer than zero".into());
            }
        }
        if self.write_attempts == 0 {
            bad("WriteAttempts", "must be at least 1".into());
        }
        if self.change_stream_max_length == 0 {
            bad("ChangeStreamMaxLength", "must be at least 1".into());
        }
        if problems.is_empty() { Ok(()) } else { Err(ConfigError { problems }) }
    }

    /// The parsed connection string.
    ///
    /// # Errors
    /// See [`parse_connection_string`].
    pub fn endpoint(&self) -> Result<Endpoint, ConfigError> {
        parse_connection_string(self.connection_string.expose())
            .map_err(|e| ConfigError::one(&setting("ConnectionString"), e))
    }

    /// The validated key prefix.
    ///
    /// # Errors
    /// An invalid prefix.
    pub fn prefix(&self) -> Result<KeyPrefix, ConfigError> {
        KeyPrefix::new(self.key_prefix.clone()).map_err(|e| ConfigError::one(&setting("KeyPrefix"), e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("00:00:01.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1.02:00:00"), Ok(Duration::from_secs(26 * 3600)));
        assert!(parse_duration("5").unwrap_err().contains("no unit"));
        assert!(parse_duration("5 parsecs").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn connection_strings() {
        let ep = parse_connection_string("localhost:6379").unwrap();
        assert_eq!((ep.host.as_str(), ep.port, ep.tls), ("localhost", 6379, false));
        let ep = parse_connection_string(
            "cache.local,user=app,password=s3cret,ssl=true,abortConnect=false,connectTimeout=2000",
        )
        .unwrap();
        assert_eq!((ep.host.as_str(), ep.port, ep.tls), ("cache.local", 6379, true));
        assert_eq!(ep.user.as_deref(), Some("app"));
        assert_eq!(ep.password.as_ref().map(Secret::expose), Some("s3cret"));
        assert_eq!(ep.connect_timeout, Some(Duration::from_secs(2)));
        assert!(!format!("{ep:?}").contains("s3cret"));
        let ep = parse_connection_string("rediss://app:p%40ss@h:7000/2").unwrap();
        assert_eq!((ep.host.as_str(), ep.port, ep.tls, ep.db), ("h", 7000, true, 2));
        assert_eq!(ep.password.as_ref().map(Secret::expose), Some("p@ss"));
        assert!(parse_connection_string("a:1,b:2").unwrap_err().contains("more than one endpoint"));
        assert!(parse_connection_string("h:1,bogus=2").unwrap_err().contains("unknown option `bogus`"));
        assert!(parse_connection_string("h:x").unwrap_err().contains("port"));
        assert!(parse_connection_string("http://h").unwrap_err().contains("scheme"));
    }

    #[test]
    fn redaction() {
        assert_eq!(redact_connection_string("redis://app:s3cret@h:1/0"), "redis://app:***@h:1/0");
        assert_eq!(redact_connection_string("redis://:s3cret@h:1"), "redis://:***@h:1");
        assert_eq!(redact_connection_string("h:1,password=s3cret,ssl=true"), "h:1,password=***,ssl=true");
        assert_eq!(redact_connection_string("h:1"), "h:1");
    }
}
