//! `http:URL`: one request per task (GET unless `--method`), counting the body bytes actually
//! read.
//!
//! `http:http://HOST:PORT/PATH` (or `https://`) goes to that server; `http:/PATH` goes to the
//! server of the run (`--url`, or the in-process `concur serve` a study starts). The URL is
//! fetched exactly as given, except that every `{rand}` in its path or query becomes 10 random
//! lowercase letters (different for every request, to defeat caches) and every `{i}` the
//! task's index; both work in the headers and the body too. Nothing is appended: a URL without
//! them is the same for every request, as in wrk, hey, oha and curl. Redirects are not
//! followed: a 3xx is a response like any other.
//!
//! The spec and the request flags are checked when the plan is built (`spec`); every task's
//! request is made by one builder (`request`) and carried out by the client of the model's
//! kind: ureq for blocking models (`blocking`), raw hyper connections for async ones,
//! HTTP/1.1 or HTTP/2 (`hyper_client`), HTTP/3 over QUIC with quinn and h3 (`h3`, `--http3`,
//! `https://` only), a hand-made HTTP/1.1 client on `may`'s sockets for
//! `green` (`green`, `wire`); all of them connect as `endpoint` says. The `curl` model drives libcurl itself
//! from [`HttpTasks::http_request`] and reports its connections back through
//! [`HttpTasks::connection_recorder`].

mod blocking;
mod endpoint;
mod green;
mod h2;
mod h3;
mod hyper_client;
mod request;
mod slots;
mod spec;
mod wire;

use std::sync::Arc;
use std::time::Duration;

pub(crate) use blocking::small_request;
#[cfg(feature = "fuzzing")]
pub(crate) use h2::{fuzz_server_bytes as h2_server_bytes, BenchExchange as H2BenchExchange};
pub use request::{letters, HttpRequest, INDEX, RAND, USER_AGENT};
pub(crate) use spec::connect_address;
pub use spec::{check_header, check_method};
#[cfg(feature = "fuzzing")]
pub(crate) use wire::write_request;
pub use wire::{read_response, read_response_to};

use super::{Entry, HttpTasks, Nature, TaskError, TaskFuture, Workload, WorkloadOptions};
use crate::measure::conn::{ConnRecorder, Connections};
use crate::measure::phases;
use crate::workload::gil;
use endpoint::Endpoint;
use request::RequestBuilder;

pub(super) const ENTRY: Entry = Entry {
    name: "http",
    usage: "http:URL",
    help: "request URL as given (http(s)://HOST:PORT/PATH, or /PATH on the run's server); every {rand} becomes 10 random letters, every {i} the task's index",
    parse,
};

fn parse(args: &str, opts: &WorkloadOptions) -> Result<Arc<dyn Workload>, String> {
    Ok(Arc::new(build(args, opts)?))
}

/// The workload `http:ARGS` names, with `opts`' request flags.
fn build(args: &str, opts: &WorkloadOptions) -> Result<Http, String> {
    let target = spec::read_url(args, opts.base_url.as_deref())?;
    let method = check_method(opts.method.as_deref().unwrap_or("GET"))?;
    let scheme = if target.tls { "https" } else { "http" };
    let requests = RequestBuilder::new(
        &method,
        format!("{scheme}://{}", target.host),
        target.host.clone(),
        target.path.clone(),
        opts,
    )?;
    let endpoint = Endpoint::new(&target, opts)?;
    // `--http3` over `http://` has no client: the plan refuses it before any run (QUIC is
    // always TLS), and `http:/PATH` gets its https:// server's URL before its runs parse it.
    let h3 = if opts.http3 && target.tls {
        Some(h3::Client::new(&endpoint)?)
    } else {
        None
    };
    Ok(Http {
        h3,
        spec_url: args.to_string(),
        delay: spec::delay_of(&target.path),
        needs_server: args.starts_with('/') && opts.base_url.is_none(),
        hyper: hyper_client::Client::new(&endpoint, &requests),
        endpoint,
        requests,
        blocking: blocking::Client::default(),
        green: green::Client::default(),
    })
}

/// HTTP requests to one server.
pub struct Http {
    spec_url: String,
    delay: Option<Duration>,
    /// Whether the spec is `/PATH` and no server was given for it yet: then there is nothing
    /// to connect to until the study provides one.
    needs_server: bool,
    endpoint: Endpoint,
    requests: RequestBuilder,
    blocking: blocking::Client,
    hyper: hyper_client::Client,
    /// `--http3`'s client (over `https://` only).
    h3: Option<h3::Client>,
    green: green::Client,
}

impl Http {
    fn check_server(&self) -> Result<(), TaskError> {
        if self.needs_server {
            return Err(TaskError::new(
                "connect",
                "http:/PATH needs a server: give --url, or use a study that starts one",
            ));
        }
        Ok(())
    }
}

/// The task error of a response whose status says the request failed.
fn status_error(code: u16) -> TaskError {
    let kind = match code {
        400..=499 => "http_4xx",
        500..=599 => "http_5xx",
        _ => "http_status",
    };
    TaskError::new(kind, format!("HTTP {code}"))
}

/// The bytes read, or the error of a status that says the request failed.
fn checked(status: u16, n: u64) -> Result<u64, TaskError> {
    if status >= 400 {
        return Err(status_error(status));
    }
    Ok(n)
}

impl Workload for Http {
    fn spec(&self) -> String {
        format!("http:{}", self.spec_url)
    }
    fn nature(&self) -> Nature {
        match self.delay {
            Some(d) => Nature::Delay(d),
            None => Nature::Network,
        }
    }
    fn task(&self, index: usize) -> Result<u64, TaskError> {
        self.check_server()?;
        let req = self.requests.build(index);
        let phases = phases::workload_task(index);
        gil::released(|| self.blocking.fetch(&self.endpoint, &req, phases.as_ref()))
    }
    fn task_async(self: Arc<Self>, index: usize) -> TaskFuture {
        // Two futures, each boxed at its own size: one `async` block with both branches would
        // size every HTTP/1.1 and HTTP/2 task's future to the HTTP/3 request's (quinn's and
        // h3's state), 4,000 bytes against 2,440.
        if self.endpoint.http3 {
            return Box::pin(async move {
                self.check_server()?;
                let Some(h3) = &self.h3 else {
                    return Err(TaskError::new(
                        "connect",
                        "--http3 needs an https:// URL: QUIC is always TLS",
                    ));
                };
                let task = phases::workload_task(index);
                let fetch = h3.fetch(&self.endpoint, &self.requests, index, task.as_ref());
                endpoint::timed(&self.endpoint, fetch).await
            });
        }
        Box::pin(async move {
            self.check_server()?;
            self.hyper
                .fetch(&self.endpoint, &self.requests, index)
                .await
        })
    }
    fn task_green(&self, index: usize) -> Result<u64, TaskError> {
        self.check_server()?;
        let phases = phases::workload_task(index);
        self.green
            .fetch(&self.endpoint, &self.requests.build(index), phases.as_ref())
    }
    fn supports_green(&self) -> bool {
        true
    }
    fn http(&self) -> Option<&dyn HttpTasks> {
        Some(self)
    }
}

impl HttpTasks for Http {
    fn needs_server(&self) -> bool {
        self.needs_server
    }
    fn url(&self, index: usize) -> Option<String> {
        (!self.needs_server).then(|| self.requests.url(index))
    }
    fn http_request(&self, index: usize) -> Option<HttpRequest> {
        (!self.needs_server).then(|| self.requests.build(index))
    }
    fn only_url_varies(&self) -> bool {
        self.requests.only_target_varies()
    }
    fn connection_groups(&self) -> Option<usize> {
        ((self.endpoint.http2 || self.endpoint.http3) && self.endpoint.keepalive)
            .then_some(self.endpoint.connections)
    }
    fn connection_recorder(&self) -> Option<&ConnRecorder> {
        Some(&self.endpoint.conns)
    }
    fn connections(&self) -> Option<Connections> {
        self.endpoint.conns.summary()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_base() -> WorkloadOptions {
        WorkloadOptions {
            base_url: Some("http://127.0.0.1:9".into()),
            ..Default::default()
        }
    }

    /// Every HTTP task's future is allocated and moved once a request: it holds the HTTP/1.1
    /// and HTTP/2 client's request and little else. (With the HTTP/3 branch inline it was
    /// 4,000 bytes against 2,440 here, and HTTP/2 cost 10-16% more CPU a request.)
    #[test]
    fn an_http_tasks_future_is_the_clients_request_and_little_more() {
        let o = with_base();
        let http = Arc::new(build("http://127.0.0.1:9/x", &o).unwrap());
        let task = http.clone().task_async(0);
        let request = http.hyper.fetch(&http.endpoint, &http.requests, 0);
        let (task, request) = (
            std::mem::size_of_val(&*task),
            std::mem::size_of_val(&request),
        );
        assert!(
            task <= request + 128,
            "task {task} bytes, request {request}"
        );
    }

    #[test]
    fn urls_are_fetched_as_given_but_for_rand() {
        let o = with_base();
        let w = parse("/add?name=a{rand}&delay=100", &o).unwrap();
        assert_eq!(w.nature(), Nature::Delay(Duration::from_millis(100)));
        let (u0, u1) = (
            w.http().unwrap().url(0).unwrap(),
            w.http().unwrap().url(1).unwrap(),
        );
        assert!(u0.starts_with("http://127.0.0.1:9/add?name=a") && u0.ends_with("&delay=100"));
        assert_eq!(
            u0.len(),
            "http://127.0.0.1:9/add?name=a&delay=100".len() + 10
        );
        assert_ne!(u0, u1);
        assert_eq!(w.spec(), "http:/add?name=a{rand}&delay=100");
        // Without {rand} nothing is appended: `delay=100` stays 100.
        let plain = parse("http://h:1/add?name=c&delay=100", &o).unwrap();
        assert_eq!(
            plain.http().unwrap().url(3).unwrap(),
            "http://h:1/add?name=c&delay=100"
        );
        assert_eq!(
            plain.http().unwrap().url(4).unwrap(),
            plain.http().unwrap().url(3).unwrap()
        );
        let twice = parse("http://h:1/{rand}/x?a={rand}", &o).unwrap();
        let u = twice.http().unwrap().url(0).unwrap();
        assert!(!u.contains("{rand}"), "{u}");
        assert_eq!(u.len(), "http://h:1//x?a=".len() + 20);
        // A bare query is asked of `/`; a fragment is never sent.
        let q = parse("http://h:1?delay=5#frag", &o).unwrap();
        assert_eq!(q.http().unwrap().url(0).unwrap(), "http://h:1/?delay=5");
        assert_eq!(q.nature(), Nature::Delay(Duration::from_millis(5)));
        assert_eq!(
            parse("http://h:1/bytes/5", &o).unwrap().nature(),
            Nature::Network
        );
        // The run's server not known yet: nothing to fetch.
        let unknown = parse("/x", &WorkloadOptions::default()).unwrap();
        assert!(unknown.http().unwrap().needs_server() && unknown.http().unwrap().url(0).is_none());
        assert_eq!(unknown.task(0).unwrap_err().kind, "connect");
    }

    #[test]
    fn https_urls_headers_and_bodies_are_filled_per_task() {
        let o = WorkloadOptions {
            method: Some("POST".into()),
            headers: vec![("X-Task".into(), "n{i}".into())],
            body: Some(b"id={i}&r={rand}".to_vec()),
            insecure: true,
            ..Default::default()
        };
        let w = parse("https://h/x?i={i}", &o).unwrap();
        let r = w.http().unwrap().http_request(7).unwrap();
        assert_eq!(r.url, "https://h/x?i=7");
        assert_eq!(r.target, "/x?i=7");
        assert_eq!(r.method, "POST");
        assert_eq!(r.headers[0], ("Host".to_string(), "h".to_string()));
        assert_eq!(r.headers[3], ("X-Task".to_string(), "n7".to_string()));
        let body = String::from_utf8(r.body.unwrap().to_vec()).unwrap();
        assert!(
            body.starts_with("id=7&r=") && body.len() == "id=7&r=".len() + 10,
            "{body}"
        );
        assert!(parse(
            "http://h/",
            &WorkloadOptions {
                method: Some("GE T".into()),
                ..Default::default()
            }
        )
        .is_err());
    }
}
