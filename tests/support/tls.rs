//! A `redis-server` that speaks TLS only, with a certificate from a throwaway CA made by
//! `openssl` for the test.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{free_port, RedisServer};

/// A TLS-only server for `127.0.0.1` and the CA that signed its certificate. The plain port is
/// still open (the harness talks to it); clients under test use [`TlsServer::url`].
pub struct TlsServer {
    pub server: RedisServer,
    certs: tempfile::TempDir,
    tls_port: u16,
}

impl TlsServer {
    /// Starts a TLS server, or, if this build of `redis-server` has no TLS, says loudly that
    /// `test` is skipped and returns `None`.
    pub fn start_or_skip(test: &str) -> Option<TlsServer> {
        if !super::server_info().tls {
            super::skip(test, "this redis-server was built without TLS");
            return None;
        }
        Some(Self::start())
    }

    pub fn start() -> TlsServer {
        let certs = tempfile::tempdir().unwrap();
        make_certificates(certs.path());
        let path = |f: &str| certs.path().join(f).to_string_lossy().into_owned();
        let tls_port = free_port();
        let server = RedisServer::start_with(&[
            "--tls-port",
            &tls_port.to_string(),
            "--tls-cert-file",
            &path("server.crt"),
            "--tls-key-file",
            &path("server.key"),
            "--tls-ca-cert-file",
            &path("ca.crt"),
            "--tls-auth-clients",
            "no",
        ]);
        TlsServer {
            server,
            certs,
            tls_port,
        }
    }

    /// `rediss://127.0.0.1:<tls port>`.
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.tls_port)
    }

    /// The PEM file of the CA that signed the server's certificate.
    pub fn ca_path(&self) -> PathBuf {
        self.certs.path().join("ca.crt")
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl must be on PATH");
    assert!(status.success(), "openssl {args:?}");
}

/// A throwaway CA and a server certificate for 127.0.0.1, in `dir`.
fn make_certificates(dir: &Path) {
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
            "1",
            "-subj",
            "/CN=redisson-lock test CA",
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
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(
        dir.join("san.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
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
            "1",
            "-extfile",
            "san.ext",
        ],
    );
}
