//! Open-model arrivals (`--rate`): when each task is released, and a dispatcher that releases
//! it then, whatever the model has finished.
//!
//! A closed run hands all N tasks to the model at once; an open run releases task `i` at
//! `t0 + offset(i)` ([`Schedule::offset_ns`]). Latency is then measured from that scheduled
//! time, not from when the model got round to starting the task: a client that waits for a
//! slow reply before sending the next request stops measuring exactly when the system is
//! slow ("coordinated omission", Gil Tene; wrk2's `-R` and oha's `--latency-correction` take
//! the intended send time as the start for that reason, and HdrHistogram's
//! `recordValueWithExpectedInterval` back-fills the same gap). Every model releases through
//! [`Arrivals`], so the schedule is the same code for all of them.

use std::sync::{Arc, Mutex};

use crate::measure::latency::{LatencyRecorder, LatencySummary};
use crate::measure::{mono_ns, runqueue_wait_ns, runqueue_wait_of_ns, Waiter};

pub use crate::measure::schedule::{OpenRun, Schedule};

/// A run's schedule anchored at its start, and the dispatcher's own lag.
pub struct Arrivals {
    /// The schedule.
    pub schedule: Schedule,
    /// Task 0's release, on [`mono_ns`].
    pub t0_ns: u64,
    /// The release timer's grain, ns (`--grain`; 0: each task at its own due time).
    grain_ns: u64,
    lag: Mutex<LatencyRecorder>,
    releaser: Mutex<ReleaserWait>,
}

/// The releasing thread's run-queue wait while it released ([`Arrivals::releasing`]).
#[derive(Default)]
struct ReleaserWait {
    /// Release loops entered and not yet left (several only on one thread: `green`'s
    /// coroutines).
    depth: usize,
    /// The thread's run-queue wait when the outermost loop was entered, ns.
    from_ns: Option<u64>,
    /// The wait over every span some loop was in, ns; `None` until one was measured.
    total_ns: Option<u64>,
    /// The threads or processes holding what a release waits for (the queue's lock), each
    /// with its run-queue wait when the outermost loop was entered (or when it was named, if
    /// a loop was in then), ns.
    holders: Vec<(Waiter, Option<u64>)>,
    /// Their wait over every span some loop was in, summed, ns; `None` until one was measured.
    holders_total_ns: Option<u64>,
}

impl Arrivals {
    /// The schedule starting at `t0_ns` (on [`mono_ns`]), released on a timer of `grain_ns`
    /// (0: each task at its own due time).
    pub fn new(schedule: Schedule, t0_ns: u64, grain_ns: u64) -> Arc<Self> {
        Arc::new(Arrivals {
            schedule,
            t0_ns,
            grain_ns,
            lag: Mutex::new(LatencyRecorder::new()),
            releaser: Mutex::new(ReleaserWait::default()),
        })
    }

    /// Marks the calling thread as the run's releaser until the guard drops: the time it
    /// waits on a run queue meanwhile, runnable but kept off the cores by the machine, goes
    /// to [`Arrivals::releaser_runnable_us`]. Two reads of a /proc file, at the loop's entry
    /// and exit, nothing per release. Loops entered while another is in must run on the same
    /// thread (`green`'s coroutines on its one worker): only the outermost reads.
    pub fn releasing(&self) -> Releasing<'_> {
        let mut w = self.releaser.lock().unwrap_or_else(|p| p.into_inner());
        if w.depth == 0 {
            w.from_ns = runqueue_wait_ns();
            for (who, from) in &mut w.holders {
                *from = runqueue_wait_of_ns(*who);
            }
        }
        w.depth += 1;
        Releasing { arrivals: self }
    }

    /// Names a thread or process that holds what a release waits for, for models whose
    /// releases take a lock their workers hold too (the job queue's: SQLite's write lock, the
    /// in-memory queue's mutex, one Redis server): while a holder waits on a run queue, kept
    /// off the cores by the machine, a release waiting for its lock waits too. Their wait
    /// while the releases ran goes to [`Arrivals::lock_holders_runnable_us`]. Two reads of
    /// /proc files a holder (at the release loop's entry, or now if a loop is in, and at its
    /// exit), nothing per release.
    pub fn lock_holder(&self, who: Waiter) {
        let mut w = self.releaser.lock().unwrap_or_else(|p| p.into_inner());
        let from = if w.depth > 0 {
            runqueue_wait_of_ns(who)
        } else {
            None
        };
        w.holders.push((who, from));
    }

    /// How long the threads named by [`Arrivals::lock_holder`] waited on a run queue,
    /// runnable but not running, while this run's tasks were released, µs, summed over them:
    /// how much longer a release could wait for their lock by the machine's doing. `None`
    /// where no holder was named or measured.
    pub fn lock_holders_runnable_us(&self) -> Option<u64> {
        let w = self.releaser.lock().unwrap_or_else(|p| p.into_inner());
        w.holders_total_ns.map(|ns| ns / 1000)
    }

    /// How long the releasing thread waited on a run queue, runnable but not running, while
    /// it released this run's tasks, µs (the kernel's count, `/proc/thread-self/schedstat`):
    /// the part of any release's lag that the machine, not the model, took. `None` where the
    /// model's releases were not timed on one thread (the multi-thread runtime's timer task
    /// moves between threads) or the kernel keeps no count.
    pub fn releaser_runnable_us(&self) -> Option<u64> {
        let w = self.releaser.lock().unwrap_or_else(|p| p.into_inner());
        w.total_ns.map(|ns| ns / 1000)
    }

    /// When task `i` is due, on [`mono_ns`]: where its latency starts.
    pub fn due_ns(&self, i: usize) -> u64 {
        self.t0_ns + self.schedule.offset_ns(i)
    }

    /// When task `i` is released, on [`mono_ns`]: its due time, or with a grain the first tick
    /// (`t0 + k × grain`) at or after it, so that every task due between two ticks goes at
    /// the second together (as wrk2's event loop sends on its 1 ms timer): one wake-up for
    /// them all, never a send before its time.
    pub fn release_ns(&self, i: usize) -> u64 {
        let due = self.due_ns(i);
        match self.grain_ns {
            0 => due,
            g => self.t0_ns + (due - self.t0_ns).div_ceil(g) * g,
        }
    }

    /// The release timer's grain, µs, if one was asked for.
    pub fn grain_us(&self) -> Option<u64> {
        (self.grain_ns > 0).then_some(self.grain_ns / 1000)
    }

    /// How many tasks were due by `now_ns` (on [`mono_ns`]).
    pub fn due_by(&self, now_ns: u64) -> usize {
        let n = self.tasks();
        // The offsets rise with i: binary search for the first task not yet due.
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.due_ns(mid) <= now_ns {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// How many tasks.
    pub fn tasks(&self) -> usize {
        self.schedule.tasks
    }

    /// Records that task `i` was released now: its lag behind the schedule.
    pub fn released(&self, i: usize) {
        let lag_us = mono_ns().saturating_sub(self.due_ns(i)) / 1000;
        self.lag
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .record_us(lag_us);
    }

    /// Blocks the calling thread until task `i`'s release, then records it.
    pub fn wait(&self, i: usize) {
        sleep_until(self.release_ns(i));
        self.released(i);
    }

    /// For a model that releases and runs on the same thread (`seq`, a coroutine of `green`):
    /// sleeps until task `i` is due if it is not yet, and records that release's lag. A task
    /// already due found the runner busy: that wait is its queue time, not dispatcher lag.
    pub fn wait_if_idle(&self, i: usize) {
        if mono_ns() < self.release_ns(i) {
            fine_timer_slack();
            self.wait(i);
        }
    }

    /// The dispatcher's lag behind the schedule, µs (what the asked rate cost the releasing
    /// side itself, apart from any queue the model keeps).
    pub fn lag_summary(&self) -> Option<LatencySummary> {
        self.lag.lock().unwrap_or_else(|p| p.into_inner()).summary()
    }

    /// Releases every task in order on the calling thread, each when it is due: `release(i)`
    /// hands it to the model (it returns false to stop early, e.g. when the model is gone).
    pub fn dispatch(&self, mut release: impl FnMut(usize) -> bool) {
        let _releasing = self.releasing();
        fine_timer_slack();
        for i in 0..self.tasks() {
            self.wait(i);
            if !release(i) {
                break;
            }
        }
    }

    /// Releases every task on a thread of its own into a tokio channel, for models whose
    /// tasks live on a runtime: the runtime's timer has a millisecond grain, a dedicated
    /// thread sleeping on absolute deadlines releases within microseconds.
    pub fn feed(
        self: &Arc<Self>,
    ) -> (
        std::thread::JoinHandle<()>,
        tokio::sync::mpsc::UnboundedReceiver<usize>,
    ) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let me = self.clone();
        let handle = std::thread::spawn(move || me.dispatch(|i| tx.send(i).is_ok()));
        (handle, rx)
    }
}

/// The calling thread marked as a run's releaser ([`Arrivals::releasing`]), until dropped.
pub struct Releasing<'a> {
    arrivals: &'a Arrivals,
}

impl Drop for Releasing<'_> {
    fn drop(&mut self) {
        let mut w = self
            .arrivals
            .releaser
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        w.depth = w.depth.saturating_sub(1);
        if w.depth == 0 {
            if let (Some(from), Some(to)) = (w.from_ns.take(), runqueue_wait_ns()) {
                w.total_ns = Some(w.total_ns.unwrap_or(0) + to.saturating_sub(from));
            }
            let mut waited = None;
            for (who, from) in &mut w.holders {
                if let (Some(from), Some(to)) = (from.take(), runqueue_wait_of_ns(*who)) {
                    waited = Some(waited.unwrap_or(0) + to.saturating_sub(from));
                }
            }
            if let Some(ns) = waited {
                w.holders_total_ns = Some(w.holders_total_ns.unwrap_or(0) + ns);
            }
        }
    }
}

/// How many tasks the dispatcher has released, and a wake-up for one waiting taker per
/// release: what the worker loops of a runtime take their next index from, released by
/// [`Arrivals::release_on_timer`].
#[derive(Default)]
pub struct Released {
    /// The dispatcher has ended: nothing more will be released.
    ended: std::sync::atomic::AtomicBool,
    count: std::sync::atomic::AtomicUsize,
    next: std::sync::atomic::AtomicUsize,
    notify: tokio::sync::Notify,
}

impl Released {
    /// The next released index no one has taken, waiting for its release; `None` once all
    /// `tasks` are taken.
    pub async fn take(&self, tasks: usize) -> Option<usize> {
        use std::sync::atomic::Ordering::SeqCst;
        loop {
            let i = self.next.load(SeqCst);
            if i >= tasks || (self.ended.load(SeqCst) && i >= self.count.load(SeqCst)) {
                return None;
            }
            if i < self.count.load(SeqCst) {
                if self.next.compare_exchange(i, i + 1, SeqCst, SeqCst).is_ok() {
                    // Another release may be waiting for a taker: pass the wake-up on.
                    if i + 1 < self.count.load(SeqCst) {
                        self.notify.notify_one();
                    }
                    return Some(i);
                }
                continue;
            }
            let woken = self.notify.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            // Released meanwhile, or the end: see to it without waiting.
            if self.next.load(SeqCst) < self.count.load(SeqCst)
                || self.next.load(SeqCst) >= tasks
                || self.ended.load(SeqCst)
            {
                continue;
            }
            woken.await;
        }
    }

    /// Releases every task below `count` with one wake-up: the taker it wakes passes it on
    /// while more are left ([`Released::take`]), so a batch wakes its takers one after the
    /// other on the releasing worker instead of all at once, which would queue them beyond
    /// the worker's next-task slot and wake the runtime's other worker to steal them.
    fn release_below(&self, count: usize) {
        self.count.store(count, std::sync::atomic::Ordering::SeqCst);
        self.notify.notify_one();
    }

    /// The dispatcher has ended (every task released, or it failed): wakes every taker, and
    /// those with nothing left to take return.
    fn finish(&self) {
        self.ended.store(true, std::sync::atomic::Ordering::SeqCst);
        self.notify.notify_waiters();
    }
}

impl Arrivals {
    /// Releases every task into `released`, each when it is due, from a task on the calling
    /// tokio runtime: a timerfd armed at each release's absolute time (the kernel's
    /// high-resolution timer, no slack) wakes the runtime's own event loop, so a release costs
    /// no thread of its own and no wake-up across threads (as wrk2's event loop sends; its
    /// timer has a millisecond grain, this one a microsecond's). Needs a runtime with I/O.
    pub async fn release_on_timer(self: Arc<Self>, released: Arc<Released>) -> std::io::Result<()> {
        // SAFETY: the timer owns its descriptor, and the AsyncFd owns the timer until it drops
        // it: nothing closes the descriptor while it is registered.
        let timer = match ReleaseTimer::new().and_then(|t| unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(t, tokio::io::Interest::READABLE)
                .map_err(std::io::Error::from)
        }) {
            Ok(t) => t,
            Err(e) => {
                released.finish();
                return Err(e);
            }
        };
        // A current-thread runtime's tasks never leave its thread: the releases are timed
        // there. A multi-thread runtime may move this task between its workers, whose
        // run-queue waits one thread's reads cannot tell apart.
        let _releasing = (tokio::runtime::Handle::current().runtime_flavor()
            == tokio::runtime::RuntimeFlavor::CurrentThread)
            .then(|| self.releasing());
        let result = self.release_each(timer, &released).await;
        released.finish();
        result
    }

    async fn release_each(
        &self,
        mut timer: tokio::io::unix::AsyncFd<ReleaseTimer>,
        released: &Released,
    ) -> std::io::Result<()> {
        let mut i = 0;
        while i < self.tasks() {
            let due = self.release_ns(i);
            while mono_ns() < due {
                timer.get_mut().arm(due)?;
                let mut guard = timer.readable_mut().await?;
                guard.get_inner_mut().fired();
                guard.clear_ready();
            }
            // Every task due by now goes in one batch (with a grain, a tick's worth).
            let now = mono_ns();
            self.released(i);
            i += 1;
            while i < self.tasks() && self.release_ns(i) <= now {
                self.released(i);
                i += 1;
            }
            released.release_below(i);
        }
        Ok(())
    }
}

/// A one-shot timer on [`mono_ns`]'s clock that an event loop can wait on beside its sockets:
/// a timerfd (the kernel's high-resolution timer, no slack) that becomes readable when that
/// time comes. The tokio release timer and `curl`'s open-model loop (in `curl_multi_wait`'s
/// extra descriptors) wait on it.
///
/// It is armed with the time left until the release, not with the release's absolute time:
/// the two agree on a real machine (`CLOCK_MONOTONIC` never steps), but a process whose
/// clock reads are rewritten in user space (libfaketime, which agents were tested under)
/// reads a `mono_ns` the kernel's timer does not share, and an absolute arming then fires
/// years late, so an open run never ended. Durations agree on both clocks; the cost is the
/// few hundred nanoseconds between reading the clock and arming.
pub struct ReleaseTimer {
    fd: std::os::fd::OwnedFd,
    armed_ns: Option<u64>,
}

impl ReleaseTimer {
    /// A new timer, not armed.
    pub fn new() -> std::io::Result<Self> {
        use std::os::fd::FromRawFd;
        // SAFETY: timerfd_create takes a clock and flags and returns a new descriptor or -1.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(ReleaseTimer {
            // SAFETY: fd is a new descriptor that nothing else owns.
            fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) },
            armed_ns: None,
        })
    }

    /// Arms the timer to fire at `at_ns` (on [`mono_ns`]); arming it at the time it is already
    /// armed for costs nothing. Arming clears an expiry not yet read.
    pub fn arm(&mut self, at_ns: u64) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        if self.armed_ns == Some(at_ns) {
            return Ok(());
        }
        // A zero it_value disarms the timer: a release already due fires after 1 ns.
        let at = libc::itimerspec {
            it_interval: timespec_of(0),
            it_value: timespec_of(at_ns.saturating_sub(mono_ns()).max(1)),
        };
        // SAFETY: `at` is a valid itimerspec; the old value may be null.
        if unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &at, std::ptr::null_mut()) } != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        self.armed_ns = Some(at_ns);
        Ok(())
    }

    /// Forgets the arming that just fired without reading its expiry: the next [`arm`] resets
    /// the expiry count, and an edge-triggered wait (tokio's) is woken by the next expiry
    /// whatever the count. One system call a release fewer than [`clear`]; a level-triggered
    /// wait would find the descriptor readable until the timer is armed again.
    ///
    /// [`arm`]: ReleaseTimer::arm
    /// [`clear`]: ReleaseTimer::clear
    pub fn fired(&mut self) {
        self.armed_ns = None;
    }

    /// Reads a pending expiry, so the descriptor is no longer readable until armed again (a
    /// timer not armed since the last clear has none).
    pub fn clear(&mut self) {
        use std::os::fd::AsRawFd;
        if self.armed_ns.is_none() {
            return;
        }
        let mut expirations = [0u8; 8];
        // SAFETY: reads at most 8 bytes into the buffer we own. The timer fires once per arming;
        // a read that finds it not ready yet (EAGAIN) leaves nothing behind either.
        unsafe { libc::read(self.fd.as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
        self.armed_ns = None;
    }
}

impl std::os::fd::AsRawFd for ReleaseTimer {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}

/// Asks for the finest timer slack on the calling thread: Linux lets a sleep overrun by 50 µs
/// by default, which at 20,000 tasks/s is a whole inter-arrival gap.
fn fine_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and changes only this thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// `ns` nanoseconds as a timespec.
fn timespec_of(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// Sleeps until `deadline_ns` on [`mono_ns`] (an absolute deadline, so lateness never
/// accumulates from one release to the next); returns at once if it has passed.
pub fn sleep_until(deadline_ns: u64) {
    let ts = timespec_of(deadline_ns);
    while mono_ns() < deadline_ns {
        // SAFETY: clock_nanosleep reads the timespec we own; the remainder pointer may be null
        // with TIMER_ABSTIME. An interrupted sleep (EINTR) goes round the loop again.
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `fd` becomes readable within `ms` milliseconds.
    fn readable_within(fd: std::os::fd::RawFd, ms: i32) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd that we own.
        unsafe { libc::poll(&mut p, 1, ms) == 1 }
    }

    #[test]
    fn the_release_timer_fires_at_its_time_and_not_again_until_armed() {
        use std::os::fd::AsRawFd;
        let mut t = ReleaseTimer::new().expect("a timerfd");
        assert!(!readable_within(t.as_raw_fd(), 0), "not armed yet");
        let at = mono_ns() + 2_000_000;
        t.arm(at).expect("armed");
        assert!(readable_within(t.as_raw_fd(), 10_000), "it fires");
        assert!(mono_ns() >= at, "never before its time");
        t.clear();
        assert!(!readable_within(t.as_raw_fd(), 0), "read, so quiet");
        // Armed again after it fired: re-arming clears a pending expiry, even unread.
        t.arm(mono_ns() + 1_000).expect("armed");
        assert!(readable_within(t.as_raw_fd(), 10_000));
        t.arm(mono_ns() + 60_000_000_000)
            .expect("armed a minute away");
        assert!(
            !readable_within(t.as_raw_fd(), 0),
            "the old expiry went with the re-arm"
        );
    }

    #[test]
    fn a_fired_timer_armed_again_unread_wakes_an_edge_triggered_wait_at_its_next_expiry() {
        use std::os::fd::AsRawFd;
        let mut t = ReleaseTimer::new().expect("a timerfd");
        // SAFETY: a new epoll descriptor, closed below; the event structs are ours.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        assert!(ep >= 0);
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: 7,
        };
        // SAFETY: registers the timer's descriptor, which outlives the epoll descriptor.
        assert_eq!(
            unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, t.as_raw_fd(), &mut ev) },
            0
        );
        let wait = |ms: i32| {
            let mut out = [libc::epoll_event { events: 0, u64: 0 }];
            // SAFETY: one event slot that we own.
            unsafe { libc::epoll_wait(ep, out.as_mut_ptr(), 1, ms) }
        };
        for round in 0..3 {
            let at = mono_ns() + 1_000_000;
            t.arm(at).expect("armed");
            assert_eq!(wait(10_000), 1, "round {round}: the expiry is an edge");
            assert!(mono_ns() >= at, "round {round}: never before its time");
            assert_eq!(wait(0), 0, "round {round}: one edge an expiry");
            // Not read: the next arming resets the count.
            t.fired();
        }
        // Armed a minute away after an unread expiry: the descriptor is no longer readable (a
        // level-triggered poll would see a count left over).
        assert!(readable_within(t.as_raw_fd(), 0), "the last expiry, unread");
        t.arm(mono_ns() + 60_000_000_000).expect("armed");
        assert!(
            !readable_within(t.as_raw_fd(), 0),
            "the unread expiry went with the re-arm"
        );
        // SAFETY: closes the epoll descriptor made above.
        unsafe { libc::close(ep) };
    }

    #[test]
    fn a_fixed_rate_releases_evenly() {
        let s = Schedule::fixed(50.0, 100);
        assert_eq!(s.offset_ns(0), 0);
        assert_eq!(s.offset_ns(1), 20_000_000);
        assert_eq!(s.offset_ns(99), 1_980_000_000);
        assert!((s.span_s() - 2.0).abs() < 1e-12);
        assert!(!s.is_ramp());
    }

    #[test]
    fn a_ramp_releases_faster_and_faster_and_ends_on_time() {
        let s = Schedule {
            from: 100.0,
            to: 300.0,
            tasks: 400,
            segment: crate::measure::schedule::Segment::WHOLE,
        };
        // Mean 200/s: 400 tasks over 2 s; the first gap is 1/100 s, the last about 1/300 s.
        assert!((s.span_s() - 2.0).abs() < 1e-12);
        let gap = |i: usize| (s.offset_ns(i + 1) - s.offset_ns(i)) as f64 / 1e9;
        assert!((gap(0) - 0.01).abs() < 0.0005, "{}", gap(0));
        assert!((gap(398) - 1.0 / 300.0).abs() < 0.0002, "{}", gap(398));
        assert!((s.offset_ns(400) as f64 / 1e9 - 2.0).abs() < 1e-6);
        assert!((s.rate_at(1.0) - 200.0).abs() < 1e-9);
    }

    #[test]
    fn released_tasks_are_each_taken_once_and_the_takers_end() {
        let a = Arrivals::new(Schedule::fixed(20_000.0, 2_000), mono_ns(), 0);
        let released = Arc::new(Released::default());
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let mut taken: Vec<usize> = rt.block_on(async {
            let timer = tokio::spawn(a.clone().release_on_timer(released.clone()));
            let loops: Vec<_> = (0..8)
                .map(|_| {
                    let r = released.clone();
                    tokio::spawn(async move {
                        let mut got = vec![];
                        while let Some(i) = r.take(2_000).await {
                            got.push(i);
                        }
                        got
                    })
                })
                .collect();
            let mut all = vec![];
            for l in loops {
                all.extend(l.await.unwrap());
            }
            timer.await.unwrap().unwrap();
            all
        });
        taken.sort_unstable();
        assert_eq!(taken, (0..2_000).collect::<Vec<_>>());
        // Each release's lag recorded.
        assert!(a.lag_summary().is_some());
    }

    #[test]
    fn a_grain_releases_at_the_first_tick_at_or_after_each_due_time() {
        // 1,000/s: due every ms; a grain of 2.5 ms releases tasks 0 | 1 2 | 3 4 5 | 6 7 ….
        let a = Arrivals::new(Schedule::fixed(1000.0, 50), 1_000_000, 2_500_000);
        let at = |i| a.release_ns(i) - 1_000_000;
        assert_eq!(at(0), 0);
        assert_eq!((at(1), at(2)), (2_500_000, 2_500_000));
        assert_eq!((at(3), at(5)), (5_000_000, 5_000_000));
        assert_eq!(at(6), 7_500_000);
        for i in 0..50 {
            assert!(a.release_ns(i) >= a.due_ns(i));
            assert!(a.release_ns(i) < a.due_ns(i) + 2_500_000);
        }
        assert_eq!(a.grain_us(), Some(2_500));
        let precise = Arrivals::new(Schedule::fixed(1000.0, 50), 7, 0);
        assert_eq!(precise.release_ns(3), precise.due_ns(3));
        assert_eq!(precise.grain_us(), None);
        // The dispatcher sleeps to each release, never earlier.
        let a = Arrivals::new(Schedule::fixed(2000.0, 20), mono_ns(), 2_000_000);
        let mut seen = vec![];
        a.dispatch(|i| {
            seen.push((i, mono_ns()));
            true
        });
        assert!(seen.iter().all(|&(i, t)| t >= a.release_ns(i)));
    }

    #[test]
    fn the_dispatcher_keeps_time() {
        let a = Arrivals::new(Schedule::fixed(1000.0, 50), mono_ns(), 0);
        let mut seen = vec![];
        a.dispatch(|i| {
            seen.push((i, mono_ns()));
            true
        });
        assert_eq!(seen.len(), 50);
        // Never early.
        assert!(seen.iter().all(|&(i, t)| t >= a.due_ns(i)));
        assert!(a.lag_summary().is_some());
    }
}
