//! What this build is: the version written into every results file and the name of the
//! process's global allocator, read by the study, the hub and the agent.

/// The version written into every results file.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

static ALLOCATOR: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Names the process's global allocator for the results' meta line (`allocator`). The `concur`
/// binary calls it before anything else with `jemalloc`, `mimalloc` or `system` (the C
/// library's malloc). A program of the user's that runs concur as a library may name its own
/// (`tcmalloc`, say); its files otherwise say nothing of the allocator, which concur cannot see
/// from inside. The first name given stays.
pub fn set_allocator(name: &'static str) {
    let _ = ALLOCATOR.set(name);
}

/// The process's global allocator as [`set_allocator`] named it.
pub fn allocator() -> Option<&'static str> {
    ALLOCATOR.get().copied()
}
