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

/// In a process whose memory a run measures, jemalloc gives a freed page back after 1 s
/// instead of its default 10 s (its dirty decay): a run's peak then counts the pages its tasks
/// hold, not the ones they freed 9 s earlier, at no measurable CPU (docs/benchmarks.md §35).
/// The user's own `_RJEM_MALLOC_CONF`, if set and not empty, is left to decide.
#[cfg(feature = "alloc-jemalloc")]
fn measured_decay() {
    if std::env::var_os("_RJEM_MALLOC_CONF").is_some_and(|c| !c.is_empty()) {
        return;
    }
    let mut ms: isize = 1000;
    let set = |name: &std::ffi::CStr, ms: &mut isize| {
        // SAFETY: the name takes an ssize_t, written from `ms`, which outlives the call;
        // nothing is read back. A name that fails (an arena not made yet) changes nothing.
        unsafe {
            tikv_jemalloc_sys::mallctl(
                name.as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                (ms as *mut isize).cast(),
                std::mem::size_of::<isize>(),
            )
        }
    };
    // Arenas made from now on, then each one already made (the setting takes no "all").
    set(c"arenas.dirty_decay_ms", &mut ms);
    let mut narenas: u32 = 0;
    let mut len = std::mem::size_of::<u32>();
    // SAFETY: `arenas.narenas` is an unsigned int, read into `narenas` of `len` bytes.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"arenas.narenas".as_ptr(),
            (&raw mut narenas).cast(),
            &raw mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return;
    }
    for i in 0..narenas {
        if let Ok(name) = std::ffi::CString::new(format!("arena.{i}.dirty_decay_ms")) {
            set(&name, &mut ms);
        }
    }
}

fn main() -> std::process::ExitCode {
    concur::set_allocator(ALLOCATOR_NAME);
    #[cfg(feature = "alloc-jemalloc")]
    concur::set_allocator_for_measured_processes(measured_decay);
    concur::cli::main()
}

#[cfg(all(test, feature = "alloc-jemalloc"))]
mod tests {
    /// A jemalloc setting of type ssize_t, read back.
    fn read(name: &std::ffi::CStr) -> isize {
        let mut value: isize = -2;
        let mut len = std::mem::size_of::<isize>();
        // SAFETY: the name's value is an ssize_t, written into `value` of `len` bytes.
        let rc = unsafe {
            tikv_jemalloc_sys::mallctl(
                name.as_ptr(),
                (&raw mut value).cast(),
                &raw mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        assert_eq!(rc, 0, "mallctl {name:?}");
        value
    }

    #[test]
    fn a_measured_process_returns_freed_pages_after_a_second() {
        if std::env::var_os("_RJEM_MALLOC_CONF").is_some_and(|c| !c.is_empty()) {
            panic!("this test reads jemalloc's defaults: unset _RJEM_MALLOC_CONF");
        }
        assert_eq!(read(c"arenas.dirty_decay_ms"), 10_000, "jemalloc's default");
        super::measured_decay();
        assert_eq!(read(c"arenas.dirty_decay_ms"), 1000);
        assert_eq!(read(c"arena.0.dirty_decay_ms"), 1000);
    }
}
