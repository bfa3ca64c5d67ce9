//! The interpreter-lock emulation (`--gil`).
//!
//! One process-wide lock, like CPython's GIL or MRI's GVL: a task holds it while it computes,
//! hands it over when it has held it for the switch interval and someone is waiting (checked
//! cheaply by [`tick`] inside the CPU loops), and releases it around blocking I/O
//! ([`released`]). The forced switch hands the lock straight to the oldest waiter, so a thread
//! that used up its interval cannot take it straight back (CPython 3.2+'s forced switching);
//! a lock released around I/O is free for whoever comes first, as in CPython, so threads
//! returning from I/O do not queue behind sleeping ones. Each process has its own lock:
//! processes are not serialised.
//!
//! When the emulation is off every entry point is one relaxed atomic load.
//!
//! A traced task's time waiting for the lock and holding it are its phases
//! ([`crate::measure::phases`]): when the run records phases, [`hold_task`] notes the task on
//! its thread and every wait and hold of that thread is recorded, up to the book's bound per
//! task ([`crate::measure::phases::LOCK_PHASES_PER_TASK`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::Thread;
use std::time::Duration;

use crate::measure::mono_ns;
use crate::measure::phases::{self, PhaseKind, TaskPhases};

static ENABLED: AtomicBool = AtomicBool::new(false);
static INTERVAL_NS: AtomicU64 = AtomicU64::new(5_000_000);
static HELD_SINCE_NS: AtomicU64 = AtomicU64::new(0);
static WAITERS: AtomicUsize = AtomicUsize::new(0);
static SWITCHES: AtomicU64 = AtomicU64::new(0);
/// Whether the lock's waits and holds are recorded as traced tasks' phases.
static TRACING: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The traced task this thread runs, while [`TRACING`]: only threads that hold the lock
    /// touch it (never a coroutine: `green` refuses `--gil`).
    static TASK: std::cell::RefCell<Option<TaskPhases>> = const { std::cell::RefCell::new(None) };
}
static STATE: Mutex<LockState> = Mutex::new(LockState {
    held: false,
    queue: VecDeque::new(),
});

struct LockState {
    held: bool,
    queue: VecDeque<Arc<Waiter>>,
}

struct Waiter {
    granted: AtomicBool,
    thread: Thread,
}

/// Turns the emulation on or off for this process, with the given switch interval.
pub fn configure(enabled: bool, switch_interval: Duration) {
    INTERVAL_NS.store(switch_interval.as_nanos() as u64, Ordering::Relaxed);
    ENABLED.store(enabled, Ordering::Release);
}

/// Records the lock's waits and holds as phases of the traced tasks (while the run's phase
/// book is installed), or stops.
pub fn trace(on: bool) {
    TRACING.store(on, Ordering::Relaxed);
}

/// Whether the emulation is on in this process.
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// How many times the lock changed hands because a holder used up its interval.
pub fn forced_switches() -> u64 {
    SWITCHES.load(Ordering::Relaxed)
}

fn state() -> MutexGuard<'static, LockState> {
    // A panic while holding this short critical section cannot leave it inconsistent.
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Takes the lock; whether it had to wait for it.
fn acquire() -> bool {
    let mut st = state();
    if !st.held {
        // Free: take it, even past queued waiters, as a thread returning from I/O does in
        // CPython.
        st.held = true;
        drop(st);
        HELD_SINCE_NS.store(mono_ns(), Ordering::Relaxed);
        return false;
    }
    let me = Arc::new(Waiter {
        granted: AtomicBool::new(false),
        thread: std::thread::current(),
    });
    st.queue.push_back(me.clone());
    WAITERS.fetch_add(1, Ordering::Relaxed);
    loop {
        drop(st);
        std::thread::park();
        st = state();
        if me.granted.load(Ordering::Acquire) {
            // Handed over directly; the giver removed us from the queue.
            break;
        }
        if !st.held {
            st.held = true;
            if let Some(pos) = st.queue.iter().position(|w| Arc::ptr_eq(w, &me)) {
                st.queue.remove(pos);
                WAITERS.fetch_sub(1, Ordering::Relaxed);
            }
            break;
        }
    }
    drop(st);
    HELD_SINCE_NS.store(mono_ns(), Ordering::Relaxed);
    true
}

/// Records a phase of the traced task this thread runs, if any.
fn note(kind: PhaseKind, start_ns: u64, end_ns: u64) {
    TASK.with(|t| {
        if let Some(task) = &*t.borrow() {
            task.record(kind, start_ns, end_ns);
        }
    });
}

/// [`acquire`], with the wait recorded when the run traces the lock.
fn acquire_noted() {
    if !TRACING.load(Ordering::Relaxed) {
        acquire();
        return;
    }
    let asked = mono_ns();
    if acquire() {
        note(
            PhaseKind::LockWait,
            asked,
            HELD_SINCE_NS.load(Ordering::Relaxed),
        );
    }
}

/// Records the hold that ends now, when the run traces the lock (the caller holds it, so
/// [`HELD_SINCE_NS`] is its own).
fn held_until_now() {
    if TRACING.load(Ordering::Relaxed) {
        note(
            PhaseKind::LockHeld,
            HELD_SINCE_NS.load(Ordering::Relaxed),
            mono_ns(),
        );
    }
}

/// Lets go of the lock and wakes the oldest waiter, which takes it unless another thread gets
/// there first (used around blocking I/O and at the end of a task).
fn release() {
    let mut st = state();
    st.held = false;
    if let Some(front) = st.queue.front() {
        front.thread.unpark();
    }
}

/// Hands the lock straight to the oldest waiter (the forced switch at the end of an
/// interval): the giver cannot take it back before someone else has run, as in CPython's
/// FORCE_SWITCHING.
fn hand_over() {
    let mut st = state();
    match st.queue.pop_front() {
        Some(next) => {
            WAITERS.fetch_sub(1, Ordering::Relaxed);
            next.granted.store(true, Ordering::Release);
            next.thread.unpark();
        }
        None => st.held = false,
    }
}

/// Proof that the current thread holds the lock; releases it on drop.
#[must_use = "the lock is released when the guard is dropped"]
pub struct Held {
    active: bool,
}

impl Drop for Held {
    #[inline]
    fn drop(&mut self) {
        if self.active {
            let_go();
        }
    }
}

/// What dropping an active [`Held`] does: the hold noted, the lock released.
#[inline(never)]
fn let_go() {
    held_until_now();
    release();
    if TRACING.load(Ordering::Relaxed) {
        TASK.with(|t| t.borrow_mut().take());
    }
}

/// Takes the lock for the current task (a no-op when the emulation is off).
#[cfg(test)]
pub fn hold() -> Held {
    hold_task(usize::MAX)
}

/// Takes the lock for task `index` (a no-op when the emulation is off); when the run traces
/// the lock and the task is traced, its waits and holds on this thread are its phases until
/// the guard is dropped.
#[inline]
pub fn hold_task(index: usize) -> Held {
    if !enabled() {
        return Held { active: false };
    }
    take(index)
}

/// [`hold_task`] when the emulation is on: out of line, so that every task of a run without
/// `--gil` pays one load and a branch.
#[inline(never)]
fn take(index: usize) -> Held {
    if TRACING.load(Ordering::Relaxed) {
        let task = phases::task(index);
        TASK.with(|t| *t.borrow_mut() = task);
    }
    acquire_noted();
    Held { active: true }
}

/// Called often from CPU loops by the lock holder: hands the lock over when the holder has
/// had it for a switch interval and another thread waits.
#[inline]
pub fn tick() {
    if !ENABLED.load(Ordering::Relaxed) || WAITERS.load(Ordering::Relaxed) == 0 {
        return;
    }
    let held = mono_ns().saturating_sub(HELD_SINCE_NS.load(Ordering::Relaxed));
    if held >= INTERVAL_NS.load(Ordering::Relaxed) {
        SWITCHES.fetch_add(1, Ordering::Relaxed);
        held_until_now();
        hand_over();
        acquire_noted();
    }
}

/// Runs blocking work (I/O, sleep) with the lock released, as interpreters do around
/// blocking system calls. Must be called by a thread that holds the lock via [`hold`].
pub fn released<T>(f: impl FnOnce() -> T) -> T {
    if !enabled() {
        return f();
    }
    held_until_now();
    release();
    let out = f();
    acquire_noted();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicI64;
    use std::time::Instant;

    /// Gives up after this long, so that a broken lock fails the test instead of hanging it.
    const LIMIT: Duration = Duration::from_secs(10);

    // One test owns the process-wide lock so the tests cannot interfere with each other.
    #[test]
    fn lock_excludes_hands_over_and_releases_around_io() {
        configure(true, Duration::from_millis(1));
        excludes();
        hands_over_while_computing();
        releases_around_io();
        assert!(!state().held, "lock left held");
        configure(
            false,
            crate::model::selfcall::RunSettings::default().switch_interval,
        );
    }

    /// Never two holders at once.
    fn excludes() {
        let inside = Arc::new(AtomicI64::new(0));
        let max_inside = Arc::new(AtomicI64::new(0));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let inside = inside.clone();
                let max_inside = max_inside.clone();
                std::thread::spawn(move || {
                    let _g = hold();
                    for _ in 0..2000 {
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        max_inside.fetch_max(now, Ordering::SeqCst);
                        std::hint::black_box((0..200u64).sum::<u64>());
                        inside.fetch_sub(1, Ordering::SeqCst);
                        tick();
                    }
                    released(std::thread::yield_now);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(max_inside.load(Ordering::SeqCst), 1, "two holders at once");
    }

    /// Two threads that compute without ever letting go take turns: the lock changes hands
    /// in the middle of their work, at the switch interval, many times. Without the forced
    /// hand-over the first holder would run to its end (here: until the deadline) and the
    /// lock would change hands once.
    fn hands_over_while_computing() {
        const TURNS: u64 = 6;
        let switches_before = forced_switches();
        // Who computed last, and how often the computing thread changed.
        let last = Arc::new(AtomicUsize::new(usize::MAX));
        let turns = Arc::new(AtomicU64::new(0));
        let deadline = Instant::now() + LIMIT;
        let handles: Vec<_> = (0..2)
            .map(|me| {
                let (last, turns) = (last.clone(), turns.clone());
                std::thread::spawn(move || {
                    let _g = hold();
                    while turns.load(Ordering::SeqCst) < TURNS && Instant::now() < deadline {
                        let before = last.swap(me, Ordering::SeqCst);
                        if before != me && before != usize::MAX {
                            turns.fetch_add(1, Ordering::SeqCst);
                        }
                        std::hint::black_box((0..200u64).sum::<u64>());
                        tick();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let turns = turns.load(Ordering::SeqCst);
        assert!(
            turns >= TURNS,
            "the lock changed hands {turns} times between two computing threads"
        );
        assert!(
            forced_switches() > switches_before,
            "no forced switch was counted"
        );
    }

    /// A holder that blocks inside [`released`] lets another thread take the lock meanwhile;
    /// when it returns it waits for the lock again.
    fn releases_around_io() {
        let (in_io_tx, in_io_rx) = std::sync::mpsc::channel::<()>();
        let (took_tx, took_rx) = std::sync::mpsc::channel::<()>();
        let blocked = std::thread::spawn(move || {
            let _g = hold();
            // The "blocking I/O": waits for the other thread to have taken the lock.
            released(|| {
                in_io_tx.send(()).unwrap();
                took_rx.recv_timeout(LIMIT).is_ok()
            })
        });
        let other = std::thread::spawn(move || {
            in_io_rx.recv_timeout(LIMIT).unwrap();
            let _g = hold();
            // Still holding: the blocked thread cannot have come back from its I/O. (If it
            // gave up waiting, nobody listens any more.)
            let _ = took_tx.send(());
        });
        other.join().unwrap();
        assert!(
            blocked.join().unwrap(),
            "the lock stayed held around blocking I/O: nobody else could take it"
        );
    }
}
