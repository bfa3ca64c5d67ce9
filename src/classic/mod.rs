//! The classic experiments' own programs, in CPython and MRI, shipped in the binary: `--classic`
//! writes them to a temporary folder and adds them to the `gil`, `mailer` and `crawl` studies
//! (and the tour) as external cells labelled `py:…` and `rb:…`, measured like concur's own
//! runs. Each uses the interpreter and packages found (a missing one becomes a note naming what
//! to install, never a failure); `concur classic install` installs them on Debian/Ubuntu and
//! `concur classic show NAME` prints a program.

pub mod runtimes;
pub mod tokio_tasks;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::base::error::{Error, Result};
use crate::plan::{presets, ClassicSizes, PeerRequest};

/// One classic program shipped in the binary.
pub struct Program {
    /// The name `concur classic show` takes.
    pub name: &'static str,
    /// Its file name.
    pub file: &'static str,
    /// What it runs, in one line.
    pub help: &'static str,
    /// Its source.
    pub text: &'static str,
}

/// Every classic program.
pub const PROGRAMS: &[Program] = &[
    Program {
        name: "gil",
        file: "gil.py",
        help: "CPython: math1 (a, b = b, a*b) or io1 (reads of /dev/urandom) K times, plain, threads or processes; --table: the classic's whole table",
        text: include_str!("gil.py"),
    },
    Program {
        name: "crawl",
        file: "crawl.py",
        help: "CPython: N GETs of the delay server with requests (serial), gevent, tornado's curl client or aiohttp, over https with --cafile",
        text: include_str!("crawl.py"),
    },
    Program {
        name: "mailer",
        file: "mailer.rb",
        help: "MRI: N deliveries (mail + fib) sequentially, forked, in threads, a thread pool, Celluloid or Sidekiq; bm: the classic's Benchmark.bm table",
        text: include_str!("mailer.rb"),
    },
    Program {
        name: "crawl-go",
        file: "crawl.go",
        help: "Go: N GETs of the delay server, C goroutines at a time, net/http (the crawl study)",
        text: include_str!("crawl.go"),
    },
    Program {
        name: "crawl-java",
        file: "Crawl.java",
        help: "Java: N GETs of the delay server, HttpClient's sendAsync, a Semaphore of C (the crawl study)",
        text: include_str!("Crawl.java"),
    },
    Program {
        name: "crawl-node",
        file: "crawl.js",
        help: "Node.js: N GETs of the delay server, C async workers, fetch (the crawl study)",
        text: include_str!("crawl.js"),
    },
    Program {
        name: "gil-go",
        file: "gil.go",
        help: "Go: the multiply loop K times, plain or in K goroutines (the gil study's CPU body)",
        text: include_str!("gil.go"),
    },
    Program {
        name: "gil-java",
        file: "Gil.java",
        help: "Java: the multiply loop K times, plain or in K platform threads (the gil study's CPU body)",
        text: include_str!("Gil.java"),
    },
    Program {
        name: "gil-node",
        file: "gil.js",
        help: "Node.js: the multiply loop K times, plain or in K worker_threads (the gil study's CPU body)",
        text: include_str!("gil.js"),
    },
    Program {
        name: "tasks-go",
        file: "tasks.go",
        help: "Go: N goroutines that each sleep (the tasks study)",
        text: include_str!("tasks.go"),
    },
    Program {
        name: "tasks-node",
        file: "tasks.js",
        help: "Node.js: N promises that each await a timer (the tasks study)",
        text: include_str!("tasks.js"),
    },
    Program {
        name: "tasks-java",
        file: "Tasks.java",
        help: "Java: N platform threads that each sleep, or virtual threads with --virtual (JDK 21+) (the tasks study)",
        text: include_str!("Tasks.java"),
    },
    Program {
        name: "tasks-elixir",
        file: "tasks.exs",
        help: "Elixir: N processes (Task.async) that each sleep (the tasks study)",
        text: include_str!("tasks.exs"),
    },
    Program {
        name: "tasks-python",
        file: "tasks.py",
        help: "CPython: N asyncio coroutines or N threads that each sleep (the tasks study)",
        text: include_str!("tasks.py"),
    },
    Program {
        name: "tasks-ruby",
        file: "tasks.rb",
        help: "MRI: N threads that each sleep (the tasks study)",
        text: include_str!("tasks.rb"),
    },
];

/// The Python packages the crawl clients use, as pip names them.
pub const PIP_PACKAGES: &[&str] = &["requests", "gevent", "tornado", "pycurl", "aiohttp"];
/// The Debian packages of the Ruby programs (and Python's venv).
pub const APT_PACKAGES: &[&str] = &[
    "ruby",
    "ruby-celluloid",
    "ruby-sidekiq",
    "python3-venv",
    "python3-pip",
    "libcurl4-openssl-dev",
    "libssl-dev",
    "python3-dev",
];

/// `concur classic show NAME`: the program's source.
pub fn show(name: &str) -> Result<&'static str> {
    PROGRAMS
        .iter()
        .find(|p| p.name == name || p.file == name)
        .map(|p| p.text)
        .ok_or_else(|| {
            Error::usage(format!(
                "unknown classic program '{name}' (allowed: {})",
                PROGRAMS
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

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

/// The Python to use: the virtual environment of `concur classic install` if there is one,
/// else `python3` on PATH.
fn python() -> Option<PathBuf> {
    let venv = home().join("venv/bin/python");
    if venv.is_file() {
        return Some(venv);
    }
    // The interpreter itself, not a wrapper (pyenv's shims are shell scripts that add a
    // tenth of a second to every start).
    let found = on_path("python3")?;
    output(Command::new(&found).args(["-c", "import sys; print(sys.executable)"]))
        .ok()
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .or(Some(found))
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Runs a short helper command and returns its stdout, or why it failed.
fn output(cmd: &mut Command) -> std::result::Result<String, String> {
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
fn quoted(p: &Path) -> String {
    let s = p.to_string_lossy();
    shlex::try_quote(&s).map_or_else(|_| s.to_string(), |q| q.to_string())
}

/// The classic programs of a study: the folder they were written to (removed when dropped),
/// the external cells, and the notes (sizes chosen, what is missing and how to install it).
pub struct Classic {
    /// The programs' folder, alive while the study runs.
    pub dir: tempfile::TempDir,
    /// The external cells.
    pub peers: Vec<PeerRequest>,
    /// What the reader should know.
    pub notes: Vec<String>,
}

/// Writes the programs and builds the external cells of study `study` (`gil`, `mailer`,
/// `crawl` or the tour) at the plan's `sizes`; calibrates the CPython task on this machine.
/// `redis`: whether the study has a Redis (`--jobs-backend redis://...`), for `rb:sidekiq:10`.
pub fn prepare(study: &str, o: &ClassicSizes, redis: bool) -> Result<Classic> {
    let dir = tempfile::Builder::new()
        .prefix("concur-classic-")
        .tempdir()
        .map_err(|e| Error::io("creating the classic programs' folder", e))?;
    for p in PROGRAMS {
        std::fs::write(dir.path().join(p.file), p.text)
            .map_err(|e| Error::io("writing the classic programs", e))?;
    }
    let mut c = Classic {
        dir,
        peers: vec![],
        notes: vec![],
    };
    match study {
        "gil" => {
            gil(&mut c, o.quick);
            runtimes::gil(&mut c, o.quick);
        }
        "mailer" => mailer(&mut c, o.quick, o.gil, redis),
        "crawl" => {
            crawl(&mut c, o.quick, o.gil, o);
            runtimes::crawl(&mut c, o.quick, o.gil, o);
        }
        "tasks" => runtimes::tasks(&mut c, o.quick),
        presets::TOUR => {
            gil(&mut c, true);
            runtimes::gil(&mut c, true);
            mailer(&mut c, true, false, redis);
            crawl(&mut c, true, false, o);
            runtimes::crawl(&mut c, true, false, o);
        }
        other => {
            return Err(Error::flag("--classic", format!(
                "--classic adds the classic programs to the gil, mailer, crawl and tasks studies and the tour, not to '{other}'"
            )))
        }
    }
    Ok(c)
}

const INSTALL: &str = "concur classic install";

pub(super) fn peer(
    label: &str,
    command: String,
    workload: &str,
    gil: bool,
    tasks: &[usize],
) -> PeerRequest {
    // The serial programs run one task at a time: their ideal is seq's.
    let serial = ["py:plain", "py:requests", "rb:seq"].contains(&label);
    PeerRequest {
        label: label.into(),
        command,
        workload: Some(workload.into()),
        gil,
        tasks: Some(tasks.to_vec()),
        workers: serial.then_some(1),
    }
}

/// The time of one run of `spin:N` in this process, best of three.
pub(super) fn spin_time(n: u64) -> Option<f64> {
    let w = crate::workload::parse(&format!("spin:{n}"), &Default::default()).ok()?;
    (0..3)
        .map(|_| {
            let t = Instant::now();
            let _ = w.task(0);
            t.elapsed().as_secs_f64()
        })
        .min_by(f64::total_cmp)
}

/// `gil`: CPython's plain calls, threads and processes for K = 1, 2, 6, 10, on the CPU body
/// (sized here to take as long as concur's task) and the read body (the same reads), in the
/// tables with the lock, beside concur's emulated one.
fn gil(c: &mut Classic, quick: bool) {
    let Some(py) = python() else {
        c.notes.push(format!(
            "classic: python3 is not on PATH, so the py: cells of gil are left out (apt-get install python3, or {INSTALL})"
        ));
        return;
    };
    let spin_n = if quick {
        presets::GIL_SPIN_QUICK
    } else {
        presets::GIL_SPIN_FULL
    };
    let read = if quick {
        presets::GIL_READ_QUICK
    } else {
        presets::GIL_READ_FULL
    };
    let script = c.dir.path().join("gil.py");
    const PROBE: u64 = 200_000;
    let probe = output(
        Command::new(&py)
            .arg(&script)
            .arg("--calibrate")
            .arg(PROBE.to_string()),
    )
    .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).map_err(|e| e.to_string()));
    let (py_s, version) = match probe {
        Ok(v) => (
            v["seconds"].as_f64().unwrap_or(0.0),
            v["version"].as_str().unwrap_or("?").to_string(),
        ),
        Err(why) => {
            c.notes.push(format!(
                "classic: {} failed to run gil.py ({why}), so the py: cells of gil are left out",
                py.display()
            ));
            return;
        }
    };
    let Some(rust_s) = spin_time(spin_n).filter(|_| py_s > 0.0) else {
        return;
    };
    // CPython's speed differs 2× between machines of one type: the size is measured here.
    let iterations = ((rust_s / (py_s / PROBE as f64)) as u64 / 1000).max(1) * 1000;
    let (reads, size) = read
        .rsplit(':')
        .next()
        .and_then(|s| s.split_once('x'))
        .map_or(("100", "65536"), |(size, reads)| (reads, size));
    let spin = format!("spin:{spin_n}");
    for (label, mode) in [
        ("py:plain", "plain"),
        ("py:threads", "threads"),
        ("py:processes", "processes"),
    ] {
        let base = format!(
            "{} {} --mode {mode} --tasks {{tasks}}",
            quoted(&py),
            quoted(&script)
        );
        c.peers.push(peer(
            label,
            format!("{base} --body math1 --iterations {iterations}"),
            &spin,
            true,
            presets::GIL_TASKS,
        ));
        c.peers.push(peer(
            label,
            format!("{base} --body io1 --reads {reads} --read-size {size}"),
            read,
            true,
            presets::GIL_TASKS,
        ));
    }
    c.notes.push(format!(
        "classic: CPython {version} ({}), math1 with {iterations} iterations ≈ {:.0} ms a call, as long as concur's {spin} task here (both timed now); io1 makes the same reads as {read}; the py: rows sit in the tables with the lock",
        py.display(),
        rust_s * 1000.0
    ));
}

/// `crawl`: the classic's Python clients against the study's server, trusting `--cacert`'s
/// CA as concur's clients do (`o` gives `--full`, `--cacert` and `-k`).
fn crawl(c: &mut Classic, quick: bool, gil: bool, o: &ClassicSizes) {
    let Some(py) = python() else {
        c.notes.push(format!(
            "classic: python3 is not on PATH, so the py: cells of crawl are left out (apt-get install python3, or {INSTALL})"
        ));
        return;
    };
    let (n, seq_n) = presets::crawl_sizes(quick, o.full);
    let cafile = o
        .cacert
        .as_deref()
        .map(|ca| format!(" --cafile {}", quoted(ca)))
        .unwrap_or_default();
    if o.insecure {
        c.notes.push(
            "classic: the py: crawl clients verify the server's certificate: -k does not reach them (give its CA with --cacert)".into(),
        );
    }
    let script = c.dir.path().join("crawl.py");
    let probe = "import importlib.util as u, sys; print(' '.join(m for m in sys.argv[1:] if u.find_spec(m)))";
    let found =
        output(Command::new(&py).arg("-c").arg(probe).args(PIP_PACKAGES)).unwrap_or_default();
    let has = |m: &str| found.split(' ').any(|f| f == m);
    for (label, client, needs, tasks) in [
        ("py:requests", "serial", &["requests"][..], seq_n),
        ("py:gevent:100", "gevent", &["gevent", "requests"][..], n),
        (
            "py:tornado-curl:100",
            "tornado",
            &["tornado", "pycurl"][..],
            n,
        ),
        ("py:aiohttp:100", "aiohttp", &["aiohttp"][..], n),
    ] {
        let missing: Vec<&str> = needs.iter().copied().filter(|m| !has(m)).collect();
        if !missing.is_empty() {
            c.notes.push(format!(
                "classic: {label} left out: the Python package{} {} {} missing for {} (pip install {}, or {INSTALL})",
                if missing.len() > 1 { "s" } else { "" },
                missing.join(", "),
                if missing.len() > 1 { "are" } else { "is" },
                py.display(),
                missing.join(" ")
            ));
            continue;
        }
        c.peers.push(peer(
            label,
            format!(
                "{} {} {client} --url {{url}} -n {{tasks}} -c {}{cafile}",
                quoted(&py),
                quoted(&script),
                if client == "serial" { "1" } else { "{workers}" }
            ),
            presets::CRAWL_WORKLOAD,
            gil,
            &[tasks],
        ));
    }
}

/// `mailer`: MRI's sequential, fork, threads and pool of 10, plus Celluloid and Sidekiq
/// where their gems are installed (Sidekiq on the study's Redis).
fn mailer(c: &mut Classic, quick: bool, gil: bool, redis: bool) {
    let Some(ruby) = on_path("ruby") else {
        c.notes.push(format!(
            "classic: ruby is not on PATH, so the rb: cells of mailer are left out (apt-get install ruby, or {INSTALL})"
        ));
        return;
    };
    let (workload, fib) = presets::mailer_task(quick);
    let script = c.dir.path().join("mailer.rb");
    let gem = |name: &str| {
        Command::new(&ruby)
            .args(["-e", &format!("require '{name}'")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let version =
        output(Command::new(&ruby).args(["-e", "print RUBY_VERSION"])).unwrap_or_default();
    let mut rows = vec![
        ("rb:seq", "seq"),
        ("rb:fork", "fork"),
        ("rb:threads", "threads"),
        ("rb:pool:10", "pool"),
    ];
    if gem("celluloid") {
        rows.push(("rb:celluloid:10", "celluloid"));
    } else {
        c.notes.push(format!(
            "classic: rb:celluloid:10 left out: the celluloid gem is missing (apt-get install ruby-celluloid, or {INSTALL})"
        ));
    }
    match (gem("sidekiq"), on_path("sidekiq"), redis) {
        (true, Some(_), true) => rows.push(("rb:sidekiq:10", "sidekiq")),
        (true, Some(_), false) => c.notes.push(
            "classic: rb:sidekiq:10 left out: it needs the study's Redis (--jobs-backend redis://HOST:PORT/DB)".into(),
        ),
        _ => c.notes.push(format!(
            "classic: rb:sidekiq:10 left out: the sidekiq gem or command is missing (apt-get install ruby-sidekiq, or {INSTALL})"
        )),
    }
    for (label, mode) in rows {
        // rb:sidekiq:10 finds the study's Redis in CONCUR_JOBS_BACKEND, which every external
        // cell gets: a password on its command line would show in `ps`.
        let cmd = format!(
            "{} {} {mode} --tasks {{tasks}} --fib {fib} --workers 10",
            quoted(&ruby),
            quoted(&script)
        );
        c.peers
            .push(peer(label, cmd, workload, gil, &[presets::MAILER_TASKS]));
    }
    c.notes.push(format!(
        "classic: MRI {version} ({}), each delivery computes fib({fib}) like concur's {workload}",
        ruby.display()
    ));
}

/// `concur classic install`: apt-get for Ruby, its gems and Python's venv, then a virtual
/// environment with pip for the Python clients; prints each step and returns the exit status
/// (1 when a step failed).
pub fn install() -> Result<i32> {
    let mut failed = false;
    let mut step = |what: &str, cmd: &mut Command| {
        eprintln!("classic install: {what}");
        match cmd.status() {
            Ok(s) if s.success() => {}
            Ok(s) => {
                eprintln!("classic install: {what} failed ({s})");
                failed = true;
            }
            Err(e) => {
                eprintln!("classic install: {what} could not start: {e}");
                failed = true;
            }
        }
    };
    match on_path("apt-get") {
        Some(apt) => {
            // SAFETY: geteuid only reads this process's credentials.
            let root = unsafe { libc::geteuid() } == 0;
            let mut cmd = if root {
                Command::new(&apt)
            } else {
                let mut c = Command::new("sudo");
                c.arg(&apt);
                c
            };
            cmd.env("DEBIAN_FRONTEND", "noninteractive")
                .args(["install", "-y"])
                .args(APT_PACKAGES)
                .args(runtimes::APT_PACKAGES);
            step(
                &format!(
                    "apt-get install -y {} {}",
                    APT_PACKAGES.join(" "),
                    runtimes::APT_PACKAGES.join(" ")
                ),
                &mut cmd,
            );
        }
        None => eprintln!(
            "classic install: apt-get is not here; install {}, {} with your package manager",
            APT_PACKAGES.join(", "),
            runtimes::APT_PACKAGES.join(", ")
        ),
    }
    let venv = home().join("venv");
    let Some(py) = on_path("python3") else {
        eprintln!("classic install: python3 is not on PATH; install it and run this again");
        return Ok(1);
    };
    step(
        &format!("python3 -m venv {}", venv.display()),
        Command::new(&py).args(["-m", "venv"]).arg(&venv),
    );
    step(
        &format!("pip install {}", PIP_PACKAGES.join(" ")),
        Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet"])
            .args(PIP_PACKAGES),
    );
    if failed {
        eprintln!(
            "classic install: some steps failed; --classic leaves out what is missing, with a note"
        );
        return Ok(1);
    }
    println!(
        "classic install: done; --classic now uses {} and ruby on PATH",
        venv.join("bin/python").display()
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_program_shows_by_name_or_file_and_unknown_ones_are_named() {
        for p in PROGRAMS {
            assert_eq!(show(p.name).unwrap(), p.text);
            assert_eq!(show(p.file).unwrap(), p.text);
        }
        let e = show("nope").unwrap_err().to_string();
        assert!(
            e.contains("'nope'") && e.contains("gil, crawl, mailer, crawl-go"),
            "{e}"
        );
    }
}
