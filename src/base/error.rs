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
    /// A flag, by its long name (`--rate`): every refusal of a flag's value starts with it.
    Flag(String),
    /// Anything else: a combination of values, a file's content, a subcommand's argument.
    Other,
}

impl Input {
    /// The input a message is about when nothing more is known: the flag it starts with
    /// (`--rate 'x': ...`), else [`Input::Other`].
    fn of_message(message: &str) -> Input {
        let Some(rest) = message.strip_prefix("--") else {
            return Input::Other;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if name.is_empty() {
            Input::Other
        } else {
            Input::Flag(format!("--{name}"))
        }
    }
}

impl Error {
    /// Builds a usage error from its one-line message; the input it refuses is the flag the
    /// message starts with, if any (see [`Error::bad`] for a spec).
    pub fn usage(msg: impl Into<String>) -> Self {
        let message = msg.into();
        Error::Usage {
            input: Input::of_message(&message),
            message,
        }
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
        let e = Error::usage("--rate 'x': not a rate (allowed: a number of tasks a second)");
        assert_eq!(e.input(), Some(&Input::Flag("--rate".into())));
        assert_eq!(
            e.to_string(),
            "--rate 'x': not a rate (allowed: a number of tasks a second)"
        );
        assert_eq!(e.exit_code(), 2);
        assert_eq!(Error::usage("-- alone").input(), Some(&Input::Other));
        assert_eq!(Error::usage("two flags clash").input(), Some(&Input::Other));
        let w = Error::bad(Input::Workload, "bad workload 'fib:x'");
        assert_eq!((w.input(), w.exit_code()), (Some(&Input::Workload), 2));
        assert_eq!(Error::Internal("x".into()).input(), None);
    }
}
