//! The exporter seam (hyperfine's `export/`): every output format is an [`Exporter`] in a file
//! of its own plus one line in [`super::FORMATS`]; an [`ExportManager`] checks the targets
//! before any work (at most one on stdout, every file creatable), then writes each rendering.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use super::Report;
use crate::base::error::{Error, Result};

/// One output format: renders a whole report (cells, comparison, advice) as text.
pub trait Exporter: Sync {
    /// The rendering.
    fn render(&self, r: &Report) -> String;
}

/// One registered format: its name (for `--format` and `--export`), a line of help, whether
/// it may go to stdout, and the exporter.
pub struct FormatEntry {
    /// The name users type.
    pub name: &'static str,
    /// What it is, in one line.
    pub help: &'static str,
    /// Whether it may be written to stdout (HTML is a file to open).
    pub stdout: bool,
    /// The renderer.
    pub exporter: &'static dyn Exporter,
}

/// Where a rendering goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// Standard output.
    Stdout,
    /// A file, created (or truncated) before any work.
    File(PathBuf),
}

impl Target {
    /// `-` is stdout, anything else a file.
    pub fn from_arg(p: PathBuf) -> Target {
        if p.as_os_str() == "-" {
            Target::Stdout
        } else {
            Target::File(p)
        }
    }
}

/// One rendering asked for: a format name and its target.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    /// A name from [`super::FORMATS`].
    pub format: String,
    /// Where it goes.
    pub target: Target,
    /// The flag that asked for it (`--csv`, `--export`…), named when its file is refused.
    pub flag: &'static str,
}

impl Export {
    /// Parses `FORMAT=FILE` (`--export`), `-` as the file meaning stdout. The file name may
    /// be any bytes, as every path on the command line; the format is text.
    pub fn parse(arg: &std::ffi::OsStr) -> std::result::Result<Export, String> {
        use std::os::unix::ffi::OsStrExt;
        let bytes = arg.as_bytes();
        let shown = arg.to_string_lossy();
        let (format, file) = match bytes.iter().position(|&b| b == b'=') {
            Some(k) => (&bytes[..k], &bytes[k + 1..]),
            None => {
                return Err(format!(
                    "'{shown}' is not FORMAT=FILE (formats: {})",
                    super::format_names().join(", ")
                ))
            }
        };
        let format = std::str::from_utf8(format)
            .map_err(|_| format!("the format of '{shown}' is not valid UTF-8"))?;
        if file.is_empty() {
            return Err(format!(
                "'{shown}' names no file (FORMAT=FILE, '-' for stdout)"
            ));
        }
        Ok(Export {
            format: format.to_string(),
            target: Target::from_arg(PathBuf::from(std::ffi::OsStr::from_bytes(file))),
            flag: "--export",
        })
    }
}

/// Looks a format up by name; the error names it and the allowed ones.
pub fn format(name: &str) -> Result<&'static FormatEntry> {
    super::FORMATS
        .iter()
        .find(|f| f.name == name)
        .ok_or_else(|| {
            Error::usage(format!(
                "unknown output format '{name}' (allowed: {})",
                super::format_names().join(", ")
            ))
        })
}

/// The renderings of a study, checked and with their files open, waiting for the report.
pub struct ExportManager {
    outputs: Vec<(&'static FormatEntry, Option<File>)>,
}

impl ExportManager {
    /// Checks every export and creates its file now, so that a bad name or an unwritable path
    /// is refused before any work. The one place that decides what goes to stdout: the
    /// exports to `-`, the results file when it is `-` (`results`), and else `stdout_format`
    /// (`--format`, the table by default); two of them there is an error.
    pub fn open(
        exports: &[Export],
        stdout_format: Option<&str>,
        results: Option<&std::path::Path>,
    ) -> Result<ExportManager> {
        let mut outputs = Vec::new();
        let mut on_stdout: Vec<&str> = Vec::new();
        let results_on_stdout =
            results.is_some_and(|p| Target::from_arg(p.to_path_buf()) == Target::Stdout);
        if results_on_stdout {
            on_stdout.push("the results file");
        }
        let mut exports = exports.to_vec();
        let stdout_free = !results_on_stdout && !exports.iter().any(|e| e.target == Target::Stdout);
        if let (true, Some(f)) = (stdout_free, stdout_format) {
            exports.push(Export {
                format: f.to_string(),
                target: Target::Stdout,
                flag: "--format",
            });
        }
        for e in &exports {
            let f = format(&e.format)?;
            match &e.target {
                Target::Stdout => {
                    if !f.stdout {
                        return Err(Error::flag(e.flag, format!(
                            "{} {}: the {} report needs a file name, not stdout (formats for stdout: {})",
                            e.flag,
                            f.name,
                            f.name,
                            super::stdout_format_names().join(", ")
                        )));
                    }
                    on_stdout.push(f.name);
                    outputs.push((f, None));
                }
                Target::File(p) => {
                    let file = crate::os::files::create_output(e.flag, p)?;
                    outputs.push((f, Some(file)));
                }
            }
        }
        if on_stdout.len() > 1 {
            return Err(Error::usage(format!(
                "only one output can go to stdout ('-'), got {}",
                on_stdout.join(" and ")
            )));
        }
        Ok(ExportManager { outputs })
    }

    /// Writes every rendering: files first, then stdout.
    pub fn write(self, r: &Report) -> Result<()> {
        let mut stdout = Vec::new();
        for (f, file) in self.outputs {
            let text = f.exporter.render(r);
            match file {
                Some(mut file) => file
                    .write_all(text.as_bytes())
                    .map_err(|e| Error::io(format!("writing the {} report", f.name), e))?,
                None => stdout.push(text),
            }
        }
        let mut so = std::io::stdout().lock();
        for text in stdout {
            so.write_all(text.as_bytes()).map_err(Error::stdout)?;
        }
        so.flush().map_err(Error::stdout)
    }
}
