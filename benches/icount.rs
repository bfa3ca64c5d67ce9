//! The single-threaded hot paths, run for `bench/icount.sh`, which counts their instructions
//! under callgrind: `icount PATH [ITERATIONS]` runs one path ITERATIONS times (1,000 unless
//! given) inside [`icount_measured`], after one warm-up call outside it (lazy statics, the
//! allocator's first pages), so that `--toggle-collect=*icount_measured*` counts the path
//! alone. What a path consumes (the server's requests) is made before the measured call.
//! Without a path (as `cargo bench` runs it) every path runs a few times, as a smoke check:
//! this is not a timing benchmark. `icount --list` names the paths.
//!
//! The paths, one task's or one request's worth each:
//!
//! | path | what runs |
//! |---|---|
//! | `request_build` | one task's request as every client gets it (`Workload::http_request`, the one builder, `{rand}` filled) and its head's bytes as the green client writes them |
//! | `response_parse` | `concur serve`'s answer to `/add` read by the green client's parser (`read_response_to`, as the `http_response` fuzz target) |
//! | `latency_record` | one latency recorded as a run records each task's (`LatencyRecorder::record_us`: the HDR histogram and the exact count, min, max, sum) |
//! | `server_route` | one `GET /add?delay=0` through the delay server's whole router (axum, the JSON-error layer, `/add`'s handler with its zero sleep, the body polled), on a current-thread runtime, no socket (`bench/icount.sh` leaves out the runtime's park, where it waits for the sleep's timer) |
//! | `job_encode_decode` | one Sidekiq task job read from its JSON payload (`Job::parse`) and written back (`Job::to_json`) |
//! | `h2_exchange` | one HTTP/2 request of `async` through its connection's state (`workload/http/h2/`): the HEADERS encoded, `concur serve`'s answer (its steady-state head and body) read, the response collected; no socket |

use std::hint::black_box;
use std::time::Duration;

use concur::jobs::Job;
use concur::measure::latency::LatencyRecorder;
use concur::server::routes::{router, AppState};
use concur::server::Stats;
use concur::workload::WorkloadOptions;

/// The paths, in the order the script and the baseline list them.
const PATHS: &[&str] = &[
    "request_build",
    "response_parse",
    "latency_record",
    "server_route",
    "job_encode_decode",
    "h2_exchange",
];

/// Iterations when none are given.
const ITERATIONS: usize = 1_000;

/// The spec `bench/throughput.sh` crawls (`{rand}` defeats caches).
const REQUEST_SPEC: &str = "http:http://127.0.0.1:8080/add?delay=0&name={rand}";

/// `concur serve`'s answer to `/add?delay=0`, byte for byte (taken from a running server).
const ADD_RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\nserver-timing: delay;dur=0.000\r\ncontent-length: 10\r\ndate: Wed, 02 Dec 2026 03:48:34 GMT\r\n\r\nok: added\n";

/// A task job as `concur jobs` pushes it (Sidekiq 6.x's float timestamps).
const JOB: &str = r#"{"class":"Concur::Task","args":["sleep:0",4711],"jid":"8f3a2c9e1b7d4f60a5c2e913","queue":"default","retry":true,"created_at":1764647314.8273451,"enqueued_at":1764647314.8273833}"#;

/// Runs `one` for each of `n` iterations: callgrind counts the instructions of this call and
/// of everything it calls, nothing else.
#[inline(never)]
fn icount_measured(n: usize, one: &mut dyn FnMut(usize)) {
    for i in 0..n {
        one(black_box(i));
    }
}

/// Runs `path` `n` times, after one warm-up call; `None` for a path that does not exist.
fn run(path: &str, n: usize) -> Option<()> {
    match path {
        "request_build" => {
            let w = concur::workload::parse(REQUEST_SPEC, &WorkloadOptions::default())
                .expect("the request spec parses");
            let mut one = |i: usize| {
                let req = w
                    .http()
                    .and_then(|h| h.http_request(i))
                    .expect("a URL with its host");
                black_box(concur::fuzzing::request_head(&req));
            };
            measure(n, &mut one);
        }
        "response_parse" => {
            let mut one = |_: usize| {
                let mut bytes = black_box(ADD_RESPONSE);
                let got = concur::workload::http::read_response_to(&mut bytes, false);
                assert_eq!(got.expect("the answer parses"), (200, 10, true));
                black_box(bytes);
            };
            measure(n, &mut one);
        }
        "latency_record" => {
            let mut r = LatencyRecorder::new();
            // Latencies from 50 µs to about 0.5 s, spread over the histogram's buckets.
            let mut x: u64 = 12345;
            let mut one = |_: usize| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                r.record_us(black_box(50 + (x >> 33) % 500_000));
            };
            measure(n, &mut one);
            black_box(r.exact());
        }
        "server_route" => server_route(n),
        "job_encode_decode" => {
            let mut one = |_: usize| {
                let job = Job::parse(black_box(JOB)).expect("the job parses");
                black_box(job.to_json());
            };
            measure(n, &mut one);
        }
        "h2_exchange" => {
            let mut exchange = concur::fuzzing::H2Exchange::new();
            let mut one = |_: usize| {
                assert_eq!(black_box(exchange.one()), (200, 10));
            };
            measure(n, &mut one);
        }
        _ => return None,
    }
    Some(())
}

/// One warm-up call, then the measured `n`.
fn measure(n: usize, one: &mut dyn FnMut(usize)) {
    one(0);
    icount_measured(n, one);
}

/// `GET /add?delay=0` through the server's router, as hyper calls it for every request.
fn server_route(n: usize) {
    use http_body_util::BodyExt;
    use hyper::service::Service;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let svc = hyper_util::service::TowerToHyperService::new(router(AppState {
        stats: std::sync::Arc::new(Stats::default()),
        max_delay: Duration::from_secs(60),
        max_bytes: 1 << 30,
        echo_budget: concur::server::routes::EchoBudget::new(64 << 20),
    }));
    // The requests are made first: hyper's parsing of them is not the route's.
    let mut requests: Vec<_> = (0..=n)
        .map(|_| {
            axum::http::Request::get("/add?delay=0&name=abcdefghij")
                .body(axum::body::Body::empty())
                .expect("a request")
        })
        .collect();
    let mut one = |_: usize| {
        let req = requests.pop().expect("one request per call");
        rt.block_on(async {
            let resp = svc.call(req).await.expect("infallible");
            assert_eq!(resp.status(), 200);
            let mut body = resp.into_body();
            while let Some(frame) = body.frame().await {
                black_box(frame.expect("a static body"));
            }
        });
    };
    measure(n, &mut one);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for path in PATHS {
            println!("{path}");
        }
        return;
    }
    // `cargo bench` adds `--bench`; flags are not paths.
    let args: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    match args.as_slice() {
        [] => {
            for path in PATHS {
                run(path, 10);
                println!("{path}: ok");
            }
        }
        [path] | [path, _] => {
            let n = match args.get(1) {
                Some(n) => n.parse().unwrap_or_else(|_| {
                    eprintln!("icount: iterations '{n}' is not a whole number");
                    std::process::exit(2)
                }),
                None => ITERATIONS,
            };
            if run(path.as_str(), n).is_none() {
                eprintln!("icount: no path '{path}' (allowed: {})", PATHS.join(", "));
                std::process::exit(2);
            }
        }
        _ => {
            eprintln!(
                "usage: icount [PATH [ITERATIONS]] (paths: {})",
                PATHS.join(", ")
            );
            std::process::exit(2);
        }
    }
}
