//! CPython: the classic gil and crawl experiments' own programs (`gil.py`, `crawl.py`), and
//! the tasks study's asyncio (on its own loop and on uvloop's), trio and threads
//! (`tasks.py`). The interpreter is the virtual environment of `concur classic install` if
//! there is one, else `python3` on `PATH`.

use std::path::PathBuf;
use std::process::Command;

use super::INSTALL;
use super::{calibrate, spin_time, Classic, Language, Part, Program, Programs, Row, Sizes, Study};
use crate::classic::toolchain::{home, on_path, output, quoted};
use crate::plan::presets;

/// The language.
pub(super) const LANGUAGE: Language = Language {
    name: "python",
    apt: &[
        "python3-venv",
        "python3-pip",
        "libcurl4-openssl-dev",
        "libssl-dev",
        "python3-dev",
    ],
    parts: &[
        Part {
            study: Study::Gil,
            place: 10,
            programs: Programs::Shipped(&[Program {
                name: "gil",
                file: "gil.py",
                help: "CPython: math1 (a, b = b, a*b) or io1 (reads of /dev/urandom) K times, plain, threads or processes; --table: the classic's whole table",
                text: include_str!("../gil.py"),
            }]),
            rows: &["py:plain", "py:threads", "py:processes"],
            classic: true,
            threads: &[],
            add: gil,
        },
        Part {
            study: Study::Crawl,
            place: 10,
            programs: Programs::Shipped(&[Program {
                name: "crawl",
                file: "crawl.py",
                help: "CPython: N GETs of the delay server with requests (serial), gevent, tornado's curl client or aiohttp, over https with --cafile",
                text: include_str!("../crawl.py"),
            }]),
            rows: &[
                "py:requests",
                "py:gevent:100",
                "py:tornado-curl:100",
                "py:aiohttp:100",
            ],
            classic: true,
            threads: &[],
            add: crawl,
        },
        Part {
            study: Study::Tasks,
            place: 60,
            programs: Programs::Shipped(&[Program {
                name: "tasks-python",
                file: "tasks.py",
                help: "CPython: N asyncio coroutines (on asyncio's loop or uvloop's), N trio tasks or N threads that each sleep (the tasks study)",
                text: include_str!("../tasks.py"),
            }]),
            rows: TASKS_ROWS,
            classic: false,
            threads: &["py:threads"],
            add: tasks,
        },
    ],
};

/// The Python packages the crawl clients use, as pip names them (`concur classic install`
/// installs them in its virtual environment).
pub const PIP_PACKAGES: &[&str] = &["requests", "gevent", "tornado", "pycurl", "aiohttp"];

/// The Python packages of the tasks study's event loops beyond asyncio's own, as pip (and
/// `import`) name them; `concur classic install` installs them too.
pub const TASKS_PIP_PACKAGES: &[&str] = &["uvloop", "trio"];

const TASKS_ROWS: &[&str] = &["py:asyncio", "py:uvloop", "py:trio", "py:threads"];

/// A Python one-liner that prints which of the modules named in its arguments this
/// interpreter can import, separated by spaces.
const FIND_MODULES: &str =
    "import importlib.util as u, sys; print(' '.join(m for m in sys.argv[1:] if u.find_spec(m)))";

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

/// The note for the classic rows of `study` left out without a Python.
fn no_python(c: &mut Classic, study: &str) {
    c.notes.push(format!(
        "classic: python3 is not on PATH, so the py: cells of {study} are left out (apt-get install python3, or {INSTALL})"
    ));
}

/// `gil`: CPython's plain calls, threads and processes for K = 1, 2, 6, 10, on the CPU body
/// (sized here to take as long as concur's task) and the read body (the same reads), in the
/// tables with the lock, beside concur's emulated one.
fn gil(c: &mut Classic, s: &Sizes) {
    let Some(py) = python() else {
        return no_python(c, "gil");
    };
    let spin_n = s.spin_n();
    let read = if s.quick {
        presets::GIL_READ_QUICK
    } else {
        presets::GIL_READ_FULL
    };
    let script = c.path("gil.py");
    const PROBE: u64 = 200_000;
    let (py_s, version) = match calibrate(&py, &script, PROBE) {
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
    // io1's task reads what concur's read task reads: its bytes.
    let io1_bytes = reads.parse::<u64>().ok().zip(size.parse::<u64>().ok());
    let io1_row = Row {
        workload: read,
        gil: true,
        each: io1_bytes.map(|(r, s)| r * s),
    };
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
        let math1 = format!("{base} --body math1 --iterations {iterations}");
        let io1 = format!("{base} --body io1 --reads {reads} --read-size {size}");
        let rows = presets::GIL_TASKS;
        if label == "py:plain" {
            c.serial_row(label, math1, Row::spin(&spin, true), rows);
            c.serial_row(label, io1, io1_row, rows);
        } else {
            c.row(label, math1, Row::spin(&spin, true), rows);
            c.row(label, io1, io1_row, rows);
        }
    }
    c.notes.push(format!(
        "classic: CPython {version} ({}), math1 with {iterations} iterations ≈ {:.0} ms a call, as long as concur's {spin} task here (both timed now); io1 makes the same reads as {read}; the py: rows sit in the tables with the lock",
        py.display(),
        rust_s * 1000.0
    ));
}

/// `crawl`: the classic's Python clients against the study's server, trusting `--cacert`'s
/// CA as concur's clients do; a client whose packages are missing is a note.
fn crawl(c: &mut Classic, s: &Sizes) {
    let Some(py) = python() else {
        return no_python(c, "crawl");
    };
    let (n, seq_n) = presets::crawl_sizes(s.quick, s.full);
    let cafile = s.cafile();
    if s.insecure {
        c.notes.push(
            "classic: the py: crawl clients verify the server's certificate: -k does not reach them (give its CA with --cacert)".into(),
        );
    }
    let script = c.path("crawl.py");
    let found = output(
        Command::new(&py)
            .arg("-c")
            .arg(FIND_MODULES)
            .args(PIP_PACKAGES),
    )
    .unwrap_or_default();
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
            let many = missing.len() > 1;
            c.notes.push(format!(
                "classic: {label} left out: the Python package{} {} {} missing for {} (pip install {}, or {INSTALL})",
                if many { "s" } else { "" },
                missing.join(", "),
                if many { "are" } else { "is" },
                py.display(),
                missing.join(" ")
            ));
            continue;
        }
        let serial = client == "serial";
        let command = format!(
            "{} {} {client} --url {{url}} -n {{tasks}} -c {}{cafile}",
            quoted(&py),
            quoted(&script),
            if serial { "1" } else { "{workers}" }
        );
        if serial {
            c.serial_row(
                label,
                command,
                Row::of(presets::CRAWL_WORKLOAD, s.gil),
                &[tasks],
            );
        } else {
            c.row(
                label,
                command,
                Row::of(presets::CRAWL_WORKLOAD, s.gil),
                &[tasks],
            );
        }
    }
}

/// `tasks`: N asyncio coroutines, the same on uvloop's loop and N trio tasks where their
/// packages are installed (a note where not), and N threads up to [`super::THREADS_MAX`]
/// tasks.
fn tasks(c: &mut Classic, s: &Sizes) {
    let labels = TASKS_ROWS.join(", ");
    let Some(py) = python() else {
        return c.missing(&labels, "python3", "python3");
    };
    let base = format!("{} {}", quoted(&py), quoted(&c.path("tasks.py")));
    let args = s.tasks_args();
    let found = output(
        Command::new(&py)
            .arg("-c")
            .arg(FIND_MODULES)
            .args(TASKS_PIP_PACKAGES),
    )
    .unwrap_or_default();
    for (label, mode, package) in [
        ("py:asyncio", "asyncio", None),
        ("py:uvloop", "uvloop", Some("uvloop")),
        ("py:trio", "trio", Some("trio")),
        ("py:threads", "threads", None),
    ] {
        if let Some(p) = package.filter(|p| !found.split(' ').any(|f| f == *p)) {
            c.notes.push(format!(
                "runtimes: {label} left out: the Python package {p} is missing for {} (pip install {p}, or {INSTALL})",
                py.display()
            ));
            continue;
        }
        let counts = if mode == "threads" {
            s.thread_counts()
        } else {
            s.task_counts().to_vec()
        };
        c.tasks_row(label, format!("{base} {mode} {args}"), &counts, s);
    }
    c.version_note(&labels, &py, Command::new(&py).arg("--version"));
}
