//! The phases of a run's traced tasks: what a model or a client sees of a task's time without
//! extra cost (connect, TLS, first byte, read; the interpreter lock waited for and held; a
//! task process's start and exit; a job's wait in its queue and its acknowledgement), recorded by the run's own process into a buffer made before the
//! run, for the tasks of the trace's sample only ([`Sample`]).
//!
//! One event is 16 bytes: its start on the monotonic clock and, in one more word, its kind
//! (the top 8 bits) and its length in ns (the other 56: two years). A traced task has a block
//! of [`Book::per_task`] events; the ones past it are counted, not kept. The buffer is
//! allocated zeroed, so pages no event is written to are never touched.
//!
//! When no book is installed (a run whose timeline is not kept, or a workload and model with
//! no phases to see), [`task`] is one atomic load and a branch; a task outside the sample
//! pays two more loads, a multiplication and a division besides; a task of the sample one
//! more load, and no lock or shared count.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// What one phase of a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[repr(u8)]
pub enum PhaseKind {
    /// HTTP: a new connection's TCP connect.
    Connect = 1,
    /// HTTP: its TLS handshake.
    Tls = 2,
    /// HTTP: the request written. Over HTTP/2, the request handed to the connection: the
    /// wait for a stream the server's limit allows, then its frames queued (the connection
    /// writes them; when is not seen).
    Send = 3,
    /// HTTP: from the request (its start, where the client does not see it end) to the
    /// response's first byte.
    Wait = 4,
    /// HTTP: from the response's first byte to the body's end.
    Read = 5,
    /// `--gil`: waiting for the interpreter lock.
    LockWait = 6,
    /// `--gil`: holding it.
    LockHeld = 7,
    /// `fork`/`spawn`: from the call that creates the task's process to the task's start in it.
    ProcessStart = 8,
    /// `fork`/`spawn`: from the task's end in its process to the run's process reaping that
    /// process (its `wait4` returned).
    ProcessExit = 9,
    /// A queue model's job: from its enqueue (a closed run's one enqueue of every job, an
    /// open run's scheduled one) to a worker's fetch of the batch it came in.
    Queued = 10,
    /// A queue model's job: its acknowledgement to the backend, one call for the worker's
    /// batch after its last job ran.
    Ack = 11,
}

impl PhaseKind {
    /// Every kind, in the order a legend lists them.
    pub const ALL: [PhaseKind; 11] = [
        PhaseKind::Connect,
        PhaseKind::Tls,
        PhaseKind::Send,
        PhaseKind::Wait,
        PhaseKind::Read,
        PhaseKind::LockWait,
        PhaseKind::LockHeld,
        PhaseKind::ProcessStart,
        PhaseKind::ProcessExit,
        PhaseKind::Queued,
        PhaseKind::Ack,
    ];

    /// Its name in the results file and the trace.
    pub fn name(self) -> &'static str {
        match self {
            PhaseKind::Connect => "connect",
            PhaseKind::Tls => "tls",
            PhaseKind::Send => "send",
            PhaseKind::Wait => "wait",
            PhaseKind::Read => "read",
            PhaseKind::LockWait => "lock-wait",
            PhaseKind::LockHeld => "lock-held",
            PhaseKind::ProcessStart => "process-start",
            PhaseKind::ProcessExit => "process-exit",
            PhaseKind::Queued => "queued",
            PhaseKind::Ack => "ack",
        }
    }

    /// Whether the phase lies before its task's start (a process's start, a job's wait in
    /// its queue): drawn beside the task, not inside it.
    pub fn before_task(self) -> bool {
        matches!(self, PhaseKind::ProcessStart | PhaseKind::Queued)
    }

    /// Whether the phase reaches its task's start, which its recorder cannot see (a process's
    /// start is recorded as the instant the process is made).
    pub fn reaches_task(self) -> bool {
        self == PhaseKind::ProcessStart
    }

    /// Whether the phase lies after its task's end (a process's exit, a job's
    /// acknowledgement): drawn beside the task, not inside it.
    pub fn after_task(self) -> bool {
        matches!(self, PhaseKind::ProcessExit | PhaseKind::Ack)
    }

    fn from_u8(v: u8) -> Option<PhaseKind> {
        PhaseKind::ALL.into_iter().find(|k| *k as u8 == v)
    }
}

/// The most phase events a traced task keeps when the lock's hand-offs are recorded: its
/// first 16 (8 waits and 8 holds); the rest are counted.
pub const LOCK_PHASES_PER_TASK: usize = 16;

/// The phase events an HTTP task can have (connect, TLS, send, wait, read).
pub const HTTP_PHASES_PER_TASK: usize = 5;

/// The phase events a task process has (its start and its exit).
pub const PROCESS_PHASES_PER_TASK: usize = 2;

/// The phase events a queue model's job has (its wait in the queue, its acknowledgement).
pub const JOB_PHASES_PER_TASK: usize = 2;

/// Which tasks of a run of `tasks` a trace of at most `cap` keeps: all of them, or the
/// `cap` tasks whose index is `⌊k·tasks/cap⌋` for `k` in `0..cap`, evenly spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// The run's tasks.
    pub tasks: usize,
    /// The most the trace keeps.
    pub cap: usize,
}

impl Sample {
    /// How many tasks the sample holds.
    pub fn kept(&self) -> usize {
        self.tasks.min(self.cap)
    }

    /// The slot (`0..kept`) of task `index`, none when the sample leaves it out.
    #[inline]
    pub fn slot(&self, index: usize) -> Option<usize> {
        if index >= self.tasks {
            return None;
        }
        if self.tasks <= self.cap {
            return Some(index);
        }
        // The smallest k with ⌊k·n/cap⌋ ≥ index; the task is kept when that is it. In u64
        // when the products fit (any run this machine can hold: index, k < n and cap ≤ 10⁶),
        // since u128's division is a call of ~20 instructions, made for every task of a run.
        let (i, n, cap) = (index as u64, self.tasks as u64, self.cap as u64);
        match (i.checked_mul(cap), n.checked_mul(cap)) {
            (Some(ic), Some(_)) => {
                let k = ic.div_ceil(n);
                (k < cap && k * n / cap == i).then_some(k as usize)
            }
            _ => {
                let (i, n, cap) = (i as u128, n as u128, cap as u128);
                let k = (i * cap).div_ceil(n);
                (k < cap && k * n / cap == i).then_some(k as usize)
            }
        }
    }
}

/// One recorded phase, as the sample reads it back: absolute times on the monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseEvent {
    /// What it is.
    pub kind: PhaseKind,
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns.
    pub end_ns: u64,
}

const LEN_BITS: u32 = 56;
const LEN_MASK: u64 = (1 << LEN_BITS) - 1;

/// A run's phase buffer: a block of `per_task` events for each task of the sample.
pub struct Book {
    sample: Sample,
    /// A host's share of a run over several hosts: (its first task, every how many): the
    /// cell's task `first + i·of` is this run's task `i`, as a workload numbers them.
    segment: Option<(usize, usize)>,
    per_task: usize,
    /// Two words an event: start ns, then kind << 56 | length ns.
    words: Box<[AtomicU64]>,
    /// Events each slot was given, kept or not.
    counts: Box<[AtomicU32]>,
}

/// A zeroed slice of atomics whose pages stay untouched until written.
fn zeroed_u64(n: usize) -> Box<[AtomicU64]> {
    const _: () = assert!(std::mem::align_of::<AtomicU64>() == std::mem::align_of::<u64>());
    let plain = vec![0u64; n].into_boxed_slice();
    let raw = Box::into_raw(plain);
    // SAFETY: AtomicU64 has the size, alignment (asserted above) and bit validity of u64, so
    // the allocation holds `n` valid AtomicU64 and its layout is the one it was made with.
    unsafe { Box::from_raw(raw as *mut [AtomicU64]) }
}

fn zeroed_u32(n: usize) -> Box<[AtomicU32]> {
    const _: () = assert!(std::mem::align_of::<AtomicU32>() == std::mem::align_of::<u32>());
    let plain = vec![0u32; n].into_boxed_slice();
    let raw = Box::into_raw(plain);
    // SAFETY: as for `zeroed_u64`, for AtomicU32 and u32.
    unsafe { Box::from_raw(raw as *mut [AtomicU32]) }
}

impl Book {
    /// A buffer for `sample`'s tasks of `per_task` events each.
    pub fn new(sample: Sample, per_task: usize) -> Book {
        let slots = sample.kept();
        Book {
            sample,
            segment: None,
            per_task,
            words: zeroed_u64(slots.saturating_mul(per_task).saturating_mul(2)),
            counts: zeroed_u32(slots),
        }
    }

    /// The book of a host's share (the cell's tasks `first + i·of`), which a workload knows by
    /// the cell's index ([`workload_task`]).
    pub fn with_segment(mut self, first: usize, of: usize) -> Book {
        self.segment = (of > 1).then_some((first, of));
        self
    }

    /// The most events a task keeps.
    pub fn per_task(&self) -> usize {
        self.per_task
    }

    /// The sample it records.
    pub fn sample(&self) -> Sample {
        self.sample
    }

    fn record_slot(&self, slot: usize, kind: PhaseKind, start_ns: u64, end_ns: u64) {
        let Some(count) = self.counts.get(slot) else {
            return;
        };
        let n = count.fetch_add(1, Ordering::Relaxed) as usize;
        if n >= self.per_task {
            // Counted, not kept; the count stops short of wrapping.
            if n > u32::MAX as usize / 2 {
                count.store(u32::MAX / 2, Ordering::Relaxed);
            }
            return;
        }
        let at = (slot * self.per_task + n) * 2;
        let len = end_ns.saturating_sub(start_ns).min(LEN_MASK);
        if let (Some(a), Some(b)) = (self.words.get(at), self.words.get(at + 1)) {
            a.store(start_ns, Ordering::Relaxed);
            b.store(((kind as u64) << LEN_BITS) | len, Ordering::Relaxed);
        }
    }

    /// Records into slot `slot` directly (other modules' tests).
    #[cfg(test)]
    pub(crate) fn record_slot_for_tests(&self, slot: usize, kind: PhaseKind, a: u64, z: u64) {
        self.record_slot(slot, kind, a, z);
    }

    /// Task `index`'s kept events in the order they were recorded, and how many more it had.
    pub fn events(&self, index: usize) -> (Vec<PhaseEvent>, usize) {
        let Some(slot) = self.sample.slot(index) else {
            return (Vec::new(), 0);
        };
        let Some(count) = self.counts.get(slot) else {
            return (Vec::new(), 0);
        };
        let n = count.load(Ordering::Relaxed) as usize;
        let kept = n.min(self.per_task);
        let mut out = Vec::with_capacity(kept);
        for k in 0..kept {
            let at = (slot * self.per_task + k) * 2;
            let (Some(a), Some(b)) = (self.words.get(at), self.words.get(at + 1)) else {
                break;
            };
            let (start_ns, word) = (a.load(Ordering::Relaxed), b.load(Ordering::Relaxed));
            if let Some(kind) = PhaseKind::from_u8((word >> LEN_BITS) as u8) {
                out.push(PhaseEvent {
                    kind,
                    start_ns,
                    end_ns: start_ns.saturating_add(word & LEN_MASK),
                });
            }
        }
        (out, n - kept)
    }
}

/// Whether a book is installed: the one load a task outside tracing pays.
static ON: AtomicBool = AtomicBool::new(false);
/// The installed book: a pointer into one of [`KEPT`]'s books, null when none is.
static BOOK: AtomicPtr<Book> = AtomicPtr::new(std::ptr::null_mut());
/// Every book this process installed, kept until it exits, so a traced task's place is a
/// plain reference that no task pays a shared count for (a lock and a reference count per
/// traced task cost 400 ns on two threads passing their lines back and forth). A `__run`
/// child installs one; a lab in one process one per traced run, whose pages no event was
/// written to were never touched.
static KEPT: Mutex<Vec<Arc<Book>>> = Mutex::new(Vec::new());
/// The installed book's sample and segment, read without its lock: a task outside the
/// sample is turned away before the book is looked at.
static TASKS: AtomicUsize = AtomicUsize::new(0);
static CAP: AtomicUsize = AtomicUsize::new(0);
static SEG_FIRST: AtomicUsize = AtomicUsize::new(0);
static SEG_OF: AtomicUsize = AtomicUsize::new(1);

/// Makes `book` the one this process's tasks record into, until [`uninstall`].
pub fn install(book: Book) {
    let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
    TASKS.store(book.sample.tasks, Ordering::Relaxed);
    CAP.store(book.sample.cap, Ordering::Relaxed);
    let (first, of) = book.segment.unwrap_or((0, 1));
    SEG_FIRST.store(first, Ordering::Relaxed);
    SEG_OF.store(of, Ordering::Relaxed);
    let book = Arc::new(book);
    BOOK.store(Arc::as_ptr(&book).cast_mut(), Ordering::Release);
    kept.push(book);
    ON.store(true, Ordering::Release);
}

/// The installed sample's slot of the run's task `index`, without the book's lock.
#[inline]
fn slot_of(index: usize) -> Option<usize> {
    Sample {
        tasks: TASKS.load(Ordering::Relaxed),
        cap: CAP.load(Ordering::Relaxed),
    }
    .slot(index)
}

/// Ends recording and gives the book back.
pub fn uninstall() -> Option<Arc<Book>> {
    ON.store(false, Ordering::Release);
    let p = BOOK.swap(std::ptr::null_mut(), Ordering::AcqRel);
    if p.is_null() {
        return None;
    }
    let kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
    kept.iter()
        .find(|b| std::ptr::eq(Arc::as_ptr(b), p))
        .cloned()
}

/// Whether a book is installed: what a recorder that must read the clock before it knows its
/// task checks first (one atomic load).
#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Acquire)
}

/// Where one traced task's phases go.
#[derive(Clone, Copy)]
pub struct TaskPhases {
    book: &'static Book,
    slot: usize,
}

impl TaskPhases {
    /// Records a phase of this task.
    #[inline]
    pub fn record(&self, kind: PhaseKind, start_ns: u64, end_ns: u64) {
        self.book.record_slot(self.slot, kind, start_ns, end_ns);
    }
}

/// Where task `index`'s phases go: none when nothing is recorded or the sample leaves it out.
#[inline]
pub fn task(index: usize) -> Option<TaskPhases> {
    if !ON.load(Ordering::Acquire) {
        return None;
    }
    task_slow(slot_of(index)?)
}

/// A traced task's place, for the tasks of the sample only.
#[cold]
fn task_slow(slot: usize) -> Option<TaskPhases> {
    let p = BOOK.load(Ordering::Acquire);
    if p.is_null() {
        return None;
    }
    // SAFETY: a non-null BOOK points into an Arc that KEPT holds until the process exits.
    let book: &'static Book = unsafe { &*p };
    (slot < book.sample.kept()).then_some(TaskPhases { book, slot })
}

/// Where the phases go of the task a workload knows as `index`: on a host's share of a run
/// over several hosts, a workload's index is the whole cell's, which is mapped back to the
/// run's own here. A model and the lock use [`task`], with the run's index.
#[inline]
pub fn workload_task(index: usize) -> Option<TaskPhases> {
    if !ON.load(Ordering::Acquire) {
        return None;
    }
    let (first, of) = (
        SEG_FIRST.load(Ordering::Relaxed),
        SEG_OF.load(Ordering::Relaxed).max(1),
    );
    let i = index.checked_sub(first)?;
    if i % of != 0 {
        return None;
    }
    task_slow(slot_of(i / of)?)
}

/// Records a phase of task `index` when it is traced.
#[inline]
pub fn record(index: usize, kind: PhaseKind, start_ns: u64, end_ns: u64) {
    if let Some(t) = task(index) {
        t.record(kind, start_ns, end_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_keeps_cap_tasks_evenly_and_finds_each_slot() {
        let s = Sample {
            tasks: 1000,
            cap: 100,
        };
        let kept: Vec<(usize, usize)> = (0..1000)
            .filter_map(|i| s.slot(i).map(|k| (i, k)))
            .collect();
        assert_eq!(kept.len(), 100);
        assert!(kept.iter().all(|&(i, k)| i == k * 10));
        // An uneven ratio: ⌊k·7/3⌋ for k in 0..3.
        let s = Sample { tasks: 7, cap: 3 };
        let kept: Vec<usize> = (0..7).filter(|&i| s.slot(i).is_some()).collect();
        assert_eq!(kept, vec![0, 2, 4]);
        let s = Sample { tasks: 5, cap: 10 };
        assert_eq!((0..6).filter_map(|i| s.slot(i)).count(), 5);
        // Products past u64 take the u128 path, with the same answers: task ⌊k·n/cap⌋ is
        // slot k, the task after it none.
        let (n, cap) = (usize::MAX / 3, 1_000_000);
        let s = Sample { tasks: n, cap };
        for k in [0, 1, 2, 999_999] {
            let i = ((k as u128 * n as u128) / cap as u128) as usize;
            assert_eq!(s.slot(i), Some(k), "{k}");
            assert_eq!(s.slot(i + 1), None, "{k}");
        }
    }

    #[test]
    fn every_kind_is_listed_named_as_serialised_and_read_back_from_its_tag() {
        let mut names = std::collections::BTreeSet::new();
        for k in PhaseKind::ALL {
            assert_eq!(PhaseKind::from_u8(k as u8), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), k.name());
            assert!(names.insert(k.name()));
            // Beside the task or inside it, never both; only a process's start reaches it.
            assert!(!(k.before_task() && k.after_task()), "{k:?}");
            assert!(!k.reaches_task() || k.before_task(), "{k:?}");
        }
        assert_eq!(PhaseKind::from_u8(0), None);
        assert_eq!(PhaseKind::from_u8(PhaseKind::ALL.len() as u8 + 1), None);
        let beside: Vec<&str> = PhaseKind::ALL
            .into_iter()
            .filter(|k| k.before_task() || k.after_task())
            .map(PhaseKind::name)
            .collect();
        assert_eq!(beside, ["process-start", "process-exit", "queued", "ack"]);
    }

    #[test]
    fn a_book_keeps_its_first_events_per_task_and_counts_the_rest() {
        let book = Book::new(Sample { tasks: 10, cap: 5 }, 2);
        book.record_slot(1, PhaseKind::LockWait, 100, 150);
        book.record_slot(1, PhaseKind::LockHeld, 150, 400);
        book.record_slot(1, PhaseKind::LockWait, 400, 500);
        let (events, more) = book.events(2);
        assert_eq!(more, 1);
        assert_eq!(
            events,
            vec![
                PhaseEvent {
                    kind: PhaseKind::LockWait,
                    start_ns: 100,
                    end_ns: 150
                },
                PhaseEvent {
                    kind: PhaseKind::LockHeld,
                    start_ns: 150,
                    end_ns: 400
                },
            ]
        );
        assert_eq!(book.events(3), (Vec::new(), 0));
        assert_eq!(book.events(0), (Vec::new(), 0));
    }
}
