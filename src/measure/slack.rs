//! The kernel's slack on a timed wait: how much later than asked Linux may end one wait of D,
//! given the syscall the waiting row sleeps in and the waiting thread's timer settings. The
//! `tasks` study reports it beside each row's lateness ([`super::wakeups`]), so that a row
//! that wakes 10 ms late after 10 s reads as the kernel's rounding, not its runtime's.
//!
//! Linux gives a timer a window, not an instant: an hrtimer armed for `t` with slack `s` may
//! fire anywhere in `[t, t + s]` (it fires at `t + s` unless another timer's interrupt comes
//! first, so on a quiet machine at about `t + s`). The slack each wait gets:
//! - a poll timeout (`poll`, `ppoll`, `select`, `epoll_wait`, `epoll_pwait`: fs/select.c,
//!   `select_estimate_accuracy`): 0.1% of the timeout (0.5% for a thread of nice > 0),
//!   capped at 100 ms, and at least the thread's timer slack; 0 for a real-time thread;
//! - `nanosleep`, `clock_nanosleep` (kernel/time/hrtimer.c, `hrtimer_nanosleep`) and a
//!   `futex` wait with a timeout (kernel/futex, `futex_setup_timer`): the thread's timer slack
//!   (`prctl(PR_GET_TIMERSLACK)`, 50 µs by default, inherited over fork and thread creation);
//!   0 for a real-time thread (since Linux 6.11 a real-time thread's timer slack is 0 itself);
//! - a `timerfd` (fs/timerfd.c starts its hrtimer with no range): none, whatever the thread's
//!   settings (the BEAM's schedulers sleep on one at times, and async-io's reactor, smol's,
//!   always; see `PROGRAMS`).
//!
//! `prctl(PR_SET_TIMERSLACK)` sets only the floor of a poll timeout's slack: 0.1% of 10 s is
//! 10 ms whatever it says.
//!
//! Each row's primitive was found by `strace -f -T` of the row's program with one task
//! waiting 1 s and 10 s (Linux 6.18, 2026-12-06; docs/benchmarks.md §33, `bench/slack.sh`):
//! the syscall that blocked for the wait and whose return woke the task.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The kind of timed wait a row's waiting task sleeps in, as the kernel times it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Primitive {
    /// A poll timeout (`epoll_wait`, `epoll_pwait`, `poll`, `ppoll`, `select`): an event
    /// loop that sleeps until its next timer.
    Poll,
    /// `nanosleep` / `clock_nanosleep`: a thread that sleeps itself.
    Nanosleep,
    /// A `futex` wait with a timeout: a thread parked on a condition until its deadline (a
    /// timer thread, `pthread_cond_timedwait`).
    Futex,
    /// A `timerfd` armed for the deadline, waited on in a poll set with no timeout (`epoll_wait`
    /// of -1): the kernel gives a timerfd's hrtimer no slack at all.
    Timerfd,
}

impl Primitive {
    /// Its name in the results and the tables' notes.
    pub fn word(self) -> &'static str {
        match self {
            Primitive::Poll => "poll",
            Primitive::Nanosleep => "nanosleep",
            Primitive::Futex => "futex",
            Primitive::Timerfd => "timerfd",
        }
    }

    /// The slack, ns, that the kernel gives one wait of `wait` in this primitive on a thread
    /// with `timers` (the module's formula).
    pub fn slack_ns(self, wait: Duration, timers: ThreadTimers) -> u64 {
        if timers.realtime {
            return 0;
        }
        match self {
            Primitive::Poll => {
                // fs/select.c: tv_nsec / divfactor + tv_sec * (NSEC_PER_SEC / divfactor), in
                // whole nanoseconds, then the cap, then the floor.
                let divfactor: u64 = if timers.nice > 0 { 200 } else { 1000 };
                let estimate = (wait.as_secs().saturating_mul(1_000_000_000 / divfactor))
                    .saturating_add(u64::from(wait.subsec_nanos()) / divfactor)
                    .min(MAX_POLL_SLACK_NS);
                estimate.max(timers.timer_slack_ns)
            }
            Primitive::Nanosleep | Primitive::Futex => timers.timer_slack_ns,
            Primitive::Timerfd => 0,
        }
    }
}

/// The most slack a poll timeout gets (fs/select.c, `MAX_SLACK`): 100 ms.
pub const MAX_POLL_SLACK_NS: u64 = 100_000_000;

/// What the kernel reads of a waiting thread to time its waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadTimers {
    /// Its timer slack, ns (`prctl(PR_GET_TIMERSLACK)`; 50,000 unless set).
    pub timer_slack_ns: u64,
    /// Its nice value (a poll timeout's slack is five times larger above 0).
    pub nice: i32,
    /// Whether it runs under a real-time policy (`SCHED_FIFO`, `SCHED_RR`, `SCHED_DEADLINE`):
    /// no slack at all.
    pub realtime: bool,
}

impl ThreadTimers {
    /// Linux's default: 50 µs of timer slack, nice 0, not real-time.
    pub const DEFAULT: ThreadTimers = ThreadTimers {
        timer_slack_ns: 50_000,
        nice: 0,
        realtime: false,
    };

    /// The calling thread's. A thread and a child process start with their creator's (fork
    /// and clone copy the timer slack, nice value and policy), so the thread that starts a
    /// run's tasks, or spawns a program, reads what they will wait with.
    pub fn current() -> ThreadTimers {
        // SAFETY: PR_GET_TIMERSLACK takes no argument and only returns the calling thread's
        // timer slack (or -1 on a kernel without it).
        let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        // SAFETY: sched_getscheduler(0) reads the calling thread's policy, or returns -1.
        let policy = unsafe { libc::sched_getscheduler(0) };
        ThreadTimers {
            timer_slack_ns: u64::try_from(slack).unwrap_or(Self::DEFAULT.timer_slack_ns),
            nice: current_nice(),
            realtime: matches!(policy, libc::SCHED_FIFO | libc::SCHED_RR | SCHED_DEADLINE),
        }
    }
}

/// `SCHED_DEADLINE` (linux/sched.h), which the libc crate does not name.
const SCHED_DEADLINE: libc::c_int = 6;

/// The calling thread's nice value (Linux keeps one per thread; `getpriority`'s
/// `PRIO_PROCESS, 0` is the calling thread's), 0 when it cannot be read.
fn current_nice() -> i32 {
    // SAFETY: getpriority may legitimately return -1, so errno is cleared first and read
    // after; both touch only this thread's errno.
    unsafe {
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, 0);
        if nice == -1 && *libc::__errno_location() != 0 {
            0
        } else {
            nice
        }
    }
}

/// The slack the kernel gives one wait of a row's tasks: the row's primitive, what the
/// waiting thread's settings were, and the slack for the run's wait (a results line's
/// `wakeups.slack`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slack {
    /// The primitive the row's tasks wait in ([`of_model`], [`of_program`]).
    pub primitive: Primitive,
    /// The slack of one wait of the run's D in it, ns.
    pub ns: u64,
    /// The waiting thread's settings it was computed from.
    #[serde(flatten)]
    pub timers: ThreadTimers,
}

impl Slack {
    /// The slack of one wait of `wait` in `primitive` on a thread with `timers`.
    pub fn of(primitive: Primitive, wait: Duration, timers: ThreadTimers) -> Slack {
        Slack {
            primitive,
            ns: primitive.slack_ns(wait, timers),
            timers,
        }
    }

    /// Whether it holds together (figures from outside: a results file): its `ns` is what
    /// its primitive and settings give for some wait (the poll slack lies between the
    /// thread's floor and the cap; the others are the timer slack).
    pub fn check(&self) -> Result<(), String> {
        let t = self.timers;
        let fits = match (t.realtime, self.primitive) {
            (true, _) | (false, Primitive::Timerfd) => self.ns == 0,
            (false, Primitive::Poll) => {
                self.ns >= t.timer_slack_ns && self.ns <= MAX_POLL_SLACK_NS.max(t.timer_slack_ns)
            }
            (false, _) => self.ns == t.timer_slack_ns,
        };
        if fits {
            Ok(())
        } else {
            Err(format!(
                "slack {{primitive {}, ns {}, timer_slack_ns {}, realtime {}}} is not what the kernel gives such a wait",
                self.primitive.word(),
                self.ns,
                t.timer_slack_ns,
                t.realtime
            ))
        }
    }
}

/// One row and the wait strace saw its waiting task sleep in.
#[derive(Debug, Clone, Copy)]
pub struct RowWait {
    /// The row: a concur model's family (`async` for `async:100`), or a `--classic`
    /// program's label (`go:goroutines`).
    pub row: &'static str,
    /// Its primitive.
    pub primitive: Primitive,
    /// The syscall strace saw, as it saw it, and who makes it.
    pub seen: &'static str,
}

/// concur's models running `sleep:D` (`concur run -w sleep:1s -m MODEL -n 1` under
/// `strace -f -T`; every model that can run it). The blocking entry point sleeps its thread
/// (`std::thread::sleep`: clock_nanosleep(CLOCK_MONOTONIC, 0, {1, 0})); the async one waits
/// on concur's precise timer (`workload/timer.rs`: one thread's futex wait with a relative
/// timeout, 0.999 s after the task registered); the green one on may's timer thread
/// (`thread::park_timeout`: an absolute futex deadline). `curl` runs http only.
pub const MODELS: &[RowWait] = &[
    nanosleep_model("seq"),
    nanosleep_model("thread"),
    nanosleep_model("spawn"),
    nanosleep_model("fork"),
    nanosleep_model("pool"),
    nanosleep_model("rayon"),
    precise_timer("async"),
    precise_timer("async-local"),
    precise_timer("actor"),
    RowWait {
        row: "green",
        primitive: Primitive::Futex,
        seen: "futex(FUTEX_WAIT_BITSET_PRIVATE, absolute deadline) on may's timer thread, which then wakes the coroutine's worker",
    },
    nanosleep_model("jobs"),
    nanosleep_model("jobs-memory"),
    nanosleep_model("jobs-redis"),
    nanosleep_model("jobs-procs"),
];

const fn nanosleep_model(row: &'static str) -> RowWait {
    RowWait {
        row,
        primitive: Primitive::Nanosleep,
        seen: "clock_nanosleep(CLOCK_MONOTONIC, 0, {tv_sec=1, tv_nsec=0}) on the task's thread (std::thread::sleep)",
    }
}

const fn precise_timer(row: &'static str) -> RowWait {
    RowWait {
        row,
        primitive: Primitive::Futex,
        seen: "futex(FUTEX_WAIT_PRIVATE, relative {0, 999…}) on concur's timer thread, which then wakes the task",
    }
}

/// The `--classic` programs of the `tasks` study (`concur classic show tasks-…`, one task,
/// `--wait-ms 1000` and `10000`, under `strace -f -T`).
pub const PROGRAMS: &[RowWait] = &[
    RowWait {
        row: "rust:tokio-bare",
        // tokio without its I/O driver parks its worker on a condition variable until the
        // wheel's next deadline, rounded up to its millisecond tick.
        primitive: Primitive::Futex,
        seen: "futex(FUTEX_WAIT_BITSET_PRIVATE, absolute deadline) on a tokio worker (the time driver parks on a condvar: no I/O driver is enabled)",
    },
    RowWait {
        row: "rust:smol-bare",
        // async-io's reactor (polling's epoll backend) arms a timerfd for its next timer and
        // waits in epoll with no timeout, on whichever thread's block_on drives it (the main
        // thread's, which awaits the tasks).
        primitive: Primitive::Timerfd,
        seen: "timerfd_settime(fd, 0, {it_value={9, 999841223}}) then epoll_pwait(fd, …, 1024, -1) in async-io's reactor, woken by the timerfd (async-io 2.6, async-executor 1.14)",
    },
    RowWait {
        row: "cpp:asio",
        // asio's epoll reactor arms its timerfd for the timer queue's next deadline and
        // waits in epoll with no timeout; the io_context's other thread waits on a futex
        // with none either.
        primitive: Primitive::Timerfd,
        seen: "timerfd_settime(fd, 0, {it_value={0, 999997000}}) then epoll_wait(fd, …, 128, -1) in asio's epoll reactor, woken by the timerfd (asio 1.22, g++ 12)",
    },
    RowWait {
        row: "go:goroutines",
        // Go 1.19's netpoller: the timeout in whole ms, rounded down (999, 9999), by the
        // thread that then runs the goroutine; sysmon's futex ends first and wakes nobody.
        primitive: Primitive::Poll,
        seen: "epoll_pwait(fd, [], 128, 999 | 9999) in the netpoller",
    },
    RowWait {
        row: "node:promises",
        primitive: Primitive::Poll,
        seen: "epoll_pwait(fd, [], 1024, 1000 | 9999) in libuv's loop",
    },
    RowWait {
        row: "java:threads",
        // Thread.sleep: pthread_cond_timedwait on the sleeping thread itself.
        primitive: Primitive::Futex,
        seen: "futex(FUTEX_WAIT_BITSET_PRIVATE, absolute deadline) on the sleeping thread (Thread.sleep, JDK 17 and 25)",
    },
    RowWait {
        row: "java:virtual",
        // A ForkJoinPool thread times the unpark, then a carrier runs the virtual thread.
        primitive: Primitive::Futex,
        seen: "futex(FUTEX_WAIT_BITSET_PRIVATE, absolute deadline) on a ForkJoinPool thread, which unparks the virtual thread (JDK 25)",
    },
    RowWait {
        row: "csharp:mono",
        // Mono's timer thread sleeps until the earliest Task.Delay's deadline in a
        // pthread_cond_timedwait, then hands the continuation to a thread-pool thread.
        primitive: Primitive::Futex,
        seen: "futex(FUTEX_WAIT_BITSET_PRIVATE, absolute deadline) on Mono's timer thread, which queues the continuation to its thread pool (Mono 6.8)",
    },
    RowWait {
        row: "elixir:processes",
        // A BEAM scheduler sleeps until its timer wheel's next timeout (in whole ms) either
        // in its poll set, on a timerfd (two traces of three: no slack), or on its own
        // event, a futex with a relative timeout (one of three: the timer slack). The larger
        // is what the kernel may add.
        primitive: Primitive::Futex,
        seen: "epoll_wait(fd, …, -1) on a timerfd armed for the wheel's next timeout, or futex(FUTEX_WAIT_PRIVATE, relative timeout), on a scheduler thread (OTP 25)",
    },
    RowWait {
        row: "py:asyncio",
        // The selector's timeout in ms, rounded up.
        primitive: Primitive::Poll,
        seen: "epoll_wait(fd, [], 1, 1000 | 10000) in asyncio's selector (CPython 3.11)",
    },
    RowWait {
        row: "py:uvloop",
        // uvloop's loop is libuv's: the timeout of its next timer in whole ms.
        primitive: Primitive::Poll,
        seen: "epoll_pwait(fd, [], 1024, 1000 | 10000) in libuv's loop under uvloop (uvloop 0.23, CPython 3.11)",
    },
    RowWait {
        row: "py:trio",
        // trio's IO manager: the time to the next deadline, rounded up to ms by select.epoll.
        primitive: Primitive::Poll,
        seen: "epoll_wait(fd, [], 1, 1000 | 10000) in trio's epoll IO manager (trio 0.22, CPython 3.11)",
    },
    RowWait {
        row: "py:threads",
        primitive: Primitive::Nanosleep,
        seen: "clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, deadline) on the task's thread (time.sleep, CPython 3.11)",
    },
    RowWait {
        row: "rb:threads",
        // Kernel#sleep: a condition variable's timed wait, the GVL released.
        primitive: Primitive::Futex,
        seen: "futex(FUTEX_WAIT_BITSET_PRIVATE, absolute deadline) on the task's thread (MRI 3.1)",
    },
    RowWait {
        row: "rb:fibers",
        // The async gem's reactor (1.x) waits in nio4r's selector, libev's epoll backend, for
        // its next timer; Kernel#sleep in a task goes through Ruby's fiber scheduler to it.
        primitive: Primitive::Poll,
        seen: "epoll_wait(fd, [], 64, 1000 | 10000) in the async gem's selector (nio4r's libev; async 1.30, MRI 3.1)",
    },
];

/// The wait of a concur model's family running `sleep:D`, `None` for a model that cannot.
pub fn of_model(family: &str) -> Option<&'static RowWait> {
    MODELS.iter().find(|r| r.row == family)
}

/// The wait of a `--classic` program's row, `None` for a label that is not one (a user's
/// `--peer` waits in what it waits in, which concur does not know).
pub fn of_program(label: &str) -> Option<&'static RowWait> {
    PROGRAMS.iter().find(|r| r.row == label)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_poll_timeout_pays_a_thousandth_of_the_wait_between_the_timer_slack_and_100_ms() {
        let t = ThreadTimers::DEFAULT;
        let poll = |d| Primitive::Poll.slack_ns(d, t);
        assert_eq!(poll(ms(10_000)), 10_000_000);
        assert_eq!(poll(ms(1_000)), 1_000_000);
        // 20 µs by the thousandth: the timer slack's floor, 50 µs.
        assert_eq!(poll(ms(20)), 50_000);
        // 200 ms by the thousandth: the cap.
        assert_eq!(poll(ms(200_000)), 100_000_000);
        // The kernel's integer arithmetic: whole seconds exact, nanoseconds divided down.
        assert_eq!(poll(Duration::new(1, 234_567_891)), 1_234_567);
        // A thread of nice > 0 gets five times more; a raised timer slack is the floor.
        let nice = ThreadTimers { nice: 5, ..t };
        assert_eq!(Primitive::Poll.slack_ns(ms(1_000), nice), 5_000_000);
        let raised = ThreadTimers {
            timer_slack_ns: 3_000_000,
            ..t
        };
        assert_eq!(Primitive::Poll.slack_ns(ms(1_000), raised), 3_000_000);
        assert_eq!(Primitive::Poll.slack_ns(ms(10_000), raised), 10_000_000);
    }

    #[test]
    fn a_sleep_or_futex_pays_the_timer_slack_and_a_realtime_thread_nothing() {
        let t = ThreadTimers::DEFAULT;
        for p in [Primitive::Nanosleep, Primitive::Futex] {
            assert_eq!(p.slack_ns(ms(10_000), t), 50_000);
            assert_eq!(p.slack_ns(ms(200_000), t), 50_000);
            let fine = ThreadTimers {
                timer_slack_ns: 1,
                ..t
            };
            assert_eq!(p.slack_ns(ms(1_000), fine), 1);
        }
        let rt = ThreadTimers {
            realtime: true,
            ..t
        };
        for p in [
            Primitive::Poll,
            Primitive::Nanosleep,
            Primitive::Futex,
            Primitive::Timerfd,
        ] {
            assert_eq!(p.slack_ns(ms(10_000), rt), 0);
        }
    }

    #[test]
    fn a_timerfd_pays_nothing_whatever_the_thread() {
        let raised = ThreadTimers {
            timer_slack_ns: 3_000_000,
            nice: 5,
            realtime: false,
        };
        for t in [ThreadTimers::DEFAULT, raised] {
            let s = Slack::of(Primitive::Timerfd, ms(10_000), t);
            assert_eq!(s.ns, 0, "{s:?}");
            assert_eq!(s.check(), Ok(()));
            assert!(Slack {
                ns: t.timer_slack_ns,
                ..s
            }
            .check()
            .is_err());
        }
        assert_eq!(
            of_program("rust:smol-bare").map(|r| r.primitive),
            Some(Primitive::Timerfd)
        );
    }

    #[test]
    fn the_calling_threads_timer_slack_is_read() {
        // A thread of its own, so that the test's thread keeps its slack.
        let read = std::thread::spawn(|| {
            // SAFETY: sets only this thread's timer slack.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 123_000 as libc::c_ulong, 0, 0, 0) };
            let mine = ThreadTimers::current();
            // A thread it starts inherits it.
            let child = std::thread::spawn(ThreadTimers::current)
                .join()
                .expect("child");
            (mine, child)
        })
        .join()
        .expect("thread");
        assert_eq!(read.0.timer_slack_ns, 123_000);
        assert_eq!(read.1, read.0);
        let s = Slack::of(Primitive::Poll, ms(10_000), read.0);
        assert_eq!(s.ns, 10_000_000, "{s:?}");
        assert_eq!(Slack::of(Primitive::Futex, ms(10_000), read.0).ns, 123_000);
    }

    #[test]
    fn slack_from_outside_is_checked_against_its_primitive() {
        let t = ThreadTimers::DEFAULT;
        let ok = Slack::of(Primitive::Poll, ms(10_000), t);
        assert_eq!(ok.check(), Ok(()));
        assert_eq!(Slack::of(Primitive::Futex, ms(10), t).check(), Ok(()));
        let wrong = Slack { ns: 7, ..ok };
        assert!(wrong.check().unwrap_err().contains("ns 7"));
        let futex = Slack {
            primitive: Primitive::Futex,
            ..ok
        };
        assert!(futex.check().is_err());
    }

    #[test]
    fn the_results_spell_it_flat() {
        let s = Slack::of(Primitive::Nanosleep, ms(1_000), ThreadTimers::DEFAULT);
        let v = serde_json::to_value(s).expect("json");
        assert_eq!(
            v,
            serde_json::json!({"primitive": "nanosleep", "ns": 50000,
                "timer_slack_ns": 50000, "nice": 0, "realtime": false})
        );
        assert_eq!(serde_json::from_value::<Slack>(v).expect("back"), s);
    }

    #[test]
    fn each_row_is_listed_once() {
        let mut rows: Vec<&str> = MODELS.iter().chain(PROGRAMS).map(|r| r.row).collect();
        let n = rows.len();
        rows.sort_unstable();
        rows.dedup();
        assert_eq!(rows.len(), n);
        assert_eq!(
            of_model("async").map(|r| r.primitive),
            Some(Primitive::Futex)
        );
        assert_eq!(
            of_program("py:asyncio").map(|r| r.primitive),
            Some(Primitive::Poll)
        );
        assert!(of_model("curl").is_none() && of_program("async").is_none());
    }
}
