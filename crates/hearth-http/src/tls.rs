//! TLS: the certificate and key Hearth serves HTTPS with, loaded once at
//! startup, and the rustls settings every connection shares.
//!
//! rustls (with the ring provider) speaks TLS 1.3 and 1.2 only, with its
//! own list of modern cipher suites: nothing older can be turned on by
//! mistake. ALPN offers `h2` first, then `http/1.1`; a client that offers
//! neither gets HTTP/1.1, as nginx does.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The ALPN name of HTTP/2.
pub(crate) const ALPN_H2: &[u8] = b"h2";
const ALPN_HTTP1: &[u8] = b"http/1.1";

/// A certificate chain and its private key, ready to serve HTTPS.
#[derive(Clone)]
pub struct TlsConfig {
    config: Arc<rustls::ServerConfig>,
    cert: PathBuf,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("cert", &self.cert)
            .finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// Loads a PEM certificate chain (the server's certificate first, then
    /// intermediates) and a PEM private key (PKCS#8, PKCS#1 or SEC1).
    /// Fails, naming the file, when one cannot be read, holds no
    /// certificate or key, or when the key does not belong to the
    /// certificate.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<TlsConfig, TlsError> {
        let cert_pem = read(cert, Which::Cert)?;
        let key_pem = read(key, Which::Key)?;
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::invalid(cert, Which::Cert, e.to_string()))?;
        if chain.is_empty() {
            return Err(TlsError::invalid(
                cert,
                Which::Cert,
                "no PEM certificate (-----BEGIN CERTIFICATE-----) found".into(),
            ));
        }
        let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
            let why = match e {
                rustls::pki_types::pem::Error::NoItemsFound => {
                    "no PEM private key (-----BEGIN PRIVATE KEY-----) found".to_owned()
                }
                e => e.to_string(),
            };
            TlsError::invalid(key, Which::Key, why)
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| TlsError::invalid(cert, Which::Cert, e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .map_err(|e| TlsError {
                kind: Kind::Mismatch,
                path: key.to_path_buf(),
                which: Which::Key,
                detail: format!("cannot be used with {}: {e}", cert.display()),
            })?;
        config.alpn_protocols = vec![ALPN_H2.to_vec(), ALPN_HTTP1.to_vec()];
        Ok(TlsConfig {
            config: Arc::new(config),
            cert: cert.to_path_buf(),
        })
    }

    pub(crate) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.clone())
    }
}

fn read(path: &Path, which: Which) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError {
        kind: Kind::Unreadable,
        path: path.to_path_buf(),
        which,
        detail: format!("cannot read: {e}"),
    })
}

/// Why the certificate or key could not be loaded.
#[derive(Debug)]
pub struct TlsError {
    kind: Kind,
    path: PathBuf,
    which: Which,
    detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Unreadable,
    Invalid,
    Mismatch,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    Cert,
    Key,
}

impl TlsError {
    fn invalid(path: &Path, which: Which, detail: String) -> TlsError {
        TlsError {
            kind: Kind::Invalid,
            path: path.to_path_buf(),
            which,
            detail,
        }
    }

    /// The file could not be read (missing, no permission).
    pub fn is_unreadable(&self) -> bool {
        self.kind == Kind::Unreadable
    }

    /// The file holds no usable PEM certificate or key.
    pub fn is_invalid(&self) -> bool {
        self.kind == Kind::Invalid
    }

    /// The key does not belong to the certificate (or is of a kind rustls
    /// does not support).
    pub fn is_mismatch(&self) -> bool {
        self.kind == Kind::Mismatch
    }

    /// Whether the key file, rather than the certificate file, is at fault.
    pub fn is_key(&self) -> bool {
        self.which == Which::Key
    }

    /// The file at fault.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.which {
            Which::Cert => "TLS certificate",
            Which::Key => "TLS private key",
        };
        write!(f, "{what} {}: {}", self.path.display(), self.detail)
    }
}

impl std::error::Error for TlsError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn self_signed() -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn loads_a_certificate_and_offers_h2_then_http1() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed();
        let tls = TlsConfig::from_pem_files(
            &write(dir.path(), "cert.pem", &cert),
            &write(dir.path(), "key.pem", &key),
        )
        .unwrap();
        assert_eq!(
            tls.config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
    }

    #[test]
    fn errors_name_the_file_at_fault() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed();
        let (other_cert, _) = self_signed();
        let cert = write(dir.path(), "cert.pem", &cert);
        let key = write(dir.path(), "key.pem", &key);
        let other = write(dir.path(), "other.pem", &other_cert);
        let garbage = write(dir.path(), "garbage.pem", "not a PEM file\n");
        let missing = dir.path().join("missing.pem");

        let e = TlsConfig::from_pem_files(&missing, &key).unwrap_err();
        assert!(e.is_unreadable() && !e.is_key(), "{e}");
        assert_eq!(e.path(), missing);
        let e = TlsConfig::from_pem_files(&cert, &missing).unwrap_err();
        assert!(e.is_unreadable() && e.is_key(), "{e}");
        let e = TlsConfig::from_pem_files(&garbage, &key).unwrap_err();
        assert!(e.is_invalid() && !e.is_key(), "{e}");
        assert!(e.to_string().contains("garbage.pem"), "{e}");
        let e = TlsConfig::from_pem_files(&cert, &garbage).unwrap_err();
        assert!(e.is_invalid() && e.is_key(), "{e}");
        // A certificate where the key should be.
        let e = TlsConfig::from_pem_files(&cert, &cert).unwrap_err();
        assert!(e.is_invalid() && e.is_key(), "{e}");
        let e = TlsConfig::from_pem_files(&other, &key).unwrap_err();
        assert!(e.is_mismatch() && e.is_key(), "{e}");
        assert!(e.to_string().contains("key.pem"), "{e}");
    }
}
