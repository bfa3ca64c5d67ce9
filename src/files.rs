//! The files concur writes: one rule for every output a user names (`--json`, `--export`,
//! `--csv`, `--markdown`, `--html`, `--cmd-output`), checked before any work, and the private
//! temporary folders of what concur writes on its own (queues, CA files, certificates).
//!
//! The rule: the folder a named file goes in must exist (a typo in it is refused, not made);
//! the target is a file to create or truncate, never a folder, and the error names the flag.
//! Only concur's own default folder, `concur-results/`, is created.

use std::fs::File;
use std::path::Path;

use crate::error::{Error, Result};

/// concur's own folder, in the current directory: default results files, saved baselines, the
/// default SQLite queue.
pub const RESULTS_DIR: &str = "concur-results";

/// Checks, without creating it, that the file `flag` names at `path` could be created by
/// [`create_output`]: for a file made only once the plan's world is bound.
pub fn check_output(flag: &str, path: &Path) -> Result<()> {
    check_parent(flag, path)?;
    if path.is_dir() {
        return Err(Error::usage(format!(
            "{flag} '{}' is a folder; give a file name",
            path.display()
        )));
    }
    Ok(())
}

/// Creates (or truncates) the file `flag` names at `path`.
pub fn create_output(flag: &str, path: &Path) -> Result<File> {
    check_output(flag, path)?;
    std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|e| Error::usage(format!("{flag} '{}': cannot write it: {e}", path.display())))
}

/// Checks, without creating it, that [`create_output_dir`] could make the folder.
pub fn check_output_dir(flag: &str, path: &Path) -> Result<()> {
    check_parent(flag, path)?;
    if path.exists() && !path.is_dir() {
        return Err(Error::usage(format!(
            "{flag} '{}' is not a folder",
            path.display()
        )));
    }
    Ok(())
}

/// Makes sure the folder `flag` names at `path` exists, creating it (not its parents).
pub fn create_output_dir(flag: &str, path: &Path) -> Result<()> {
    check_output_dir(flag, path)?;
    match std::fs::create_dir(path) {
        Ok(()) => Ok(()),
        Err(_) if path.is_dir() => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(Error::usage(format!(
            "{flag} '{}' is not a folder",
            path.display()
        ))),
        Err(e) => Err(Error::usage(format!(
            "{flag} '{}': cannot create the folder: {e}",
            path.display()
        ))),
    }
}

/// The folder a named output goes in must exist.
fn check_parent(flag: &str, path: &Path) -> Result<()> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) if !dir.is_dir() => Err(Error::usage(format!(
            "{flag} '{}': the folder '{}' does not exist (create it first)",
            path.display(),
            dir.display()
        ))),
        _ => Ok(()),
    }
}

/// Creates concur's own default folder (`concur-results`, its `baselines`) with its parents.
pub fn create_default_dir(dir: impl AsRef<Path>) -> Result<()> {
    let dir = dir.as_ref();
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::usage(format!("cannot create the folder '{}': {e}", dir.display())))
}

/// A new folder of concur's own in the temporary directory, readable by its owner only
/// (mode 700, a random name made with `O_EXCL` semantics: nobody can plant a file or a
/// symlink in it beforehand); removed with everything in it when dropped.
pub fn private_temp_dir(purpose: &str) -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&format!("concur-{purpose}-"))
        .tempdir()
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
