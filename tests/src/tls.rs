//! Files for tests of secured connections: a fresh temporary folder and
//! test certificates made with the `openssl` CLI (a missing CLI fails the
//! test with how to install it).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A new, empty folder under the system temp dir for test `name`.
///
/// # Panics
/// When the folder cannot be created.
pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "microdcs-test-{}-{name}-{}",
        std::process::id(),
        crate::unique_prefix("d").as_str()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl CLI (apt-get install openssl)");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// In `dir`: a CA (`ca.crt`), a server certificate for localhost/127.0.0.1 signed by it, and an unrelated CA.
pub fn certificates(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=microdcs test CA",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "other.key",
            "-out",
            "other.crt",
            "-days",
            "2",
            "-subj",
            "/CN=other CA",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
    );
    std::fs::write(dir.join("san.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n").unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "san.ext",
        ],
    );
}

/// In `dir`, after [`certificates`]: a client certificate signed by the CA
/// (`client.crt`, its PKCS#8 key `client.key`, the same key as PKCS#1
/// `client-pkcs1.key`), a second one of the CA (`client2.crt`,
/// `client2.key`), and one signed by the unrelated CA (`stranger.crt`,
/// `stranger.key`), for servers that ask for client certificates.
pub fn client_certificates(dir: &Path) {
    // An extension makes them X.509 v3: rustls (webpki) refuses v1 certificates.
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    for (name, ca) in [("client", "ca"), ("client2", "ca"), ("stranger", "other")] {
        let (key, csr, crt) = (format!("{name}.key"), format!("{name}.csr"), format!("{name}.crt"));
        let subj = format!("/CN=microdcs test {name}");
        openssl(dir, &["req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj", &subj]);
        let (ca_crt, ca_key) = (format!("{ca}.crt"), format!("{ca}.key"));
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                &ca_crt,
                "-CAkey",
                &ca_key,
                "-CAcreateserial",
                "-out",
                &crt,
                "-days",
                "2",
                "-extfile",
                "client.ext",
            ],
        );
    }
    openssl(dir, &["rsa", "-in", "client.key", "-traditional", "-out", "client-pkcs1.key"]);
}
