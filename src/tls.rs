//! TLS for the HTTP clients and the delay server: rustls configurations, the trusted roots,
//! the self-signed certificate of `concur serve --tls-self-signed`, and fingerprints.
//!
//! One crypto provider, aws-lc-rs, for every stack (why it and not ring: `Cargo.toml`). It is
//! named explicitly in every config, and it is the one libcurl's rustls-ffi picks for itself, so
//! every client offers the same key exchanges and suites.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};

/// The provider every config here uses.
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: std::sync::OnceLock<Arc<CryptoProvider>> = std::sync::OnceLock::new();
    PROVIDER
        .get_or_init(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
        .clone()
}

/// The certificates in a PEM text, or why there are none. Used by the plan to refuse a
/// `--cacert` file that holds no certificate before any work.
pub fn certs_from_pem(pem: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("is not PEM: {e}"))?;
    if certs.is_empty() {
        return Err("holds no certificate (expected -----BEGIN CERTIFICATE-----)".into());
    }
    Ok(certs)
}

/// The system's trusted roots, read once per process (rustls-native-certs: the same files
/// curl and OpenSSL read, so a CA the administrator installed is trusted here too).
fn native_roots() -> &'static (Vec<CertificateDer<'static>>, Option<String>) {
    static ROOTS: std::sync::OnceLock<(Vec<CertificateDer<'static>>, Option<String>)> =
        std::sync::OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        let why = if found.certs.is_empty() {
            Some(
                found
                    .errors
                    .first()
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "no system CA certificates found".into()),
            )
        } else {
            None
        };
        (found.certs, why)
    })
}

/// Where the system's CA bundle is, for libcurl (whose rustls backend reads a file).
pub fn system_ca_file() -> Option<PathBuf> {
    openssl_probe::probe()
        .cert_file
        .filter(|p| Path::new(p).is_file())
}

/// A client config: the system's roots plus `extra_ca_pem`, or no verification at all
/// (`insecure`, curl's `-k`). ALPN offers `http/1.1` only: every client here speaks HTTP/1.
pub fn client_config(insecure: bool, extra_ca_pem: Option<&str>) -> Result<ClientConfig, String> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?;
    let mut config = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider())))
            .with_no_client_auth()
    } else {
        let mut roots = RootCertStore::empty();
        roots.add_parsable_certificates(native_roots().0.iter().cloned());
        if let Some(pem) = extra_ca_pem {
            for cert in certs_from_pem(pem)? {
                roots
                    .add(cert)
                    .map_err(|e| format!("--cacert: a certificate is unusable as a CA: {e}"))?;
            }
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Accepts any certificate: `-k/--insecure`. Signatures are still checked, so the handshake
/// costs what a verified one costs but for the chain.
#[derive(Debug)]
struct NoVerify(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A server certificate and its key, PEM.
#[derive(Debug, Clone)]
pub struct ServerCert {
    /// The certificate chain, PEM.
    pub cert_pem: String,
    /// The private key, PEM.
    pub key_pem: String,
}

impl ServerCert {
    /// Reads `--tls-cert` and `--tls-key`, naming the file that cannot be used.
    pub fn from_files(cert: &Path, key: &Path) -> Result<ServerCert, String> {
        let read = |p: &Path, what: &str| {
            std::fs::read_to_string(p)
                .map_err(|e| format!("{what} '{}' cannot be read: {e}", p.display()))
        };
        let c = ServerCert {
            cert_pem: read(cert, "--tls-cert")?,
            key_pem: read(key, "--tls-key")?,
        };
        certs_from_pem(&c.cert_pem).map_err(|e| format!("--tls-cert '{}' {e}", cert.display()))?;
        PrivateKeyDer::from_pem_slice(c.key_pem.as_bytes()).map_err(|e| {
            format!(
                "--tls-key '{}' holds no usable private key: {e}",
                key.display()
            )
        })?;
        Ok(c)
    }

    /// A self-signed certificate for `addr`'s IP and `localhost` (ECDSA P-256, rcgen).
    pub fn self_signed(addr: SocketAddr) -> Result<ServerCert, String> {
        let mut names = vec!["localhost".to_string(), addr.ip().to_string()];
        if addr.ip().is_unspecified() {
            names.push("127.0.0.1".into());
        }
        let key = rcgen::generate_simple_self_signed(names)
            .map_err(|e| format!("cannot make a self-signed certificate: {e}"))?;
        Ok(ServerCert {
            cert_pem: key.cert.pem(),
            key_pem: key.key_pair.serialize_pem(),
        })
    }

    /// The SHA-256 fingerprint of the first certificate, as `AB:CD:…` (what browsers and
    /// `openssl x509 -fingerprint -sha256` show).
    pub fn fingerprint(&self) -> String {
        certs_from_pem(&self.cert_pem)
            .ok()
            .and_then(|c| c.into_iter().next())
            .map(|der| fingerprint(&der))
            .unwrap_or_default()
    }

    /// The server config: this certificate, ALPN `http/1.1`.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, String> {
        let certs = certs_from_pem(&self.cert_pem)?;
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .map_err(|e| format!("no usable private key: {e}"))?;
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup: {e}"))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| format!("the certificate and key do not make a TLS server: {e}"))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// SHA-256 of a DER certificate, `AB:CD:…`.
pub fn fingerprint(der: &[u8]) -> String {
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, der)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The kind of a failed task whose handshake or verification failed.
pub const KIND: &str = "tls";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_certificates_make_servers_and_are_trusted_as_cas() {
        let c = ServerCert::self_signed("127.0.0.1:0".parse().unwrap()).unwrap();
        assert!(c.server_config().is_ok());
        assert_eq!(c.fingerprint().len(), 32 * 3 - 1);
        assert!(client_config(false, Some(&c.cert_pem)).is_ok());
        assert!(certs_from_pem("hello")
            .unwrap_err()
            .contains("no certificate"));
    }
}
