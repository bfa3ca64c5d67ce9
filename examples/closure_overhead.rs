//! The per-task cost of a closure task beside the built-in `fib:0` in the same study: N empty
//! tasks under `pool:2`, `rayon:2` and `async:2`, median wall over N (as bench/overhead.sh
//! measures the built-in models). Run by bench/closure_overhead.sh.
//!
//! `cargo run --release --example closure_overhead -- [N] [REPEAT]`

use concur::Lab;

fn main() -> Result<(), concur::Error> {
    concur::init();
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let repeat: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let report = Lab::new("empty")
        .task(|_| ())
        .builtin("fib:0")
        .models(["pool:2", "rayon:2", "async:2"])
        .tasks([n])
        .repeat(repeat)
        .warmup(1)
        .run()?;
    println!(
        "{:<10} {:>14} {:>14} {:>8}",
        "model", "fib:0 µs/task", "closure µs/task", "ratio"
    );
    for m in ["pool:2", "rayon:2", "async:2"] {
        let per_task = |workload: &str| {
            report
                .cells()
                .iter()
                .find(|c| c.key.model == m && c.key.workload == workload)
                .and_then(|c| c.wall_median_s)
                .map(|w| w / n as f64 * 1e6)
        };
        if let (Some(b), Some(c)) = (per_task("fib:0"), per_task("empty")) {
            println!("{m:<10} {b:>14.3} {c:>14.3} {:>8.2}", c / b);
        }
    }
    Ok(())
}
