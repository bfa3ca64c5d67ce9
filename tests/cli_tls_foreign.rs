//! HTTPS against a server that is not concur's (Python's `ssl`, over OpenSSL) with certificates
//! made by `openssl` the way users make them, on every client stack (ureq, hyper, the green
//! model's own client, libcurl): the `openssl req -x509` one-liner's certificate, marked
//! CA:TRUE, is accepted when `--cacert` holds exactly it (as curl and Python accept it), and each
//! refusal says what is wrong and what to do. Fast tier: `openssl` and `python3` are on a base
//! machine.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

/// One model of each client stack: ureq, hyper, the hand-made client, libcurl.
const MODELS: [&str; 4] = ["seq", "async:2", "green:2", "curl:2"];

/// Runs `openssl ARGS` in `dir`, which must succeed.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A certificate and its key in `dir`, made by the usual one-liner for `san`, with `extra`
/// arguments after it; (certificate, key).
fn one_liner(dir: &Path, name: &str, san: &str, extra: &[&str]) -> (PathBuf, PathBuf) {
    let (cert, key) = (format!("{name}.pem"), format!("{name}.key"));
    let san = format!("subjectAltName={san}");
    let mut args = vec![
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &cert,
    ];
    args.extend(["-subj", "/CN=127.0.0.1", "-addext", &san, "-days", "30"]);
    args.extend(extra);
    openssl(dir, &args);
    (dir.join(cert), dir.join(key))
}

/// A one-liner certificate (CA:TRUE, SAN IP:127.0.0.1) that expired on 2020-01-02: `openssl
/// req` takes no dates in the past, `openssl ca -selfsign` does.
fn expired(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::write(dir.join("index.txt"), "").unwrap();
    std::fs::write(
        dir.join("ca.cnf"),
        "[ca]\ndefault_ca = here\n[here]\ndatabase = index.txt\nnew_certs_dir = .\n\
         serial = serial\ndefault_md = sha256\npolicy = any\n[any]\ncommonName = supplied\n\
         [ext]\nbasicConstraints = critical,CA:TRUE\nsubjectAltName = IP:127.0.0.1\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "old.key",
            "-out",
            "old.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    openssl(
        dir,
        &[
            "ca",
            "-batch",
            "-config",
            "ca.cnf",
            "-selfsign",
            "-keyfile",
            "old.key",
            "-in",
            "old.csr",
            "-out",
            "old.pem",
            "-startdate",
            "20200101000000Z",
            "-enddate",
            "20200102000000Z",
            "-extensions",
            "ext",
            "-notext",
            "-create_serial",
        ],
    );
    (dir.join("old.pem"), dir.join("old.key"))
}

/// The server: Python's `http.server` over `ssl`, answering every GET with 10 bytes, with
/// HTTP/1.1 keep-alive (with HTTP/1.0 it closes each connection without a TLS close_notify,
/// which libcurl's rustls reports as a failed read). It binds port 0 and prints the port.
const SERVER: &str = r#"
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "10")
        self.end_headers()
        self.wfile.write(b"0123456789")
    def log_message(self, *args):
        pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"#;

/// A running [`SERVER`], killed when dropped.
struct PyServer {
    child: Child,
    port: u16,
}

impl PyServer {
    /// Starts it with `cert` and `key`; returns once it listens (it prints its port then).
    fn start(cert: &Path, key: &Path) -> PyServer {
        let mut child = Command::new("python3")
            .args(["-c", SERVER])
            .arg(cert)
            .arg(key)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the server prints its port within 20 s");
        let port = line.trim().parse().expect("a port");
        PyServer { child, port }
    }

    /// The `http:` workload that fetches from it.
    fn workload(&self) -> String {
        format!("http:https://127.0.0.1:{}/x", self.port)
    }
}

impl Drop for PyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `concur run` of every model in [`MODELS`] against `server`, 2 tasks each, with `extra`
/// flags, exiting with `code`; its stderr (not quiet: what a user sees) and its run lines.
fn run_all(server: &PyServer, extra: &[&str], code: i32) -> (String, Vec<serde_json::Value>) {
    let (_dir, path) = results_path();
    let mut cmd = concur();
    cmd.args([
        "run",
        "-w",
        &server.workload(),
        "-n",
        "2",
        "-r",
        "1",
        "--warmup",
        "0",
    ]);
    for m in MODELS {
        cmd.args(["-m", m]);
    }
    let out = cmd.args(extra).arg("--json").arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{extra:?}: {stderr}");
    let lines = read_lines(&path);
    let runs: Vec<_> = of_type(&lines, "run").into_iter().cloned().collect();
    assert_eq!(runs.len(), MODELS.len(), "{lines:?}");
    (stderr, runs)
}

/// Checks that every run failed both tasks as `tls` with an error containing each of `words`,
/// and that stderr's `error:` line shows the first of them.
fn all_refused(stderr: &str, runs: &[serde_json::Value], words: &[&str]) {
    for r in runs {
        assert_eq!(r["status"], "failed", "{r}");
        assert_eq!(r["failures"]["tls"], 2, "{r}");
        let e = r["error"].as_str().unwrap();
        for w in words {
            assert!(e.contains(w), "{}: {w:?} not in {e}", r["model"]);
        }
    }
    let line = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_default();
    assert!(line.contains(words[0]), "{stderr}");
}

#[test]
fn a_ca_marked_certificate_given_exactly_with_cacert_is_accepted_by_every_client() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = one_liner(dir.path(), "leaf", "IP:127.0.0.1", &[]);
    let text = String::from_utf8(
        Command::new("openssl")
            .args(["x509", "-noout", "-ext", "basicConstraints", "-in"])
            .arg(&cert)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(text.contains("CA:TRUE"), "the one-liner's mark: {text}");
    let server = PyServer::start(&cert, &key);
    let (_, runs) = run_all(&server, &["--cacert", cert.to_str().unwrap()], 0);
    for r in runs {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["bytes"], 20, "{r}");
    }
    // Without --cacert, refused as a CA, saying how to trust it.
    let (stderr, runs) = run_all(&server, &[], 1);
    all_refused(&stderr, &runs, &["CA:TRUE", "--cacert FILE", "-k"]);
    // Another certificate in --cacert (same names, another key) is no exact match.
    let (other, _) = one_liner(dir.path(), "other", "IP:127.0.0.1", &[]);
    let (stderr, runs) = run_all(&server, &["--cacert", other.to_str().unwrap()], 1);
    all_refused(&stderr, &runs, &["CA:TRUE", "--cacert FILE"]);
}

#[test]
fn an_end_entity_certificate_without_cacert_is_not_signed_by_a_trusted_ca() {
    let dir = tempfile::tempdir().unwrap();
    let ee = ["-addext", "basicConstraints=critical,CA:FALSE"];
    let (cert, key) = one_liner(dir.path(), "ee", "IP:127.0.0.1", &ee);
    let server = PyServer::start(&cert, &key);
    let (stderr, runs) = run_all(&server, &[], 1);
    all_refused(
        &stderr,
        &runs,
        &["the server's certificate is not signed by a trusted CA: pass its CA with --cacert FILE, or -k to skip verification"],
    );
    let (_, runs) = run_all(&server, &["--cacert", cert.to_str().unwrap()], 0);
    for r in runs {
        assert_eq!(r["bytes"], 20, "{r}");
    }
}

#[test]
fn a_certificate_for_another_name_is_refused_naming_the_host_and_k_accepts_it() {
    let dir = tempfile::tempdir().unwrap();
    let wrong = "IP:127.0.0.2,DNS:example.test";
    // The one-liner's (CA:TRUE: libcurl's refusal then comes from concur's own check, with the
    // names) and an end-entity one (libcurl's own refusal, which names no names).
    for (name, extra) in [
        ("ca-wrong", &[][..]),
        (
            "ee-wrong",
            &["-addext", "basicConstraints=critical,CA:FALSE"][..],
        ),
    ] {
        let (cert, key) = one_liner(dir.path(), name, wrong, extra);
        let server = PyServer::start(&cert, &key);
        let (stderr, runs) = run_all(&server, &["--cacert", cert.to_str().unwrap()], 1);
        all_refused(&stderr, &runs, &["does not cover 127.0.0.1", "-k"]);
        for r in &runs {
            let e = r["error"].as_str().unwrap();
            if r["model"] != "curl:2" || name == "ca-wrong" {
                assert!(
                    e.contains("its subjectAltNames are IP:127.0.0.2, DNS:example.test;"),
                    "{name}: {e}"
                );
            }
        }
        let (_, runs) = run_all(&server, &["-k"], 0);
        for r in runs {
            assert_eq!(r["bytes"], 20, "{r}");
        }
    }
}

#[test]
fn an_expired_certificate_is_refused_even_when_trusted_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = expired(dir.path());
    let server = PyServer::start(&cert, &key);
    let (stderr, runs) = run_all(&server, &["--cacert", cert.to_str().unwrap()], 1);
    // libcurl's refusal names no date.
    all_refused(&stderr, &runs, &["expired", "-k to skip verification"]);
    for r in &runs {
        let e = r["error"].as_str().unwrap();
        if r["model"] != "curl:2" {
            assert!(e.contains("expired at 2020-01-02T00:00:00Z ("), "{e}");
        }
    }
}
