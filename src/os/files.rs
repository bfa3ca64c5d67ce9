//! The files concur writes: one rule for every output a user names (`--json`, `--export`,
//! `--csv`, `--markdown`, `--html`, `--cmd-output`), checked before any work, and the private
//! temporary folders of what concur writes on its own (queues, CA files, certificates).
//!
//! The rule: the folder a named file goes in must exist (a typo in it is refused, not made);
//! the target is a file to create or truncate, never a folder, and the error names the flag.
//! Only concur's own default folder, `concur-results/`, is created.

use std::fs::File;
use std::path::Path;

use crate::base::error::{Error, Result};

/// concur's own folder, in the current directory: default results files, saved baselines, the
/// default SQLite queue.
pub const RESULTS_DIR: &str = "concur-results";

/// Checks, without creating it, that the file `flag` names at `path` could be created by
/// [`create_output`]: for a file made only once the plan's world is bound.
pub fn check_output(flag: &str, path: &Path) -> Result<()> {
    check_parent(flag, path)?;
    if path.is_dir() {
        return Err(Error::flag(
            flag,
            format!("{flag} '{}' is a folder; give a file name", path.display()),
        ));
    }
    Ok(())
}

/// Creates (or truncates) the file `flag` names at `path`. A symbolic link there is not
/// followed (`O_NOFOLLOW`), and a file that another user owns is not truncated: in a folder
/// others can write to, either could have been planted to make concur overwrite a file of its
/// user's (or root's) choosing. A device (`/dev/null`) is written as it is.
pub fn create_output(flag: &str, path: &Path) -> Result<File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    check_output(flag, path)?;
    let cannot = |e: std::io::Error| {
        let why = if e.raw_os_error() == Some(libc::ELOOP) {
            "it is a symbolic link, which concur does not follow for what it writes; name the file itself".to_string()
        } else {
            e.to_string()
        };
        Error::flag(
            flag,
            format!("{flag} '{}': cannot write it: {why}", path.display()),
        )
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.is_file() {
        if meta.uid() != me {
            return Err(Error::flag(flag, format!(
                "{flag} '{}': cannot write it: it belongs to another user (uid {}); concur does not overwrite a file it does not own",
                path.display(),
                meta.uid()
            )));
        }
        file.set_len(0).map_err(cannot)?;
    }
    Ok(file)
}

/// Checks, without creating it, that [`create_output_dir`] could make the folder.
pub fn check_output_dir(flag: &str, path: &Path) -> Result<()> {
    check_parent(flag, path)?;
    if path.exists() && !path.is_dir() {
        return Err(Error::flag(
            flag,
            format!("{flag} '{}' is not a folder", path.display()),
        ));
    }
    Ok(())
}

/// Makes sure the folder `flag` names at `path` exists, creating it (not its parents).
pub fn create_output_dir(flag: &str, path: &Path) -> Result<()> {
    check_output_dir(flag, path)?;
    match std::fs::create_dir(path) {
        Ok(()) => Ok(()),
        Err(_) if path.is_dir() => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(Error::flag(
            flag,
            format!("{flag} '{}' is not a folder", path.display()),
        )),
        Err(e) => Err(Error::flag(
            flag,
            format!("{flag} '{}': cannot create the folder: {e}", path.display()),
        )),
    }
}

/// The folder a named output goes in must exist.
fn check_parent(flag: &str, path: &Path) -> Result<()> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) if !dir.is_dir() => Err(Error::flag(
            flag,
            format!(
                "{flag} '{}': the folder '{}' does not exist (create it first)",
                path.display(),
                dir.display()
            ),
        )),
        _ => Ok(()),
    }
}

/// Creates concur's own default folder (`concur-results`, its `baselines`) with its parents,
/// and refuses it when it is not concur's user's to trust: a symbolic link, a folder another
/// user owns, or one everybody may write to (without the sticky bit). Another user who made
/// `concur-results/` first in a shared directory could otherwise fill it with links that
/// make the next run overwrite files of their choosing.
pub fn create_default_dir(dir: impl AsRef<Path>) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let dir = dir.as_ref();
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::usage(format!("cannot create the folder '{}': {e}", dir.display())))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    // The default folder and every folder of it below the current directory.
    for part in dir.ancestors().filter(|p| !p.as_os_str().is_empty()) {
        let meta = std::fs::symlink_metadata(part).map_err(|e| {
            Error::usage(format!("cannot read the folder '{}': {e}", part.display()))
        })?;
        let why = if meta.file_type().is_symlink() {
            Some("it is a symbolic link".to_string())
        } else if meta.uid() != me {
            Some(format!("it belongs to another user (uid {})", meta.uid()))
        } else if meta.mode() & 0o1002 == 0o002 {
            Some("everybody may write to it".to_string())
        } else {
            None
        };
        if let Some(why) = why {
            return Err(Error::usage(format!(
                "the results folder '{}' cannot be trusted: {why}; remove it, or name the outputs with --json/--export",
                part.display()
            )));
        }
        if part == Path::new(RESULTS_DIR) {
            break;
        }
    }
    Ok(())
}

/// A new folder of concur's own in the temporary directory, readable by its owner only
/// (mode 700, a random name made with `O_EXCL` semantics: nobody can plant a file or a
/// symlink in it beforehand); removed with everything in it when dropped.
pub fn private_temp_dir(purpose: &str) -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&format!("concur-{purpose}-"))
        .tempdir()
}

/// The largest `--body` file: 64 MiB. The body is held in memory once and sent with every
/// request; 64 MiB is far above what a load test uploads (and 32 times the delay server's own
/// `/echo` limit), while a file named by mistake (a disk image, `/dev/zero` through a symlink)
/// is refused before it is read rather than filling the memory.
pub const MAX_BODY_FILE: u64 = 64 << 20;

/// The largest certificate or key file (`--cacert`, `--tls-cert`, `--tls-key`): 1 MiB, some
/// 700 PEM certificates (the whole Mozilla root store is about 220 KiB).
pub const MAX_PEM_FILE: u64 = 1 << 20;

/// What a path is when it is not a regular file, in words (`"a FIFO"`), or `None` for a
/// regular file.
fn not_regular(kind: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    Some(if kind.is_file() {
        return None;
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a file"
    })
}

/// Opens `path` for reading, refusing anything but a regular file: a directory, a device
/// (`/dev/zero` never ends) or a FIFO (which would block). The file is opened without blocking
/// and then checked, so that opening a FIFO cannot hang and nothing can be swapped in between
/// the check and the open. The error says why in words (`it is a FIFO`, or the system's
/// error), for the caller to name the flag or the file.
pub fn open_regular(path: &Path) -> std::result::Result<File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| e.to_string())?;
    let kind = file.metadata().map_err(|e| e.to_string())?.file_type();
    match not_regular(kind) {
        None => Ok(file),
        Some(what) => Err(format!("it is {what}")),
    }
}

/// Reads the regular file the flag `flag` names at `path`, at most `max` bytes; anything else
/// is refused with one line naming the flag, the path, why, and what is `allowed`
/// (`--cacert 'F' is a FIFO (allowed: …)`). Only regular files are opened ([`open_regular`]),
/// and a file over `max` is refused by its size before a byte of it is read.
pub fn read_regular(flag: &str, path: &Path, max: u64, allowed: &str) -> Result<Vec<u8>> {
    use std::io::Read;
    let refuse = |why: String| {
        Error::flag(
            flag,
            format!(
                "{flag} '{}' cannot be read: {why} (allowed: {allowed})",
                path.display()
            ),
        )
    };
    let file = open_regular(path).map_err(refuse)?;
    let over = |n: u64| {
        refuse(format!(
            "it holds {n} bytes, over the limit of {}",
            size(max)
        ))
    };
    let len = file.metadata().map_err(|e| refuse(e.to_string()))?.len();
    if len > max {
        return Err(over(len));
    }
    // The size may change under us: read one byte past the limit to see it.
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refuse(e.to_string()))?;
    if bytes.len() as u64 > max {
        return Err(over(bytes.len() as u64));
    }
    Ok(bytes)
}

/// `n` bytes in words: `64 MiB`, `1 MiB`, `512 KiB`, `100 bytes`.
fn size(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// A path carried to a child process inside a JSON request, as its bytes: a file name need
/// not be UTF-8, and JSON strings must be.
pub mod path_bytes {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::path::PathBuf;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the path's bytes.
    pub fn serialize<S: Serializer>(p: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        match p {
            Some(p) => s.serialize_some(p.as_os_str().as_bytes()),
            None => s.serialize_none(),
        }
    }

    /// Reads the path's bytes.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        Ok(Option::<Vec<u8>>::deserialize(d)?
            .map(|b| PathBuf::from(std::ffi::OsString::from_vec(b))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_folder_is_refused_naming_the_flag_and_a_folder_is_not_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let e = create_output("--json", &dir.path().join("no/x.jsonl")).unwrap_err();
        assert!(e.to_string().starts_with("--json '"), "{e}");
        assert!(e.to_string().contains("does not exist"), "{e}");
        assert!(!dir.path().join("no").exists());
        let e = create_output("--csv", dir.path()).unwrap_err();
        assert!(e.to_string().contains("is a folder"), "{e}");
        create_output("--csv", &dir.path().join("x.csv")).unwrap();
        create_output_dir("--cmd-output", &dir.path().join("out")).unwrap();
        create_output_dir("--cmd-output", &dir.path().join("out")).unwrap();
        let e = create_output_dir("--cmd-output", &dir.path().join("x.csv")).unwrap_err();
        assert!(e.to_string().contains("is not a folder"), "{e}");
    }

    #[test]
    fn read_regular_refuses_what_is_not_a_bounded_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_regular("--x", Path::new("/dev/zero"), 10, "a small file").unwrap_err();
        assert_eq!(
            e.to_string(),
            "--x '/dev/zero' cannot be read: it is a character device (allowed: a small file)"
        );
        let e = read_regular("--x", dir.path(), 10, "a small file").unwrap_err();
        assert!(e.to_string().contains("it is a directory"), "{e}");
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_regular("--x", &path, 10, "-").unwrap(), b"0123456789");
        let e = read_regular("--x", &path, 9, "-").unwrap_err();
        assert!(
            e.to_string()
                .contains("it holds 10 bytes, over the limit of 9 bytes"),
            "{e}"
        );
        let e = read_regular("--x", &dir.path().join("none"), 9, "-").unwrap_err();
        assert!(e.to_string().contains("No such file"), "{e}");
    }

    #[test]
    fn a_path_that_is_not_utf8_travels_whole() {
        use std::os::unix::ffi::OsStringExt;
        #[derive(serde::Serialize, serde::Deserialize)]
        struct W {
            #[serde(with = "path_bytes")]
            p: Option<std::path::PathBuf>,
        }
        let p = std::path::PathBuf::from(std::ffi::OsString::from_vec(b"x\xff\xfe".to_vec()));
        let text = serde_json::to_string(&W { p: Some(p.clone()) }).unwrap();
        let back: W = serde_json::from_str(&text).unwrap();
        assert_eq!(back.p, Some(p));
    }
}
