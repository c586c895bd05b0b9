//! `ConnectionString`: `host:port`, a `redis://`-style URL, or a
//! StackExchange.Redis string, parsed into one [`Endpoint`] (with the
//! further `host:port` seeds of a cluster, when it names several).

use std::fmt;
use std::time::Duration;

use super::option_names::IGNORED_OPTIONS;
use super::parse_bool;
use super::secret::Secret;

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
    /// Further `host:port` endpoints after the first
    /// (`10.0.0.1:6379,10.0.0.2:6379`): nodes of one Valkey Cluster, tried
    /// in turn to learn its topology. Empty for one endpoint (which may
    /// still be a cluster node: the server says so when connecting).
    pub seeds: Vec<(String, u16)>,
    /// `serviceName=` of a StackExchange string: the endpoints are
    /// Sentinels, and the handle follows the primary they name for this
    /// service (an endpoint without a port means Sentinel's 26379).
    pub service_name: Option<String>,
}

/// The port of an endpoint named without one: Valkey's, or Sentinel's
/// when the string names a service.
const DEFAULT_PORT: u16 = 6379;
const DEFAULT_SENTINEL_PORT: u16 = 26379;

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("db", &self.db)
            .field("seeds", &self.seeds)
            .field("service_name", &self.service_name)
            .finish_non_exhaustive()
    }
}

/// Parses a connection string (see [`super::ValkeyConfig::connection_string`]).
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
        if !super::HAS_TLS_BACKEND && (lower.starts_with("rediss://") || lower.starts_with("valkeys://")) {
            return Err(super::NO_TLS_BACKEND.into());
        }
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
        seeds: Vec::new(),
        service_name: None,
    };
    // Endpoints as written; a missing port is filled in at the end, when
    // it is known whether they are Sentinels.
    let mut endpoints: Vec<(String, Option<u16>)> = Vec::new();
    // After a password, a part may be a piece of it (a `,` in the password
    // splits it): such parts are never quoted in an error.
    let mut after_password = false;
    for part in cs.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((key, value)) = part.split_once('=') {
            let key = key.trim().to_ascii_lowercase();
            let value = value.trim();
            // Zero would fail every connect or reply at once, so it is refused
            // like `ConnectTimeout`/`ResponseTimeout` of zero.
            let ms = |v: &str| -> Result<Duration, String> {
                let d =
                    v.parse::<u64>().map(Duration::from_millis).map_err(|_| format!("`{key}` must be milliseconds"))?;
                if d.is_zero() {
                    Err(format!("`{key}` must be longer than zero"))
                } else if d > super::defaults::MAX_DURATION {
                    Err(format!("`{key}` is too long; the longest accepted duration is 100 years (36500 days)"))
                } else {
                    Ok(d)
                }
            };
            match key.as_str() {
                "user" => ep.user = Some(value.to_owned()),
                "password" => {
                    ep.password = Some(Secret::new(value));
                    after_password = true;
                }
                "ssl" => ep.tls = parse_bool(value).map_err(|e| format!("ssl: {e}"))?,
                "defaultdatabase" => {
                    ep.db = value.parse().map_err(|_| "defaultDatabase must be a number".to_owned())?
                }
                "connecttimeout" => ep.connect_timeout = Some(ms(value)?),
                "synctimeout" | "asynctimeout" => ep.response_timeout = Some(ms(value)?),
                k if IGNORED_OPTIONS.contains(&k) => {}
                "servicename" => {
                    // Sentinel answers a name that is one word of printable
                    // characters; anything else is a typo to report now.
                    if value.is_empty() || !value.chars().all(|c| c.is_ascii_graphic()) {
                        return Err("serviceName must be one word of printable characters".into());
                    }
                    if ep.service_name.is_some() {
                        return Err("serviceName is given twice".into());
                    }
                    ep.service_name = Some(value.to_owned());
                }
                // Named only when it cannot be a piece of a password that
                // held a `,` (the split would make one an option).
                other if !after_password && other.chars().all(|c| c.is_ascii_alphabetic()) && other.len() <= 24 => {
                    return Err(format!("unknown option `{other}`"));
                }
                _ => {
                    return Err("an option that is not `name=value` (a `,` in a password must be escaped; use a URL)"
                        .to_owned());
                }
            }
        } else {
            // `user:password@host` is no StackExchange form; taken as a host it
            // would carry the password into logs and error texts.
            if part.contains('@') {
                return Err("`@` in the endpoint: write credentials as `host:port,user=u,password=p` or as a \
                            redis:// URL, not `user:password@host`"
                    .into());
            }
            // After a password, a bare part may be a piece of it (a `,` in
            // the password splits it): never taken as an endpoint, never quoted.
            if after_password {
                return Err("an endpoint after `password=`: name every endpoint first, and escape a `,` in a \
                            password (or use a URL)"
                    .into());
            }
            endpoints.push(split_host_port(part)?);
        }
    }
    let default_port = if ep.service_name.is_some() { DEFAULT_SENTINEL_PORT } else { DEFAULT_PORT };
    let mut named: Vec<(String, u16)> = Vec::new();
    for (host, port) in endpoints {
        let port = port.unwrap_or(default_port);
        if named.contains(&(host.clone(), port)) {
            return Err(format!("the endpoint `{}` is named twice", show_host_port(&host, port)));
        }
        named.push((host, port));
    }
    let mut named = named.into_iter();
    let Some((host, port)) = named.next() else {
        return Err("no `host:port` endpoint".into());
    };
    ep.host = host;
    ep.port = port;
    ep.seeds = named.collect();
    Ok(ep)
}

/// `host:port`, with an IPv6 host in brackets.
fn show_host_port(host: &str, port: u16) -> String {
    if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

/// `host` and the port, if one is written.
fn split_host_port(part: &str) -> Result<(String, Option<u16>), String> {
    // [::1]:6379, host:6379, host
    if let Some(rest) = part.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or("unclosed `[` in the host")?;
        let port = match after.strip_prefix(':') {
            // The text is not quoted: with a `,` in a password, a piece of
            // it can land here.
            Some(p) => Some(p.parse().map_err(|_| "a port that is not a number".to_owned())?),
            None => None,
        };
        return Ok((host.to_owned(), port));
    }
    match part.rsplit_once(':') {
        Some((host, port)) => {
            if host.is_empty() {
                return Err("no host before `:`".into());
            }
            Ok((host.to_owned(), Some(port.parse().map_err(|_| "a port that is not a number".to_owned())?)))
        }
        None => Ok((part.to_owned(), None)),
    }
}

fn parse_url(cs: &str) -> Result<Endpoint, String> {
    use redis::IntoConnectionInfo;
    let info = cs.into_connection_info().map_err(|e| {
        // redis-rs does not put the password in its URL errors, but be sure.
        let msg = e.to_string();
        let hint = "(a `/`, `?`, `#` or `@` in the user or password must be percent-encoded, `/` as `%2F`)";
        if msg.contains(cs) { format!("not a valid URL {hint}") } else { format!("not a valid URL: {msg} {hint}") }
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
        seeds: Vec::new(),
        service_name: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        #[cfg(any(feature = "tls-native-tls", feature = "tls-rustls"))]
        {
            let ep = parse_connection_string("rediss://app:p%40ss@h:7000/2").unwrap();
            assert_eq!((ep.host.as_str(), ep.port, ep.tls, ep.db), ("h", 7000, true, 2));
            assert_eq!(ep.password.as_ref().map(Secret::expose), Some("p@ss"));
        }
        let ep = parse_connection_string("a:1, b:2,[::1]:3,password=p").unwrap();
        let e = parse_connection_string("a:1,password=p,b:2").unwrap_err();
        assert!(e.contains("endpoint after `password=`") && !e.contains("b:2"), "{e}");
        assert_eq!((ep.host.as_str(), ep.port), ("a", 1));
        assert_eq!(ep.seeds, [("b".to_owned(), 2), ("::1".to_owned(), 3)]);
        assert!(parse_connection_string("a:1,b:2,a:1").unwrap_err().contains("`a:1` is named twice"));
        assert!(parse_connection_string("a:1").unwrap().seeds.is_empty());
        assert!(parse_connection_string("h:1,bogus=2").unwrap_err().contains("unknown option `bogus`"));
        assert!(parse_connection_string("h:x").unwrap_err().contains("port"));
        assert!(parse_connection_string("http://h").unwrap_err().contains("scheme"));
    }

    #[test]
    fn a_service_name_makes_the_endpoints_sentinels() {
        let ep = parse_connection_string("s1,s2:26380,[::1],serviceName=mymaster,password=p").unwrap();
        assert_eq!(ep.service_name.as_deref(), Some("mymaster"));
        assert_eq!((ep.host.as_str(), ep.port), ("s1", 26379));
        assert_eq!(ep.seeds, [("s2".to_owned(), 26380), ("::1".to_owned(), 26379)]);
        assert_eq!(parse_connection_string("h").unwrap().port, 6379);
        assert!(parse_connection_string("h:1").unwrap().service_name.is_none());
        for bad in ["h,serviceName=", "h,serviceName=a b", "h,serviceName=a,serviceName=b"] {
            assert!(parse_connection_string(bad).unwrap_err().contains("serviceName"), "{bad}");
        }
        // The default port is applied before duplicates are found.
        let e = parse_connection_string("s1,s1:26379,serviceName=m").unwrap_err();
        assert!(e.contains("`s1:26379` is named twice"), "{e}");
    }

    #[test]
    fn zero_or_huge_timeouts_are_refused() {
        for opt in ["connectTimeout", "syncTimeout", "asyncTimeout", "CONNECTTIMEOUT"] {
            let e = parse_connection_string(&format!("h:1,{opt}=0")).unwrap_err();
            assert!(e.contains("longer than zero"), "{opt}: {e}");
            let e = parse_connection_string(&format!("h:1,{opt}=18446744073709551615")).unwrap_err();
            assert!(e.contains("too long"), "{opt}: {e}");
        }
        assert_eq!(
            parse_connection_string("h:1,syncTimeout=1").unwrap().response_timeout,
            Some(Duration::from_millis(1))
        );
    }

    #[test]
    fn credentials_before_a_host_without_a_scheme_are_refused() {
        for cs in ["user:s3cret@host:6379", "s3cret@host", "host:1,ssl=true,u:s3cret@h2"] {
            let e = parse_connection_string(cs).unwrap_err();
            assert!(e.contains("password=") && e.contains("URL") && !e.contains("s3cret"), "{cs}: {e}");
        }
        let e = parse_connection_string("redis://u:s3/cret@h:1").unwrap_err();
        assert!(e.contains("percent-encoded") && !e.contains("s3"), "{e}");
    }
}
