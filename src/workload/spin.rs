//! `spin:N`: the classic `math1` loop, `a, b = b, a * b`, N times.

use std::sync::Arc;

use super::{parse_count, Entry, Nature, TaskError, Workload, WorkloadOptions};
use crate::workload::gil;

pub(super) const ENTRY: Entry = Entry {
    name: "spin",
    usage: "spin:N",
    help: "N iterations of the multiply loop `a, b = b, a*b` (the classic gil study's math1)",
    parse,
};

fn parse(args: &str, _: &WorkloadOptions) -> Result<Arc<dyn Workload>, String> {
    if args.is_empty() {
        return Err("missing N".into());
    }
    let n = parse_count("N", args, 1 << 40)?;
    Ok(Arc::new(Spin { n }))
}

/// The multiply loop, with wrapping arithmetic and an opaque state so it is not folded away.
pub struct Spin {
    n: u64,
}

/// How many iterations between offers of the interpreter lock (about 10 µs of work).
const TICK_EVERY: u64 = 1 << 12;

/// Runs the loop and returns the final `b`.
pub fn spin(n: u64) -> u64 {
    let (mut a, mut b) = (std::hint::black_box(3u64), std::hint::black_box(5u64));
    let mut i = 0;
    while i < n {
        let chunk = (n - i).min(TICK_EVERY);
        for _ in 0..chunk {
            let next = a.wrapping_mul(b) | 1;
            a = b;
            b = std::hint::black_box(next);
        }
        i += chunk;
        gil::tick();
    }
    b
}

impl Workload for Spin {
    fn spec(&self) -> String {
        format!("spin:{}", self.n)
    }
    fn nature(&self) -> Nature {
        Nature::Cpu
    }
    fn task(&self, _index: usize) -> Result<u64, TaskError> {
        let v = spin(self.n);
        Ok(std::mem::size_of_val(&std::hint::black_box(v)) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The loop without the chunks that offer the interpreter lock.
    fn reference(n: u64) -> u64 {
        let (mut a, mut b) = (3u64, 5u64);
        for _ in 0..n {
            let next = a.wrapping_mul(b) | 1;
            a = b;
            b = next;
        }
        b
    }

    #[test]
    fn known_values_across_chunk_boundaries() {
        assert_eq!(spin(0), 5);
        assert_eq!(spin(1), 15);
        assert_eq!(spin(2), 75);
        assert_eq!(spin(3), 1125);
        for n in [
            TICK_EVERY - 1,
            TICK_EVERY,
            TICK_EVERY + 1,
            3 * TICK_EVERY + 7,
        ] {
            assert_eq!(spin(n), reference(n), "n = {n}");
        }
        let w = parse("1000", &WorkloadOptions::default()).unwrap();
        assert_eq!(w.spec(), "spin:1000");
        assert_eq!(w.task(0).unwrap(), 8);
    }
}
