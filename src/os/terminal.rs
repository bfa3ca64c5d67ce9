//! The terminal, while a study runs: the one owner of stderr (hyperfine's `output/` is the
//! model). The progress bar, the live lines of open runs, `--rate auto`'s probes, notes,
//! warnings and the closing lines all go through a [`Terminal`], which knows whether to draw
//! the live view (stdout and stderr are terminals: [`crate::os::live`]), a bar (stderr is a
//! terminal, or the view was turned off), print lines (it is not) or stay silent
//! (`--quiet`). Results themselves go to stdout or files, never here.
//!
//! Text from outside (an agent's name, host or answer, a results file from elsewhere) may
//! hold terminal control sequences: [`escape_controls`] shows them as `\x1b` or `\u{9b}`, and
//! every line a [`Terminal`] prints goes through it and through
//! [`crate::base::secret::mask_credentials`].

use std::fmt::Display;

use std::sync::{Arc, Mutex};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::os::live::{HostRow, LiveState, RunDone, RunProbe, Screen};

/// What a study shows on stderr while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feedback {
    /// Nothing (`--quiet`, a library lab).
    Quiet,
    /// Lines (stderr is not a terminal): open runs' live lines, `--rate auto`'s probes.
    Lines,
    /// A progress bar (stderr is a terminal), whose message shows the live rate.
    Bar,
    /// The live view (stdout and stderr are terminals, `--no-live` not given); the bar when
    /// the terminal will not give the view its screen.
    Live,
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

    /// [`Feedback::for_stderr`], or the live view when `live` and stdout and stderr are both
    /// terminals (drawn on stderr; a stdout sent elsewhere keeps today's bar).
    pub fn for_terminal(quiet: bool, live: bool) -> Feedback {
        let shown = Feedback::for_stderr(quiet);
        if shown == Feedback::Bar && live && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            Feedback::Live
        } else {
            shown
        }
    }
}

/// stderr during a study: cloned freely (the bar is shared), so the runner's live lines and
/// the study loop's progress draw on the same bar.
#[derive(Clone)]
pub struct Terminal {
    feedback: Feedback,
    /// `--verbose`: warm-ups' live lines shown too.
    verbose: bool,
    bar: ProgressBar,
    /// The live view: what it will show until it opens, then the screen; `None` when the
    /// feedback is not [`Feedback::Live`] or the screen has closed (or would not open).
    live: Arc<Mutex<Live>>,
}

/// Where the live view stands.
enum Live {
    /// Not asked for, closed, or refused by the terminal: the bar or lines instead.
    Off,
    /// Asked for; the cells' rows wait for [`Terminal::start`] to open the screen.
    Planned(Option<Box<LiveState>>),
    /// Up.
    Up(Screen),
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
        } else if feedback == Feedback::Live {
            // Drawn only if the screen will not open.
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
        let live = if feedback == Feedback::Live {
            Live::Planned(None)
        } else {
            Live::Off
        };
        Terminal {
            feedback,
            verbose: false,
            bar,
            live: Arc::new(Mutex::new(live)),
        }
    }

    /// The live view's state, if it is planned or up.
    fn view(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes what the live view shows, if it is up; false when it is not.
    fn on_screen(&self, f: impl FnOnce(&mut LiveState)) -> bool {
        match &*self.view() {
            Live::Up(screen) => {
                screen.update(f);
                true
            }
            _ => false,
        }
    }

    /// The study's title and cells, (label, runs planned), for the live view (nothing
    /// otherwise); called before [`Terminal::start`].
    pub(crate) fn cells(&self, title: String, cells: Vec<(String, u64)>) {
        let mut live = self.view();
        if let Live::Planned(state) = &mut *live {
            *state = Some(Box::new(LiveState::new(
                title,
                cells,
                std::time::Instant::now(),
            )));
        }
    }

    /// Cell `i` (of [`Terminal::cells`]) runs now.
    pub(crate) fn cell(&self, i: usize) {
        self.on_screen(|s| s.running(i));
    }

    /// A run of cell `i` ended, having measured `done`.
    pub(crate) fn ran(&self, i: usize, done: RunDone) {
        self.on_screen(|s| s.ran(i, done));
    }

    /// A host of a study over a hub stands as `row` says, on the live view if it is up.
    pub(crate) fn host(&self, row: HostRow) {
        self.on_screen(|s| s.host(row));
    }

    /// Whether the live view is up (the runner then hands it each run's probe).
    pub(crate) fn watching(&self) -> bool {
        matches!(&*self.view(), Live::Up(_))
    }

    /// The run under way is read through `probe` (`None`: it ended).
    pub(crate) fn watch(&self, probe: Option<Arc<dyn RunProbe>>) {
        self.on_screen(|s| s.watch(probe, std::time::Instant::now()));
    }

    /// stderr once the study is over (no bar to draw on): lines, or nothing with `--quiet`.
    pub fn after(quiet: bool) -> Terminal {
        Terminal::new(if quiet {
            Feedback::Quiet
        } else {
            Feedback::Lines
        })
    }

    /// This terminal, showing warm-up runs' live lines too when `verbose` (`--verbose`).
    pub fn verbose(mut self, verbose: bool) -> Terminal {
        self.verbose = verbose;
        self
    }

    /// Whether warm-up runs' live lines are shown.
    pub fn is_verbose(&self) -> bool {
        self.verbose
    }

    /// A terminal that shows nothing.
    pub fn silent() -> Terminal {
        Terminal::new(Feedback::Quiet)
    }

    /// Whether nothing is shown.
    pub fn is_quiet(&self) -> bool {
        self.feedback == Feedback::Quiet
    }

    /// The study will make `runs` runs: the bar's length; the live view opens (the bar is
    /// drawn instead when the terminal refuses it).
    pub fn start(&self, runs: u64) {
        {
            let mut live = self.view();
            if let Live::Planned(state) = &mut *live {
                let state = state.take().map_or_else(
                    || LiveState::new(String::new(), Vec::new(), std::time::Instant::now()),
                    |s| *s,
                );
                *live = match Screen::open(state) {
                    Ok(screen) => Live::Up(screen),
                    Err(_) => Live::Off,
                };
            }
            if matches!(&*live, Live::Up(_)) {
                return;
            }
        }
        self.bar.set_length(runs);
    }

    /// What runs now (the bar's message).
    pub fn doing(&self, what: String) {
        if !self.watching() {
            self.bar.set_message(what);
        }
    }

    /// One more run finished.
    pub fn advance(&self) {
        if !self.watching() {
            self.bar.inc(1);
        }
    }

    /// `runs` more runs are done, or will not happen (a cell whose search found no rate).
    pub fn advance_by(&self, runs: u64) {
        if !self.watching() {
            self.bar.inc(runs);
        }
    }

    /// The study is over: the bar goes, or the live view closes and the lines it showed are
    /// printed.
    pub fn clear(&self) {
        let up = std::mem::replace(&mut *self.view(), Live::Off);
        match up {
            Live::Up(screen) => {
                for line in screen.close() {
                    eprintln!("{line}");
                }
            }
            _ => self.bar.finish_and_clear(),
        }
    }

    /// A line of its own (above the bar while one is drawn; at the live view's foot, and
    /// again once it closes).
    pub fn line(&self, text: impl Display) {
        match self.feedback {
            Feedback::Quiet => {}
            Feedback::Live if self.on_screen(|s| s.line(shown(&text))) => {}
            Feedback::Bar | Feedback::Live if self.bar_drawn() => self.bar.println(shown(text)),
            Feedback::Lines | Feedback::Bar | Feedback::Live => eprintln!("{}", shown(text)),
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
            Feedback::Lines => eprintln!("{}", shown(text)),
            Feedback::Live if self.on_screen(|s| s.status(shown(&text))) => {}
            Feedback::Bar | Feedback::Live => self.bar.set_message(shown(text)),
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
        let text = shown(format_args!("error: {error}"));
        match self.feedback {
            Feedback::Live if self.on_screen(|s| s.line(text.clone())) => {}
            Feedback::Bar | Feedback::Live if self.bar_drawn() => self.bar.println(text),
            _ => eprintln!("{text}"),
        }
    }
}

/// The one line of an error that ends the process (its exit status says the rest).
pub fn fatal(error: impl Display) {
    eprintln!("{}", shown(format_args!("concur: {error}")));
}

/// A warning shown whatever the feedback (a library user's binary has no `--quiet`): once,
/// when a lab runs in-process.
pub fn warn_always(warning: impl Display) {
    eprintln!("{}", shown(format_args!("concur: warning: {warning}")));
}

/// A line as stderr shows it: credentials masked, control characters escaped (its line
/// breaks kept: a few messages span lines on purpose).
fn shown(text: impl Display) -> String {
    let text = crate::base::secret::mask_credentials(&text.to_string());
    escape_controls_but_newlines(&text).into_owned()
}

pub use crate::base::escape::{
    escape_controls, escape_controls_but_newlines, escape_json_controls, Escaped,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::escape::needs_escape;
    use std::borrow::Cow;

    #[test]
    fn controls_are_escaped_and_the_rest_kept() {
        assert_eq!(
            escape_controls("\x1b]0;pwned\x07\x1b[2J"),
            "\\x1b]0;pwned\\x07\\x1b[2J"
        );
        assert_eq!(
            escape_controls("a\u{9b}2Jb\u{7f}\0"),
            "a\\u{9b}2Jb\\x7f\\x00"
        );
        assert_eq!(escape_controls("tab\there\r\n"), "tab\\there\\r\\n");
        assert_eq!(escape_controls("evil\u{202e}cod"), "evil\\u{202e}cod");
        assert_eq!(escape_controls_but_newlines("a\x1bb\nc"), "a\\x1bb\nc");
        for same in ["", "host-1.example", "ünïcödé µs ± 3", "C:\\x1b (typed)"] {
            assert!(matches!(escape_controls(same), Cow::Borrowed(s) if s == same));
        }
        assert_eq!(
            format!("agent '{}'", Escaped("a\x1b[31m")),
            "agent 'a\\x1b[31m'"
        );
    }

    #[test]
    fn json_keeps_its_value_with_its_controls_escaped() {
        let value = serde_json::json!({"host": "a\u{1b}[2J\u{9b}\u{7f}\u{202e}b"});
        let text = serde_json::to_string(&value).unwrap();
        let escaped = escape_json_controls(&text);
        assert!(!escaped.chars().any(needs_escape), "{escaped}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&escaped).unwrap(),
            value
        );
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        let escaped = escape_json_controls(&pretty);
        assert!(
            escaped.contains('\n') && !escaped.contains('\u{9b}'),
            "{escaped}"
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&escaped).unwrap(),
            value
        );
        assert!(matches!(
            escape_json_controls("{\"a\":\"b\"}"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_line_shown_is_masked_and_escaped() {
        assert_eq!(
            shown("--hub 'redis://:pw@h' -H 'Cookie: s=1' \x1b[2J\nnext"),
            "--hub 'redis://:***@h' -H 'Cookie: ***' \\x1b[2J\nnext"
        );
    }
}
