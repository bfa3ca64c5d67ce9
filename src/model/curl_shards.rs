//! The event loop under `curl:W`: libcurl multi handles driven through libcurl's socket
//! interface (`curl_multi_socket_action`) from one epoll set, on one thread.
//!
//! Why several multi handles: for each new transfer libcurl looks for a connection to reuse by
//! walking the pool of the destination's connections (`Curl_cpool_find` calling
//! `url_match_conn` on each, string comparisons included), so with 10,000 connections to one
//! server every request would walk thousands of them. A multi handle has a pool of its own, so W transfers split over
//! ceil(W / [`SHARD`]) handles walk at most [`SHARD`] connections each. Why the socket
//! interface: `curl_multi_perform` and `curl_multi_wait` visit every transfer of their handle
//! at each call; `socket_action` is called for the sockets that are ready, and libcurl's timer
//! for a handle only when it is due. Up to [`SHARD`] connections one multi handle is driven
//! with `curl_multi_perform` and `curl_multi_wait` instead: there the socket interface's
//! bookkeeping (an `epoll_ctl` each time a socket turns from writing to reading) cost more
//! than the visits it saves (`curl:100` at delay 0: 47.4k against 52.3k requests/s).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use curl::easy::{Easy2, Handler};
use curl::multi::{Easy2Handle, Events, Message, Multi, Socket};

use crate::measure::mono_ns;

/// At most this many transfers (and connections) per multi handle.
pub(super) const SHARD: usize = 256;

/// The epoll tag of the [`Shards::wake_on`] descriptor (a socket's tag holds its shard in the
/// upper half, never all ones).
const WAKE_TAG: u64 = u64::MAX;

/// `d` rounded up to whole milliseconds: libcurl's waits count in them and truncate, so a
/// wait under a millisecond would return at once and the loop would spin.
fn whole_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_nanos().div_ceil(1_000_000).min(u64::MAX as u128) as u64)
}

/// A socket's interest as libcurl's socket callback last gave it.
#[derive(Debug, Clone, Copy)]
struct Interest {
    input: bool,
    output: bool,
    remove: bool,
}

/// What libcurl's callbacks report, read by the loop after each call into libcurl.
#[derive(Default)]
struct Reported {
    /// (handle, socket, interest), in the order reported.
    sockets: Vec<(usize, Socket, Interest)>,
    /// Each handle's timer: when libcurl wants its timeout action, on [`mono_ns`].
    due_ns: Vec<Option<u64>>,
}

/// K multi handles, the easy handles each has free, and (K > 1) one epoll set for all their
/// sockets.
pub(super) struct Shards<H> {
    /// One multi handle driven by `curl_multi_perform`/`curl_multi_wait` (K = 1), or the
    /// socket interface.
    perform: bool,
    multis: Vec<Multi>,
    free: Vec<Vec<Easy2<H>>>,
    reported: Arc<Mutex<Reported>>,
    epoll: std::os::fd::OwnedFd,
    /// The sockets in the epoll set (each event carries its handle's number).
    registered: HashSet<Socket>,
    events: Vec<libc::epoll_event>,
    /// Where the search for a handle with a free easy handle starts (round robin).
    next: usize,
    /// A descriptor whose readiness also ends a wait ([`Shards::wake_on`]).
    wake: Option<std::os::fd::RawFd>,
}

fn lock(m: &Mutex<Reported>) -> MutexGuard<'_, Reported> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<H: Handler> Shards<H> {
    /// `workers` easy handles from `make`, over ceil(connections / SHARD) multi handles, each
    /// allowed its share of `connections` and, over HTTP/2, `streams` streams per connection.
    pub(super) fn new(
        workers: usize,
        connections: usize,
        streams: Option<usize>,
        mut make: impl FnMut() -> Easy2<H>,
    ) -> Result<Self, String> {
        let k = connections.div_ceil(SHARD).clamp(1, workers.max(1));
        let reported = Arc::new(Mutex::new(Reported {
            sockets: Vec::new(),
            due_ns: vec![None; k],
        }));
        let mut multis = Vec::with_capacity(k);
        let mut free = Vec::with_capacity(k);
        for i in 0..k {
            // Shares that differ by at most one.
            let share = |n: usize| n / k + usize::from(i < n % k);
            let mut multi = Multi::new();
            let cap = share(connections).max(1);
            let err = |e: curl::MultiError| format!("cannot configure libcurl multi: {e}");
            multi.set_max_total_connections(cap).map_err(err)?;
            multi.set_max_host_connections(cap).map_err(err)?;
            if let Some(s) = streams {
                multi.pipelining(false, true).map_err(err)?;
                multi.set_max_concurrent_streams(s).map_err(err)?;
            }
            if k == 1 {
                multis.push(multi);
                free.push((0..workers).map(|_| make()).collect());
                continue;
            }
            let r = reported.clone();
            multi
                .socket_function(move |socket, what, _| {
                    let interest = Interest {
                        input: what.input() || what.input_and_output(),
                        output: what.output() || what.input_and_output(),
                        remove: what.remove(),
                    };
                    lock(&r).sockets.push((i, socket, interest));
                })
                .map_err(err)?;
            let r = reported.clone();
            multi
                .timer_function(move |after| {
                    lock(&r).due_ns[i] = after.map(|d| mono_ns() + d.as_nanos() as u64);
                    true
                })
                .map_err(err)?;
            multis.push(multi);
            free.push((0..share(workers)).map(|_| make()).collect());
        }
        // SAFETY: epoll_create1 takes a flag and returns a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(format!(
                "cannot create an epoll set: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: fd is a new descriptor that nothing else owns.
        let epoll = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        Ok(Shards {
            perform: k == 1,
            multis,
            free,
            reported,
            epoll,
            registered: HashSet::new(),
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 1024],
            next: 0,
            wake: None,
        })
    }

    /// Whether some multi handle has a free easy handle.
    pub(super) fn has_free(&self) -> bool {
        self.free.iter().any(|f| !f.is_empty())
    }

    /// A free easy handle and the multi handle it belongs to, round robin over the handles.
    pub(super) fn take_free(&mut self) -> Option<(usize, Easy2<H>)> {
        let k = self.multis.len();
        for step in 0..k {
            let i = (self.next + step) % k;
            if let Some(easy) = self.free[i].pop() {
                self.next = (i + 1) % k;
                return Some((i, easy));
            }
        }
        None
    }

    /// Gives an easy handle back to multi handle `i`'s free ones.
    pub(super) fn put_free(&mut self, i: usize, easy: Easy2<H>) {
        self.free[i].push(easy);
    }

    /// Multi handle `i`.
    pub(super) fn multi(&self, i: usize) -> &Multi {
        &self.multis[i]
    }

    /// Takes a finished transfer out of multi handle `i`.
    pub(super) fn remove(
        &self,
        i: usize,
        handle: Easy2Handle<H>,
    ) -> Result<Easy2<H>, curl::MultiError> {
        self.multis[i].remove2(handle)
    }

    /// Calls `f` with each finished transfer's message, and the multi handle it is from.
    pub(super) fn messages(&self, mut f: impl FnMut(usize, Message<'_>)) {
        for (i, m) in self.multis.iter().enumerate() {
            m.messages(|msg| f(i, msg));
        }
    }

    /// Brings the epoll set up to date with what libcurl asked for.
    fn apply(&mut self) {
        let sockets = std::mem::take(&mut lock(&self.reported).sockets);
        let epfd = std::os::fd::AsRawFd::as_raw_fd(&self.epoll);
        for (i, socket, interest) in sockets {
            if interest.remove {
                if self.registered.remove(&socket) {
                    // SAFETY: a null event is allowed for EPOLL_CTL_DEL; a socket libcurl
                    // already closed left the set by itself (the call then fails, harmlessly).
                    unsafe {
                        libc::epoll_ctl(epfd, libc::EPOLL_CTL_DEL, socket, std::ptr::null_mut())
                    };
                }
                continue;
            }
            let mut ev = libc::epoll_event {
                events: (if interest.input { libc::EPOLLIN } else { 0 }
                    | if interest.output { libc::EPOLLOUT } else { 0 })
                    as u32,
                u64: ((i as u64) << 32) | socket as u32 as u64,
            };
            // A socket is added, or changed; one closed behind our back (its number now
            // another socket's) has left the set, so a change that finds nothing adds.
            let first = if self.registered.contains(&socket) {
                libc::EPOLL_CTL_MOD
            } else {
                libc::EPOLL_CTL_ADD
            };
            // SAFETY: ev is a valid epoll_event for the duration of each call.
            let mut rc = unsafe { libc::epoll_ctl(epfd, first, socket, &mut ev) };
            if rc != 0 {
                let second = if first == libc::EPOLL_CTL_MOD {
                    libc::EPOLL_CTL_ADD
                } else {
                    libc::EPOLL_CTL_MOD
                };
                // SAFETY: as above.
                rc = unsafe { libc::epoll_ctl(epfd, second, socket, &mut ev) };
            }
            if rc == 0 {
                self.registered.insert(socket);
            }
        }
    }

    /// Ends every [`Shards::wait`] as soon as `fd` is readable too (the open model's release
    /// timer), so the wait can be given in libcurl's whole milliseconds while a release that
    /// falls between them is still served on time.
    pub(super) fn wake_on(&mut self, fd: std::os::fd::RawFd) -> std::io::Result<()> {
        if !self.perform {
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: WAKE_TAG,
            };
            let epfd = std::os::fd::AsRawFd::as_raw_fd(&self.epoll);
            // SAFETY: both descriptors are open; `ev` is a valid event we own.
            if unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        self.wake = Some(fd);
        Ok(())
    }

    /// Waits up to `cap` (less when a libcurl timer is due sooner; rounded up to libcurl's
    /// whole milliseconds) for sockets or the [`Shards::wake_on`] descriptor to be ready, and
    /// lets libcurl act on the ready sockets and on its due timers.
    pub(super) fn wait(&mut self, cap: Duration) -> Result<(), curl::MultiError> {
        if self.perform {
            let multi = &self.multis[0];
            let wait = multi
                .get_timeout()
                .ok()
                .flatten()
                .map_or(cap, |t| t.min(cap));
            let mut extra = [curl::multi::WaitFd::new()];
            let extra: &mut [curl::multi::WaitFd] = match self.wake {
                Some(fd) => {
                    extra[0].set_fd(fd);
                    extra[0].poll_on_read(true);
                    &mut extra
                }
                None => &mut [],
            };
            // As before the socket interface: a failed wait (a signal) is a shorter one.
            let _ = multi.wait(extra, whole_ms(wait));
            return Ok(());
        }
        self.apply();
        let now = mono_ns();
        let soonest = lock(&self.reported).due_ns.iter().flatten().min().copied();
        let wait = soonest.map_or(cap, |due| {
            cap.min(Duration::from_nanos(due.saturating_sub(now)))
        });
        // epoll counts in milliseconds: round up, so a timer is never served early.
        let ms = whole_ms(wait).as_millis().min(i32::MAX as u128) as i32;
        let epfd = std::os::fd::AsRawFd::as_raw_fd(&self.epoll);
        // SAFETY: events has room for its length of epoll_event.
        let n = unsafe {
            libc::epoll_wait(epfd, self.events.as_mut_ptr(), self.events.len() as i32, ms)
        };
        for e in self.events.iter().take(n.max(0) as usize).copied() {
            if e.u64 == WAKE_TAG {
                continue;
            }
            let (i, socket) = ((e.u64 >> 32) as usize, e.u64 as u32 as Socket);
            let flags = e.events as i32;
            let mut what = Events::new();
            what.input(flags & (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLRDHUP) != 0)
                .output(flags & libc::EPOLLOUT != 0)
                .error(flags & libc::EPOLLERR != 0);
            if let Some(m) = self.multis.get(i) {
                m.action(socket, &what)?;
            }
        }
        self.serve_timers()
    }

    /// Lets libcurl run what is due: transfers just added, expired timers (and, with one
    /// multi handle, every transfer, through `curl_multi_perform`).
    pub(super) fn serve_timers(&mut self) -> Result<(), curl::MultiError> {
        if self.perform {
            self.multis[0].perform()?;
            return Ok(());
        }
        let now = mono_ns();
        for i in 0..self.multis.len() {
            let due = {
                let mut r = lock(&self.reported);
                match r.due_ns[i] {
                    Some(t) if t <= now => {
                        r.due_ns[i] = None;
                        true
                    }
                    _ => false,
                }
            };
            if due {
                self.multis[i].timeout()?;
            }
        }
        self.apply();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Nothing;
    impl Handler for Nothing {}

    #[test]
    fn transfers_split_over_multi_handles_of_at_most_shard_connections() {
        let one = Shards::new(100, 100, None, || Easy2::new(Nothing)).unwrap();
        assert!(one.perform);
        assert_eq!(one.free.iter().map(Vec::len).collect::<Vec<_>>(), [100]);
        let many = Shards::new(1_000, 1_000, None, || Easy2::new(Nothing)).unwrap();
        assert!(!many.perform);
        // ceil(1,000 / 256) = 4 handles of 250.
        assert_eq!(
            many.free.iter().map(Vec::len).collect::<Vec<_>>(),
            [250, 250, 250, 250]
        );
        let uneven = Shards::new(601, 601, None, || Easy2::new(Nothing)).unwrap();
        assert_eq!(
            uneven.free.iter().map(Vec::len).collect::<Vec<_>>(),
            [201, 200, 200]
        );
        // HTTP/2 over 2 connections: one handle carrying every stream.
        let h2 = Shards::new(1_000, 2, Some(500), || Easy2::new(Nothing)).unwrap();
        assert!(h2.perform);
        assert_eq!(h2.free[0].len(), 1_000);
    }

    #[test]
    fn free_handles_are_taken_round_robin_and_given_back_to_their_own() {
        let mut s = Shards::new(600, 600, None, || Easy2::new(Nothing)).unwrap();
        let taken: Vec<usize> = (0..4).map(|_| s.take_free().unwrap().0).collect();
        assert_eq!(taken, [0, 1, 2, 0]);
        let (i, easy) = s.take_free().unwrap();
        s.put_free(i, easy);
        assert_eq!(s.free[i].len(), 199);
    }
}
