//! TLS for the HTTP clients and the delay server: rustls configurations, the trusted roots,
//! the verifier every client shares (and the words its refusals give), the self-signed
//! certificate of `concur serve --tls-self-signed`, and fingerprints.
//!
//! One crypto provider, aws-lc-rs, for every stack (why it and not ring: `Cargo.toml`). It is
//! named explicitly in every config, and it is the one libcurl's rustls-ffi picks for itself, so
//! every client offers the same key exchanges and suites.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_cert_signed_by_trust_anchor, verify_server_name};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig,
    SignatureScheme,
};

/// The provider every config here uses (libcurl's rustls-ffi links the same aws-lc).
///
/// Its random generator is seeded here, when the first configuration is made, before any
/// measurement: aws-lc seeds it once a process, on its first use, from CPU timing jitter (tens
/// of milliseconds of one core). Left to the first handshake, that seeding would stall the
/// worker thread that met it, and every handshake queued behind it, at the start of a TLS run.
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER
        .get_or_init(|| {
            let provider = rustls::crypto::aws_lc_rs::default_provider();
            // A failure here would fail the first handshake too, with its own words.
            let _ = provider.secure_random.fill(&mut [0u8; 1]);
            Arc::new(provider)
        })
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
    static ROOTS: OnceLock<(Vec<CertificateDer<'static>>, Option<String>)> = OnceLock::new();
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

/// A client config: the system's roots plus `extra_ca_pem` checked by [`Verifier`], or no
/// verification at all (`insecure`, curl's `-k`). ALPN offers `http/1.1` only, as every
/// client speaks it; [`offer_http2`] makes the config of `--http2`, [`offer_http3`] `--http3`'s.
pub fn client_config(insecure: bool, extra_ca_pem: Option<&str>) -> Result<ClientConfig, String> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?;
    let verifier: Arc<dyn ServerCertVerifier> = if insecure {
        Arc::new(NoVerify(provider()))
    } else {
        Arc::new(Verifier::new(extra_ca_pem)?)
    };
    let mut config = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The ALPN protocol id of HTTP/2 over TLS (RFC 9113 §3.2).
pub const ALPN_H2: &[u8] = b"h2";

/// `config` for `--http2`: ALPN offers `h2` first and `http/1.1` after it, so that a server
/// that speaks only HTTP/1.1 still answers, in HTTP/1.1.
pub fn offer_http2(config: &ClientConfig) -> ClientConfig {
    let mut h2 = config.clone();
    h2.alpn_protocols = vec![ALPN_H2.to_vec(), b"http/1.1".to_vec()];
    h2
}

/// The ALPN protocol id of HTTP/3 (RFC 9114 §3.1).
pub const ALPN_H3: &[u8] = b"h3";

/// `config` for `--http3`: ALPN offers `h3` alone (QUIC carries nothing else here), the roots,
/// verifier and provider the same as every other client's.
pub fn offer_http3(config: &ClientConfig) -> ClientConfig {
    let mut h3 = config.clone();
    h3.alpn_protocols = vec![ALPN_H3.to_vec()];
    h3
}

/// The server name to verify a certificate for, from a URL's host (`[::1]` or `::1`).
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.trim_matches(['[', ']']).to_string())
        .map_err(|e| format!("'{host}' is not a name TLS can verify: {e}"))
}

/// webpki's verification (the chain to a trusted root, its dates, the host in its
/// subjectAltNames) with the one exception curl and Python's `ssl` make too: a certificate given
/// with `--cacert` is trusted as the server's own when the server presents exactly it
/// (byte-equal DER), although it is marked as a CA. `openssl req -x509` marks its certificates
/// so (`basicConstraints CA:TRUE`) unless told otherwise, and webpki refuses every such
/// certificate as a server's (`CaUsedAsEndEntity`), trusted or not. The name still has to
/// match and the dates still have to hold. Refusals come back as words that say what is wrong
/// and what to do, in `rustls::Error::General`.
#[derive(Debug)]
pub struct Verifier {
    roots: RootCertStore,
    /// The `--cacert` certificates, each trusted as itself besides as a CA.
    explicit: Vec<CertificateDer<'static>>,
    provider: Arc<CryptoProvider>,
}

impl Verifier {
    /// The system's roots plus the certificates of `extra_ca_pem` (`--cacert`).
    pub fn new(extra_ca_pem: Option<&str>) -> Result<Verifier, String> {
        let mut roots = RootCertStore::empty();
        roots.add_parsable_certificates(native_roots().0.iter().cloned());
        let explicit = match extra_ca_pem {
            Some(pem) => certs_from_pem(pem)?,
            None => Vec::new(),
        };
        for cert in &explicit {
            roots
                .add(cert.clone())
                .map_err(|e| format!("--cacert: a certificate is unusable as a CA: {e}"))?;
        }
        Ok(Verifier {
            roots,
            explicit,
            provider: provider(),
        })
    }

    /// Checks the chain a server presented (its own certificate, then the others it sent) for
    /// `name` at `now`: nothing, or the words of `refusal_words`. For clients that verify
    /// outside a rustls handshake (libcurl's, in `curl_multi.rs`) as well as for this verifier.
    pub fn check(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        now: UnixTime,
    ) -> Result<(), String> {
        let host = name.to_str();
        let refused = |e: rustls::Error| refusal_words(&Refusal::of(&e), &host);
        let cert = ParsedCertificate::try_from(end_entity).map_err(refused)?;
        match verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        ) {
            Ok(()) => {}
            // webpki checks a certificate's dates before its basicConstraints
            // (check_issuer_independent_properties in its verify_cert.rs), so a certificate
            // refused as a CA has valid dates. What webpki would check after that, the chain
            // and the extendedKeyUsage, is left out for a certificate trusted as exactly itself
            // (an extendedKeyUsage without serverAuth goes unnoticed, which OpenSSL refuses).
            Err(e)
                if Refusal::of(&e) == Refusal::CaAsServer
                    && self
                        .explicit
                        .iter()
                        .any(|c| c.as_ref() == end_entity.as_ref()) => {}
            Err(e) => return Err(refused(e)),
        }
        verify_server_name(&cert, name).map_err(refused)
    }

    /// Whether a certificate of `--cacert` could be a server's own that webpki refuses: marked
    /// as a CA, yet naming hosts in subjectAltNames (a CA names none). libcurl's rustls backend
    /// refuses such a certificate even when the server presents exactly it, and offers no hook
    /// to accept it; `curl_multi.rs` then verifies with [`Verifier::check`] itself. Told apart
    /// with webpki itself: verified against itself alone, such a certificate is refused as a CA,
    /// and for a name nobody uses it lists the names it has.
    pub fn has_ca_marked_server_certificate(&self) -> bool {
        let Ok(nobody) = ServerName::try_from("concur.invalid") else {
            return false;
        };
        let now = UnixTime::now();
        self.explicit.iter().any(|der| {
            let Ok(cert) = ParsedCertificate::try_from(der) else {
                return false;
            };
            let mut alone = RootCertStore::empty();
            if alone.add(der.clone()).is_err() {
                return false;
            }
            let algs = self.provider.signature_verification_algorithms.all;
            let as_ca = verify_server_cert_signed_by_trust_anchor(&cert, &alone, &[], now, algs)
                .is_err_and(|e| Refusal::of(&e) == Refusal::CaAsServer);
            let names_hosts = verify_server_name(&cert, &nobody).is_err_and(
                |e| matches!(Refusal::of(&e), Refusal::WrongName(Some(names)) if !names.is_empty()),
            );
            as_ca && names_hosts
        })
    }
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // General: the one variant whose text is all ours (the others print rustls's names).
        self.check(end_entity, intermediates, server_name, now)
            .map(|()| ServerCertVerified::assertion())
            .map_err(rustls::Error::General)
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
            &self.provider.signature_verification_algorithms,
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
            &self.provider.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Why a server's certificate was refused: what [`refusal_words`] needs from rustls's error,
/// or from the name libcurl's message gives.
#[derive(Debug, Clone, PartialEq)]
enum Refusal {
    UnknownIssuer,
    /// Marked as a CA (and not trusted as exactly itself).
    CaAsServer,
    /// Not valid for the host; its subjectAltNames when known.
    WrongName(Option<Vec<String>>),
    /// Past its notAfter: (the check's time, notAfter) when known.
    Expired(Option<(UnixTime, UnixTime)>),
    /// Before its notBefore, when known.
    NotYetValid(Option<UnixTime>),
    BadSignature,
    UnsupportedAlgorithm,
    NotForServers,
    Revoked,
    /// Anything else, as rustls or libcurl put it.
    Other(String),
}

impl Refusal {
    fn of(e: &rustls::Error) -> Refusal {
        let rustls::Error::InvalidCertificate(c) = e else {
            return Refusal::Other(e.to_string());
        };
        #[allow(deprecated)] // UnsupportedSignatureAlgorithm: deprecated, still a variant.
        match c {
            CertificateError::UnknownIssuer => Refusal::UnknownIssuer,
            CertificateError::NotValidForName => Refusal::WrongName(None),
            CertificateError::NotValidForNameContext { presented, .. } => {
                Refusal::WrongName(Some(presented.clone()))
            }
            CertificateError::Expired => Refusal::Expired(None),
            CertificateError::ExpiredContext { time, not_after } => {
                Refusal::Expired(Some((*time, *not_after)))
            }
            CertificateError::NotValidYet => Refusal::NotYetValid(None),
            CertificateError::NotValidYetContext { not_before, .. } => {
                Refusal::NotYetValid(Some(*not_before))
            }
            CertificateError::BadSignature => Refusal::BadSignature,
            CertificateError::UnsupportedSignatureAlgorithm
            | CertificateError::UnsupportedSignatureAlgorithmContext { .. }
            | CertificateError::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => {
                Refusal::UnsupportedAlgorithm
            }
            CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
                Refusal::NotForServers
            }
            CertificateError::Revoked => Refusal::Revoked,
            // rustls passes on the webpki errors it has no variant for as an opaque OtherError.
            CertificateError::Other(other)
                if matches!(
                    other.0.downcast_ref::<webpki::Error>(),
                    Some(webpki::Error::CaUsedAsEndEntity)
                ) =>
            {
                Refusal::CaAsServer
            }
            _ => Refusal::Other(e.to_string()),
        }
    }
}

/// `DnsName("a.test")` and `IpAddress(127.0.0.1)` (webpki's names) as `openssl` writes them
/// in `-addext subjectAltName=`: `DNS:a.test`, `IP:127.0.0.1`.
fn san(name: &str) -> String {
    let inner = |prefix: &str| {
        name.strip_prefix(prefix)
            .and_then(|r| r.strip_suffix(')'))
            .map(|r| r.trim_matches('"').to_string())
    };
    if let Some(dns) = inner("DnsName(") {
        format!("DNS:{dns}")
    } else if let Some(ip) = inner("IpAddress(") {
        format!("IP:{ip}")
    } else {
        name.to_string()
    }
}

/// The words a refusal gives: what is wrong with the certificate, and what to do. Each fits in
/// a task error's 300 bytes after a client's prefix (ureq's is about 90).
fn refusal_words(r: &Refusal, host: &str) -> String {
    const SKIP: &str = "or -k to skip verification";
    let date = |t: &UnixTime| crate::base::units::rfc3339(t.as_secs());
    match r {
        Refusal::UnknownIssuer => format!(
            "the server's certificate is not signed by a trusted CA: pass its CA with --cacert FILE, {SKIP}"
        ),
        Refusal::CaAsServer => format!(
            "the server's certificate is marked CA:TRUE (openssl req -x509's default), refused unless --cacert FILE holds exactly it; or remake it with basicConstraints=CA:FALSE, {SKIP}"
        ),
        Refusal::WrongName(Some(names)) if names.is_empty() => format!(
            "the server's certificate names no host in a subjectAltName (its CN is not used), so not {host}: remake it with subjectAltName=IP:… or DNS:…, {SKIP}"
        ),
        Refusal::WrongName(Some(names)) => {
            const SHOWN: usize = 4;
            let mut list = names.iter().take(SHOWN).map(|n| san(n)).collect::<Vec<_>>();
            if names.len() > SHOWN {
                list.push(format!("{} more", names.len() - SHOWN));
            }
            format!(
                "the server's certificate does not cover {host}: its subjectAltNames are {}; connect by one of them, {SKIP}",
                list.join(", ")
            )
        }
        Refusal::WrongName(None) => format!(
            "the server's certificate does not cover {host}: its subjectAltNames name other hosts; connect by a name it covers, {SKIP}"
        ),
        Refusal::Expired(Some((now, not_after))) => format!(
            "the server's certificate expired at {} ({} days ago): renew it (or check this machine's clock), {SKIP}",
            date(not_after),
            now.as_secs().saturating_sub(not_after.as_secs()) / 86_400
        ),
        Refusal::Expired(None) => format!(
            "the server's certificate has expired: renew it (or check this machine's clock), {SKIP}"
        ),
        Refusal::NotYetValid(Some(not_before)) => format!(
            "the server's certificate is not valid before {}: check this machine's clock, {SKIP}",
            date(not_before)
        ),
        Refusal::NotYetValid(None) => format!(
            "the server's certificate is not valid yet: check this machine's clock, {SKIP}"
        ),
        Refusal::BadSignature => format!(
            "the server's certificate chain does not verify (a signature does not match its issuer's key): the server sends a wrong chain; fix it, {SKIP}"
        ),
        Refusal::UnsupportedAlgorithm => format!(
            "the server's certificate is signed with an algorithm these clients do not support; use RSA or ECDSA with SHA-256 or better, {SKIP}"
        ),
        Refusal::NotForServers => format!(
            "the server's certificate is not for TLS servers (its extendedKeyUsage lacks serverAuth); make it with -addext extendedKeyUsage=serverAuth, {SKIP}"
        ),
        Refusal::Revoked => format!("the server's certificate has been revoked; {SKIP}"),
        Refusal::Other(text) => format!("the server's certificate was refused: {text}; {SKIP}"),
    }
}

/// The words for a refusal that libcurl reports (`[60] SSL peer certificate … (rustls_…:
/// invalid peer certificate: NotValidForName)`), or `None` when `message` is no certificate
/// refusal. rustls-ffi gives libcurl the refusal's name only, without the names or dates
/// behind it; a refusal it has no name for (webpki's `CaUsedAsEndEntity` among them) is
/// `unknown certificate error`.
pub fn libcurl_refusal_words(message: &str, host: &str) -> Option<String> {
    if message.contains("unknown certificate error") {
        return Some(
            "the server's certificate was refused for a reason libcurl's rustls does not name, most likely CA:TRUE (openssl req -x509's default): pass exactly it with --cacert FILE, or -k to skip verification".into(),
        );
    }
    let name = message.split("invalid peer certificate: ").nth(1)?;
    let r = match name.trim_end_matches(')') {
        "UnknownIssuer" => Refusal::UnknownIssuer,
        "NotValidForName" => Refusal::WrongName(None),
        "Expired" => Refusal::Expired(None),
        "NotValidYet" => Refusal::NotYetValid(None),
        "BadSignature" => Refusal::BadSignature,
        "InvalidPurpose" => Refusal::NotForServers,
        "Revoked" => Refusal::Revoked,
        n if n.starts_with("UnsupportedSignatureAlgorithm") => Refusal::UnsupportedAlgorithm,
        other => Refusal::Other(other.to_string()),
    };
    Some(refusal_words(&r, host))
}

/// The line a failed handshake shows: the words [`Verifier`] gave, not rustls's display of
/// them (`unexpected error: …`: they are no unexpected error), else the error's own text.
/// Every rustls client's handshake error is shown through this.
pub fn handshake_failure(e: &std::io::Error) -> String {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::General(words)) => words.clone(),
        _ => e.to_string(),
    }
}

/// [`handshake_failure`] for QUIC, whose stack hands the rustls error on as its display
/// (`unexpected error: WORDS` for the verifier's [`rustls::Error::General`]): the words alone.
pub fn quic_handshake_failure(reason: &str) -> String {
    let general = rustls::Error::General(String::new()).to_string();
    reason.strip_prefix(&general).unwrap_or(reason).to_string()
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
    /// Reads `--tls-cert` and `--tls-key`, naming the file that cannot be used: each a
    /// regular file of at most `files::MAX_PEM_FILE` (a FIFO would block the server's
    /// start, `/dev/zero` would fill its memory).
    pub fn from_files(cert: &Path, key: &Path) -> Result<ServerCert, String> {
        let read = |p: &Path, what: &str| {
            let allowed = "a PEM file, a regular file of at most 1 MiB";
            let bytes =
                crate::os::files::read_regular(what, p, crate::os::files::MAX_PEM_FILE, allowed)
                    .map_err(|e| e.to_string())?;
            String::from_utf8(bytes)
                .map_err(|_| format!("{what} '{}' is not text (allowed: {allowed})", p.display()))
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

    /// The server config: this certificate, offering the protocols `alpn` by ALPN (in the
    /// server's order of preference, e.g. `h2` then `http/1.1`).
    pub fn server_config(&self, alpn: &[&[u8]]) -> Result<Arc<ServerConfig>, String> {
        let certs = certs_from_pem(&self.cert_pem)?;
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .map_err(|e| format!("no usable private key: {e}"))?;
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup: {e}"))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| format!("the certificate and key do not make a TLS server: {e}"))?;
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
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
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};

    #[test]
    fn self_signed_certificates_make_servers_and_are_trusted_as_cas() {
        let c = ServerCert::self_signed("127.0.0.1:0".parse().unwrap()).unwrap();
        assert!(c.server_config(&[b"http/1.1"]).is_ok());
        assert_eq!(c.fingerprint().len(), 32 * 3 - 1);
        assert!(client_config(false, Some(&c.cert_pem)).is_ok());
        assert!(certs_from_pem("hello")
            .unwrap_err()
            .contains("no certificate"));
    }

    /// A self-signed certificate for `names`, marked as a CA or not, valid from `from` to `to`.
    fn cert(names: &[&str], ca: bool, years: (i32, i32)) -> (CertificateDer<'static>, String) {
        let mut p = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap();
        if ca {
            p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        }
        p.not_before = rcgen::date_time_ymd(years.0, 1, 1);
        p.not_after = rcgen::date_time_ymd(years.1, 1, 1);
        let c = p.self_signed(&KeyPair::generate().unwrap()).unwrap();
        (c.der().clone(), c.pem())
    }

    fn check(v: &Verifier, der: &CertificateDer<'_>, host: &str) -> Result<(), String> {
        v.check(der, &[], &server_name(host).unwrap(), UnixTime::now())
    }

    #[test]
    fn a_ca_marked_certificate_given_with_cacert_is_trusted_as_exactly_itself() {
        let (der, pem) = cert(&["127.0.0.1", "localhost"], true, (2000, 2999));
        let trusting = Verifier::new(Some(&pem)).unwrap();
        assert_eq!(check(&trusting, &der, "127.0.0.1"), Ok(()));
        assert_eq!(check(&trusting, &der, "localhost"), Ok(()));
        assert!(trusting.has_ca_marked_server_certificate());
        // The name still has to match.
        let e = check(&trusting, &der, "127.0.0.2").unwrap_err();
        assert!(
            e.contains(
                "does not cover 127.0.0.2: its subjectAltNames are IP:127.0.0.1, DNS:localhost;"
            ),
            "{e}"
        );
        // Not given: refused as a CA, saying how to trust it.
        let e = check(&Verifier::new(None).unwrap(), &der, "127.0.0.1").unwrap_err();
        assert!(
            e.contains("marked CA:TRUE") && e.contains("--cacert FILE"),
            "{e}"
        );
        // Another CA-marked certificate of the same names is no exact match.
        let (other, _) = cert(&["127.0.0.1"], true, (2000, 2999));
        assert!(check(&trusting, &other, "127.0.0.1")
            .unwrap_err()
            .contains("marked CA:TRUE"));
    }

    #[test]
    fn an_exactly_trusted_certificate_still_expires() {
        // webpki checks dates before basicConstraints: the exception relies on it.
        let (der, pem) = cert(&["127.0.0.1"], true, (2000, 2001));
        let e = check(&Verifier::new(Some(&pem)).unwrap(), &der, "127.0.0.1").unwrap_err();
        assert!(
            e.starts_with("the server's certificate expired at 2001-01-01T00:00:00Z ("),
            "{e}"
        );
        let (der, pem) = cert(&["127.0.0.1"], true, (2998, 2999));
        let e = check(&Verifier::new(Some(&pem)).unwrap(), &der, "127.0.0.1").unwrap_err();
        assert!(e.contains("not valid before 2998-01-01T00:00:00Z"), "{e}");
        assert!(e.ends_with("or -k to skip verification"), "{e}");
    }

    #[test]
    fn unknown_issuers_and_ordinary_chains() {
        let (der, pem) = cert(&["127.0.0.1"], false, (2000, 2999));
        assert_eq!(
            check(&Verifier::new(Some(&pem)).unwrap(), &der, "127.0.0.1"),
            Ok(())
        );
        assert!(!Verifier::new(Some(&pem))
            .unwrap()
            .has_ca_marked_server_certificate());
        assert_eq!(
            check(&Verifier::new(None).unwrap(), &der, "127.0.0.1").unwrap_err(),
            "the server's certificate is not signed by a trusted CA: pass its CA with --cacert FILE, or -k to skip verification"
        );
        // A CA (no subjectAltName) and a server certificate it signed.
        let ca_key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = p.self_signed(&ca_key).unwrap();
        let leaf = CertificateParams::new(vec!["a.test".to_string()])
            .unwrap()
            .signed_by(&KeyPair::generate().unwrap(), &ca, &ca_key)
            .unwrap();
        let v = Verifier::new(Some(&ca.pem())).unwrap();
        assert!(!v.has_ca_marked_server_certificate(), "a CA names no host");
        assert_eq!(check(&v, leaf.der(), "a.test"), Ok(()));
        assert!(check(&v, leaf.der(), "b.test")
            .unwrap_err()
            .contains("does not cover b.test: its subjectAltNames are DNS:a.test;"));
        // The CA itself, presented as the server's, has no name to match.
        assert!(check(&v, ca.der(), "a.test")
            .unwrap_err()
            .contains("names no host in a subjectAltName"));
    }

    #[test]
    fn rustls_shows_the_words_and_libcurl_names_are_translated() {
        let words = "the server's certificate is not signed by a trusted CA: pass its CA with --cacert FILE, or -k to skip verification";
        // As the clients get it: rustls's error inside the handshake's io::Error.
        let e = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::General(words.into()),
        );
        assert_eq!(handshake_failure(&e), words);
        let other = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert_eq!(handshake_failure(&other), "reset");
        let libcurl = "[60] SSL peer certificate or SSH remote key was not OK (rustls_connection_process_new_packets: invalid peer certificate: UnknownIssuer)";
        assert_eq!(libcurl_refusal_words(libcurl, "h").as_deref(), Some(words));
        let libcurl = libcurl.replace("UnknownIssuer", "NotValidForName");
        assert!(libcurl_refusal_words(&libcurl, "h.test")
            .unwrap()
            .contains("does not cover h.test"));
        let other = "[56] Failure when receiving data from the peer";
        assert_eq!(libcurl_refusal_words(other, "h"), None);
        assert!(libcurl_refusal_words("(x: unknown certificate error)", "h")
            .unwrap()
            .contains("CA:TRUE"));
    }
}
