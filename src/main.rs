//! The `concur` binary: the command line lives in the library (`concur::cli`), so that this
//! file is only the process's entry point and its exit code.

#[cfg(all(feature = "alloc-mimalloc", feature = "alloc-jemalloc"))]
compile_error!(
    "choose one allocator: the features alloc-mimalloc and alloc-jemalloc exclude each other"
);

/// mimalloc as the process's allocator, built only to measure the choice (bench/allocators.sh).
#[cfg(feature = "alloc-mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// jemalloc, the process's allocator by default: chosen by measurement against glibc's malloc
/// and mimalloc (bench/allocators.sh).
#[cfg(feature = "alloc-jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The allocator above, for the results' meta line.
const ALLOCATOR_NAME: &str = if cfg!(feature = "alloc-mimalloc") {
    "mimalloc"
} else if cfg!(feature = "alloc-jemalloc") {
    "jemalloc"
} else {
    "system"
};

fn main() -> std::process::ExitCode {
    concur::set_allocator(ALLOCATOR_NAME);
    concur::cli::main()
}
