//! Live counters of a run: tasks started, ended and failed, and when the last task started.
//! A `__run` child counts into a page of memory it shares with the parent that started it
//! (a [`CounterPage`]: a memfd the parent made, mapped `MAP_SHARED` by both), so the parent's
//! live view reads them while the run goes on; the open-model ticker of the child reads them
//! too. Forked tasks (`fork`) inherit the mapping and count into the same page. Where no page
//! was handed over (a lab in-process, an agent's older parent, a `__task` child) the counts go
//! to a page of this process's own.
//!
//! What a task costs: one count as it starts and one as it ends (a second only when it
//! failed), into its thread's shard: a cache line of counters of its own, written with a
//! plain load and store, so two workers starting and ending tasks do not pass a line back
//! and forth and no locked instruction is paid; threads past the first 62 (of every process
//! counting into the page, forked children included) share the last shard and count into it
//! with `fetch_add`. No lock, no clock and no system call. The reader sums the
//! shards, and it is the reader that sees every planned task started (the started sum at the
//! planned count): the memory sampler takes its PSS sample then.

use std::cell::Cell;
use std::io;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use crate::os::shared::SharedMemory;

/// The counts of the threads that share it, alone on a cache line.
#[repr(C, align(64))]
struct Shard {
    started: AtomicU64,
    ended: AtomicU64,
    failed: AtomicU64,
}

/// What is written once a run: read often by the parent, written once by the child; and the
/// hand-shake of the run's end (futex words: 32 bits).
#[repr(C, align(64))]
struct Meta {
    planned: AtomicU64,
    /// 1 once the run's tasks are over, set by the child, which then waits for `sampled`.
    done: AtomicU32,
    /// `SAMPLED` once the parent has taken its sample of the ended run, `GONE` once its
    /// sampler has stopped watching.
    sampled: AtomicU32,
    /// 1 while a sampler of the parent watches the page ([`CounterPage::watch`]): only then
    /// does the child wait at its end for a sample.
    watching: AtomicU32,
    /// The next shard a thread claims, of any process counting into the page.
    next_shard: AtomicU32,
}

/// `sampled`: the parent took its sample of the ended run.
const SAMPLED: u32 = 1;
/// `sampled`: the parent's sampler stopped watching; nothing will answer.
const GONE: u32 = 2;

/// How many shards the page holds: a thread counts into shard `k mod SHARDS`, `k` the order
/// in which the process's threads first counted.
const SHARDS: usize = 63;

/// The counters, as laid out in the shared page.
#[repr(C)]
pub struct Counters {
    meta: Meta,
    shards: [Shard; SHARDS],
}

impl Counters {
    const fn new() -> Counters {
        #[allow(clippy::declare_interior_mutable_const)]
        const ZERO: Shard = Shard {
            started: AtomicU64::new(0),
            ended: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        };
        Counters {
            meta: Meta {
                planned: AtomicU64::new(0),
                done: AtomicU32::new(0),
                sampled: AtomicU32::new(0),
                watching: AtomicU32::new(0),
                next_shard: AtomicU32::new(0),
            },
            shards: [ZERO; SHARDS],
        }
    }

    /// The sums over the shards, and the planned count.
    fn read(&self) -> Reading {
        let planned = self.meta.planned.load(Ordering::Acquire);
        let (mut started, mut ended, mut failed) = (0, 0, 0);
        for s in &self.shards {
            started += s.started.load(Ordering::Relaxed);
            ended += s.ended.load(Ordering::Relaxed);
            failed += s.failed.load(Ordering::Relaxed);
        }
        Reading {
            started,
            ended,
            failed,
            planned,
            all_started: planned > 0 && started >= planned,
            done: self.meta.done.load(Ordering::Acquire) != 0,
        }
    }
}

/// The bytes of a page: what the parent maps and the child checks it was given.
const PAGE: usize = 4096;

const _: () = assert!(std::mem::size_of::<Counters>() <= PAGE);

/// The counters of this process when no page was handed to it.
static OWN: Counters = Counters::new();

/// The counters every task of this process counts into: [`OWN`], or a shared page once
/// [`CounterPage::install`] put one here.
static ACTIVE: AtomicPtr<Counters> = AtomicPtr::new(std::ptr::addr_of!(OWN).cast_mut());

fn active() -> &'static Counters {
    // SAFETY: ACTIVE points at OWN or at a page that `install` leaked: mapped until the
    // process ends, and only ever accessed through atomics.
    unsafe { &*ACTIVE.load(Ordering::Acquire) }
}

/// Which claims of shards hold: bumped when a page is installed and in the child of every
/// fork, whose threads claim shards of their own again (a forked child must not write into
/// its parent thread's shard, which that thread goes on writing).
static EPOCH: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// This thread's claim: the epoch it was made in, its shard, and whether the shard is the
    /// thread's alone. The shard's address is kept, not its number, so that a task's count
    /// reads only this and [`EPOCH`] (a claim of an older epoch, or none, is made again).
    static CLAIM: Cell<(u32, *const Shard, bool)> =
        const { Cell::new((u32::MAX, std::ptr::null(), false)) };
}

/// The shard every thread past the first `SHARDS - 1` shares, counting with `fetch_add`.
const SHARED_SHARD: usize = SHARDS - 1;

/// The calling thread's shard of the active counters, and whether it is the thread's alone.
#[inline]
fn shard() -> (&'static Shard, bool) {
    let epoch = EPOCH.load(Ordering::Relaxed);
    let (claimed, shard, alone) = CLAIM.with(|claim| {
        let held = claim.get();
        if held.0 == epoch && !held.1.is_null() {
            return held;
        }
        claim_shard(claim, epoch)
    });
    // SAFETY: `shard` points into OWN or into a page that `install` leaked (mapped until the
    // process ends); it was claimed in this epoch, so from the counters active now.
    debug_assert_eq!(claimed, epoch);
    (unsafe { &*shard }, alone)
}

/// Claims the next shard of the active counters for the calling thread.
#[cold]
fn claim_shard(claim: &Cell<(u32, *const Shard, bool)>, epoch: u32) -> (u32, *const Shard, bool) {
    let c = active();
    let k = (c.meta.next_shard.fetch_add(1, Ordering::Relaxed) as usize).min(SHARED_SHARD);
    let held = (epoch, std::ptr::addr_of!(c.shards[k]), k != SHARED_SHARD);
    claim.set(held);
    held
}

/// One more on `n`: a plain load and store where only this thread writes it (no locked
/// instruction), `fetch_add` on the shared shard.
#[inline]
fn bump(n: &AtomicU64, alone: bool) {
    if alone {
        n.store(n.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    } else {
        n.fetch_add(1, Ordering::Relaxed);
    }
}

/// Counts one started task.
#[inline]
pub fn started() {
    let (s, alone) = shard();
    bump(&s.started, alone);
}

/// Counts one ended task.
#[inline]
pub fn ended(ok: bool) {
    let (s, alone) = shard();
    bump(&s.ended, alone);
    if !ok {
        bump(&s.failed, alone);
    }
}

/// In the child of a fork: its threads claim shards again.
extern "C" fn after_fork_in_child() {
    EPOCH.fetch_add(1, Ordering::Relaxed);
}

/// Tasks ended so far, and how many of them failed.
pub fn counts() -> (u64, u64) {
    let r = active().read();
    (r.ended, r.failed)
}

/// A run of `tasks` tasks begins in this process: the counts start again from zero.
pub fn begin(tasks: usize) {
    begin_on(active(), tasks);
}

/// [`begin`] on the counters `c`.
fn begin_on(c: &Counters, tasks: usize) {
    for s in &c.shards {
        for n in [&s.started, &s.ended, &s.failed] {
            n.store(0, Ordering::Relaxed);
        }
    }
    c.meta.done.store(0, Ordering::Relaxed);
    c.meta.sampled.store(0, Ordering::Relaxed);
    c.meta.planned.store(tasks as u64, Ordering::Release);
    // The parent's sampler sleeps on `done` until its next tick; woken now, it sees tasks
    // starting and reads the page every few ms until all have (a short run's all-started
    // moment falls between two ticks).
    futex_wake(&c.meta.done);
}

/// How a child's [`run_ended`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// No page was handed to this process: nobody to tell.
    NoPage,
    /// A page, but no sampler of the parent watches it (its thread did not start): the end is
    /// said and not waited for.
    NoSampler,
    /// The parent took its sample of the ended run.
    Sampled,
    /// The parent watches but took no sample within the wait.
    TimedOut,
}

/// The longest a run waits at its end for its parent's sample of the tree (a tree of a
/// million waiting tasks takes tens of ms to read).
pub const RUN_END_SAMPLE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The run's tasks are over: says so to the parent that handed this process its page, and
/// waits at most `wait` for it to take its sample of the tree (its PSS at the end, before
/// this process frees anything or exits). Returns at once where no page was handed over or
/// no sampler watches it.
pub fn run_ended(wait: std::time::Duration) -> RunEnd {
    let c = active();
    if std::ptr::eq(c, &OWN) {
        return RunEnd::NoPage;
    }
    end_on(c, wait)
}

/// [`run_ended`] on the counters `c`.
fn end_on(c: &Counters, wait: std::time::Duration) -> RunEnd {
    c.meta.done.store(1, Ordering::Release);
    futex_wake(&c.meta.done);
    // A sampler sets `watching` as it starts, before the child could reach its end (the
    // parent starts it right after the spawn, while the child is still being exec'd); one
    // whose thread failed never does, and nothing would answer.
    if c.meta.watching.load(Ordering::Acquire) == 0 {
        return RunEnd::NoSampler;
    }
    let deadline = std::time::Instant::now() + wait;
    loop {
        match c.meta.sampled.load(Ordering::Acquire) {
            SAMPLED => return RunEnd::Sampled,
            GONE => return RunEnd::NoSampler,
            _ => {}
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return RunEnd::TimedOut;
        }
        futex_wait(&c.meta.sampled, 0, left);
    }
}

/// Wakes every process waiting on `word` (the page is shared between processes: no
/// `FUTEX_PRIVATE_FLAG`).
fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a valid, aligned 32-bit word; no memory is written by the kernel.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

/// Sleeps until `word` is woken, no longer holds `expected`, or `timeout` has passed.
fn futex_wait(word: &AtomicU32, expected: u32, timeout: std::time::Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT reads the aligned word and the timespec we own; a relative timeout.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

/// What a [`CounterPage`] holds at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reading {
    /// Tasks started.
    pub started: u64,
    /// Tasks ended (failed ones included).
    pub ended: u64,
    /// Tasks failed.
    pub failed: u64,
    /// Tasks the run will start (0 until the child has said).
    pub planned: u64,
    /// Whether every planned task has started (the started count at the planned count).
    pub all_started: bool,
    /// Whether the child has said its run's tasks are over ([`run_ended`]).
    pub done: bool,
}

/// A page of memory shared between the parent of a run and its child: made by the parent
/// ([`CounterPage::create`]) before the child starts, handed over as a descriptor, mapped by
/// the child ([`CounterPage::attach`]) and [`CounterPage::install`]ed as this process's
/// counters.
pub struct CounterPage {
    mem: SharedMemory,
}

impl CounterPage {
    /// A fresh page of zeroes behind a memfd (close-on-exec: it reaches a child only where
    /// the spawn puts it), mapped here.
    pub fn create() -> io::Result<CounterPage> {
        let mem = SharedMemory::create(c"concur-counters", PAGE)?;
        Ok(CounterPage { mem })
    }

    /// In the child: maps the page on descriptor `fd` and closes the descriptor (nothing the
    /// run starts inherits it; forked tasks inherit the mapping). Refuses a descriptor that
    /// is not a page's size.
    pub fn attach(fd: RawFd) -> io::Result<CounterPage> {
        let mem = SharedMemory::attach(fd, PAGE, PAGE)?;
        Ok(CounterPage { mem })
    }

    /// The descriptor to hand to the child (the parent's side only).
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.mem.fd()
    }

    fn counters(&self) -> &Counters {
        // SAFETY: PAGE bytes (a Counters' size), page-aligned (more than its 64-byte
        // alignment), mapped for as long as self lives; only atomics are read or written.
        unsafe { self.mem.as_ptr().cast::<Counters>().as_ref() }
    }

    /// The counts now.
    pub fn read(&self) -> Reading {
        self.counters().read()
    }

    /// Whether every planned task of the run has started: the moment the memory sampler
    /// takes the tree's PSS at, seen within one of its reads.
    pub fn all_started(&self) -> bool {
        self.read().all_started
    }

    /// Sleeps until the child says its run is over ([`run_ended`]), [`CounterPage::wake`] is
    /// called, or `timeout` has passed.
    pub fn wait_done(&self, timeout: std::time::Duration) {
        let c = self.counters();
        if c.meta.done.load(Ordering::Acquire) == 0 {
            futex_wait(&c.meta.done, 0, timeout);
        }
    }

    /// Wakes a [`CounterPage::wait_done`] early (the sampler is told to stop).
    pub fn wake(&self) {
        futex_wake(&self.counters().meta.done);
    }

    /// The child's side of its run's end ([`run_ended`]) on this page: says the tasks are
    /// over and waits at most `wait` for the parent's sample.
    pub fn end_run(&self, wait: std::time::Duration) -> RunEnd {
        end_on(self.counters(), wait)
    }

    /// Says a sampler watches this page (the parent's, as its thread starts): a child waits
    /// at its run's end only for a sampler that watches.
    pub fn watch(&self) {
        self.counters().meta.watching.store(1, Ordering::Release);
    }

    /// Says the sampler stopped watching: a child waiting at its run's end stops waiting.
    pub fn unwatch(&self) {
        let c = self.counters();
        c.meta.watching.store(0, Ordering::Release);
        c.meta.sampled.store(GONE, Ordering::Release);
        futex_wake(&c.meta.sampled);
    }

    /// Tells the child waiting in [`run_ended`] that its end was sampled.
    pub fn sampled(&self) {
        let c = self.counters();
        c.meta.sampled.store(SAMPLED, Ordering::Release);
        futex_wake(&c.meta.sampled);
    }

    /// Makes this page the counters of every task of this process (and of the processes it
    /// forks from now on), for the rest of its life.
    pub fn install(self) {
        static AT_FORK: std::sync::Once = std::sync::Once::new();
        AT_FORK.call_once(|| {
            // SAFETY: registers a handler that only increments an atomic (async-signal-safe).
            unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
        });
        // Never unmapped: the tasks of this process count into it until it ends.
        let page = std::mem::ManuallyDrop::new(self);
        ACTIVE.store(
            page.mem.as_ptr().cast::<Counters>().as_ptr(),
            Ordering::Release,
        );
        EPOCH.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn each_shard_has_a_cache_line_of_its_own_and_all_fill_the_page() {
        use std::mem::{offset_of, size_of};
        assert_eq!(offset_of!(Counters, meta), 0);
        assert_eq!(offset_of!(Counters, shards), 64);
        assert_eq!(size_of::<Shard>(), 64);
        assert_eq!(size_of::<Counters>(), PAGE);
    }

    /// Threads count into shards of their own and the reading sums them: every count is
    /// seen, whichever thread made it.
    #[test]
    fn counts_of_many_threads_sum_over_their_shards() {
        let c: &'static Counters = Box::leak(Box::new(Counters::new()));
        c.meta.planned.store(400, Ordering::Relaxed);
        let threads: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    let k = c.meta.next_shard.fetch_add(1, Ordering::Relaxed) as usize;
                    for i in 0..100 {
                        c.shards[k].started.fetch_add(1, Ordering::Relaxed);
                        c.shards[k].ended.fetch_add(1, Ordering::Relaxed);
                        if (i + t) % 10 == 0 {
                            c.shards[k].failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    k
                })
            })
            .collect();
        let shards: std::collections::BTreeSet<usize> =
            threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(shards.len(), 4, "{shards:?}");
        let r = c.read();
        assert_eq!((r.started, r.ended, r.failed), (400, 400, 40), "{r:?}");
        assert!(r.all_started);
    }

    /// A forked child attaches the page by its descriptor (as a `__run` child does), counts
    /// into it, and the parent sees every count and that all had started; a grandchild
    /// forked by the child counts into the same page.
    #[test]
    fn a_childs_counts_are_seen_by_its_parent_across_a_fork() {
        let page = CounterPage::create().unwrap();
        assert_eq!(page.read(), Reading::default());
        let fd = page.fd().unwrap().as_raw_fd();
        // SAFETY: the child only maps, counts with atomics, forks and exits with _exit; the
        // test harness's other threads are not touched in it.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
        if pid == 0 {
            // The child: the descriptor as a `__run` child gets it (a copy, as dup2 makes).
            // SAFETY: dup of a descriptor this process has.
            let copy = unsafe { libc::dup(fd) };
            let code = match CounterPage::attach(copy) {
                Ok(own) => {
                    own.install();
                    begin(5);
                    for i in 0..4 {
                        started();
                        ended(i != 2);
                    }
                    // SAFETY: fork from a single-threaded child; the grandchild only counts.
                    match unsafe { libc::fork() } {
                        0 => {
                            started();
                            ended(true);
                            // SAFETY: ends the grandchild without running destructors.
                            unsafe { libc::_exit(0) }
                        }
                        g if g > 0 => {
                            let mut status = 0;
                            // SAFETY: waits for our own grandchild.
                            unsafe { libc::waitpid(g, &mut status, 0) };
                            0
                        }
                        _ => 3,
                    }
                }
                Err(_) => 2,
            };
            // SAFETY: ends the forked test child without running the harness's destructors.
            unsafe { libc::_exit(code) }
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{status}"
        );
        let r = page.read();
        assert_eq!(
            (r.started, r.ended, r.failed, r.planned),
            (5, 5, 1, 5),
            "{r:?}"
        );
        assert!(page.all_started(), "{r:?}");
        // The grandchild claimed a shard of its own: its parent thread's is written with plain
        // stores, which two processes must not share.
        let used = page
            .counters()
            .shards
            .iter()
            .filter(|s| s.started.load(Ordering::Relaxed) > 0)
            .count();
        assert_eq!(
            used, 2,
            "the child and its forked child each count into their own shard"
        );
        // This process's own counters were not touched by the child.
        assert!(std::ptr::eq(active(), &OWN));
    }

    #[test]
    fn all_started_waits_for_the_last_planned_task() {
        let page = CounterPage::create().unwrap();
        let c = page.counters();
        c.meta.planned.store(2, Ordering::Relaxed);
        c.shards[0].started.store(1, Ordering::Relaxed);
        assert!(!page.all_started());
        c.shards[5].started.store(1, Ordering::Relaxed);
        assert!(page.all_started());
    }

    /// A page no sampler watches (the parent's sampler thread did not start): the child's end
    /// says so and returns at once instead of waiting its whole wait for a sample.
    #[test]
    fn a_run_end_that_no_sampler_watches_does_not_wait() {
        let page = CounterPage::create().unwrap();
        let t = std::time::Instant::now();
        let end = page.end_run(std::time::Duration::from_secs(30));
        assert_eq!(end, RunEnd::NoSampler);
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "{t:?}");
        assert!(page.read().done, "the end is said all the same");
    }

    /// A watched page: the child waits until the sampler answers, or until its wait is over.
    #[test]
    fn a_watched_run_end_waits_for_the_sample_or_its_wait() {
        let page = std::sync::Arc::new(CounterPage::create().unwrap());
        page.watch();
        let end = page.end_run(std::time::Duration::from_millis(20));
        assert_eq!(end, RunEnd::TimedOut);
        begin_on(page.counters(), 1);
        let answer = {
            let page = page.clone();
            std::thread::spawn(move || {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
                while !page.read().done {
                    assert!(std::time::Instant::now() < deadline, "no end said");
                    page.wait_done(std::time::Duration::from_millis(100));
                }
                page.sampled();
            })
        };
        let end = page.end_run(std::time::Duration::from_secs(30));
        answer.join().unwrap();
        assert_eq!(end, RunEnd::Sampled);
        // A sampler that stops watching releases a child still waiting.
        begin_on(page.counters(), 1);
        let waiting = {
            let page = page.clone();
            std::thread::spawn(move || page.end_run(std::time::Duration::from_secs(30)))
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !page.read().done {
            assert!(std::time::Instant::now() < deadline, "no end said");
            std::thread::yield_now();
        }
        page.unwatch();
        assert_eq!(waiting.join().unwrap(), RunEnd::NoSampler);
    }

    #[test]
    fn a_descriptor_of_another_size_is_refused() {
        let f = tempfile::tempfile().unwrap();
        f.set_len(100).unwrap();
        let fd = std::os::fd::IntoRawFd::into_raw_fd(f);
        let e = CounterPage::attach(fd).err().unwrap();
        assert!(e.to_string().contains("100 bytes, not 4096"), "{e}");
    }
}
