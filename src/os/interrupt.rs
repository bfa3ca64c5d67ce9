//! The user's request to stop (Ctrl-C or SIGTERM), as one process-wide flag. It sits below
//! everything that reads it — the study runner and `concur jobs work` — so neither reaches
//! into the other for it.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Catches Ctrl-C and SIGTERM so the current run's process tree is killed and every finished
/// run is kept. A second Ctrl-C while stopping is honoured by the same flag.
pub fn install_interrupt_handler() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe; the sigaction
    // struct is zeroed plain data filled in before use.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
}

/// Asks to stop as Ctrl-C does (the live view's `q`).
pub fn request() {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Whether the user asked to stop.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}
