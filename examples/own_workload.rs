//! Your own functions under every concurrency model, each run in a fresh process of this
//! binary: a CPU-bound function and an async I/O-bound one.
//!
//! `cargo run --release --example own_workload` prints the tables and the advice and writes
//! `own_workload.html`.

use std::time::Duration;

use concur::{Lab, Nature};

/// CPU work of the user's: a little hash chain.
fn checksum(i: usize) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ i as u64;
    for _ in 0..2_000_000 {
        h = (h ^ (h >> 29)).wrapping_mul(0x0100_0000_01b3);
    }
    h % 97
}

/// I/O of the user's: an async call that waits 20 ms (a remote service, say).
async fn fetch(i: usize) -> Result<u64, std::io::Error> {
    tokio::time::sleep(Duration::from_millis(20)).await;
    Ok(i as u64 % 7)
}

fn main() -> Result<(), concur::Error> {
    // First: lets every run happen in a fresh process of this binary.
    concur::init();
    let models = ["seq", "thread", "pool:4", "rayon:4", "async:16", "fork"];
    let cpu = Lab::new("checksum")
        .task(checksum)
        .models(models)
        .tasks([16])
        .repeat(3)
        .warmup(0)
        .run()?;
    let io = Lab::new("fetch")
        .nature(Nature::Delay(Duration::from_millis(20)))
        .async_task(fetch)
        .models(models)
        .tasks([16])
        .repeat(3)
        .warmup(0)
        .run()?;
    cpu.print()?;
    io.print()?;
    io.write("html", "own_workload.html")?;
    eprintln!("wrote own_workload.html");
    if cpu.failed_runs() + io.failed_runs() > 0 {
        std::process::exit(1);
    }
    Ok(())
}
