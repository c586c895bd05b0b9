//! The TLS files of a connection: the CA to trust (`TlsCaFile`, with the
//! system bundle), the client certificate and key of mutual TLS
//! (`TlsCertFile`, `TlsKeyFile`), and how the compiled backend turns them
//! into clients of one server, of a Sentinel's nodes and of a cluster.
//!
//! The backend is chosen at compile time: `tls-native-tls` or
//! `tls-rustls`; with both, rustls is used (redis-rs's rule, see
//! [`crate::config::tls_backend`]).

use std::fmt;
use std::path::{Path, PathBuf};

use redis::{ConnectionAddr, ConnectionInfo, RedisResult};

use super::ConnectError;
use crate::config::ValkeyConfig;

/// Both backends compiled in: redis-rs then uses rustls and loads no
/// platform roots of its own (its `rustls-native-certs` path is compiled
/// out with native-tls present), so the roots are always given.
const BOTH_BACKENDS: bool = cfg!(all(feature = "tls-native-tls", feature = "tls-rustls"));

/// Paths where Linux distributions keep the system CA bundle.
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
];

/// What a TLS client trusts and presents beyond its backend's defaults.
/// Empty: the backend's own trust store and no client certificate.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct TlsFiles {
    /// PEM roots replacing the backend's store: the system bundle, then
    /// `TlsCaFile` (redis-rs replaces the platform store when given roots,
    /// so both go in).
    roots: Option<Vec<u8>>,
    /// The client certificate chain and its private key, PEM. The key is a
    /// secret: never printed.
    identity: Option<Identity>,
}

#[derive(Clone, PartialEq, Eq)]
#[cfg_attr(not(any(feature = "tls-native-tls", feature = "tls-rustls")), allow(dead_code))]
struct Identity {
    cert: Vec<u8>,
    key: Vec<u8>,
}

impl fmt::Debug for TlsFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Neither the certificates nor the key: only whether they are set.
        f.debug_struct("TlsFiles")
            .field("roots", &self.roots.as_ref().map(|_| "<set>"))
            .field("identity", &self.identity.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl TlsFiles {
    /// The files of a validated configuration, read now, so a missing or
    /// malformed one fails at start by its setting's name. `tls`: whether
    /// the connection speaks TLS at all.
    pub(crate) fn from_config(config: &ValkeyConfig, tls: bool) -> Result<TlsFiles, ConnectError> {
        let roots = match &config.tls_ca_file {
            Some(ca) => Some(trust_bundle(ca)?),
            None if tls && BOTH_BACKENDS => system_bundle(),
            None => None,
        };
        // `validate` refused one of the two without the other.
        let identity = match (&config.tls_cert_file, &config.tls_key_file) {
            (Some(cert), Some(key)) => Some(read_identity(cert, key)?),
            _ => None,
        };
        Ok(TlsFiles { roots, identity })
    }

    /// The files of a `rediss://` URL: the backend's defaults (with both
    /// backends, the system bundle that redis-rs would not load).
    pub(crate) fn for_url(tls: bool) -> TlsFiles {
        TlsFiles { roots: if tls && BOTH_BACKENDS { system_bundle() } else { None }, identity: None }
    }

    /// Whether nothing beyond the backend's defaults is set.
    pub(crate) fn is_default(&self) -> bool {
        self.roots.is_none() && self.identity.is_none()
    }

    /// A client of `info` presenting and trusting these files when it
    /// speaks TLS.
    pub(crate) fn client(&self, info: ConnectionInfo) -> RedisResult<redis::Client> {
        let tls = matches!(info.addr(), ConnectionAddr::TcpTls { .. });
        if tls {
            ensure_crypto_provider();
        }
        if !tls || self.is_default() {
            return redis::Client::open(info);
        }
        #[cfg(any(feature = "tls-native-tls", feature = "tls-rustls"))]
        {
            redis::Client::build_with_tls(info, self.certificates())
        }
        // Configuration checks refuse TLS without a backend first; this is
        // the same refusal for a path that skipped them.
        #[cfg(not(any(feature = "tls-native-tls", feature = "tls-rustls")))]
        {
            Err(redis::RedisError::from((redis::ErrorKind::InvalidClientConfig, crate::config::NO_TLS_BACKEND)))
        }
    }

    /// A cluster client builder presenting and trusting these files. With
    /// rustls the cluster client takes them itself; with native-tls its
    /// nodes are opened by [`super::node::Node`] with the files
    /// [`super::ClusterTls::hold`] registered.
    pub(crate) fn cluster(
        &self,
        builder: redis::cluster::ClusterClientBuilder,
        tls: bool,
    ) -> redis::cluster::ClusterClientBuilder {
        if tls {
            ensure_crypto_provider();
        }
        if !tls || self.is_default() {
            return builder;
        }
        #[cfg(feature = "tls-rustls")]
        {
            builder.certs(self.certificates())
        }
        #[cfg(not(feature = "tls-rustls"))]
        {
            builder
        }
    }

    #[cfg(any(feature = "tls-native-tls", feature = "tls-rustls"))]
    fn certificates(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: self
                .identity
                .as_ref()
                .map(|i| redis::ClientTlsConfig { client_cert: i.cert.clone(), client_key: i.key.clone() }),
            root_cert: self.roots.clone(),
        }
    }
}

/// redis-rs builds its rustls configurations with the process's default
/// crypto provider, and rustls cannot pick one by itself when the
/// application's dependencies enable several: when the application
/// installed none, rustls's default (aws-lc-rs) is installed. Nothing with
/// native-tls alone.
pub(crate) fn ensure_crypto_provider() {
    #[cfg(feature = "tls-rustls")]
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may install one first; either is a whole provider.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
}

/// The system's CA bundle: `SSL_CERT_FILE`, else the first of the usual
/// paths that reads.
fn system_bundle() -> Option<Vec<u8>> {
    std::env::var_os("SSL_CERT_FILE")
        .map(PathBuf::from)
        .into_iter()
        .chain(SYSTEM_BUNDLES.iter().map(PathBuf::from))
        .find_map(|p| std::fs::read(p).ok())
}

/// The PEM roots to trust with `TlsCaFile`: the system bundle and the CA.
fn trust_bundle(ca_file: &Path) -> Result<Vec<u8>, ConnectError> {
    let ca = std::fs::read(ca_file)
        .map_err(|e| ConnectError::Tls(format!("cannot read TlsCaFile `{}`: {e}", ca_file.display())))?;
    if !String::from_utf8_lossy(&ca).contains("-----BEGIN CERTIFICATE-----") {
        return Err(ConnectError::Tls(format!("TlsCaFile `{}` holds no PEM certificate", ca_file.display())));
    }
    let mut bundle = match system_bundle() {
        Some(s) => s,
        None => {
            tracing::warn!("no system CA bundle found; trusting only TlsCaFile");
            Vec::new()
        }
    };
    if !bundle.ends_with(b"\n") && !bundle.is_empty() {
        bundle.push(b'\n');
    }
    bundle.extend_from_slice(&ca);
    Ok(bundle)
}

/// The client certificate and key. Messages name the files, never their
/// content.
fn read_identity(cert_file: &Path, key_file: &Path) -> Result<Identity, ConnectError> {
    let cert = std::fs::read(cert_file)
        .map_err(|e| ConnectError::Tls(format!("cannot read TlsCertFile `{}`: {e}", cert_file.display())))?;
    if !String::from_utf8_lossy(&cert).contains("-----BEGIN CERTIFICATE-----") {
        return Err(ConnectError::Tls(format!("TlsCertFile `{}` holds no PEM certificate", cert_file.display())));
    }
    let key = std::fs::read(key_file)
        .map_err(|e| ConnectError::Tls(format!("cannot read TlsKeyFile `{}`: {e}", key_file.display())))?;
    let (pem, pkcs8) = {
        let text = String::from_utf8_lossy(&key);
        (text.contains("-----BEGIN") && text.contains("PRIVATE KEY-----"), text.contains("-----BEGIN PRIVATE KEY-----"))
    };
    if !pem {
        return Err(ConnectError::Tls(format!("TlsKeyFile `{}` holds no PEM private key", key_file.display())));
    }
    // native-tls reads PKCS#8 only; its own error would not say so.
    if cfg!(all(feature = "tls-native-tls", not(feature = "tls-rustls"))) && !pkcs8 {
        return Err(ConnectError::Tls(format!(
            "TlsKeyFile `{}` is not a PKCS#8 key (`BEGIN PRIVATE KEY`), the only kind the native-tls backend reads: \
             convert it with `openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pk8`, or use the `tls-rustls` feature",
            key_file.display()
        )));
    }
    Ok(Identity { cert, key })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The TLS files never show in `Debug`: not the key, not the certificates.
    #[test]
    fn debug_shows_nothing_of_the_files() {
        let files = TlsFiles {
            roots: Some(b"ROOTS-CONTENT".to_vec()),
            identity: Some(Identity { cert: b"CERT-CONTENT".to_vec(), key: b"KEY-CONTENT".to_vec() }),
        };
        let shown = format!("{files:?}");
        assert_eq!(shown, r#"TlsFiles { roots: Some("<set>"), identity: Some("<redacted>") }"#);
    }
}
