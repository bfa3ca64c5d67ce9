//! `read:PATH:BYTESxCOUNT`: open a file once and make COUNT blocking reads of BYTES each
//! (the classic gil study's `io1`: 100 reads of 1 KiB from `/dev/urandom`).

use std::fs::File;
use std::io::Read;
use std::sync::Arc;

use super::{parse_count, Entry, Nature, TaskError, Workload, WorkloadOptions};
use crate::{gil, units};

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
    // Checked before opening: opening a FIFO would wait for a writer.
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot open '{path}': {e}"))?;
    let kind = meta.file_type();
    if !(kind.is_file() || std::os::unix::fs::FileTypeExt::is_char_device(&kind)) {
        return Err(format!(
            "'{path}' is not a regular file or a character device (such as /dev/urandom)"
        ));
    }
    File::open(path).map_err(|e| format!("cannot open '{path}': {e}"))?;
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

impl Workload for ReadFile {
    fn spec(&self) -> String {
        format!("read:{}:{}x{}", self.path, self.bytes, self.count)
    }
    fn nature(&self) -> Nature {
        Nature::BlockingIo
    }
    fn task(&self, _index: usize) -> Result<u64, TaskError> {
        let io = |e: std::io::Error| TaskError::new("io", format!("{}: {e}", self.path));
        let mut file = gil::released(|| File::open(&self.path)).map_err(io)?;
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
}
