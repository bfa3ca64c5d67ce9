//! The library's error type: usage errors (bad input, exit code 2) apart from everything else.

/// Everything that can go wrong in the library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad user input: a spec, flag, path or file the user named. The binary exits with 2.
    /// `input` says which value was refused, for a library user who acts on it; `message` is
    /// the one line the binary prints.
    #[error("{message}")]
    Usage {
        /// Which of the user's values was refused.
        input: Input,
        /// The one-line message, naming the value and what is allowed.
        message: String,
    },
    /// An I/O failure with what we were doing when it happened.
    #[error("{context}: {source}")]
    Io {
        /// What we were doing.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A failure of the tool itself (a child that broke the protocol, for instance).
    #[error("{0}")]
    Internal(String),
    /// Standard output was closed by its reader (`concur run … | head -1`): not a failure,
    /// the binary ends quietly with 0, as ripgrep does.
    #[error("standard output was closed")]
    ClosedStdout,
}

/// Which of the user's values a usage error refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Input {
    /// A workload spec (`-w`): its syntax, or what it needs from the world (a file, a
    /// program).
    Workload,
    /// A model spec (`-m`), or a model that cannot run the workload it is given.
    Model,
    /// A task count (`-n`).
    Tasks,
    /// A flag, by the name the message gives it (`--rate`, `-n`): the refusal of its value, or
    /// of it beside another flag it contradicts (then the flag the message starts with).
    Flag(String),
    /// An environment variable the user set (`CONCUR_HUB_KEY`).
    Env(String),
    /// A file the user named, and the line of it at fault when one is (a results file's
    /// line, from 1).
    File {
        /// The file, as the user named it.
        path: std::path::PathBuf,
        /// Its line at fault, from 1; `None` when the whole file is (unreadable, empty).
        line: Option<u64>,
    },
    /// Anything else: a combination of values, a subcommand's argument.
    Other,
}

impl Error {
    /// Builds a usage error about no one value ([`Input::Other`]) from its one-line message:
    /// a combination of values, a subcommand's argument. A value the error can name is given
    /// with [`Error::flag`], [`Error::file`] or [`Error::bad`].
    pub fn usage(msg: impl Into<String>) -> Self {
        Error::bad(Input::Other, msg)
    }

    /// Builds a usage error refusing flag `flag`'s value (`--rate`); the message names it.
    pub fn flag(flag: &str, msg: impl Into<String>) -> Self {
        Error::bad(Input::Flag(flag.to_string()), msg)
    }

    /// Builds a usage error about a file the user named, at `line` (from 1) when one is at fault.
    pub fn file(path: &std::path::Path, line: Option<u64>, msg: impl Into<String>) -> Self {
        Error::bad(
            Input::File {
                path: path.to_path_buf(),
                line,
            },
            msg,
        )
    }

    /// Builds a usage error about `input` (a workload or model spec, a task count).
    pub fn bad(input: Input, msg: impl Into<String>) -> Self {
        Error::Usage {
            input,
            message: msg.into(),
        }
    }

    /// Which of the user's values a usage error refuses; `None` for other errors.
    pub fn input(&self) -> Option<&Input> {
        match self {
            Error::Usage { input, .. } => Some(input),
            _ => None,
        }
    }

    /// Wraps an I/O error with what we were doing.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// Wraps an error writing to standard output: a closed pipe is [`Error::ClosedStdout`].
    pub fn stdout(source: std::io::Error) -> Self {
        if source.kind() == std::io::ErrorKind::BrokenPipe {
            Error::ClosedStdout
        } else {
            Error::io("writing to standard output", source)
        }
    }

    /// The exit code the binary should use for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage { .. } => 2,
            Error::ClosedStdout => 0,
            _ => 1,
        }
    }
}

/// The library's result type.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usage_error_says_which_input_it_refuses_and_keeps_its_line() {
        let e = Error::flag(
            "--rate",
            "--rate 'x': not a rate (allowed: a number of tasks a second)",
        );
        assert_eq!(e.input(), Some(&Input::Flag("--rate".into())));
        assert_eq!(
            e.to_string(),
            "--rate 'x': not a rate (allowed: a number of tasks a second)"
        );
        assert_eq!(e.exit_code(), 2);
        // The input is what the error was built with, never read back from its text.
        assert_eq!(
            Error::usage("--rate is not read from here").input(),
            Some(&Input::Other)
        );
        let f = Error::file(
            std::path::Path::new("r.jsonl"),
            Some(3),
            "'r.jsonl' line 3: bad",
        );
        assert_eq!(
            f.input(),
            Some(&Input::File {
                path: "r.jsonl".into(),
                line: Some(3)
            })
        );
        let w = Error::bad(Input::Workload, "bad workload 'fib:x'");
        assert_eq!((w.input(), w.exit_code()), (Some(&Input::Workload), 2));
        assert_eq!(Error::Internal("x".into()).input(), None);
    }
}
