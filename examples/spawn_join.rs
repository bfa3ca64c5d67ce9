//! The kernel's own price of a thread, for comparison with the `thread` model's overhead:
//! `std::thread::spawn` + `join` of an empty thread, one at a time and with N alive at once.
//! Run: `cargo run --release --example spawn_join [N]` (default 1000).

use std::time::Instant;

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let t = Instant::now();
    for _ in 0..n {
        let _ = std::thread::spawn(|| 1).join();
    }
    println!("one at a time: {:?} per thread", t.elapsed() / n);
    let t = Instant::now();
    let alive: Vec<_> = (0..n).map(|_| std::thread::spawn(|| 1)).collect();
    for h in alive {
        let _ = h.join();
    }
    println!("{n} alive at once: {:?} per thread", t.elapsed() / n);
}
