//! Memory of a whole process tree, sampled: the sum of PSS (`/proc/PID/smaps_rollup`) over a
//! process and all its descendants. PSS shares copy-on-write pages fairly between processes,
//! so a tree of forks shows its real cost, where summed RSS would count shared pages N times.
//! For the live view the sampler also keeps its latest sample and, asked to, the tree's CPU
//! time ([`TreeSampler::now`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::live::CounterPage;

/// The parent pid of every process on the machine.
fn parent_map() -> HashMap<i32, Vec<i32>> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return children;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The command name may hold spaces and parentheses: fields start after the last ')'.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|s| s.parse().ok()) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    children
}

/// `root` and all its descendants alive now.
pub fn process_tree(root: i32) -> Vec<i32> {
    let children = parent_map();
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        if let Some(kids) = children.get(&out[i]) {
            out.extend(kids);
        }
        i += 1;
    }
    out
}

/// PSS of one process in KiB, if it is still there.
pub fn pss_kib(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// One process's CPU time in clock ticks (`/proc/PID/stat`): its own (user + system) and
/// that of its children it has reaped, if it is still there.
fn cpu_ticks(pid: i32) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which may hold spaces: `state` is field 3, utime 14.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    let [utime, stime, cutime, cstime] = f[..] else {
        return None;
    };
    Some((utime + stime, cutime + cstime))
}

/// The kernel's clock ticks a second (`/proc/PID/stat`'s unit).
fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// The pid the kernel handed out last (the last field of `/proc/loadavg`), threads included.
/// While it stays the same no process was created, so a tree walked before has gained nobody:
/// walking every process of the machine again would find the same tree.
fn last_pid() -> Option<i32> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().nth(4)?.parse().ok()
}

/// A process tree followed from sample to sample: walked again only when a pid was handed out
/// since the last walk.
struct Tree {
    root: i32,
    members: Vec<i32>,
    walked_at: Option<i32>,
}

impl Tree {
    fn new(root: i32) -> Self {
        Tree {
            root,
            members: Vec::new(),
            walked_at: None,
        }
    }

    /// The tree's CPU time so far, in clock ticks: its members' own, and what the root's
    /// reaped children used (a forked task that has ended).
    fn cpu_ticks(&self) -> u64 {
        self.members
            .iter()
            .filter_map(|&pid| {
                let (own, reaped) = cpu_ticks(pid)?;
                Some(if pid == self.root { own + reaped } else { own })
            })
            .sum()
    }

    /// The tree's total PSS now, KiB.
    fn pss_kib(&mut self) -> u64 {
        // Read before the walk: a process created during it changes the pid again.
        let last = last_pid();
        if last.is_none() || last != self.walked_at {
            self.members = process_tree(self.root);
            self.walked_at = last;
        }
        self.members.iter().filter_map(|&pid| pss_kib(pid)).sum()
    }
}

/// How many times its last sample's cost the sampler pauses: it spends at most a
/// `1 / (1 + COST_PAUSE)` share of one core, taken from the machine the run measures.
const COST_PAUSE: u32 = 50;

/// The CPU time the calling thread has used. A sample's cost is CPU time, not wall time: on a
/// loaded machine a walk of /proc waits for a core, and a wall-time cost made the pause grow
/// past the lives of short children (a tree of 200 ms processes sampled every 0.5 s or more
/// was measured as its parent alone).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which lives on this frame.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The shortest pause between two samples.
const MIN_PAUSE: Duration = Duration::from_millis(10);

/// Samples a process tree's total PSS on a thread of its own and keeps the peak.
pub struct TreeSampler {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<TreePss>>,
    now: Arc<TreeNow>,
    page: Option<Arc<CounterPage>>,
}

/// A sampled tree's latest sample, for the live view.
#[derive(Debug, Default)]
pub struct TreeNow {
    /// PSS of the tree at the latest sample, KiB (0: none yet).
    pss_kib: AtomicU64,
    /// Whether CPU time is read with each sample (the live view asked).
    with_cpu: AtomicBool,
    /// The tree's CPU time at the latest sample, clock ticks, plus one (0: none yet).
    cpu_ticks: AtomicU64,
}

impl TreeNow {
    /// PSS of the tree at the latest sample, KiB.
    pub fn pss_kib(&self) -> Option<u64> {
        Some(self.pss_kib.load(Ordering::Relaxed)).filter(|&k| k > 0)
    }

    /// The tree's CPU time (user + system) at the latest sample, seconds.
    pub fn cpu_s(&self) -> Option<f64> {
        let t = self.cpu_ticks.load(Ordering::Relaxed);
        (t > 0).then(|| (t - 1) as f64 / ticks_per_second())
    }
}

/// How often the counter page is read while a run's tasks are still starting, to take a
/// sample as soon as the last one has.
const STARTING_POLL: Duration = Duration::from_millis(2);

/// The moments of a run the sampler takes a sample at besides its tick, read off the run's
/// counter page: when every task has started, and when the child says the tasks are over
/// (it waits for that sample before it goes on).
#[derive(Default)]
struct Moments {
    all_started: bool,
    ended: bool,
}

/// The moments a read of the page shows for the first time.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Due {
    /// Every task has started and the run is not over yet: the tree holds every task.
    all_started: bool,
    /// The child says its tasks are over and waits for this sample.
    ended: bool,
}

impl Moments {
    /// The moments due now that the page shows. Every task seen started only together with
    /// the end is no all-started moment: tasks may have ended and freed their memory.
    fn due(&mut self, page: &CounterPage) -> Due {
        let r = page.read();
        if !r.done && self.ended {
            // The child began another run.
            *self = Moments::default();
        }
        let started = r.all_started && !std::mem::replace(&mut self.all_started, r.all_started);
        let ended = r.done && !std::mem::replace(&mut self.ended, r.done);
        Due {
            all_started: started && !r.done,
            ended,
        }
    }

    /// Whether the run's tasks are still starting (the page is read often then).
    fn starting(&self, page: &CounterPage) -> bool {
        let r = page.read();
        r.planned > 0 && !r.all_started && !r.done
    }
}

/// What a sampler took of a tree: the peak of every sample, and the samples taken at the
/// moments of the run (when a counter page told them).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TreePss {
    /// The peak of the samples, KiB; None if no sample was taken.
    pub peak_kib: Option<u64>,
    /// The sample taken when every task had started and the run was not over, KiB: the
    /// tree with every task in it (the last sample of that moment, for a child that ran
    /// several runs).
    pub all_started_kib: Option<u64>,
    /// The sample taken when the child said its tasks were over, before it freed anything,
    /// KiB.
    pub end_kib: Option<u64>,
}

impl TreePss {
    /// Only a peak (no moments were seen).
    pub fn peak(peak_kib: Option<u64>) -> TreePss {
        TreePss {
            peak_kib,
            ..TreePss::default()
        }
    }
}

impl TreeSampler {
    /// Starts sampling the tree of `root`. The interval adapts to keep the sampler's own CPU
    /// cost under 2% of one core: at least 10 ms, at least 50 times one sample's
    /// CPU time. The tree is walked again (every process of the machine) only when a process or
    /// thread was created since the last walk; otherwise a sample reads the PSS of the
    /// members found before. With the run's counter page, a sample is also taken when every
    /// task has started and when the child says its tasks are over (it waits for that one,
    /// and only while this sampler watches the page: [`CounterPage::watch`]).
    pub fn start(root: i32, page: Option<Arc<CounterPage>>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let now = Arc::new(TreeNow::default());
        let latest = now.clone();
        let watched = page.clone();
        let handle = std::thread::Builder::new()
            .name("pss-sampler".into())
            .spawn(move || {
                let mut pss = TreePss::default();
                let mut tree = Tree::new(root);
                let mut moments = Moments::default();
                let mut next_tick = Instant::now();
                while !flag.load(Ordering::Relaxed) {
                    let due = match &watched {
                        Some(p) => moments.due(p),
                        None => Due::default(),
                    };
                    if due.all_started || due.ended || Instant::now() >= next_tick {
                        let t = thread_cpu();
                        let now = tree.pss_kib();
                        if now > 0 {
                            pss.peak_kib = Some(pss.peak_kib.unwrap_or(0).max(now));
                            if due.all_started {
                                pss.all_started_kib = Some(now);
                            }
                            if due.ended {
                                pss.end_kib = Some(now);
                            }
                        }
                        latest.pss_kib.store(now, Ordering::Relaxed);
                        if latest.with_cpu.load(Ordering::Relaxed) {
                            latest
                                .cpu_ticks
                                .store(tree.cpu_ticks() + 1, Ordering::Relaxed);
                        }
                        if due.ended {
                            if let Some(p) = &watched {
                                p.sampled();
                            }
                        }
                        let cost = thread_cpu().saturating_sub(t);
                        next_tick = Instant::now() + (cost * COST_PAUSE).max(MIN_PAUSE);
                    }
                    // Sleeps until the next tick: `finish` wakes the thread after setting the
                    // flag, so a short run does not wait for it; the child's end wakes it
                    // through the page. (A 2 ms poll of the flag woke this thread 500 times a
                    // second, beside the run it measures; the page is polled that often only
                    // while tasks are starting.)
                    let mut until = next_tick;
                    match &watched {
                        Some(p) if !moments.ended => {
                            if moments.starting(p) {
                                until = until.min(Instant::now() + STARTING_POLL);
                            }
                            p.wait_done(until.saturating_duration_since(Instant::now()));
                        }
                        _ => {
                            let left = until.saturating_duration_since(Instant::now());
                            if !left.is_zero() && !flag.load(Ordering::Relaxed) {
                                std::thread::park_timeout(left);
                            }
                        }
                    }
                }
                pss
            })
            .ok();
        // Watched only by a thread that runs: without it the child would wait its whole
        // `run_ended` wait at every run's end for a sample nobody takes.
        if let (Some(_), Some(p)) = (&handle, &page) {
            p.watch();
        }
        TreeSampler {
            stop,
            handle,
            now,
            page,
        }
    }

    /// The latest sample, updated as the sampler goes; from now on each sample reads the
    /// tree's CPU time too (a read of `/proc/PID/stat` per member; the sampler's pause
    /// grows with its cost, as for PSS).
    pub fn now(&self) -> Arc<TreeNow> {
        self.now.with_cpu.store(true, Ordering::Relaxed);
        self.now.clone()
    }

    /// Stops sampling and returns what it took: the peak (KiB) if at least one sample was
    /// taken, and the samples of the run's moments.
    pub fn finish(mut self) -> TreePss {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(p) = &self.page {
            p.unwatch();
        }
        let Some(handle) = self.handle.take() else {
            return TreePss::default();
        };
        // A wake-up through the page is not kept for a thread not yet waiting on it (as an
        // unpark is): woken again until it has seen the flag.
        loop {
            handle.thread().unpark();
            if let Some(p) = &self.page {
                p.wake();
            }
            if handle.is_finished() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        handle.join().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Python process that holds still until its stdin closes (first printing `ready`), or,
    /// given `grow`, starts on its first line a child holding 64 MiB of its own, touched.
    /// Measured rather than the test's own process: under `cargo test` the other tests'
    /// threads allocate and free beside a reading of this one.
    fn quiet_python(grow: bool) -> std::process::Child {
        let script = if grow {
            "import subprocess, sys\n\
             print('ready', flush=True); sys.stdin.readline()\n\
             c = subprocess.Popen([sys.executable, '-c', 'import sys; b = bytearray(64 << 20); \
             print(1, flush=True); sys.stdin.read()'], stdin=subprocess.PIPE, \
             stdout=subprocess.DEVNULL)\n\
             sys.stdin.read(); c.stdin.close(); c.wait()"
        } else {
            "import sys; print('ready', flush=True); sys.stdin.read()"
        };
        let mut child = std::process::Command::new("python3")
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "ready");
        child
    }

    #[test]
    fn pss_lies_between_private_and_resident_and_the_tree_holds_the_children() {
        let mut quiet = quiet_python(false);
        let pid = quiet.id() as i32;
        // A process's own pages, read apart: PSS lies between what is private to it and all
        // it has resident (a count in pages or bytes, or of another process, would not).
        let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap();
        let field = |name: &str| -> u64 {
            let line = rollup.lines().find_map(|l| l.strip_prefix(name)).unwrap();
            line.split_whitespace().next().unwrap().parse().unwrap()
        };
        let private = field("Private_Clean:") + field("Private_Dirty:");
        let pss = pss_kib(pid).unwrap();
        assert!(private <= pss, "{pss} KiB: {rollup}");
        assert!(pss <= field("Rss:"), "{pss} KiB: {rollup}");
        assert!(pss >= 1024, "{pss} KiB");
        drop(quiet.stdin.take());
        quiet.wait().unwrap();

        let me = std::process::id() as i32;
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let tree = process_tree(me);
        assert!(tree.contains(&(child.id() as i32)), "{tree:?}");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// A sampler watches the page it was given: the end a child says on it is sampled and
    /// answered (the child does not wait out its wait), and the sample is the run's end's.
    #[test]
    fn a_sampler_answers_the_end_said_on_its_page() {
        let page = Arc::new(CounterPage::create().unwrap());
        let sampler = TreeSampler::start(std::process::id() as i32, Some(page.clone()));
        let end = page.end_run(Duration::from_secs(60));
        assert_eq!(end, crate::measure::live::RunEnd::Sampled);
        let pss = sampler.finish();
        let (peak, at_end) = (pss.peak_kib.unwrap(), pss.end_kib.unwrap());
        assert!(at_end > 0 && at_end <= peak, "{pss:?}");
        // No task was planned: there was no moment when all had started.
        assert_eq!(pss.all_started_kib, None, "{pss:?}");
        // Finished, it watches no more: a later end is not waited for.
        assert_eq!(
            page.end_run(Duration::from_secs(60)),
            crate::measure::live::RunEnd::NoSampler
        );
    }

    #[test]
    fn the_last_pid_moves_when_a_process_is_created() {
        let before = last_pid().expect("/proc/loadavg names the last pid");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let after = last_pid().unwrap();
        child.wait().unwrap();
        assert_ne!(before, after, "a new process took a pid");
    }

    #[test]
    fn a_followed_tree_counts_a_child_started_after_its_first_sample() {
        // The tree of a quiet process, first alone, then with a child it starts after the
        // first sample, holding 64 MiB of its own.
        let mut root = quiet_python(true);
        let mut tree = Tree::new(root.id() as i32);
        let alone = tree.pss_kib();
        assert!(alone > 0);
        let mut stdin = root.stdin.take().unwrap();
        std::io::Write::write_all(&mut stdin, b"grow\n").unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let grown = |pid: i32| {
            process_tree(pid)
                .into_iter()
                .any(|p| p != pid && pss_kib(p).unwrap_or(0) >= 60 << 10)
        };
        while !grown(root.id() as i32) {
            assert!(Instant::now() < deadline, "the child never grew");
            std::thread::sleep(Duration::from_millis(5));
        }
        let with_child = tree.pss_kib();
        drop(stdin);
        root.wait().unwrap();
        assert!(
            with_child > alone + (60 << 10),
            "with the child {with_child} KiB, alone {alone} KiB"
        );
    }
}
