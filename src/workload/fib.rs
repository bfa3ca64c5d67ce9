//! `fib:N`: naive recursive Fibonacci, the classic CPU-bound task.

use std::sync::Arc;

use super::{parse_count, Entry, Nature, TaskError, Workload, WorkloadOptions};
use crate::workload::gil;

pub(super) const ENTRY: Entry = Entry {
    name: "fib",
    usage: "fib:N",
    help: "recursive Fibonacci of N (CPU-bound; fib:30 is the classic mailer's task)",
    parse,
};

fn parse(args: &str, _: &WorkloadOptions) -> Result<Arc<dyn Workload>, String> {
    if args.is_empty() {
        return Err("missing N".into());
    }
    let n = parse_count("N", args, 50)? as u32;
    Ok(Arc::new(Fib { n }))
}

/// Recursive Fibonacci; the recursion is kept opaque to the optimiser.
pub struct Fib {
    n: u32,
}

/// Computes fib(n) recursively, offering the interpreter lock at coarse-grained calls.
pub fn fib(n: u32) -> u64 {
    if n < 2 {
        return std::hint::black_box(n as u64);
    }
    if n >= 18 {
        gil::tick();
    }
    fib(std::hint::black_box(n - 1)) + fib(std::hint::black_box(n - 2))
}

impl Workload for Fib {
    fn spec(&self) -> String {
        format!("fib:{}", self.n)
    }
    fn nature(&self) -> Nature {
        Nature::Cpu
    }
    fn task(&self, _index: usize) -> Result<u64, TaskError> {
        let v = fib(self.n);
        // The task "produces" the 8 bytes of its result.
        Ok(std::mem::size_of_val(&std::hint::black_box(v)) as u64)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fib_values() {
        assert_eq!(super::fib(0), 0);
        assert_eq!(super::fib(1), 1);
        assert_eq!(super::fib(20), 6765);
        assert_eq!(super::fib(30), 832040);
    }

    #[test]
    fn a_task_produces_the_8_bytes_of_its_result() {
        use super::super::WorkloadOptions;
        let w = super::parse("20", &WorkloadOptions::default()).unwrap();
        assert_eq!(w.spec(), "fib:20");
        assert_eq!(w.task(3).unwrap(), 8);
        assert!(super::parse("", &WorkloadOptions::default()).is_err());
    }
}
