//! The live view: a screen drawn with ratatui while a study runs on a terminal (stdout and
//! stderr both terminals, `--no-live` and `-q` not given), in place of the progress bar. Per
//! cell its runs done of runs planned, tasks done of the run under way and how many of them are
//! running, the rate now, p50 and p99 of its finished runs, CPU and memory of the run's
//! process tree, and the time left.
//!
//! What it shows comes from three places, none of which costs the measured child anything
//! per task beyond its relaxed counters: the study loop says which cell runs and what each
//! finished run measured ([`LiveState::ran`]); the parent's supervisor hands over a
//! [`RunProbe`] for the run under way (its counter page, its sampled tree); this screen reads
//! the probe when it draws, 5 times a second, on a thread of its own that otherwise sleeps in
//! poll(2) on the keyboard. `q` asks the study to stop exactly as Ctrl-C does (the same flag,
//! [`crate::os::interrupt`]); Ctrl-C itself still arrives as SIGINT (the terminal keeps
//! ISIG: only line buffering and echo are turned off).
//!
//! A study over a hub's hosts also lists each host the run uses, its state, its clock offset
//! and its share's tasks, as the study's executor says them ([`LiveState::host`]): the
//! executor runs in the study's process, between runs and while it waits for answers, never
//! in a measured path.
//!
//! The screen is the terminal's alternate screen: lines the study prints meanwhile (notes,
//! warnings) show at its foot and are printed again, in order, once it closes. The terminal
//! is given back on every way out: the study's end, an error (the screen's `Drop`), a panic
//! (a hook restores it before the message is printed).

use std::collections::VecDeque;
use std::io::Write;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table};
use ratatui::Frame;

use crate::base::units::{fmt_kib, fmt_secs};

/// How often the screen is drawn (and the probe read).
const FRAME: Duration = Duration::from_millis(200);

/// How far back the rate and the CPU share now are measured.
const WINDOW: Duration = Duration::from_secs(2);

/// The study's lines kept at the screen's foot.
const FOOT_LINES: usize = 4;

/// What the parent knows of the run under way at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunReading {
    /// Tasks started (the child's counter page).
    pub started: u64,
    /// Tasks ended, failed ones included.
    pub ended: u64,
    /// Tasks failed.
    pub failed: u64,
    /// Tasks the run will start (0: not said yet).
    pub planned: u64,
    /// Whether every planned task has started.
    pub all_started: bool,
    /// CPU time of the run's process tree so far, seconds.
    pub cpu_s: Option<f64>,
    /// PSS of the run's process tree now, KiB.
    pub pss_kib: Option<u64>,
}

/// Reads the run under way: made by the parent's supervisor for each run it watches.
pub trait RunProbe: Send + Sync {
    /// The counts and the tree's use now.
    fn read(&self) -> RunReading;
}

/// What a finished run measured, as the view shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunDone {
    /// Whether it counts (not a warm-up): only those give the cell's p50 and p99.
    pub counted: bool,
    /// Its wall time, seconds.
    pub wall_s: f64,
    /// Its tasks ended.
    pub tasks: u64,
    /// Its CPU time (user + sys), seconds.
    pub cpu_s: f64,
    /// Its tree's peak PSS, KiB.
    pub pss_kib: Option<u64>,
    /// Its tasks' latency p50 and p99, µs.
    pub p50_us: Option<u64>,
    /// As above.
    pub p99_us: Option<u64>,
}

/// Where a host of a study over a hub stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostState {
    /// Alive on the hub, known to the study, no share of the run under way.
    Announced,
    /// Given its share of the run under way, not yet answered.
    Running,
    /// Answered with its share's run, every task ok.
    Answered,
    /// Answered with a run that failed (or some of its tasks did).
    Failed,
    /// Refused its share, or its answer was refused.
    Refused,
    /// Stopped heartbeating, or did not answer in time.
    Lost,
}

impl HostState {
    /// What the screen says.
    pub fn word(self) -> &'static str {
        match self {
            HostState::Announced => "announced",
            HostState::Running => "running its share",
            HostState::Answered => "answered",
            HostState::Failed => "failed",
            HostState::Refused => "refused",
            HostState::Lost => "lost",
        }
    }
}

/// One host of a study over a hub, as the screen shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostRow {
    /// The agent's name.
    pub name: String,
    /// Where it stands.
    pub state: HostState,
    /// Its clock against the hub's, as said (`+0.120 ms ± 0.051 ms`), when measured.
    pub clock: Option<String>,
    /// Its share's tasks (arrivals, for an open cell), once it was given one.
    pub tasks: Option<u64>,
    /// Why it failed, was refused or lost.
    pub why: Option<String>,
}

/// One cell as the view keeps it.
#[derive(Debug, Clone, Default)]
struct CellState {
    label: String,
    runs_planned: u64,
    runs_done: u64,
    walls: Vec<f64>,
    p50s: Vec<u64>,
    p99s: Vec<u64>,
    last: Option<RunDone>,
}

/// The run under way.
struct Current {
    probe: Arc<dyn RunProbe>,
    since: Instant,
    now: RunReading,
    /// Recent readings, for the rate and CPU share over [`WINDOW`].
    recent: VecDeque<(Instant, RunReading)>,
}

/// Everything the screen shows, kept up to date by the study and the supervisor.
pub struct LiveState {
    title: String,
    began: Instant,
    cells: Vec<CellState>,
    running: Option<usize>,
    current: Option<Current>,
    foot: VecDeque<String>,
    /// Every line shown at the foot, printed again once the screen closes.
    said: Vec<String>,
    status: Option<String>,
    stopping: bool,
    /// The hosts of a study over a hub, in the study's order (none for a local study).
    hosts: Vec<HostRow>,
}

impl LiveState {
    /// A study called `title` of these cells: (label, runs planned).
    pub fn new(title: String, cells: Vec<(String, u64)>, began: Instant) -> LiveState {
        LiveState {
            title,
            began,
            cells: cells
                .into_iter()
                .map(|(label, runs_planned)| CellState {
                    label,
                    runs_planned,
                    ..Default::default()
                })
                .collect(),
            running: None,
            current: None,
            foot: VecDeque::new(),
            said: Vec::new(),
            status: None,
            stopping: false,
            hosts: Vec::new(),
        }
    }

    /// Host `row.name` stands as `row` says: its row replaced, or added after the others.
    /// Text from the hub (names, reasons) is shown with its control characters escaped.
    pub fn host(&mut self, mut row: HostRow) {
        use crate::base::escape::escape_controls;
        row.name = escape_controls(&row.name).into_owned();
        row.why = row.why.map(|w| escape_controls(&w).into_owned());
        match self.hosts.iter_mut().find(|h| h.name == row.name) {
            Some(h) => *h = row,
            None => self.hosts.push(row),
        }
    }

    /// Cell `i` runs now.
    pub fn running(&mut self, i: usize) {
        if i < self.cells.len() {
            self.running = Some(i);
        }
        self.status = None;
    }

    /// A run of cell `i` ended, having measured `done`.
    pub fn ran(&mut self, i: usize, done: RunDone) {
        let Some(c) = self.cells.get_mut(i) else {
            return;
        };
        c.runs_done += 1;
        c.walls.push(done.wall_s);
        if done.counted {
            c.p50s.extend(done.p50_us);
            c.p99s.extend(done.p99_us);
        }
        c.last = Some(done);
    }

    /// The run under way is read through `probe` from now on (`None`: no run is).
    pub fn watch(&mut self, probe: Option<Arc<dyn RunProbe>>, now: Instant) {
        self.current = probe.map(|probe| Current {
            probe,
            since: now,
            now: RunReading::default(),
            recent: VecDeque::new(),
        });
    }

    /// A line of the study's (a note, a warning), shown at the foot.
    pub fn line(&mut self, text: String) {
        if self.foot.len() == FOOT_LINES {
            self.foot.pop_front();
        }
        self.foot.push_back(text.clone());
        self.said.push(text);
    }

    /// What the run under way says of itself (an open run's live line).
    pub fn status(&mut self, text: String) {
        self.status = Some(text);
    }

    /// The study was asked to stop.
    pub fn stopping(&mut self) {
        self.stopping = true;
    }

    /// Reads the run under way's probe at `now`.
    pub fn sample(&mut self, now: Instant) {
        if let Some(c) = &mut self.current {
            c.now = c.probe.read();
            c.recent.push_back((now, c.now));
            while c
                .recent
                .front()
                .is_some_and(|(t, _)| now.duration_since(*t) > WINDOW)
            {
                c.recent.pop_front();
            }
        }
    }

    /// Tasks per second and CPU share (1.0 = one core) of the run under way over the recent
    /// readings, once they span a few frames.
    fn rates(&self) -> (Option<f64>, Option<f64>) {
        let Some(c) = &self.current else {
            return (None, None);
        };
        let (Some((t0, r0)), Some((t1, r1))) = (c.recent.front(), c.recent.back()) else {
            return (None, None);
        };
        let dt = t1.duration_since(*t0).as_secs_f64();
        if dt < 0.3 {
            return (None, None);
        }
        let rate = r1.ended.saturating_sub(r0.ended) as f64 / dt;
        let cpu = match (r0.cpu_s, r1.cpu_s) {
            (Some(a), Some(b)) => Some((b - a).max(0.0) / dt),
            _ => None,
        };
        (Some(rate), cpu)
    }

    /// The study's time left, estimated: each cell's runs still to come at the mean wall of
    /// its finished runs (of every finished run, for a cell with none yet), less what the
    /// run under way has done.
    fn time_left(&self, now: Instant) -> Option<f64> {
        let all: Vec<f64> = self.cells.iter().flat_map(|c| c.walls.clone()).collect();
        let overall = (!all.is_empty()).then(|| all.iter().sum::<f64>() / all.len() as f64);
        let mut left = 0.0;
        for (i, c) in self.cells.iter().enumerate() {
            let mean = if c.walls.is_empty() {
                overall
            } else {
                Some(c.walls.iter().sum::<f64>() / c.walls.len() as f64)
            };
            let mut to_come = c.runs_planned.saturating_sub(c.runs_done);
            if self.running == Some(i) && to_come > 0 {
                to_come -= 1;
                let under_way = self
                    .current
                    .as_ref()
                    .map_or(0.0, |cur| now.duration_since(cur.since).as_secs_f64());
                let (rate, _) = self.rates();
                let by_tasks = match (&self.current, rate) {
                    (Some(cur), Some(r)) if r > 0.0 && cur.now.planned > 0 => {
                        Some(cur.now.planned.saturating_sub(cur.now.ended) as f64 / r)
                    }
                    _ => None,
                };
                left += match (mean, by_tasks) {
                    (_, Some(t)) => t,
                    (Some(m), None) => (m - under_way).max(0.0),
                    (None, None) => return None,
                };
            }
            if to_come > 0 {
                left += to_come as f64 * mean?;
            }
        }
        Some(left)
    }

    /// Draws the screen into `frame`.
    pub fn render(&self, frame: &mut Frame, now: Instant) {
        let area = frame.area();
        let foot = self.foot.len() as u16 + u16::from(self.status.is_some());
        // The hosts' block: its title line, its header and a row per host.
        let hosts = if self.hosts.is_empty() {
            0
        } else {
            self.hosts.len() as u16 + 2
        };
        let [head, table, hosts_area, bottom] = Layout::vertical([
            Constraint::Length(2),
            Constraint::Min(3),
            Constraint::Length(hosts),
            Constraint::Length(foot),
        ])
        .areas(area);
        self.render_head(frame, head, now);
        self.render_table(frame, table);
        if !self.hosts.is_empty() {
            self.render_hosts(frame, hosts_area);
        }
        let mut lines: Vec<Line> = self.foot.iter().map(|l| Line::raw(l.as_str())).collect();
        if let Some(s) = &self.status {
            lines.push(Line::raw(s.as_str()));
        }
        frame.render_widget(Paragraph::new(lines), bottom);
    }

    fn render_head(&self, frame: &mut Frame, area: Rect, now: Instant) {
        let done: u64 = self.cells.iter().map(|c| c.runs_done).sum();
        let planned: u64 = self.cells.iter().map(|c| c.runs_planned).sum();
        let left = self.time_left(now).map_or("time left: -".to_string(), |s| {
            format!("~{} left", clock(s))
        });
        let first = format!(
            "concur: {}, {done}/{planned} runs, {} elapsed, {left}",
            self.title,
            clock(now.duration_since(self.began).as_secs_f64()),
        );
        let second = if self.stopping {
            "stopping: the run under way is killed, the finished runs are kept".to_string()
        } else {
            "q: stop (as Ctrl-C: finished runs are kept)".to_string()
        };
        frame.render_widget(
            Paragraph::new(vec![
                Line::styled(first, Style::new().add_modifier(Modifier::BOLD)),
                Line::raw(second),
            ]),
            area,
        );
    }

    fn render_table(&self, frame: &mut Frame, area: Rect) {
        let (rate_now, cpu_now) = self.rates();
        let dash = || "-".to_string();
        let rows = self.cells.iter().enumerate().map(|(i, c)| {
            let runs = format!("{}/{}", c.runs_done, c.runs_planned);
            let p50 = median(&c.p50s).map_or_else(dash, |us| fmt_secs(us as f64 / 1e6));
            let p99 = median(&c.p99s).map_or_else(dash, |us| fmt_secs(us as f64 / 1e6));
            let under_way = self.running == Some(i);
            let (tasks, running, rate, cpu, mem) = match (&self.current, under_way) {
                (Some(cur), true) => {
                    let r = cur.now;
                    let tasks = if r.planned > 0 {
                        format!("{}/{}", r.ended, r.planned)
                    } else {
                        r.ended.to_string()
                    };
                    let failed = if r.failed > 0 {
                        format!(" ({} failed)", r.failed)
                    } else {
                        String::new()
                    };
                    (
                        format!("{tasks}{failed}"),
                        r.started.saturating_sub(r.ended).to_string(),
                        rate_now.map_or_else(dash, |r| format!("{r:.1}/s")),
                        cpu_now.map_or_else(dash, |c| format!("{:.0}%", c * 100.0)),
                        r.pss_kib.map_or_else(dash, fmt_kib),
                    )
                }
                _ => match &c.last {
                    Some(l) => (
                        l.tasks.to_string(),
                        dash(),
                        if l.wall_s > 0.0 {
                            format!("{:.1}/s", l.tasks as f64 / l.wall_s)
                        } else {
                            dash()
                        },
                        if l.wall_s > 0.0 {
                            format!("{:.0}%", l.cpu_s / l.wall_s * 100.0)
                        } else {
                            dash()
                        },
                        l.pss_kib.map_or_else(dash, fmt_kib),
                    ),
                    None => (dash(), dash(), dash(), dash(), dash()),
                },
            };
            let mark = if under_way { "> " } else { "  " };
            let row = Row::new(vec![
                Cell::from(format!("{mark}{}", c.label)),
                Cell::from(runs),
                Cell::from(tasks),
                Cell::from(running),
                Cell::from(rate),
                Cell::from(p50),
                Cell::from(p99),
                Cell::from(cpu),
                Cell::from(mem),
            ]);
            if under_way {
                row.style(Style::new().add_modifier(Modifier::BOLD))
            } else {
                row
            }
        });
        let widths = [
            Constraint::Fill(1),
            Constraint::Length(6),
            Constraint::Length(13),
            Constraint::Length(7),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(5),
            Constraint::Length(9),
        ];
        let header = Row::new(vec![
            "  cell", "runs", "tasks", "running", "rate", "p50", "p99", "CPU", "memory",
        ])
        .style(Style::new().add_modifier(Modifier::UNDERLINED));
        let block = Block::new()
            .borders(Borders::TOP)
            .title(" cells (rate, CPU and memory: the run under way, else the last run) ");
        frame.render_widget(Table::new(rows, widths).header(header).block(block), area);
    }
}

impl LiveState {
    fn render_hosts(&self, frame: &mut Frame, area: Rect) {
        let dash = || "-".to_string();
        let rows = self.hosts.iter().map(|h| {
            let row = Row::new(vec![
                Cell::from(format!("  {}", h.name)),
                Cell::from(h.state.word()),
                Cell::from(h.clock.clone().unwrap_or_else(dash)),
                Cell::from(h.tasks.map_or_else(dash, |t| t.to_string())),
                Cell::from(h.why.clone().unwrap_or_default()),
            ]);
            if h.state == HostState::Running {
                row.style(Style::new().add_modifier(Modifier::BOLD))
            } else {
                row
            }
        });
        let name_width = self
            .hosts
            .iter()
            .map(|h| h.name.chars().count() + 3)
            .max()
            .unwrap_or(0)
            .clamp(6, 30) as u16;
        let widths = [
            Constraint::Length(name_width),
            Constraint::Length(18),
            Constraint::Length(22),
            Constraint::Length(7),
            Constraint::Fill(1),
        ];
        let header = Row::new(vec!["  host", "state", "clock offset", "tasks", ""])
            .style(Style::new().add_modifier(Modifier::UNDERLINED));
        let block = Block::new()
            .borders(Borders::TOP)
            .title(" hosts (tasks: their last share's) ");
        frame.render_widget(Table::new(rows, widths).header(header).block(block), area);
    }
}

/// The median of `v`, if any.
fn median(v: &[u64]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    Some(s[s.len() / 2])
}

/// Seconds as a clock: `0:07`, `12:30`, `1:02:03`.
fn clock(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// The terminal's state before the screen took it, for every way out (the panic hook too).
struct Saved {
    /// The descriptor the keys are read from, and its mode before.
    keys: Option<(RawFd, libc::termios)>,
}

/// The terminal to give back, while a screen holds it.
static SAVED: Mutex<Option<Saved>> = Mutex::new(None);

/// Gives the terminal back: the normal screen, the cursor, the keyboard's mode. Idempotent;
/// called by the screen's thread on its way out and by the panic hook.
fn restore() {
    let saved = match SAVED.try_lock() {
        Ok(mut s) => s.take(),
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().take(),
        Err(std::sync::TryLockError::WouldBlock) => None,
    };
    let Some(saved) = saved else { return };
    // Leave the alternate screen, show the cursor: raw bytes, no lock that a panicking
    // thread could hold.
    let bytes = b"\x1b[?1049l\x1b[?25h";
    // SAFETY: write(2) of a static buffer to stderr.
    unsafe { libc::write(libc::STDERR_FILENO, bytes.as_ptr().cast(), bytes.len()) };
    if let Some((fd, mode)) = saved.keys {
        // SAFETY: tcsetattr with a termios read from the same descriptor.
        unsafe { libc::tcsetattr(fd, libc::TCSANOW, &mode) };
        if fd != libc::STDIN_FILENO {
            // SAFETY: the descriptor was opened by `keys` for the screen alone.
            unsafe { libc::close(fd) };
        }
    }
}

/// Installs, once, a panic hook that gives the terminal back before the message is printed.
fn hook_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// The keyboard: stdin when it is a terminal, else the controlling terminal; switched to
/// unbuffered, unechoed input (ISIG kept: Ctrl-C stays a signal). `None` when there is none
/// or this process is not in the terminal's foreground (changing its mode would stop us).
fn keys() -> Option<(RawFd, libc::termios)> {
    // SAFETY: isatty and open with a NUL-terminated literal; the result is checked.
    let fd = unsafe {
        if libc::isatty(libc::STDIN_FILENO) == 1 {
            libc::STDIN_FILENO
        } else {
            libc::open(
                c"/dev/tty".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY,
            )
        }
    };
    if fd < 0 {
        return None;
    }
    let close = |fd: RawFd| {
        if fd != libc::STDIN_FILENO {
            // SAFETY: a descriptor opened above.
            unsafe { libc::close(fd) };
        }
    };
    // SAFETY: tcgetpgrp/getpgrp/tcgetattr/tcsetattr on a terminal descriptor, into a struct
    // we own.
    unsafe {
        if libc::tcgetpgrp(fd) != libc::getpgrp() {
            close(fd);
            return None;
        }
        let mut mode: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(fd, &mut mode) != 0 {
            close(fd);
            return None;
        }
        let mut quiet = mode;
        quiet.c_lflag &= !(libc::ICANON | libc::ECHO);
        quiet.c_cc[libc::VMIN] = 1;
        quiet.c_cc[libc::VTIME] = 0;
        if libc::tcsetattr(fd, libc::TCSANOW, &quiet) != 0 {
            close(fd);
            return None;
        }
        Some((fd, mode))
    }
}

/// Waits up to `timeout` for keys on `fd`; whether `q` (or `Q`) was among them.
fn q_pressed(fd: RawFd, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll on one pollfd we own.
    let n = unsafe { libc::poll(&mut p, 1, timeout.as_millis() as libc::c_int) };
    if n <= 0 || p.revents & libc::POLLIN == 0 {
        if n > 0 {
            // The terminal hung up: no more keys; wait out the frame without them.
            std::thread::sleep(timeout);
        }
        return false;
    }
    let mut buf = [0u8; 64];
    // SAFETY: read into a buffer we own, at most its length.
    let got = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    got > 0 && buf[..got as usize].iter().any(|&b| b == b'q' || b == b'Q')
}

/// The screen while it is up: its state, shared with the study, and the thread drawing it.
pub struct Screen {
    state: Arc<Mutex<LiveState>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Screen {
    /// Takes the terminal (stderr) and starts drawing `state`; an error when the terminal
    /// will not be taken (the caller falls back to the progress bar).
    pub fn open(state: LiveState) -> std::io::Result<Screen> {
        let mut guard = SAVED.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_some() {
            return Err(std::io::Error::other("a live screen is already up"));
        }
        // Ctrl-C stays a signal while the screen is up: it must set the flag, not end the
        // process with the terminal still taken.
        crate::os::interrupt::install_interrupt_handler();
        let keys = keys();
        *guard = Some(Saved { keys });
        drop(guard);
        hook_panics();
        let backend = ratatui::backend::CrosstermBackend::new(std::io::stderr());
        let mut terminal = match ratatui::Terminal::new(backend) {
            Ok(t) => t,
            Err(e) => {
                restore();
                return Err(e);
            }
        };
        let entered = crossterm::execute!(
            std::io::stderr(),
            crossterm::terminal::EnterAlternateScreen,
            crossterm::cursor::Hide
        )
        .and_then(|_| terminal.clear());
        if let Err(e) = entered {
            restore();
            return Err(e);
        }
        let state = Arc::new(Mutex::new(state));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, flag) = (state.clone(), stop.clone());
        let key_fd = keys.map(|(fd, _)| fd);
        let thread = std::thread::Builder::new()
            .name("live-view".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) && held() {
                    {
                        let mut st = s.lock().unwrap_or_else(|p| p.into_inner());
                        if crate::os::interrupt::interrupted() {
                            st.stopping();
                        }
                        let now = Instant::now();
                        st.sample(now);
                        let _ = terminal.draw(|f| st.render(f, now));
                    }
                    let pressed = match key_fd {
                        Some(fd) => q_pressed(fd, FRAME),
                        None => {
                            std::thread::park_timeout(FRAME);
                            false
                        }
                    };
                    if pressed {
                        crate::os::interrupt::request();
                    }
                }
                let _ = std::io::stderr().flush();
                restore();
            });
        match thread {
            Ok(t) => Ok(Screen {
                state,
                stop,
                thread: Some(t),
            }),
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }

    /// Changes what the screen shows.
    pub fn update(&self, f: impl FnOnce(&mut LiveState)) {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// Takes the screen down and gives the terminal back; the lines it showed at its foot,
    /// to be printed now that they stay.
    pub fn close(mut self) -> Vec<String> {
        self.shut()
    }

    fn shut(&mut self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        let Some(t) = self.thread.take() else {
            return Vec::new();
        };
        t.thread().unpark();
        let _ = t.join();
        restore();
        std::mem::take(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()).said)
    }
}

impl Drop for Screen {
    /// An error ended the study: the terminal is given back and the lines shown printed.
    fn drop(&mut self) {
        for line in self.shut() {
            eprintln!("{line}");
        }
    }
}

/// Whether a screen still holds the terminal (a panic hook may have given it back).
fn held() -> bool {
    SAVED.lock().unwrap_or_else(|p| p.into_inner()).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;

    /// A probe that reads what the test put in it.
    struct Fixed(Mutex<RunReading>);

    impl RunProbe for Fixed {
        fn read(&self) -> RunReading {
            *self.0.lock().unwrap()
        }
    }

    fn text(state: &LiveState, now: Instant, w: u16, h: u16) -> String {
        let mut t = ratatui::Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| state.render(f, now)).unwrap();
        let buf = t.backend().buffer();
        (0..h)
            .map(|y| {
                (0..w)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect::<String>()
                    .trim_end()
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_screen_shows_each_cells_progress_rate_latency_and_the_time_left() {
        let t0 = Instant::now();
        let mut s = LiveState::new(
            "study 'run'".into(),
            vec![
                ("sleep:20ms seq".into(), 3),
                ("sleep:20ms pool:4".into(), 3),
            ],
            t0,
        );
        s.running(0);
        s.ran(
            0,
            RunDone {
                counted: true,
                wall_s: 4.0,
                tasks: 200,
                cpu_s: 0.04,
                pss_kib: Some(3 << 10),
                p50_us: Some(20_100),
                p99_us: Some(20_900),
            },
        );
        s.running(1);
        let probe = Arc::new(Fixed(Mutex::new(RunReading {
            started: 64,
            ended: 60,
            planned: 200,
            cpu_s: Some(0.10),
            pss_kib: Some(2560),
            ..Default::default()
        })));
        let t1 = t0 + Duration::from_secs(5);
        s.watch(Some(probe.clone()), t1);
        s.sample(t1);
        *probe.0.lock().unwrap() = RunReading {
            started: 164,
            ended: 160,
            planned: 200,
            cpu_s: Some(0.12),
            pss_kib: Some(2600),
            ..Default::default()
        };
        let t2 = t1 + Duration::from_millis(500);
        s.sample(t2);
        s.line("note: a note of the study's".into());
        let screen = text(&s, t2, 100, 12);
        for want in [
            "concur: study 'run', 1/6 runs, 0:06 elapsed, ~0:16 left",
            "q: stop",
            "sleep:20ms seq",
            "1/3",
            "200",
            "50.0/s",
            "20.1 ms",
            "20.9 ms",
            "> sleep:20ms pool:4",
            "160/200",
            "200.0/s",
            "4%",
            "2.5 MiB",
            "note: a note of the study's",
        ] {
            assert!(screen.contains(want), "{want:?} missing from:\n{screen}");
        }
        // The seq row's numbers are its last run's; pool:4's the run under way's, with its
        // tasks started and not yet ended.
        let seq = screen.lines().find(|l| l.contains("seq")).unwrap();
        assert!(seq.contains("1%") && seq.contains("3.0 MiB"), "{seq}");
        let pool = screen.lines().find(|l| l.contains("pool:4")).unwrap();
        let words: Vec<&str> = pool.split_whitespace().collect();
        assert_eq!(&words[3..6], ["0/3", "160/200", "4"], "{pool}");
        s.stopping();
        s.watch(None, t2);
        let screen = text(&s, t2, 100, 12);
        assert!(screen.contains("stopping:"), "{screen}");
        assert!(!screen.contains("160/200"), "{screen}");
    }

    #[test]
    fn a_study_over_hosts_lists_each_host_with_its_state_clock_and_share() {
        let t0 = Instant::now();
        let mut s = LiveState::new(
            "study 'run'".into(),
            vec![("sleep:5ms pool:2 @2 hosts ×20".into(), 3)],
            t0,
        );
        s.running(0);
        let row = |name: &str, state, tasks, why: Option<&str>| HostRow {
            name: name.into(),
            state,
            clock: Some("+0.120 ms ± 0.051 ms".into()),
            tasks,
            why: why.map(str::to_string),
        };
        for name in ["h1", "h2", "h3"] {
            s.host(row(name, HostState::Announced, None, None));
        }
        // Each state the executor says, a row replaced by name, an escape sequence in a
        // reason from the hub shown escaped.
        s.host(row("h1", HostState::Running, Some(10), None));
        s.host(row("h2", HostState::Answered, Some(10), None));
        s.host(row(
            "h3",
            HostState::Lost,
            Some(10),
            Some("was lost: no heartbeat\x1b[2J"),
        ));
        s.host(row(
            "h4\x1b]0;x\x07",
            HostState::Refused,
            Some(5),
            Some("refused its share"),
        ));
        let screen = text(&s, t0, 110, 16);
        assert!(
            screen.contains(" hosts (tasks: their last share's) "),
            "{screen}"
        );
        let line = |name: &str| -> Vec<String> {
            screen
                .lines()
                .find(|l| l.trim_start().starts_with(name))
                .unwrap_or_else(|| panic!("no row for {name}:\n{screen}"))
                .split("  ")
                .map(str::trim)
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect()
        };
        assert_eq!(
            line("h1"),
            ["h1", "running its share", "+0.120 ms ± 0.051 ms", "10"],
            "{screen}"
        );
        assert_eq!(line("h2")[1], "answered", "{screen}");
        assert_eq!(
            line("h3"),
            [
                "h3",
                "lost",
                "+0.120 ms ± 0.051 ms",
                "10",
                "was lost: no heartbeat\\x1b[2J"
            ],
            "{screen}"
        );
        assert_eq!(
            line("h4")[..2],
            ["h4\\x1b]0;x\\x07".to_string(), "refused".into()],
            "{screen}"
        );
        assert_eq!(screen.matches("announced").count(), 0, "{screen}");
        // A local study has no hosts' block.
        let local = LiveState::new("x".into(), vec![("a".into(), 2)], t0);
        assert!(!text(&local, t0, 80, 12).contains("hosts"));
    }

    #[test]
    fn no_time_left_is_guessed_before_any_run_or_rate() {
        let t0 = Instant::now();
        let s = LiveState::new("x".into(), vec![("a".into(), 2)], t0);
        assert_eq!(s.time_left(t0), None);
        assert!(text(&s, t0, 80, 8).contains("time left: -"));
    }

    #[test]
    fn clocks_read_as_people_read_them() {
        assert_eq!(clock(7.4), "0:07");
        assert_eq!(clock(750.0), "12:30");
        assert_eq!(clock(3723.0), "1:02:03");
    }
}
