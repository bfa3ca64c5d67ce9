//! Finding the user's toolchains and running them briefly: a program on `PATH`, a short
//! helper command's output, a path quoted for `sh -c`, and the folder `concur classic install`
//! fills.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where `concur classic install` puts its virtual environment: `$CONCUR_CLASSIC_HOME`, else
/// `$XDG_DATA_HOME/concur/classic`, else `~/.local/share/concur/classic`.
pub fn home() -> PathBuf {
    if let Some(h) = std::env::var_os("CONCUR_CLASSIC_HOME") {
        return PathBuf::from(h);
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(std::env::temp_dir);
    data.join("concur/classic")
}

/// The file `name` in the first folder of `PATH` that has it.
pub(super) fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Runs a short helper command and returns its stdout, or why it failed.
pub(super) fn output(cmd: &mut Command) -> std::result::Result<String, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(err.lines().last().unwrap_or("failed").to_string());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A shell word for a path (the programs' commands run under `sh -c`).
pub(super) fn quoted(p: &Path) -> String {
    let s = p.to_string_lossy();
    shlex::try_quote(&s).map_or_else(|_| s.to_string(), |q| q.to_string())
}
