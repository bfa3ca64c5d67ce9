//! A precise timer for waits inside an async runtime: one thread, a heap of deadlines (kept in
//! fixed blocks: `block_heap.rs`), and a futex wait with a relative nanosecond timeout,
//! so that a task waiting D wakes within tens of microseconds of its due time. tokio's own
//! timer rounds every deadline up to its next millisecond tick and parks on `epoll_wait`'s
//! millisecond timeout: its sleeps come 1 to 2 ms late even alone (`docs/benchmarks.md`, the
//! tasks study), which is the runtime's timer, not the concurrency model, and would hide what
//! the models cost. The `sleep` workload's async entry point waits here; blocking models sleep
//! their thread (already precise), green ones on may's timer.

use super::block_heap::BlockHeap;
use crate::measure::mono_ns;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// One registered wait: when it is due, and whom to wake then. The woken future reads the
/// clock itself (a wake-up from the timer comes at its due time or after), so nothing else is
/// shared. The deadline is nanoseconds on [`mono_ns`]'s clock (the monotonic one, which
/// `Instant` reads too) rather than an `Instant` (16 bytes): 24 bytes a wait, not 32, held by
/// every waiting task (docs/benchmarks.md §31).
struct Entry {
    due: u64,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.due == other.due
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.due.cmp(&other.due)
    }
}

/// The process's timer: its heap, and a counter of new earliest deadlines that its thread
/// waits on.
struct Timer {
    heap: Mutex<BlockHeap<Entry>>,
    changed: AtomicU32,
}

/// Waits until `word` is no longer `seen`, or `timeout` has passed as the kernel counts it
/// (`FUTEX_WAIT`'s timeout is relative). std's `Condvar::wait_timeout` turns a timeout into an
/// absolute time read from `clock_gettime`, which libfaketime shifts in user space while the
/// kernel's futex runs on the real clock: an agent under libfaketime (5 s ahead, the hub
/// tests' clock check) then slept 5 s past every deadline.
fn futex_wait(word: &AtomicU32, seen: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: FUTEX_WAIT reads the aligned u32 behind `word`, which lives for the process
    // (the timer is leaked), and the timespec on this stack frame; it writes nothing. Any
    // error (EAGAIN: the word changed, EINTR, ETIMEDOUT) only ends the wait.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            seen,
            ts_ptr,
        );
    }
}

/// Wakes the thread waiting on `word`.
fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE only reads the address of the aligned u32 behind `word`.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        );
    }
}

/// The process's one timer, its thread started at the first wait.
fn timer() -> &'static Timer {
    static TIMER: OnceLock<&'static Timer> = OnceLock::new();
    TIMER.get_or_init(|| {
        let t: &'static Timer = Box::leak(Box::new(Timer {
            heap: Mutex::new(BlockHeap::default()),
            changed: AtomicU32::new(0),
        }));
        // Without its thread no wait would ever end: a process that cannot start one more
        // thread has failed already, and says so.
        if let Err(e) = std::thread::Builder::new()
            .name("concur-timer".into())
            // 64 KiB overflowed in a debug build, in jemalloc's first allocation on the
            // thread; only the pages touched are memory.
            .stack_size(256 << 10)
            .spawn(move || t.run())
        {
            eprintln!("concur: cannot start the timer thread: {e}");
            std::process::abort();
        }
        t
    })
}

impl Timer {
    /// Wakes every entry that is due, then waits for the next one (or for a new, earlier one).
    fn run(&self) -> ! {
        let mut due: Vec<Entry> = Vec::new();
        loop {
            let mut heap = self.heap.lock().unwrap_or_else(|p| p.into_inner());
            // Read before the heap is looked at: a deadline registered after this makes the
            // wait below return at once.
            let seen = self.changed.load(Ordering::Acquire);
            let now = mono_ns();
            while heap.peek().is_some_and(|e| e.due <= now) {
                if let Some(e) = heap.pop() {
                    due.push(e);
                }
            }
            let next = heap
                .peek()
                .map(|e| Duration::from_nanos(e.due.saturating_sub(now)));
            drop(heap);
            if !due.is_empty() {
                // Woken outside the lock: a woken task's runtime may register its next wait.
                for e in due.drain(..) {
                    e.waker.wake();
                }
                continue;
            }
            futex_wait(&self.changed, seen, next);
        }
    }

    fn register(&self, due: u64, waker: Waker) {
        let mut heap = self.heap.lock().unwrap_or_else(|p| p.into_inner());
        let earliest = heap.peek().is_none_or(|e| due < e.due);
        heap.push(Entry { due, waker });
        drop(heap);
        // The thread sleeps until the earliest deadline it knew: only a new earliest one needs
        // it awake.
        if earliest {
            self.changed.fetch_add(1, Ordering::Release);
            futex_wake(&self.changed);
        }
    }
}

/// A wait of `d` from now, precise to the timer thread's wake-up (tens of microseconds).
pub fn sleep(d: Duration) -> Sleep {
    Sleep {
        due: mono_ns().saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        registered: false,
    }
}

/// The future of [`sleep`]: 16 bytes, and 24 in the timer's heap while it waits.
pub struct Sleep {
    /// Nanoseconds on [`mono_ns`]'s clock.
    due: u64,
    registered: bool,
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if mono_ns() >= self.due {
            return Poll::Ready(());
        }
        // Registered once: the waker given then wakes this task at the due time (tokio's and
        // may's wakers do not change between polls of one task; an early poll finds it not due).
        if !self.registered {
            timer().register(self.due, cx.waker().clone());
            self.registered = true;
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// Every waiting task holds one entry in the heap and one `Sleep` inside its own task: a
    /// word added to either is paid a task (8 MB at the tasks study's million).
    #[test]
    fn an_entry_is_24_bytes_and_a_wait_16() {
        assert_eq!(std::mem::size_of::<Entry>(), 24);
        assert_eq!(std::mem::size_of::<Sleep>(), 16);
    }

    #[test]
    fn waits_end_at_their_due_time_in_order_and_never_early() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let t0 = Instant::now();
        let order = std::sync::Arc::new(Mutex::new(Vec::new()));
        let ends = rt.block_on(async {
            // Spawned out of due order: waits that ran one after another would end in this
            // order (each registering only once the one before it ended), and 60 ms late.
            let waits = [30u64, 10, 20, 0].map(|ms| {
                let order = order.clone();
                tokio::spawn(async move {
                    sleep(Duration::from_millis(ms)).await;
                    order.lock().expect("order").push(ms);
                    (ms, t0.elapsed())
                })
            });
            let mut ends = Vec::new();
            for w in waits {
                ends.push(w.await.expect("task"));
            }
            ends
        });
        // The timer wakes in due order, and the runtime runs the woken in the order woken,
        // however late a loaded machine lets either run: the order is the code's, not the
        // machine's.
        assert_eq!(*order.lock().expect("order"), [0, 10, 20, 30]);
        for (ms, took) in ends {
            assert!(
                took >= Duration::from_millis(ms),
                "{ms} ms ended at {took:?}"
            );
        }
    }
}
