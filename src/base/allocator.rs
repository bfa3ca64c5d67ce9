//! The process's global allocator as the binary chose it: its name, for the results' meta
//! line, and what a process whose memory a run measures asks of it.
//!
//! Measured processes (a run's child, `concur classic tokio-tasks`, the floor it is compared
//! with) ask the allocator to give freed pages back sooner than a long-lived process would:
//! jemalloc keeps a freed page 10 s by default (its dirty decay), so a run's peak counted the
//! pages its tasks had freed, a million waiting tasks' cells at their end (docs/benchmarks.md
//! §31, §35). The study, the server and the agents keep the allocator's defaults.

use std::sync::OnceLock;

static NAME: OnceLock<&'static str> = OnceLock::new();
static FOR_MEASURED: OnceLock<fn()> = OnceLock::new();

/// Names the process's global allocator for the results' meta line (`allocator`). The `concur`
/// binary calls it before anything else with `jemalloc`, `mimalloc` or `system` (the C
/// library's malloc). A program of the user's that runs concur as a library may name its own
/// (`tcmalloc`, say); its files otherwise say nothing of the allocator, which concur cannot see
/// from inside. The first name given stays.
pub fn set_allocator(name: &'static str) {
    let _ = NAME.set(name);
}

/// The process's global allocator as [`set_allocator`] named it.
pub fn allocator() -> Option<&'static str> {
    NAME.get().copied()
}

/// What the binary's allocator does in a process whose memory a run measures: the `concur`
/// binary gives jemalloc's setting here (freed pages returned after 1 s instead of 10 s). A
/// program that runs concur as a library and chooses its own allocator may give its own; none
/// given, nothing is changed. The first one given stays.
pub fn set_allocator_for_measured_processes(tune: fn()) {
    let _ = FOR_MEASURED.set(tune);
}

/// Called first thing by a process whose memory a run measures (a `__run` child, the floor
/// program): applies what [`set_allocator_for_measured_processes`] gave.
pub(crate) fn as_a_measured_process() {
    if let Some(tune) = FOR_MEASURED.get() {
        tune();
    }
}
