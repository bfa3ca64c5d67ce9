//! Which worker ran each task: what a model's lanes are ([`Lanes`]), the lanes of tasks that
//! only a schedule can tell (interval colouring, [`colour`]), and the per-task columns that
//! travel beside a run's sampled timeline ([`TimelineTasks`]), which the trace file draws, with
//! the phases seen of them ([`Phases`]).

use serde::{Deserialize, Serialize};

use super::phases::{Book, PhaseKind, Sample};
use super::TaskRecord;

/// What a model's worker (a trace's thread, a task's lane) is, and so how a task's record
/// learns it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lanes {
    /// A worker the model names as it runs each task (`seq`'s one, a pool's thread, rayon's
    /// thread index, an actor, a queue worker): the record carries it.
    Worker,
    /// One OS thread per task (`thread`): the task's index is its lane.
    Thread,
    /// One process per task (`fork`, `spawn`): the task's index is its lane.
    Process,
    /// At most W tasks in flight and no worker to name (`async:W`, `green:W`, `curl:W`): the
    /// lanes are assigned after the run by [`colour`], which is exact for slots.
    #[default]
    Slot,
}

impl Lanes {
    /// The word a trace names one lane with (`worker 3`, `slot 3`).
    pub fn word(self) -> &'static str {
        match self {
            Lanes::Worker => "worker",
            Lanes::Thread => "thread",
            Lanes::Process => "process",
            Lanes::Slot => "slot",
        }
    }

    /// Gives every record its lane where the model did not record one: a task's index for
    /// one thread or process per task, interval colouring for slots.
    pub fn assign(self, records: &mut [TaskRecord]) {
        match self {
            Lanes::Worker => {}
            Lanes::Thread | Lanes::Process => {
                for r in records.iter_mut() {
                    r.worker = r.index;
                }
            }
            Lanes::Slot => {
                let lanes = colour_by(records.len(), |i| (records[i].start_ns, records[i].end_ns));
                for (r, lane) in records.iter_mut().zip(lanes) {
                    r.worker = lane;
                }
            }
        }
    }
}

/// The lane of each `(start, end)` span, in their order: spans sorted by start each take the
/// lowest lane free at their start (one whose last span ended at or before it). This uses
/// as many lanes as the most spans that overlap at once, so for a model that keeps at most W
/// tasks in flight it never uses more than W: a slot of the semaphore is such a lane.
pub fn colour(spans: impl Iterator<Item = (u64, u64)>) -> Vec<u32> {
    let spans: Vec<(u64, u64)> = spans.collect();
    colour_by(spans.len(), |i| spans[i])
}

/// [`colour`] of `n` spans read by `span(i)`, with no copy of them: 12 bytes a span at most
/// (its place in the start order, its lane, an entry while it is busy). A run's records are
/// coloured after its tasks, inside the run's measured memory, and a copy of the spans with
/// indices and busy entries of a machine word took about 50 bytes a task (at a million
/// waiting tasks, which all overlap, 20 MiB more of `async`'s peak: docs/benchmarks.md §31).
fn colour_by(n: usize, span: impl Fn(usize) -> (u64, u64)) -> Vec<u32> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    // A run has at most `plan::MAX_TASKS` records, a timeline as many spans: far below 2^32.
    let mut order: Vec<u32> = (0..n).map(|i| i as u32).collect();
    order.sort_unstable_by_key(|&i| {
        let (s, e) = span(i as usize);
        (s, e, i)
    });
    let mut lanes = vec![0u32; n];
    // Busy spans, the least (end, lane) first; free lanes, lowest first. No two busy spans
    // share a lane, so the order is strict and any heap pops them in the same order.
    let mut busy = Busy::default();
    let mut free: BinaryHeap<Reverse<u32>> = BinaryHeap::new();
    let mut next = 0u32;
    for i in order {
        let (start, _) = span(i as usize);
        while let Some(top) = busy.peek() {
            let (s, e) = span(top as usize);
            if e.max(s) > start {
                break;
            }
            busy.pop(|j| busy_key(&span, &lanes, j));
            free.push(Reverse(lanes[top as usize]));
        }
        let lane = match free.pop() {
            Some(Reverse(l)) => l,
            None => {
                next += 1;
                next - 1
            }
        };
        lanes[i as usize] = lane;
        busy.push(i, |j| busy_key(&span, &lanes, j));
    }
    lanes
}

/// A busy span's place in [`Busy`]: when it ends (at its start at the earliest), then its lane.
fn busy_key(span: &impl Fn(usize) -> (u64, u64), lanes: &[u32], i: u32) -> (u64, u32) {
    let (s, e) = span(i as usize);
    (e.max(s), lanes[i as usize])
}

/// A binary min-heap of span numbers, ordered by a key the caller gives at each change (the
/// keys live in the spans and lanes being coloured): 4 bytes an entry.
#[derive(Default)]
struct Busy(Vec<u32>);

impl Busy {
    fn peek(&self) -> Option<u32> {
        self.0.first().copied()
    }

    fn push(&mut self, i: u32, key: impl Fn(u32) -> (u64, u32)) {
        self.0.push(i);
        let mut c = self.0.len() - 1;
        while c > 0 {
            let p = (c - 1) / 2;
            if key(self.0[c]) >= key(self.0[p]) {
                break;
            }
            self.0.swap(c, p);
            c = p;
        }
    }

    fn pop(&mut self, key: impl Fn(u32) -> (u64, u32)) -> Option<u32> {
        let last = self.0.pop()?;
        let Some(first) = self.0.first_mut() else {
            return Some(last);
        };
        let top = std::mem::replace(first, last);
        let n = self.0.len();
        let mut c = 0;
        loop {
            let (l, r) = (2 * c + 1, 2 * c + 2);
            let mut least = c;
            if l < n && key(self.0[l]) < key(self.0[least]) {
                least = l;
            }
            if r < n && key(self.0[r]) < key(self.0[least]) {
                least = r;
            }
            if least == c {
                break;
            }
            self.0.swap(c, least);
            c = least;
        }
        Some(top)
    }
}

/// The tasks behind a run's `timeline_us`, one entry per span and in its order: which task,
/// on which lane, with what outcome; and how many tasks the run had, so a reader knows
/// whether the timeline is every task or an even sample of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineTasks {
    /// Tasks the run had.
    pub tasks: usize,
    /// Tasks in the timeline: all of them, or an even sample of `cap`.
    pub kept: usize,
    /// The most tasks the run was asked to keep (`--trace-tasks`); absent in files from
    /// before it was asked (2,000 then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<usize>,
    /// What a lane is.
    pub lanes: Lanes,
    /// Each span's task index.
    pub index: Vec<usize>,
    /// Each span's lane (worker, thread, process or slot number, from 0).
    pub worker: Vec<u32>,
    /// Each span's bytes produced.
    pub bytes: Vec<u64>,
    /// Each span's failure kind, null when the task succeeded; empty when none failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error: Vec<Option<String>>,
    /// Each span's scheduled time, µs from the run's start: when an open run's task was due,
    /// or when a closed queue run's job was enqueued; empty for other runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sched_us: Vec<u64>,
    /// The phases the run's process saw of the kept tasks; absent where it saw none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<Phases>,
    /// A run over several hosts: each span's host, a position in the run's `hub.parts`
    /// (its index is then the whole cell's task); empty for a run on one host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host: Vec<u32>,
}

/// The most phase events a task may keep (what a results file or a host's answer may say).
pub const PHASES_PER_TASK_MAX: usize = 64;

/// The phases of a timeline's tasks, one entry per phase, grouped by span in span order and
/// in time order within one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Phases {
    /// The most phases a task keeps; a task's later ones are counted in `dropped`.
    pub per_task: usize,
    /// Phases past `per_task` that were counted and not kept, over every kept task.
    pub dropped: u64,
    /// Each phase's span (a position in `timeline_us`).
    pub span: Vec<u32>,
    /// Each phase's kind.
    pub kind: Vec<PhaseKind>,
    /// Each phase's `[start, end]`, µs from the run's start: inside its task's span, but for
    /// the phases before it (a process's start, which ends where its task starts; a job's
    /// wait in its queue, which ends at the latest there) and after it (a process's exit, a
    /// job's acknowledgement, which start at the earliest at its end). A phase before its
    /// task starts at the earliest where the lane's previous kept task and its phases ended:
    /// a lane shows its worker's time, never two things at once (a job's whole wait is its
    /// `sched_us` to its start).
    pub us: Vec<[u64; 2]>,
}

/// A run's timeline and its tasks: each task's `[start, end]` in µs from `t0_ns`, ordered by
/// start, for the tasks `sample` keeps (all, or an even spread by index), and beside it the
/// same tasks' index, lane, outcome, scheduled time and the phases `book` holds of them (the
/// records' `worker` must already be set, see [`Lanes::assign`]).
pub fn sample(
    records: &[TaskRecord],
    t0_ns: u64,
    keep: Sample,
    lanes: Lanes,
    book: Option<&Book>,
) -> (Vec<[u64; 2]>, TimelineTasks) {
    let us = |ns: u64| ns.saturating_sub(t0_ns) / 1000;
    let mut kept: Vec<(u64, u64, usize)> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| keep.slot(r.index()).is_some())
        .map(|(k, r)| {
            let s = us(r.start_ns);
            (s, us(r.end_ns).max(s), k)
        })
        .collect();
    kept.sort_unstable();
    let spans = kept.iter().map(|&(s, e, _)| [s, e]).collect();
    let failed = kept.iter().any(|&(_, _, k)| records[k].error.is_some());
    let scheduled = kept.iter().any(|&(_, _, k)| records[k].sched_ns.is_some());
    let phases = book.map(|b| {
        let mut p = Phases {
            per_task: b.per_task(),
            ..Default::default()
        };
        // Where each lane's last kept task, its phases after it included, ended: a phase
        // before a task starts there at the earliest, so that a lane draws what its worker
        // did (a job's wait in the queue while its worker ran the jobs before it is no
        // time of this lane's; the whole wait is the job's scheduled time to its start).
        let mut lane_free: std::collections::HashMap<u32, u64> = Default::default();
        for (span, &(_, _, k)) in kept.iter().enumerate() {
            let r = &records[k];
            let (events, more) = b.events(r.index());
            p.dropped += more as u64;
            let end = r.end_ns.max(r.start_ns);
            let free = lane_free.get(&r.worker).copied().unwrap_or(0);
            let mut last = end;
            for e in events {
                let (a, z) = if e.kind.before_task() {
                    let a = e.start_ns.max(free.min(r.start_ns)).min(r.start_ns);
                    let z = if e.kind.reaches_task() {
                        r.start_ns
                    } else {
                        e.end_ns.clamp(a, r.start_ns)
                    };
                    (a, z)
                } else if e.kind.after_task() {
                    let a = e.start_ns.max(end);
                    (a, e.end_ns.max(a))
                } else {
                    let a = e.start_ns.clamp(r.start_ns, end);
                    (a, e.end_ns.clamp(a, end))
                };
                last = last.max(z);
                p.span.push(span as u32);
                p.kind.push(e.kind);
                p.us.push([us(a), us(z)]);
            }
            lane_free.insert(r.worker, last);
        }
        p
    });
    let tasks = TimelineTasks {
        tasks: records.len(),
        kept: kept.len(),
        cap: Some(keep.cap),
        lanes,
        index: kept.iter().map(|&(_, _, k)| records[k].index()).collect(),
        worker: kept.iter().map(|&(_, _, k)| records[k].worker).collect(),
        bytes: kept.iter().map(|&(_, _, k)| records[k].bytes).collect(),
        error: if failed {
            kept.iter()
                .map(|&(_, _, k)| records[k].error.as_ref().map(|e| e.kind.clone()))
                .collect()
        } else {
            Vec::new()
        },
        sched_us: if scheduled {
            kept.iter()
                .map(|&(_, _, k)| us(records[k].sched().unwrap_or(records[k].start_ns)))
                .collect()
        } else {
            Vec::new()
        },
        phases: phases.filter(|p| !p.span.is_empty() || p.dropped > 0),
        host: Vec::new(),
    };
    (spans, tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colouring_uses_as_many_lanes_as_the_most_overlap_and_never_overlaps_in_one() {
        // Three slots: 0-10, 0-5, 0-3, then 3-8 reuses the lane freed at 3, 5-9 the one at 5.
        let spans = [(0, 10), (0, 5), (0, 3), (3, 8), (5, 9), (10, 12)];
        let lanes = colour(spans.iter().copied());
        assert_eq!(lanes, vec![2, 1, 0, 0, 1, 0]);
        for a in 0..spans.len() {
            for b in 0..spans.len() {
                if a != b && lanes[a] == lanes[b] {
                    assert!(spans[a].1 <= spans[b].0 || spans[b].1 <= spans[a].0);
                }
            }
        }
    }

    /// The colouring before §31 (a copy of the spans, a heap of `(end, lane)` pairs), kept
    /// here as the reference the leaner one must agree with, lane for lane.
    fn colour_reference(spans: &[(u64, u64)]) -> Vec<u32> {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut order: Vec<usize> = (0..spans.len()).collect();
        order.sort_unstable_by_key(|&i| (spans[i].0, spans[i].1, i));
        let mut lanes = vec![0u32; spans.len()];
        let mut busy: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
        let mut free: BinaryHeap<Reverse<u32>> = BinaryHeap::new();
        let mut next = 0u32;
        for i in order {
            let (start, end) = spans[i];
            while let Some(&Reverse((e, lane))) = busy.peek() {
                if e > start {
                    break;
                }
                busy.pop();
                free.push(Reverse(lane));
            }
            let lane = match free.pop() {
                Some(Reverse(l)) => l,
                None => {
                    next += 1;
                    next - 1
                }
            };
            lanes[i] = lane;
            busy.push(Reverse((end.max(start), lane)));
        }
        lanes
    }

    #[test]
    fn colouring_gives_the_lanes_it_gave_before_it_was_made_lean() {
        // Spans of every shape, ties and ends before starts included: starts and lengths
        // drawn from a small range so that many coincide.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut draw = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for n in [0, 1, 2, 7, 100, 2_000] {
            for spread in [1, 10, 1_000] {
                let spans: Vec<(u64, u64)> = (0..n)
                    .map(|_| {
                        let s = draw(spread);
                        // One in ten ends before its start (a clock read out of order).
                        let e = if draw(10) == 0 {
                            s.saturating_sub(1)
                        } else {
                            s + draw(spread)
                        };
                        (s, e)
                    })
                    .collect();
                assert_eq!(
                    colour(spans.iter().copied()),
                    colour_reference(&spans),
                    "{n} spans over {spread}"
                );
            }
        }
    }

    #[test]
    fn one_task_per_thread_takes_its_index_and_samples_stay_aligned() {
        let mut recs: Vec<TaskRecord> = (0..10)
            .map(|i| TaskRecord::ran(9 - i, i as u64 * 1000, i as u64 * 1000 + 500))
            .collect();
        Lanes::Thread.assign(&mut recs);
        let keep = Sample { tasks: 10, cap: 5 };
        let (spans, t) = sample(&recs, 0, keep, Lanes::Thread, None);
        assert_eq!((t.tasks, t.kept), (10, 5));
        // Tasks 0, 2, 4, 6, 8 by index, in the order they started.
        assert_eq!(spans, vec![[1, 1], [3, 3], [5, 5], [7, 7], [9, 9]]);
        assert_eq!(t.index, vec![8, 6, 4, 2, 0]);
        assert_eq!(t.worker, vec![8, 6, 4, 2, 0]);
        assert!(t.error.is_empty());
    }

    #[test]
    fn phases_are_kept_for_the_sampled_tasks_clamped_into_their_task() {
        use crate::measure::phases::{Book, PhaseKind};
        // Four tasks, two kept (0 and 2), each 10 µs long from 10 µs apart.
        let recs: Vec<TaskRecord> = (0..4)
            .map(|i| TaskRecord::ran(i, i as u64 * 10_000, i as u64 * 10_000 + 10_000))
            .collect();
        let keep = Sample { tasks: 4, cap: 2 };
        let book = Book::new(keep, 3);
        let t0 = crate::measure::phases::Sample { tasks: 4, cap: 2 };
        assert_eq!(t0.slot(2), Some(1));
        // Task 2 (20–30 µs): a connect before its start is clamped to it, a read past its end
        // is cut at it; a process start ends where the task starts.
        book_record(&book, 1, PhaseKind::Connect, 15_000, 22_000);
        book_record(&book, 1, PhaseKind::Read, 25_000, 31_000);
        book_record(&book, 0, PhaseKind::ProcessStart, 0, 0);
        let (spans, t) = sample(&recs, 0, keep, Lanes::Worker, Some(&book));
        assert_eq!(spans, vec![[0, 10], [20, 30]]);
        let p = t.phases.unwrap();
        assert_eq!(p.per_task, 3);
        assert_eq!(p.span, vec![0, 1, 1]);
        assert_eq!(
            p.kind,
            vec![PhaseKind::ProcessStart, PhaseKind::Connect, PhaseKind::Read]
        );
        assert_eq!(p.us, vec![[0, 0], [20, 22], [25, 30]]);
        // Beside its task: a job's wait in the queue keeps its own end, at the latest the
        // task's start; an exit or an acknowledgement starts at the earliest at its end.
        let book = Book::new(keep, 4);
        book_record(&book, 1, PhaseKind::Queued, 2_000, 18_000);
        book_record(&book, 1, PhaseKind::Ack, 29_000, 33_000);
        book_record(&book, 0, PhaseKind::Queued, 0, 12_000);
        book_record(&book, 0, PhaseKind::ProcessExit, 10_000, 11_000);
        let p = sample(&recs, 0, keep, Lanes::Worker, Some(&book))
            .1
            .phases
            .unwrap();
        assert_eq!(
            p.kind,
            vec![
                PhaseKind::Queued,
                PhaseKind::ProcessExit,
                PhaseKind::Queued,
                PhaseKind::Ack
            ]
        );
        // Task 2's wait began at 2 µs, while the lane's worker still ran task 0 and its
        // exit (to 11 µs): the lane draws it from there, never over task 0.
        assert_eq!(p.us, vec![[0, 0], [10, 11], [11, 18], [30, 33]]);
        // On another lane (another worker), the same wait is drawn whole.
        let mut recs2 = recs.clone();
        recs2[2].worker = 1;
        let p = sample(&recs2, 0, keep, Lanes::Worker, Some(&book))
            .1
            .phases
            .unwrap();
        assert_eq!(p.us, vec![[0, 0], [10, 11], [2, 18], [30, 33]]);
        // A book with nothing in it leaves the timeline without phases.
        let empty = Book::new(keep, 3);
        assert!(sample(&recs, 0, keep, Lanes::Worker, Some(&empty))
            .1
            .phases
            .is_none());
    }

    fn book_record(
        book: &crate::measure::phases::Book,
        slot: usize,
        kind: crate::measure::phases::PhaseKind,
        a: u64,
        z: u64,
    ) {
        book.record_slot_for_tests(slot, kind, a, z);
    }
}
