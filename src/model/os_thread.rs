//! OS threads created with `pthread_create` directly.
//!
//! `std::thread::spawn` cannot be used where thread creation may run into the OS's limits:
//! each std thread also maps an alternate signal stack, and when that mapping fails (near
//! 16,000 threads here, at `vm.max_map_count`) std panics inside the new thread and the whole
//! process aborts. A raw pthread reports the same exhaustion as an error we can record
//! ("could create K of N threads"), which is the experiment's point.

use std::ffi::c_void;
use std::io;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;

type Start = Box<dyn FnOnce() -> *mut c_void + Send>;

/// A joinable OS thread returning `T`.
#[must_use = "an OS thread must be joined"]
pub struct OsThread<T> {
    id: libc::pthread_t,
    _result: PhantomData<T>,
}

extern "C" fn trampoline(arg: *mut c_void) -> *mut c_void {
    // SAFETY: `arg` is the `Box<Start>` leaked by `spawn` for this thread alone.
    let start = unsafe { Box::from_raw(arg as *mut Start) };
    start()
}

/// Starts `f` on a new OS thread with a stack of `stack_size` bytes (raised to the minimum the
/// system allows). The error is the OS's own (`EAGAIN`, `ENOMEM`).
pub fn spawn<T, F>(stack_size: usize, f: F) -> io::Result<OsThread<T>>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let start: Start = Box::new(move || {
        // Never unwind across the C boundary: the panic travels back through join.
        let result: std::thread::Result<T> = std::panic::catch_unwind(AssertUnwindSafe(f));
        Box::into_raw(Box::new(result)) as *mut c_void
    });
    let arg = Box::into_raw(Box::new(start));
    // SAFETY: attr is initialised before use and destroyed after; on failure we take back
    // ownership of `arg`, which the thread never saw.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        let rc = libc::pthread_attr_init(&mut attr);
        if rc != 0 {
            drop(Box::from_raw(arg));
            return Err(io::Error::from_raw_os_error(rc));
        }
        let size = stack_size.max(libc::PTHREAD_STACK_MIN);
        let rc = libc::pthread_attr_setstacksize(&mut attr, size);
        if rc != 0 {
            libc::pthread_attr_destroy(&mut attr);
            drop(Box::from_raw(arg));
            return Err(io::Error::from_raw_os_error(rc));
        }
        let mut id: libc::pthread_t = std::mem::zeroed();
        let rc = libc::pthread_create(&mut id, &attr, trampoline, arg as *mut c_void);
        libc::pthread_attr_destroy(&mut attr);
        if rc != 0 {
            drop(Box::from_raw(arg));
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(OsThread {
            id,
            _result: PhantomData,
        })
    }
}

impl<T> OsThread<T> {
    /// Waits for the thread and returns its result, or the payload of its panic.
    pub fn join(self) -> std::thread::Result<T> {
        let mut ret: *mut c_void = std::ptr::null_mut();
        // SAFETY: `id` is a joinable thread we created and join exactly once (self is consumed).
        let rc = unsafe { libc::pthread_join(self.id, &mut ret) };
        if rc != 0 || ret.is_null() {
            return Err(Box::new(format!(
                "pthread_join failed: {}",
                io::Error::from_raw_os_error(rc)
            )));
        }
        // SAFETY: the trampoline returned a leaked Box<thread::Result<T>> for this T.
        *unsafe { Box::from_raw(ret as *mut std::thread::Result<T>) }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn returns_values_and_panics() {
        let t = super::spawn(64 << 10, || 41 + 1).unwrap();
        assert_eq!(t.join().unwrap(), 42);
        let p = super::spawn(64 << 10, || -> u8 { panic!("boom") }).unwrap();
        assert!(p.join().is_err());
    }
}
