//! Why a start failed ([`ConnectError`]), and the same failure as the
//! runtime's [`crate::Error`] for the URL constructor.

use std::path::PathBuf;
use std::time::Duration;

use crate::config::ConfigError;

/// Why [`Valkey::connect`](crate::client::Valkey::connect) failed. Never contains a password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The password file cannot be read.
    #[error("MicroDcs:Valkey:PasswordFile: cannot read `{}`: {reason}", path.display())]
    PasswordFile {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The TLS set-up failed (CA, certificate or key file unreadable or
    /// not PEM, a key the backend cannot read, a cluster handle whose TLS
    /// files differ from those of an open one with native-tls, or no TLS
    /// client could be built). Never quotes a key file's content. Not used for anything
    /// but TLS.
    #[error("TLS: {0}")]
    Tls(String),
    /// The server was not reachable, or did not answer, within the connect timeout.
    #[error("cannot connect to {endpoint} within {timeout:?}: {reason}")]
    Unreachable {
        /// `host:port`.
        endpoint: String,
        /// The connect timeout.
        timeout: Duration,
        /// What happened.
        reason: String,
    },
    /// The server refused the credentials, or requires some and none were
    /// given (`NOAUTH`).
    #[error("{endpoint} refused the credentials of user `{user}`: {reason}")]
    Auth {
        /// `host:port`.
        endpoint: String,
        /// The ACL user (`default` when none is set).
        user: String,
        /// The server's reason (no secrets).
        reason: String,
    },
    /// The server runs without its Lua scripting engine (Valkey 9.1 lets
    /// operators leave it out), so no write, claim or step can run: each is
    /// one script.
    #[error(
        "{endpoint} runs without Lua scripting ({reason}): every write of this library is a Lua script; load the \
         server's `lua` engine (Valkey 9.1+: do not unload the built-in `lua` module)"
    )]
    NoScripting {
        /// `host:port`.
        endpoint: String,
        /// The server's answer to a one-line script.
        reason: String,
    },
}

impl ConnectError {
    /// The same failure as the runtime's error, for [`Valkey::connect_url`](crate::client::Valkey::connect_url):
    /// the text (endpoint, reason, never a password) is kept; an unreachable
    /// server stays a connection error, refused credentials stay an
    /// authentication error, and set-up problems are the caller's.
    pub(crate) fn into_error(self) -> crate::Error {
        let text = self.to_string();
        match self {
            ConnectError::Unreachable { .. } => {
                crate::Error::Redis(std::io::Error::new(std::io::ErrorKind::NotConnected, text).into())
            }
            ConnectError::Auth { .. } => crate::Error::Redis(redis::RedisError::from((
                redis::ErrorKind::AuthenticationFailed,
                "authentication failed",
                text,
            ))),
            _ => crate::Error::InvalidArgument(text),
        }
    }
}
