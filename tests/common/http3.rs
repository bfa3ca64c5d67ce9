//! An HTTP/3 client for the tests, independent of concur's own code: quinn and h3 over rustls,
//! trusting one certificate (a `concur serve --tls-self-signed`'s), many requests at once over
//! one connection.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

/// One HTTP/3 connection: its QUIC connection (to watch it close) and what sends requests.
pub struct H3 {
    /// The QUIC connection.
    pub quic: quinn::Connection,
    send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    /// The endpoint, kept open while the connection lives.
    _endpoint: quinn::Endpoint,
}

/// An answer: status, headers, body.
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The headers.
    pub headers: axum::http::HeaderMap,
    /// The body, whole.
    pub body: Vec<u8>,
}

/// A QUIC client configuration trusting the certificate in `cert` (PEM), offering `h3`.
pub fn client_config(cert: &Path) -> quinn::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(cert).expect("the certificate file") {
        roots
            .add(c.expect("a certificate"))
            .expect("a usable certificate");
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("a QUIC config");
    quinn::ClientConfig::new(Arc::new(quic))
}

/// A bare QUIC connection to `addr` offering `h3`, for a test to write what no HTTP/3 client
/// would (half a request head), with its endpoint.
pub async fn quic(
    addr: SocketAddr,
    cert: &Path,
) -> Result<(quinn::Endpoint, quinn::Connection), quinn::ConnectionError> {
    let mut endpoint =
        quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).expect("a client endpoint");
    endpoint.set_default_client_config(client_config(cert));
    let quic = endpoint
        .connect(addr, "localhost")
        .expect("a connection attempt")
        .await?;
    Ok((endpoint, quic))
}

impl H3 {
    /// Connects to `addr` (UDP), trusting `cert`; the QUIC handshake's error when it fails.
    pub async fn connect(addr: SocketAddr, cert: &Path) -> Result<H3, quinn::ConnectionError> {
        let (endpoint, quic) = quic(addr, cert).await?;
        let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(quic.clone()))
            .await
            .expect("HTTP/3 on the connection");
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        Ok(H3 {
            quic,
            send,
            _endpoint: endpoint,
        })
    }

    /// `METHOD path` with `body` (none when empty) on a new stream of this connection.
    pub async fn request(&self, method: &str, path: &str, body: &[u8]) -> Answer {
        let mut send = self.send.clone();
        let req = axum::http::Request::builder()
            .method(method)
            .uri(format!("https://localhost{path}"))
            .body(())
            .unwrap();
        let mut stream = send.send_request(req).await.expect("a request stream");
        if !body.is_empty() {
            stream
                .send_data(Bytes::copy_from_slice(body))
                .await
                .expect("the body sent");
        }
        stream.finish().await.expect("the request finished");
        answer(&mut stream, BodyEnd::Clean).await
    }

    /// `GET path`, its status and headers once its head arrives, and the stream its body is
    /// still to be read from (a test that reads none of it stalls the answer).
    pub async fn get_head(
        &self,
        path: &str,
    ) -> (
        u16,
        h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>,
    ) {
        let mut send = self.send.clone();
        let req = axum::http::Request::get(format!("https://localhost{path}"))
            .body(())
            .unwrap();
        let mut stream = send.send_request(req).await.expect("a request stream");
        stream.finish().await.expect("the request finished");
        let resp = stream.recv_response().await.expect("an answer");
        (resp.status().as_u16(), stream)
    }

    /// `POST path` with the first `part` of a body that never ends (declaring `declared` bytes
    /// as its `Content-Length`, when given): the answer the server gives it.
    pub async fn unfinished_post(&self, path: &str, part: &[u8], declared: Option<u64>) -> Answer {
        let mut send = self.send.clone();
        let mut req = axum::http::Request::post(format!("https://localhost{path}"));
        if let Some(n) = declared {
            req = req.header("content-length", n);
        }
        let req = req.body(()).unwrap();
        let mut stream = send.send_request(req).await.expect("a request stream");
        stream
            .send_data(Bytes::copy_from_slice(part))
            .await
            .expect("the part sent");
        // The server answers before the body ends and may reset the stream after.
        answer(&mut stream, BodyEnd::MayReset).await
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Answer {
        self.request("GET", path, b"").await
    }

    /// `GET /stats`, as JSON.
    pub async fn stats(&self) -> serde_json::Value {
        let a = self.get("/stats").await;
        assert_eq!(a.status, 200);
        serde_json::from_slice(&a.body).expect("/stats is JSON")
    }
}

/// How a test expects an answer's body to end.
#[derive(PartialEq)]
enum BodyEnd {
    /// With the stream's end: an error fails the test.
    Clean,
    /// With the stream's end or a reset: what came before is the body.
    MayReset,
}

/// The answer on `stream`: its head, then its body to the end.
async fn answer(
    stream: &mut h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>,
    end: BodyEnd,
) -> Answer {
    let resp = stream.recv_response().await.expect("an answer");
    let mut got = Vec::new();
    loop {
        let mut chunk = match stream.recv_data().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break,
            Err(_) if end == BodyEnd::MayReset => break,
            Err(e) => panic!("the body: {e}"),
        };
        while chunk.has_remaining() {
            let c = chunk.chunk();
            got.extend_from_slice(c);
            let n = c.len();
            chunk.advance(n);
        }
    }
    Answer {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: got,
    }
}
