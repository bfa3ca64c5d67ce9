//! Memory shared between a parent and a child of our own binary: a memfd the parent makes and
//! maps, handed to the child as a descriptor (`process::PAGE_FD`), mapped `MAP_SHARED` by the
//! child too. Its size is sealed where the kernel allows (a memfd's `F_SEAL_SHRINK` and
//! `F_SEAL_GROW`): the parent reads what the child wrote, and a file the child shrank under
//! its mapping would turn the parent's next read into SIGBUS.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

/// A shared mapping of `len` bytes of a memfd (or, where memfds are missing, of an unlinked
/// file of mode 0600), unmapped when dropped.
pub struct SharedMemory {
    ptr: NonNull<u8>,
    len: usize,
    /// The descriptor to hand to a child (the parent's side only).
    fd: Option<OwnedFd>,
}

// SAFETY: the mapping is plain memory that stays mapped as long as the value lives; what is
// read and written through it is the user's to synchronise (atomics).
unsafe impl Send for SharedMemory {}
// SAFETY: as above.
unsafe impl Sync for SharedMemory {}

impl SharedMemory {
    /// `len` bytes of zeroes, named `name` (as `/proc/PID/fd` shows it), mapped here; the
    /// descriptor is close-on-exec (it reaches a child only where a spawn puts it).
    pub fn create(name: &std::ffi::CStr, len: usize) -> io::Result<SharedMemory> {
        if len == 0 {
            return Err(io::Error::other("shared memory of 0 bytes"));
        }
        let (fd, sealable) = match memfd(name) {
            Ok(fd) => (fd, true),
            Err(_) => (OwnedFd::from(super::process::unlinked_temp_file()?), false),
        };
        // SAFETY: ftruncate on a descriptor we own.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if sealable {
            // SAFETY: fcntl on a descriptor we own; a failure leaves the size unsealed.
            unsafe {
                libc::fcntl(
                    fd.as_raw_fd(),
                    libc::F_ADD_SEALS,
                    libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
                )
            };
        }
        let ptr = map(fd.as_raw_fd(), len)?;
        Ok(SharedMemory {
            ptr,
            len,
            fd: Some(fd),
        })
    }

    /// In the child: maps the memory on descriptor `fd`, which must hold from `min` to `max`
    /// bytes, and closes the descriptor (nothing the child starts inherits it).
    pub fn attach(fd: RawFd, min: usize, max: usize) -> io::Result<SharedMemory> {
        // SAFETY: the caller hands over `fd`, which nothing else in this process owns; the
        // File closes it when this function returns.
        let file = unsafe { File::from_raw_fd(fd) };
        let len = file.metadata()?.len();
        if len < min as u64 || len > max as u64 {
            let expected = if min == max {
                format!("not {min}")
            } else {
                format!("expected {min} to {max}")
            };
            return Err(io::Error::other(format!(
                "the shared memory on fd {fd} is {len} bytes, {expected}"
            )));
        }
        let len = len as usize;
        let ptr = map(file.as_raw_fd(), len)?;
        Ok(SharedMemory { ptr, len, fd: None })
    }

    /// The descriptor to hand to a child (the creating side only).
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(|f| f.as_fd())
    }

    /// Its start (page-aligned).
    pub fn as_ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
}

impl Drop for SharedMemory {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `map` with `len` bytes, and nothing borrowed from
        // it outlives this value.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

fn memfd(name: &std::ffi::CStr) -> io::Result<OwnedFd> {
    // SAFETY: the name is NUL-terminated; a non-negative result is a descriptor that nothing
    // else owns.
    unsafe {
        let fd = libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// `len` bytes of `fd` from its start, mapped shared, read and write.
fn map(fd: RawFd, len: usize) -> io::Result<NonNull<u8>> {
    // SAFETY: a fresh shared mapping of a descriptor at least `len` bytes long; the kernel
    // returns page-aligned memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(p.cast()).ok_or_else(|| io::Error::other("mmap returned null"))
}
