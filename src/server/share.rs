//! The server-wide cap on requests in flight (`--max-in-flight`), with a share kept for every
//! client, so that one client cannot fill it and turn everyone else away.
//!
//! A client is a source address: an IPv4 address, or an IPv6 /64 (what one host, or one
//! customer of a provider, is given: a client with a /64 has 2^64 addresses to choose from);
//! an IPv4-mapped IPv6 address is its IPv4 address. The rule, for a cap `C`:
//!
//! - `C / 16` slots (none when `C < 16`) are kept free for clients under their share;
//! - a client's share is `(C - C / 16) / K`, `K` the clients with a connection open now;
//! - a client under its share takes any free slot; a client at or over it takes one only while
//!   more than the kept slots are free.
//!
//! One client alone can so hold `C - C / 16` requests; a newcomer beside a client that holds
//! them finds the kept slots free at once, and as the greedy client's requests end it takes
//! their slots back only down to the kept ones, which stay for clients under their share. The
//! rule wastes no slot (a client over its share uses what no one else asks for) and takes
//! nothing from a request already admitted. Anchors: max-min fairness, nginx's `limit_conn` per
//! address (one limit per key), HAProxy's per-source stick tables.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Body;
use axum::http::{Response, StatusCode};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Who a client is: an IPv4 address, or an IPv6 address's first 64 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientKey {
    /// An IPv4 address (IPv4-mapped IPv6 addresses included).
    V4(u32),
    /// The /64 an IPv6 address is in.
    V6(u64),
}

impl ClientKey {
    /// The client `peer` is.
    pub fn of(peer: SocketAddr) -> Self {
        match peer.ip() {
            IpAddr::V4(a) => ClientKey::V4(u32::from(a)),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => ClientKey::V4(u32::from(v4)),
                None => ClientKey::V6((u128::from(a) >> 64) as u64),
            },
        }
    }
}

impl std::fmt::Display for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            ClientKey::V4(a) => write!(f, "{}", std::net::Ipv4Addr::from(a)),
            ClientKey::V6(p) => write!(f, "{}/64", std::net::Ipv6Addr::from(u128::from(p) << 64)),
        }
    }
}

/// One client's requests in flight, shared by its connections.
#[derive(Debug)]
pub struct Client {
    key: ClientKey,
    in_flight: AtomicUsize,
}

/// The cap and the clients it keeps a share for. Cloned into every connection's service.
#[derive(Clone)]
pub struct InFlightCap {
    inner: Arc<Inner>,
}

struct Inner {
    slots: Arc<Semaphore>,
    cap: usize,
    /// Slots kept free for clients under their share.
    kept: usize,
    /// Each client with a connection open, and how many it has open.
    clients: Mutex<HashMap<ClientKey, (Arc<Client>, usize)>>,
    /// How many entries `clients` has, read without its lock on every request.
    connected: AtomicUsize,
}

/// A connection's hold on its client's entry: the entry goes with the client's last connection.
pub struct Membership {
    client: Arc<Client>,
    cap: Arc<Inner>,
}

/// A request's slot: given back, and the client's count lowered, when it is dropped.
pub struct Slot {
    _permit: OwnedSemaphorePermit,
    client: Arc<Client>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.client.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Why a request was not admitted: when every slot is taken, that (whoever holds them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Every slot is taken.
    Full { cap: usize },
    /// The client holds its share and no more than the kept slots are free.
    Share {
        client: ClientKey,
        held: usize,
        share: usize,
        clients: usize,
        cap: usize,
    },
}

impl InFlightCap {
    /// At most `cap` requests in flight, a share kept for every client.
    pub fn new(cap: usize) -> Self {
        let cap = cap.min(Semaphore::MAX_PERMITS);
        InFlightCap {
            inner: Arc::new(Inner {
                slots: Arc::new(Semaphore::new(cap)),
                cap,
                kept: cap / 16,
                clients: Mutex::new(HashMap::new()),
                connected: AtomicUsize::new(0),
            }),
        }
    }

    /// A connection from `peer` opens: its client is counted until its last connection goes.
    pub fn join(&self, peer: SocketAddr) -> Membership {
        let key = ClientKey::of(peer);
        let mut clients = self.inner.lock();
        let entry = clients.entry(key).or_insert_with(|| {
            let c = Client {
                key,
                in_flight: AtomicUsize::new(0),
            };
            (Arc::new(c), 0)
        });
        entry.1 += 1;
        let client = entry.0.clone();
        self.inner.connected.store(clients.len(), Ordering::Release);
        Membership {
            client,
            cap: self.inner.clone(),
        }
    }

    /// A slot for a request of `member`'s client, or why not.
    pub fn admit(&self, member: &Membership) -> Result<Slot, Refusal> {
        let inner = &*self.inner;
        let client = &member.client;
        let clients = inner.connected.load(Ordering::Acquire).max(1);
        let share = ((inner.cap - inner.kept) / clients).max(1);
        let held = client.in_flight.fetch_add(1, Ordering::AcqRel);
        let free = inner.slots.available_permits();
        if held >= share && free <= inner.kept && free > 0 {
            client.in_flight.fetch_sub(1, Ordering::AcqRel);
            return Err(Refusal::Share {
                client: client.key,
                held,
                share,
                clients,
                cap: inner.cap,
            });
        }
        match inner.slots.clone().try_acquire_owned() {
            Ok(permit) => Ok(Slot {
                _permit: permit,
                client: client.clone(),
            }),
            Err(_) => {
                client.in_flight.fetch_sub(1, Ordering::AcqRel);
                Err(Refusal::Full { cap: inner.cap })
            }
        }
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, HashMap<ClientKey, (Arc<Client>, usize)>> {
        // A panic while holding it leaves only counts behind, which stay right.
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        let mut clients = self.cap.lock();
        if let Some(entry) = clients.get_mut(&self.client.key) {
            entry.1 = entry.1.saturating_sub(1);
            if entry.1 == 0 {
                clients.remove(&self.client.key);
            }
        }
        self.cap.connected.store(clients.len(), Ordering::Release);
    }
}

impl Refusal {
    /// The 503 the refused request gets, handled by no route and costing nothing more.
    pub fn response(&self) -> Response<Body> {
        let why = match self {
            Refusal::Full { cap } => format!(
                "the server has {cap} requests in flight, its limit (--max-in-flight): try again later"
            ),
            Refusal::Share {
                client,
                held,
                share,
                clients,
                cap,
            } => format!(
                "this client ({client}) has {held} requests in flight, its share of the server's \
                 limit (--max-in-flight {cap}, shared by the {clients} clients connected, 1/16 \
                 kept free for newcomers is {share}): try again later"
            ),
        };
        let mut r = super::answer::error_response(StatusCode::SERVICE_UNAVAILABLE, why);
        r.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from_static("1"),
        );
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_client_is_an_ipv4_address_or_an_ipv6_slash_64() {
        let a = ClientKey::of(peer("[2001:db8:1:2::1]:5000"));
        let b = ClientKey::of(peer("[2001:db8:1:2:ffff::9]:6000"));
        let c = ClientKey::of(peer("[2001:db8:1:3::1]:5000"));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.to_string(), "2001:db8:1:2::/64");
        let v4 = ClientKey::of(peer("192.0.2.7:80"));
        assert_eq!(ClientKey::of(peer("[::ffff:192.0.2.7]:80")), v4);
        assert_eq!(v4.to_string(), "192.0.2.7");
        assert_ne!(v4, ClientKey::of(peer("192.0.2.8:80")));
    }

    #[test]
    fn a_lone_client_holds_all_but_the_kept_slots_and_a_newcomer_gets_them() {
        let cap = InFlightCap::new(160);
        let greedy = cap.join(peer("127.0.0.1:1000"));
        let mut held = Vec::new();
        while let Ok(slot) = cap.admit(&greedy) {
            held.push(slot);
        }
        assert_eq!(held.len(), 150, "160 less the 10 kept");
        assert!(matches!(
            cap.admit(&greedy),
            Err(Refusal::Share {
                held: 150,
                share: 150,
                clients: 1,
                ..
            })
        ));
        let newcomer = cap.join(peer("127.0.0.2:1000"));
        let mut theirs = Vec::new();
        while let Ok(slot) = cap.admit(&newcomer) {
            theirs.push(slot);
        }
        assert_eq!(theirs.len(), 10, "the kept slots, at once");
        assert!(matches!(
            cap.admit(&newcomer),
            Err(Refusal::Full { cap: 160 })
        ));
        // 50 of the greedy client's requests end: over its share (75 of 150 with two
        // clients), it takes their slots back only down to the kept 10, which stay for the
        // newcomer under its share.
        held.truncate(100);
        while let Ok(slot) = cap.admit(&greedy) {
            held.push(slot);
        }
        assert_eq!(held.len(), 140);
        assert!(matches!(
            cap.admit(&greedy),
            Err(Refusal::Share {
                share: 75,
                clients: 2,
                ..
            })
        ));
        while let Ok(slot) = cap.admit(&newcomer) {
            theirs.push(slot);
        }
        assert_eq!(theirs.len(), 20);
    }

    #[test]
    fn a_client_is_forgotten_with_its_last_connection() {
        let cap = InFlightCap::new(32);
        let one = cap.join(peer("10.0.0.1:1"));
        let two = cap.join(peer("10.0.0.1:2"));
        let other = cap.join(peer("10.0.0.2:1"));
        assert_eq!(cap.inner.connected.load(Ordering::Acquire), 2);
        drop(one);
        assert_eq!(cap.inner.connected.load(Ordering::Acquire), 2);
        drop(two);
        drop(other);
        assert_eq!(cap.inner.connected.load(Ordering::Acquire), 0);
        assert!(cap.inner.lock().is_empty());
    }

    #[test]
    fn small_caps_keep_nothing_back() {
        let cap = InFlightCap::new(4);
        let m = cap.join(peer("127.0.0.1:1"));
        let slots: Vec<_> = (0..4).map(|_| cap.admit(&m).unwrap()).collect();
        assert_eq!(slots.len(), 4);
        assert!(matches!(cap.admit(&m), Err(Refusal::Full { cap: 4 })));
    }
}
