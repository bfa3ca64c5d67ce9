//! The terminal, while a study runs: the one owner of stderr (hyperfine's `output/` is the
//! model). The progress bar, the live lines of open runs, `--rate auto`'s probes, notes,
//! warnings and the closing lines all go through a [`Terminal`], which knows whether to draw a
//! bar (stderr is a terminal), print lines (it is not) or stay silent (`--quiet`). Results
//! themselves go to stdout or files, never here.

use std::fmt::Display;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// What a study shows on stderr while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feedback {
    /// Nothing (`--quiet`, a library lab).
    Quiet,
    /// Lines (stderr is not a terminal): open runs' live lines, `--rate auto`'s probes.
    Lines,
    /// A progress bar (stderr is a terminal), whose message shows the live rate.
    Bar,
}

impl Feedback {
    /// Quiet when asked, else a bar on a terminal and lines elsewhere.
    pub fn for_stderr(quiet: bool) -> Feedback {
        if quiet {
            Feedback::Quiet
        } else if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            Feedback::Bar
        } else {
            Feedback::Lines
        }
    }
}

/// stderr during a study: cloned freely (the bar is shared), so the runner's live lines and
/// the study loop's progress draw on the same bar.
#[derive(Clone)]
pub struct Terminal {
    feedback: Feedback,
    bar: ProgressBar,
}

impl Terminal {
    /// A terminal that shows what `feedback` asks for; the bar appears at [`Terminal::start`].
    pub fn new(feedback: Feedback) -> Terminal {
        let bar = if feedback == Feedback::Bar {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                "{bar:30} {pos}/{len} runs, {elapsed} elapsed, ~{eta} left  {msg}",
            ) {
                bar.set_style(style);
            }
            bar
        } else {
            ProgressBar::hidden()
        };
        Terminal { feedback, bar }
    }

    /// stderr once the study is over (no bar to draw on): lines, or nothing with `--quiet`.
    pub fn after(quiet: bool) -> Terminal {
        Terminal::new(if quiet {
            Feedback::Quiet
        } else {
            Feedback::Lines
        })
    }

    /// A terminal that shows nothing.
    pub fn silent() -> Terminal {
        Terminal::new(Feedback::Quiet)
    }

    /// Whether nothing is shown.
    pub fn is_quiet(&self) -> bool {
        self.feedback == Feedback::Quiet
    }

    /// The study will make `runs` runs: the bar's length.
    pub fn start(&self, runs: u64) {
        self.bar.set_length(runs);
    }

    /// What runs now (the bar's message).
    pub fn doing(&self, what: String) {
        self.bar.set_message(what);
    }

    /// One more run finished.
    pub fn advance(&self) {
        self.bar.inc(1);
    }

    /// `runs` more runs are done, or will not happen (a cell whose search found no rate).
    pub fn advance_by(&self, runs: u64) {
        self.bar.inc(runs);
    }

    /// The study is over: the bar goes.
    pub fn clear(&self) {
        self.bar.finish_and_clear();
    }

    /// A line of its own (above the bar while one is drawn).
    pub fn line(&self, text: impl Display) {
        match self.feedback {
            Feedback::Quiet => {}
            Feedback::Bar if self.bar_drawn() => self.bar.println(text.to_string()),
            Feedback::Lines | Feedback::Bar => eprintln!("{text}"),
        }
    }

    /// Whether the bar is on screen: started and not yet cleared.
    fn bar_drawn(&self) -> bool {
        self.bar.length().is_some_and(|n| n > 0) && !self.bar.is_finished()
    }

    /// What a run is doing now: the bar's message, or a line when there is no bar.
    pub fn live(&self, text: String) {
        match self.feedback {
            Feedback::Quiet => {}
            Feedback::Lines => eprintln!("{text}"),
            Feedback::Bar => self.bar.set_message(text),
        }
    }

    /// `note: …` (a choice the plan made that the reader should know).
    pub fn note(&self, note: impl Display) {
        self.line(format_args!("note: {note}"));
    }

    /// `warning: …`.
    pub fn warning(&self, warning: impl Display) {
        self.line(format_args!("warning: {warning}"));
    }

    /// `error: …`, a failure the exit status reports: shown whatever the feedback, since
    /// `--quiet` silences progress and tables, never the reason the exit status is not 0.
    pub fn error(&self, error: impl Display) {
        match self.feedback {
            Feedback::Bar if self.bar_drawn() => self.bar.println(format!("error: {error}")),
            _ => eprintln!("error: {error}"),
        }
    }
}

/// The one line of an error that ends the process (its exit status says the rest).
pub fn fatal(error: impl Display) {
    eprintln!("concur: {error}");
}

/// A warning shown whatever the feedback (a library user's binary has no `--quiet`): once,
/// when a lab runs in-process.
pub fn warn_always(warning: impl Display) {
    eprintln!("concur: warning: {warning}");
}
