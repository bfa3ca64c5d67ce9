//! The library's error type: usage errors (bad input, exit code 2) apart from everything else.

/// Everything that can go wrong in the library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad user input: a spec, flag, path or file the user named. The binary exits with 2.
    #[error("{0}")]
    Usage(String),
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

impl Error {
    /// Builds a usage error from anything printable.
    pub fn usage(msg: impl Into<String>) -> Self {
        Error::Usage(msg.into())
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
            Error::Usage(_) => 2,
            Error::ClosedStdout => 0,
            _ => 1,
        }
    }
}

/// The library's result type.
pub type Result<T> = std::result::Result<T, Error>;
