//! Which worker ran each task: what a model's lanes are ([`Lanes`]), the lanes of tasks that
//! only a schedule can tell (interval colouring, [`colour`]), and the per-task columns that
//! travel beside a run's sampled timeline ([`TimelineTasks`]), which the trace file draws.

use serde::{Deserialize, Serialize};

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
                    r.worker = u32::try_from(r.index).unwrap_or(u32::MAX);
                }
            }
            Lanes::Slot => {
                let lanes = colour(records.iter().map(|r| (r.start_ns, r.end_ns)));
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
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let spans: Vec<(u64, u64)> = spans.collect();
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_unstable_by_key(|&i| (spans[i].0, spans[i].1, i));
    let mut lanes = vec![0u32; spans.len()];
    // Busy lanes by the end of their last span; free lanes, lowest first.
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

/// The tasks behind a run's `timeline_us`, one entry per span and in its order: which task,
/// on which lane, with what outcome; and how many tasks the run had, so a reader knows
/// whether the timeline is every task or an even sample of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineTasks {
    /// Tasks the run had.
    pub tasks: usize,
    /// Tasks in the timeline: all of them, or an even sample of [`super::TIMELINE_CAP`].
    pub kept: usize,
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
}

/// A run's timeline and its tasks: each task's `[start, end]` in µs from `t0_ns`, ordered by
/// start, evenly sampled down to `cap` tasks, and beside it the same tasks' index, lane and
/// outcome (the records' `worker` must already be set, see [`Lanes::assign`]).
pub fn sample(
    records: &[TaskRecord],
    t0_ns: u64,
    cap: usize,
    lanes: Lanes,
) -> (Vec<[u64; 2]>, TimelineTasks) {
    let us = |ns: u64| ns.saturating_sub(t0_ns) / 1000;
    let mut order: Vec<(u64, u64, usize)> = records
        .iter()
        .enumerate()
        .map(|(k, r)| {
            let s = us(r.start_ns);
            (s, us(r.end_ns).max(s), k)
        })
        .collect();
    order.sort_unstable();
    let n = order.len();
    let kept: Vec<(u64, u64, usize)> = if n <= cap || cap == 0 {
        order
    } else {
        (0..cap).map(|i| order[i * n / cap]).collect()
    };
    let spans = kept.iter().map(|&(s, e, _)| [s, e]).collect();
    let failed = kept.iter().any(|&(_, _, k)| records[k].error.is_some());
    let tasks = TimelineTasks {
        tasks: n,
        kept: kept.len(),
        lanes,
        index: kept.iter().map(|&(_, _, k)| records[k].index).collect(),
        worker: kept.iter().map(|&(_, _, k)| records[k].worker).collect(),
        bytes: kept.iter().map(|&(_, _, k)| records[k].bytes).collect(),
        error: if failed {
            kept.iter()
                .map(|&(_, _, k)| records[k].error.as_ref().map(|e| e.kind.clone()))
                .collect()
        } else {
            Vec::new()
        },
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

    #[test]
    fn one_task_per_thread_takes_its_index_and_samples_stay_aligned() {
        let mut recs: Vec<TaskRecord> = (0..10)
            .map(|i| TaskRecord::ran(9 - i, i as u64 * 1000, i as u64 * 1000 + 500))
            .collect();
        Lanes::Thread.assign(&mut recs);
        let (spans, t) = sample(&recs, 0, 5, Lanes::Thread);
        assert_eq!((t.tasks, t.kept), (10, 5));
        assert_eq!(spans, vec![[0, 0], [2, 2], [4, 4], [6, 6], [8, 8]]);
        assert_eq!(t.index, vec![9, 7, 5, 3, 1]);
        assert_eq!(t.worker, vec![9, 7, 5, 3, 1]);
        assert!(t.error.is_empty());
    }
}
