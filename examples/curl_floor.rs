//! The floor of any libcurl client here: N GETs of one URL with W transfers at once through
//! libcurl's multi interface, the same library build and the same request as `curl:W` (HTTP/1.1,
//! `User-Agent: concur/VERSION`, `Accept: */*`, no proxy, connections kept), and nothing around
//! it: no records, no clock per request, no retries, no memory sampler. A finished handle gets
//! the next URL and goes back in, as `curl:W`'s do. bench/curl-floor.sh runs it beside `curl:W`
//! and wrk (docs/benchmarks.md §21).
//!
//! `cargo run --release --example curl_floor -- URL_PREFIX [N] [W]`: each request's URL is
//! URL_PREFIX followed by its index; prints `requests/s`, wall and failures.

use std::time::{Duration, Instant};

use curl::easy::{Easy2, Handler, HttpVersion, List, WriteError};
use curl::multi::{Easy2Handle, Multi};

/// Counts body bytes, as `curl:W`'s handler does.
struct Count(u64);

impl Handler for Count {
    fn write(&mut self, data: &[u8]) -> Result<usize, WriteError> {
        self.0 += data.len() as u64;
        Ok(data.len())
    }
}

fn setup(prefix: &str) -> Result<Easy2<Count>, curl::Error> {
    let mut easy = Easy2::new(Count(0));
    easy.url(prefix)?;
    easy.proxy("")?;
    easy.timeout(Duration::from_secs(30))?;
    easy.http_version(HttpVersion::V11)?;
    let mut list = List::new();
    list.append(&format!("User-Agent: concur/{}", env!("CARGO_PKG_VERSION")))?;
    list.append("Accept: */*")?;
    list.append("Content-Type:")?;
    list.append("Expect:")?;
    easy.http_headers(list)?;
    Ok(easy)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: curl_floor URL_PREFIX [N] [W]";
    let prefix = args.first().ok_or(usage)?.clone();
    let n: usize = args.get(1).map_or(Ok(100_000), |s| s.parse())?;
    let w: usize = args.get(2).map_or(Ok(100), |s| s.parse())?;
    let multi = Multi::new();
    let mut free: Vec<Easy2<Count>> = (0..w.min(n))
        .map(|_| setup(&prefix))
        .collect::<Result<_, _>>()?;
    let mut active: Vec<Option<Easy2Handle<Count>>> = Vec::new();
    let (mut next, mut done, mut failed) = (0usize, 0usize, 0usize);
    let t0 = Instant::now();
    while done < n {
        while next < n {
            let Some(mut easy) = free.pop() else { break };
            easy.url(&format!("{prefix}{next}"))?;
            easy.get_mut().0 = 0;
            let mut handle = multi.add2(easy)?;
            let id = active
                .iter()
                .position(Option::is_none)
                .unwrap_or(active.len());
            handle.set_token(id)?;
            if id == active.len() {
                active.push(Some(handle));
            } else {
                active[id] = Some(handle);
            }
            next += 1;
        }
        multi.perform()?;
        let mut finished = Vec::new();
        multi.messages(|m| {
            if let (Ok(id), Some(result)) = (m.token(), m.result()) {
                finished.push((id, result.is_ok()));
            }
        });
        for (id, ok) in &finished {
            if let Some(handle) = active.get_mut(*id).and_then(Option::take) {
                let easy = multi.remove2(handle)?;
                let good = *ok && easy.response_code().is_ok_and(|c| c < 400);
                failed += usize::from(!good);
                done += 1;
                free.push(easy);
            }
        }
        if finished.is_empty() {
            multi.wait(&mut [], Duration::from_millis(10))?;
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    println!(
        "{:.0} requests/s  wall {wall:.3} s  {n} requests, {w} at once, {failed} failed",
        n as f64 / wall
    );
    Ok(())
}
