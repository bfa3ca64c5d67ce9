//! The shared connections of the multiplexing clients (`--http2`, `--http3`): one slot per
//! connection that carries streams (`--connections`), the slot a request takes its turn on,
//! and one connect at a time per slot while the slot's other requests wait for it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::measure::conn::{ConnRecorder, ConnSample};
use crate::workload::task_group;

/// A connection that many requests share: cloned out to each, and asked whether it still
/// takes new streams (not once it died or began to go away).
pub(super) trait Shared: Clone {
    fn accepts_streams(&self) -> bool;
}

/// A workload's slots.
pub(super) struct Slots<C> {
    slots: Vec<Slot<C>>,
    /// The slot of the next request (round robin) outside a task group.
    next: AtomicUsize,
}

impl<C: Shared> Slots<C> {
    /// `n` empty slots.
    pub(super) fn new(n: usize) -> Slots<C> {
        Slots {
            slots: (0..n).map(|_| Slot::default()).collect(),
            next: AtomicUsize::new(0),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The calling request's slot: in a task group (`async`), the group's own; else the next
    /// in turn. There must be at least one slot.
    pub(super) fn turn(&self) -> &Slot<C> {
        let turn =
            task_group::current().unwrap_or_else(|| self.next.fetch_add(1, Ordering::Relaxed));
        &self.slots[turn % self.slots.len()]
    }
}

/// One connection's place: empty until first used and after its connection died or began to
/// go away.
pub(super) struct Slot<C> {
    /// The connection, cloned out by every request under a lock held for nothing else (no
    /// request waits on another's await).
    conn: Mutex<Option<C>>,
    /// Held while connecting, so that the requests waiting for the slot's connection open
    /// one, not one each.
    connecting: tokio::sync::Mutex<()>,
}

impl<C> Default for Slot<C> {
    fn default() -> Slot<C> {
        Slot {
            conn: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
        }
    }
}

impl<C: Shared> Slot<C> {
    /// The slot's connection, if it has one that takes new streams.
    fn live(&self) -> Option<C> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        conn.as_ref().filter(|c| c.accepts_streams()).cloned()
    }

    /// The slot's live connection (a reuse, recorded in `conns`), or, when it has none, the
    /// slot's connect lock: the caller opens the connection and [`Slot::put`]s it while the
    /// slot's other requests wait here, then find it live.
    pub(super) async fn live_or_connect(
        &self,
        conns: &ConnRecorder,
    ) -> Result<C, tokio::sync::MutexGuard<'_, ()>> {
        if let Some(c) = self.live() {
            conns.record(ConnSample::default());
            return Ok(c);
        }
        let connecting = self.connecting.lock().await;
        // Another request opened it while this one waited.
        if let Some(c) = self.live() {
            conns.record(ConnSample::default());
            return Ok(c);
        }
        Err(connecting)
    }

    /// Makes `conn` the slot's connection.
    pub(super) fn put(&self, conn: C) {
        *self.conn.lock().unwrap_or_else(|p| p.into_inner()) = Some(conn);
    }

    /// Empties the slot if its connection is the one `is` picks (a request found it going
    /// away: the next request opens another).
    pub(super) fn forget(&self, is: impl Fn(&C) -> bool) {
        let mut held = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if held.as_ref().is_some_and(is) {
            *held = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone)]
    struct Fake(std::sync::Arc<std::sync::atomic::AtomicBool>);

    impl Shared for Fake {
        fn accepts_streams(&self) -> bool {
            !self.0.load(Ordering::Relaxed)
        }
    }

    /// An empty slot hands out its connect lock once; a put connection is reused (and the
    /// reuse recorded) until it stops taking streams or is forgotten.
    #[test]
    fn a_slot_connects_once_and_reuses_what_takes_streams() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let slots: Slots<Fake> = Slots::new(2);
            assert!(!slots.is_empty());
            let conns = ConnRecorder::default();
            let slot = slots.turn();
            let lock = slot.live_or_connect(&conns).await;
            assert!(lock.is_err());
            let ended = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            slot.put(Fake(ended.clone()));
            drop(lock);
            let reused = slot.live_or_connect(&conns).await;
            assert!(reused.is_ok());
            ended.store(true, Ordering::Relaxed);
            assert!(slot.live_or_connect(&conns).await.is_err());
            ended.store(false, Ordering::Relaxed);
            slot.forget(|c| std::sync::Arc::ptr_eq(&c.0, &ended));
            assert!(slot.live_or_connect(&conns).await.is_err());
            // Round robin outside a task group: the next turn is the other slot.
            assert!(!std::ptr::eq(slot, slots.turn()));
        });
    }
}
