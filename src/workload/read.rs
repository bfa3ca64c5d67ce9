//! `read:PATH:BYTESxCOUNT`: open a file once and make COUNT blocking reads of BYTES each
//! (the classic gil study's `io1`: 100 reads of 1 KiB from `/dev/urandom`).

use std::fs::File;
use std::io::Read;
use std::sync::Arc;

use super::{parse_count, Entry, Nature, TaskError, Workload, WorkloadOptions};
use crate::base::units;
use crate::workload::gil;

pub(super) const ENTRY: Entry = Entry {
    name: "read",
    usage: "read[:PATH[:BYTESxCOUNT]]",
    help: "COUNT blocking reads of BYTES from PATH (default /dev/urandom:1024x100); releases the GIL around each read",
    parse,
};

const DEFAULT_PATH: &str = "/dev/urandom";

fn parse(args: &str, _: &WorkloadOptions) -> Result<Arc<dyn Workload>, String> {
    let (path, shape) = match args.rsplit_once(':') {
        Some((p, s)) if s.contains('x') => (p, Some(s)),
        _ => (args, None),
    };
    let path = if path.is_empty() { DEFAULT_PATH } else { path };
    let (bytes, count) = match shape {
        None => (1024, 100),
        Some(s) => {
            let (b, c) = s
                .split_once('x')
                .ok_or_else(|| format!("'{s}' is not BYTESxCOUNT"))?;
            let bytes = units::parse_size(b)?;
            if bytes == 0 || bytes > 1 << 30 {
                return Err(format!("BYTES '{b}' must be between 1 and 1G"));
            }
            let count = parse_count("COUNT", c, 1 << 32)?;
            (bytes as usize, count)
        }
    };
    Ok(Arc::new(ReadFile {
        path: path.to_string(),
        bytes,
        count,
    }))
}

/// Blocking reads from one file.
pub struct ReadFile {
    path: String,
    bytes: usize,
    count: u64,
}

/// Opens `path` for reading if it is a regular file or a character device, without waiting:
/// opening a FIFO would wait for a writer, so it is opened non-blocking, checked, and only
/// then made blocking. The bind step's check and every task's open, in one place.
fn open_checked(path: &str) -> Result<File, String> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("cannot open '{path}': {e}"))?;
    let kind = file
        .metadata()
        .map_err(|e| format!("cannot open '{path}': {e}"))?
        .file_type();
    if !(kind.is_file() || kind.is_char_device()) {
        return Err(format!(
            "'{path}' is not a regular file or a character device (such as /dev/urandom)"
        ));
    }
    // SAFETY: fcntl on a descriptor this function owns; clearing O_NONBLOCK makes the reads
    // block as the workload means them to.
    let fd = file.as_raw_fd();
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(format!(
            "cannot open '{path}': {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(file)
}

impl Workload for ReadFile {
    fn acquire(&self) -> Result<(), String> {
        open_checked(&self.path).map(drop)
    }
    fn spec(&self) -> String {
        format!("read:{}:{}x{}", self.path, self.bytes, self.count)
    }
    fn nature(&self) -> Nature {
        Nature::BlockingIo
    }
    fn task(&self, _index: usize) -> Result<u64, TaskError> {
        let io = |e: std::io::Error| TaskError::new("io", format!("{}: {e}", self.path));
        let mut file =
            gil::released(|| open_checked(&self.path)).map_err(|e| TaskError::new("io", e))?;
        let mut buf = vec![0u8; self.bytes];
        let mut total = 0u64;
        for _ in 0..self.count {
            let n = gil::released(|| file.read(&mut buf)).map_err(io)?;
            total += n as u64;
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_count_bytes() {
        let w = parse("/dev/zero:4kx3", &WorkloadOptions::default()).unwrap();
        assert_eq!(w.task(0).unwrap(), 3 * 4096);
        assert_eq!(w.spec(), "read:/dev/zero:4096x3");
        let d = parse("", &WorkloadOptions::default()).unwrap();
        assert_eq!(d.spec(), "read:/dev/urandom:1024x100");
        assert_eq!(d.task(0).unwrap(), 102_400);
    }

    #[test]
    fn a_missing_file_a_folder_or_a_fifo_is_refused_by_acquire_and_by_the_task() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let missing = dir.path().join("missing");
        for (path, why) in [
            (dir.path(), "not a regular file"),
            (fifo.as_path(), "not a regular file"),
            (missing.as_path(), "cannot open"),
        ] {
            // Parsing is syntax only: the spec parses, and the world is looked at later.
            let w = parse(path.to_str().unwrap(), &WorkloadOptions::default()).unwrap();
            assert!(w.acquire().unwrap_err().contains(why), "{path:?}");
            let e = w.task(0).unwrap_err();
            assert_eq!(e.kind, "io");
            assert!(e.message.contains(why), "{path:?}: {}", e.message);
        }
    }
}
