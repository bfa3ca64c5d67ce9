//! Which jobs a worker process is running, told to its supervisor ([`super::supervisor`])
//! through memory they share: one slot per worker thread, holding the key of the job the
//! thread runs ([`super::worker::job_key`]), when it started, and a generation that is odd
//! while the job runs. The supervisor makes the page (a sealed memfd) before the child
//! starts; the child maps it and writes its slots with plain stores (release stores: a `mov`
//! on x86), no lock and no system call a job, so the queue keeps its rate (bench/jobs/ab.py;
//! docs/benchmarks.md §30: the pipe of one 19-byte `write` per start and end it replaces cost
//! Redis 20% of its no-op rate). The supervisor reads the page when the child has died (which
//! jobs were running, in start order) and, for `--job-timeout`, every so often while it
//! lives. What it reads was written by a process that may have been dying: the slot count is
//! the supervisor's own, and a slot's values only ever pick among the jobs the backend says
//! the child held.

use std::io;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::os::shared::SharedMemory;

/// One worker thread's slot, alone on a cache line (threads on other cores writing their
/// own slots do not pass a line back and forth).
#[repr(C, align(64))]
pub struct Slot {
    /// Odd while a job runs; each start and each end adds one.
    generation: AtomicU64,
    /// The running job's key.
    key: AtomicU64,
    /// When it started (`measure::mono_ns`): orders the jobs that were running.
    start_ns: AtomicU64,
}

const SLOT: usize = std::mem::size_of::<Slot>();

/// The most slots a page holds: `jobs work -c`'s bound.
pub const MAX_SLOTS: usize = 10_000;

impl Slot {
    /// The job `key` starts on this slot's thread at `at_ns`.
    pub fn start(&self, key: u64, at_ns: u64) {
        // Only this slot's thread writes it: its own last value, read back.
        let g = self.generation.load(Ordering::Relaxed);
        self.key.store(key, Ordering::Release);
        self.start_ns.store(at_ns, Ordering::Release);
        // Odd: running (an earlier start that never ended is passed over).
        let running = if g & 1 == 0 { g + 1 } else { g + 2 };
        self.generation.store(running, Ordering::Release);
    }

    /// The job this slot's thread ran has ended.
    pub fn end(&self) {
        let g = self.generation.load(Ordering::Relaxed);
        if g & 1 == 1 {
            self.generation.store(g + 1, Ordering::Release);
        }
    }
}

/// A job a slot says is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Running {
    /// Which slot (worker thread).
    pub slot: usize,
    /// Its generation: a slot's job is the same run while this stays.
    pub generation: u64,
    /// The job's key.
    pub key: u64,
    /// When it started, as the child wrote it (orders the suspects; never trusted as a time).
    pub start_ns: u64,
}

/// The slots of one worker process.
pub struct JobSlots {
    mem: SharedMemory,
    count: usize,
}

impl std::fmt::Debug for JobSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JobSlots({} slots)", self.count)
    }
}

impl JobSlots {
    /// In the supervisor: a page of `count` idle slots (at least one, at most [`MAX_SLOTS`]),
    /// to hand to the child it starts next ([`JobSlots::fd`]).
    pub fn create(count: usize) -> io::Result<JobSlots> {
        let count = count.clamp(1, MAX_SLOTS);
        let mem = SharedMemory::create(c"concur-job-slots", count * SLOT)?;
        Ok(JobSlots { mem, count })
    }

    /// In the worker child: the page on descriptor `fd` (which is closed), refused unless
    /// it holds from `need` to [`MAX_SLOTS`] whole slots.
    pub fn attach(fd: RawFd, need: usize) -> io::Result<JobSlots> {
        let mem = SharedMemory::attach(fd, need.max(1) * SLOT, MAX_SLOTS * SLOT)?;
        if !mem.len().is_multiple_of(SLOT) {
            return Err(io::Error::other(format!(
                "the job slots on fd {fd} are {} bytes, not a whole number of {SLOT}-byte slots",
                mem.len()
            )));
        }
        let count = mem.len() / SLOT;
        Ok(JobSlots { mem, count })
    }

    /// The descriptor to hand to the child (the supervisor's side only).
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.mem.fd()
    }

    /// Slot `i` (worker thread `i`'s), if there is one.
    pub fn slot(&self, i: usize) -> Option<&Slot> {
        if i >= self.count {
            return None;
        }
        // SAFETY: the mapping holds `count` slots, is page-aligned (more than a slot's
        // alignment) and lives as long as self; a slot is only atomics.
        Some(unsafe { &*self.mem.as_ptr().as_ptr().cast::<Slot>().add(i) })
    }

    /// The jobs the slots say are running, in start order (ties by slot). A slot caught in
    /// the middle of a change (its generation moved while it was read) is left out: read
    /// while the child lives, it was starting or ending a job; read after it died, nothing
    /// moves.
    pub fn running(&self) -> Vec<Running> {
        let mut out = Vec::new();
        for i in 0..self.count {
            let Some(s) = self.slot(i) else { break };
            let g = s.generation.load(Ordering::Acquire);
            if g & 1 == 0 {
                continue;
            }
            let key = s.key.load(Ordering::Acquire);
            let start_ns = s.start_ns.load(Ordering::Acquire);
            if s.generation.load(Ordering::Acquire) != g {
                continue;
            }
            out.push(Running {
                slot: i,
                generation: g,
                key,
                start_ns,
            });
        }
        out.sort_by_key(|r| (r.start_ns, r.slot));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_slot_is_running_from_its_start_to_its_end_and_the_order_is_the_starts() {
        assert_eq!(SLOT, 64);
        let slots = JobSlots::create(3).unwrap();
        assert!(slots.running().is_empty());
        assert!(slots.slot(3).is_none());
        let (a, b, c) = (
            slots.slot(0).unwrap(),
            slots.slot(1).unwrap(),
            slots.slot(2).unwrap(),
        );
        c.start(30, 100);
        a.start(10, 300);
        b.start(20, 200);
        let keys: Vec<u64> = slots.running().iter().map(|r| r.key).collect();
        assert_eq!(keys, [30, 20, 10]);
        b.end();
        // A second job on the same thread is another run of its slot.
        let before = slots.running()[0];
        c.end();
        c.start(31, 400);
        let keys: Vec<u64> = slots.running().iter().map(|r| r.key).collect();
        assert_eq!(keys, [10, 31]);
        let after = slots.running()[1];
        assert_eq!((before.slot, after.slot), (2, 2));
        assert_ne!(before.generation, after.generation);
        // An end without a start changes nothing.
        b.end();
        assert_eq!(slots.running().len(), 2);
    }

    /// The child's side sees the supervisor's page through the descriptor it inherits, and
    /// what it writes is what the supervisor reads; a page of the wrong size is refused.
    #[test]
    fn the_child_writes_what_the_supervisor_reads() {
        let parent = JobSlots::create(2).unwrap();
        // SAFETY: dup of a descriptor we hold; the copy is handed to attach, which owns it.
        let copy = unsafe { libc::dup(parent.fd().unwrap().as_raw_fd()) };
        assert!(copy >= 0);
        let child = JobSlots::attach(copy, 2).unwrap();
        child.slot(1).unwrap().start(7, 1);
        assert_eq!(parent.running()[0].key, 7);
        assert_eq!(parent.running()[0].slot, 1);
        // SAFETY: as above.
        let copy = unsafe { libc::dup(parent.fd().unwrap().as_raw_fd()) };
        let why = JobSlots::attach(copy, 3).err().unwrap().to_string();
        assert!(why.contains("128 bytes"), "{why}");
    }

    /// A page full of garbage (a child that died in the middle of anything) reads as at most
    /// one job per slot.
    #[test]
    fn a_garbage_page_reads_as_at_most_one_job_a_slot() {
        let slots = JobSlots::create(4).unwrap();
        // SAFETY: the page's 4 slots, written as bytes (any bit pattern is a valid u64).
        unsafe {
            std::ptr::write_bytes(slots.mem.as_ptr().as_ptr(), 0xa5, 4 * SLOT);
        }
        let running = slots.running();
        assert_eq!(running.len(), 4);
        assert!(running.iter().all(|r| r.key == 0xa5a5_a5a5_a5a5_a5a5));
    }
}
