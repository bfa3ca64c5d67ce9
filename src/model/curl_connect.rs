//! `curl:W` past descriptor 1,023 with a libcurl that waits on its sockets with `select()`.
//!
//! curl-sys builds libcurl with `HAVE_POLL_FINE`, which curl 8.22 renamed `HAVE_POLL`; without
//! `HAVE_POLL`, every wait inside libcurl goes through `select()`, which cannot watch a
//! descriptor numbered 1,024 or more (`FD_SETSIZE`). The wait that matters is its connect
//! check (lib/cf-socket.c, `SOCKET_WRITABLE(sock, 0)`): on such a socket it fails before any
//! system call, and every connect past the 1,023rd descriptor ends "Could not connect to
//! server" (curl/curl#15080). concur's own build sets `CFLAGS=-DHAVE_POLL` (.cargo/config.toml),
//! but that file does not apply when concur is built as another crate's dependency, and no
//! build script of ours can change how curl-sys compiles.
//!
//! So a run asks libcurl once whether it can wait on a high descriptor ([`select_bound`]:
//! `curl_multi_wait` on a pipe duplicated past 1,023 fails in a select() build, before any
//! wait), and if it cannot, concur connects libcurl's sockets itself: its own
//! CURLOPT_OPENSOCKETFUNCTION makes each socket and starts a non-blocking `connect()` on every
//! TCP one, and its CURLOPT_SOCKOPTFUNCTION tells libcurl they are already
//! connected (`CURL_SOCKOPT_ALREADY_CONNECTED`), so libcurl skips its connect check and sends
//! at once; its first send meets `EAGAIN` until the handshake is done and waits for the socket
//! to be writable through concur's own epoll (libcurl's socket interface, src/model/curl_shards.rs).
//! A connect that fails then shows as a send failure with the connect's error
//! (`ECONNREFUSED`…): [`connect_failed`] reads it as the connect failure it is.
//!
//! What stays select()-bound in such a build: libcurl's liveness check of an idle connection
//! before reuse (once a connection has been idle a second), which on a high descriptor reads
//! as dead, so such a connection is opened again instead of reused; and `curl_multi_wait`,
//! which concur uses only up to 256 transfers. Neither loses a request. With `HAVE_POLL`
//! (concur's own build) none of this is installed.

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

use curl::easy::{Easy2, Handler};

/// Not in curl-sys: the sockopt callback's "already connected" answer (curl.h).
const CURL_SOCKOPT_OK: c_int = 0;
const CURL_SOCKOPT_ALREADY_CONNECTED: c_int = 2;

/// The first descriptor `select()` cannot watch.
const FD_SETSIZE: c_int = libc::FD_SETSIZE as c_int;

type OpenSocketFn = curl_sys::curl_opensocket_callback;
type SockoptFn =
    extern "C" fn(*mut c_void, curl_sys::curl_socket_t, curl_sys::curlsocktype) -> c_int;

thread_local! {
    /// The socket [`open_socket`] last connected itself, until [`sockopt`] (which libcurl calls
    /// right after, on the same thread, for the same socket) tells libcurl so.
    static CONNECTED_HERE: std::cell::Cell<Option<c_int>> = const { std::cell::Cell::new(None) };
}

/// Whether this process's libcurl waits with `select()`, so that it cannot use a socket
/// numbered 1,024 or more (asked once: a `curl_multi_wait` on a pipe duplicated past 1,023).
/// `false` when no descriptor that high can be made (the limit of open files is at most
/// 1,024): then no socket of ours is that high either.
pub(super) fn select_bound() -> bool {
    static BOUND: OnceLock<bool> = OnceLock::new();
    *BOUND.get_or_init(probe)
}

fn probe() -> bool {
    curl::init();
    let mut ends = [0 as c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return false;
    }
    // SAFETY: fcntl on a descriptor we own; F_DUPFD_CLOEXEC returns a new one ≥ the argument.
    let high = unsafe { libc::fcntl(ends[0], libc::F_DUPFD_CLOEXEC, FD_SETSIZE) };
    let bound = if high >= FD_SETSIZE {
        // SAFETY: a fresh multi handle, waited on with one extra descriptor of ours for no
        // time, then cleaned up; every pointer passed outlives the call.
        unsafe {
            let multi = curl_sys::curl_multi_init();
            if multi.is_null() {
                false
            } else {
                let mut fd = curl_sys::curl_waitfd {
                    fd: high,
                    events: curl_sys::CURL_WAIT_POLLIN,
                    revents: 0,
                };
                let mut n: c_int = 0;
                let code = curl_sys::curl_multi_wait(multi, &mut fd, 1, 0, &mut n);
                curl_sys::curl_multi_cleanup(multi);
                code != curl_sys::CURLM_OK
            }
        }
    } else {
        false
    };
    for fd in [ends[0], ends[1], high] {
        if fd >= 0 {
            // SAFETY: descriptors this function opened, closed once.
            unsafe { libc::close(fd) };
        }
    }
    bound
}

/// Sets `easy` to connect its high sockets itself, when this process's libcurl is
/// [`select_bound`]; nothing otherwise. Again after every `reset()` (which drops callbacks).
pub(super) fn install<H: Handler>(easy: &mut Easy2<H>) -> Result<(), curl::Error> {
    if !select_bound() {
        return Ok(());
    }
    let open: OpenSocketFn = open_socket;
    let opt: SockoptFn = sockopt;
    // SAFETY: both options take a function of libcurl's prototype; neither callback uses its
    // data pointer, so none is set (the crate's own open-socket data pointer is left as it is
    // and unused).
    let codes = unsafe {
        [
            curl_sys::curl_easy_setopt(easy.raw(), curl_sys::CURLOPT_OPENSOCKETFUNCTION, open),
            curl_sys::curl_easy_setopt(easy.raw(), curl_sys::CURLOPT_SOCKOPTFUNCTION, opt),
        ]
    };
    match codes.iter().find(|&&c| c != curl_sys::CURLE_OK) {
        Some(&code) => Err(curl::Error::new(code)),
        None => Ok(()),
    }
}

/// libcurl's socket, made here: as libcurl makes it, and for a TCP socket, connecting already
/// (non-blocking) to the address libcurl was about to connect to. Every TCP socket, not only
/// those numbered 1,024 or more: then no connect of the run goes through libcurl's select()
/// (one `pselect6` a connect below 1,024 otherwise, seen with strace), and every connect
/// fails, if it does, the same way.
extern "C" fn open_socket(
    _data: *mut c_void,
    _purpose: curl_sys::curlsocktype,
    address: *mut curl_sys::curl_sockaddr,
) -> curl_sys::curl_socket_t {
    CONNECTED_HERE.with(|c| c.set(None));
    if address.is_null() {
        return curl_sys::CURL_SOCKET_BAD;
    }
    // SAFETY: libcurl passes a valid address for the duration of the call; its `addr` field
    // is the start of a sockaddr of `addrlen` bytes (libcurl's storage holds the whole of it).
    let (family, socktype, protocol, addr, len) = unsafe {
        let a = &*address;
        (
            a.family,
            a.socktype,
            a.protocol,
            std::ptr::addr_of!(a.addr),
            a.addrlen,
        )
    };
    // SAFETY: socket() with libcurl's own arguments.
    let fd = unsafe { libc::socket(family, socktype | libc::SOCK_CLOEXEC, protocol) };
    let tcp = (family == libc::AF_INET || family == libc::AF_INET6)
        && socktype & 0xf == libc::SOCK_STREAM;
    if fd < 0 || !tcp {
        return fd;
    }
    // SAFETY: fcntl and connect on the socket just made; `addr` is `len` bytes long.
    let started = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0
            && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) == 0
            && (libc::connect(fd, addr, len) == 0
                || std::io::Error::last_os_error().raw_os_error() == Some(libc::EINPROGRESS))
    };
    if started {
        CONNECTED_HERE.with(|c| c.set(Some(fd)));
        fd
    } else {
        // The connect failed at once (no route, no port): libcurl sees the socket it asked
        // for refused, "Could not connect", as for a connect of its own that failed.
        // SAFETY: the socket made above, closed once.
        unsafe { libc::close(fd) };
        curl_sys::CURL_SOCKET_BAD
    }
}

/// Tells libcurl that the socket [`open_socket`] just connected is connected.
extern "C" fn sockopt(
    _data: *mut c_void,
    fd: curl_sys::curl_socket_t,
    _purpose: curl_sys::curlsocktype,
) -> c_int {
    match CONNECTED_HERE.with(|c| c.take()) {
        Some(ours) if ours == fd => CURL_SOCKOPT_ALREADY_CONNECTED,
        _ => CURL_SOCKOPT_OK,
    }
}

/// Whether a transfer that failed with `e` failed to connect: libcurl's own connect failure,
/// or, with a [`select_bound`] libcurl whose socket concur connected, the send or receive
/// failure that carries the connect's error (the operating system's `errno`) before any
/// response.
pub(super) fn connect_failed(e: &curl::Error, errno: Option<i32>, status: u32) -> bool {
    e.is_couldnt_connect()
        || (select_bound()
            && status == 0
            && (e.is_send_error() || e.is_recv_error())
            && matches!(
                errno,
                Some(libc::ECONNREFUSED | libc::ETIMEDOUT | libc::EHOSTUNREACH | libc::ENETUNREACH)
            ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// concur's own build compiles libcurl with `HAVE_POLL` (.cargo/config.toml): its libcurl
    /// waits with poll(), so nothing is installed. (tests/dependent_build.rs builds concur as
    /// another crate's dependency, without that flag, and sees the other answer.)
    #[test]
    fn this_build_waits_with_poll() {
        crate::os::process::raise_nofile_limit();
        assert!(!select_bound());
    }
}
