//! Every command the documentation shows runs, and what the documentation shows it printing
//! still has the shape a fresh run prints, so that neither can drift from what the tool does.
//!
//! **Which lines are commands.** The fenced code blocks of README.md and of every `docs/*.md`
//! (not ```` ```rust ````). In a block that has prompt lines (`$ …`), the prompt lines are the
//! commands and every other line is output; in a block without prompts, a line that starts
//! with `concur ` is a command unless its second word ends with a colon (`concur 0.1.0: study
//! …`, `concur serve: listening …` are output), `cargo run --release -- ARGS` is `concur ARGS`
//! (the README's main command), and `export NAME=VALUE` sets NAME for the block's later
//! commands, as it would in the reader's shell. A line ending in `\` continues on the next; a
//! trailing `# …` is a comment.
//!
//! **How they run.** In document order (README.md, then `docs/*.md` by name), all in one
//! temporary directory, as one reader following the docs in one shell would: a later
//! `concur report concur-results/gil-….jsonl` finds the results file of an earlier run, and
//! `--baseline before` the baseline `--save-baseline before` saved. Each line is split like a
//! shell splits it (`shlex`) and run as the built binary, in its own process group, with a
//! deadline; it must exit 0, or the status [`EXIT_STATUS`] gives it (the docs' own failing
//! examples). A line with a shell operator as a word (`|`, `>`, `&&`, …) runs under `sh -c`
//! with the binary first on `PATH` as `concur`. A command that appears twice with the same
//! options runs once.
//!
//! **What is made small, and why that is sound.** Every flag is a real flag of the command, and
//! every value the harness changes is a size, never a meaning, so clap and the plan check the
//! command exactly as written: task counts (`-n`, `--tasks`, `--requests`, `jobs enqueue -n`)
//! keep their values up to 4 and drop larger ones (a list left empty becomes `4`); `run` and
//! `advise` take `-r 1` (`-r 4` with `--save-baseline` or `--fail-on-regression`, the fewest
//! runs at which the gate can fail; a gate may then exit 1 on a slower machine, never 2)
//! (and `run` `--warmup 0`), replacing a value or added (not with
//! `--rate auto`, where `-r` would add runs and `--warmup` is refused); a built-in study gets
//! `--quick`; `--duration` becomes 1 s (a probe's 200 ms under `--rate auto`); `crawl` without
//! `-n` gets `-n 4`. Values are replaced in place, not overridden by a second flag: concur's
//! flags do not let the last value win (a second `-r` is an error, a second `-n` adds counts).
//! On the project's 2-core VM the whole file takes about 2 min 10 s quiet (2026-12-06), up to 5 min
//! under heavy load.
//!
//! **What the docs assume exists**, the harness provides in the directory or rewrites to:
//! `Cargo.lock` (the crate's own), `big.log` (64 KiB of text), `./convert` (a stand-in that
//! reads its input file) and `in-0.png` … `in-19.png`, `cert.pem` (the CA of the TLS server
//! below); `127.0.0.1:8080` and `localhost:8080` become a `concur serve` the test started,
//! `127.0.0.1:8443` and `/tmp/concur-serve-x1Yz2W/concur-serve-8443.pem` a `concur serve --tls-self-signed` and its
//! certificate; `redis://queue-host:6379/0` a `redis-server` the test started, and
//! `redis://:PASSWORD@queue-host:6379/0` a second one started with `--requirepass PASSWORD`
//! (`redis://hub-host:6379/0`, a hub, is the first one too); a
//! word with `…` is a glob in the directory (`…` = `*`), the newest match by name (results
//! file names carry their time).
//!
//! **What never ends on its own** is ended by a condition, never by a sleep: `concur serve` is
//! started on a free port (its `--addr` replaced), must print that it listens and answer a
//! request (`/add` over HTTP; a ClientHello with a TLS record over HTTPS), then gets SIGTERM and
//! must exit 0; `concur jobs work` gets `--until-empty`, its own flag to exit once the queues
//! are empty, so it works off what the docs enqueued and ends; `concur agent` must say that it
//! joined the hub, and stays joined for the later commands (a study `--hub … --hosts 1,2,3`
//! after three of them), until the end.
//!
//! **What the pasted output must still say.** In a block with prompts, the lines under a
//! command, up to the next prompt, are its pasted output; each is held against the output
//! (stdout, then stderr) of that command's fresh run here (or, for a command the docs show
//! twice, of its one run), for shape ([`compare_output`]):
//! - *Tables* (a header above a `═` rule; or, in a paste trimmed of its rules, a header whose
//!   first name is `model`; the rows below it down to a blank line or a rule): each pasted
//!   table is a fresh table with the same title (the line above its top rule, the docs' hosts
//!   replaced as in the command) and the same columns, names and order. A paste may leave out
//!   tables and rows (its text should say so), never add or rename them.
//! - *Rows*: each pasted row is a fresh row with the same label (the first column) and, where
//!   the command ran at the docs' size, the same `tasks`. Counts the command sets (`tasks`,
//!   `asked/s`) are compared exactly; `tasks` only at the docs' size.
//! - *Units*, cell by cell: what is left of a cell once its figures are taken out, exactly
//!   (`±%`, `×`, `/`, `/ runs`, `(auto)`), but for time (ns, µs, ms, s) and size (B to TiB):
//!   the scale follows the figure's size, so within each of these two dimensions any scale
//!   matches. A word alone (`yes`, `BEHIND`) is a verdict and matches any word; `-` (not
//!   measured) and an empty cell (no failure) are each a unit of their own.
//! - *Figures*: times and sizes within [`FIGURE_FACTOR`]× of the fresh run's either way, or
//!   [`TIME_SLACK`] s / [`BYTES_SLACK`] bytes apart, where the command ran at the docs' size
//!   (one run against the docs' median is within that on a quiet machine); rates, speedups
//!   and percentages follow from these and are not compared on their own.
//! - *Messages* outside tables that start `concur: `, `error: ` or `warning: `: a fresh line
//!   says each again, digits aside (`#` for each run of them), a `…` in the pasted line
//!   standing for any text.
//!
//! What the harness changed limits what a fresh run can confirm: a command whose task counts
//! or `--duration` it made small keeps its tables, columns, labels and units (not `tasks`, not
//! the figures); a built-in study it gave `--quick` keeps its columns, its row labels with
//! their numbers aside (`async:1000000` is `async:#`), and each column's units where both show
//! any. Lines that are neither tables nor messages (the machine line, advice, notes, JSON) and
//! other programs' output (`curl`, `h2load`) are not compared.
//!
//! **Figures that depend on the machine** may be marked: `<!-- example: WHOSE FIGURES -->` as
//! the last line that is not blank before a block says that its figures (times, sizes) and its
//! warnings (a busy machine, a remote host) are that machine's; they are then not compared,
//! and everything else is. The marker must say whose figures they are and must stand over a
//! block with pasted output, or the extraction fails. Only a block whose figures depend on the
//! machine takes one: CPU time, memory, timings on a loaded machine, a host other than the
//! test's loopback.
//!
//! A command the harness cannot run goes in [`NOT_RUN`], by exact text and with its reason;
//! the test fails when an entry of [`NOT_RUN`] or [`EXIT_STATUS`] no longer appears in the
//! docs, so neither list can rot.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::wait_for;

/// How long one command may take at its small size before it counts as hung.
const DEADLINE: Duration = Duration::from_secs(180);

/// Commands the harness does not run: (the command's exact text, as [`DocCommand::text`]
/// gives it, the reason). Every entry must still appear in the docs.
const NOT_RUN: &[(&str, &str)] = &[];

/// Commands the docs show failing, with the exit status they document.
const EXIT_STATUS: &[(&str, i32)] = &[
    // docs/output.md: "When no run of a group succeeded …", the run ends with exit status 1.
    (
        "concur run -w http:http://127.0.0.1:1/x -m seq -n 3 -r 1",
        1,
    ),
    // docs/output.md: bad input is refused before anything runs, with exit code 2.
    ("concur run -w fib:abc -m seq", 2),
    ("concur run -w fib:30 -m pool:0", 2),
];

/// The largest task count a command keeps.
const SMALL: usize = 4;

/// The runs a command that saves or gates on a baseline keeps: the fewest at which
/// `--fail-on-regression` can fail (Mann-Whitney's 2/70 < 0.05).
const GATE_REPEAT: &str = "4";

/// Shell operators that make a line a shell pipeline rather than one command.
const SHELL_OPS: &[&str] = &[
    "|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1", "&>",
];

/// One command found in the docs.
#[derive(Debug, Clone)]
struct DocCommand {
    /// The file it is in, relative to the crate root.
    file: String,
    /// Its (first) line there, from 1.
    line: usize,
    /// Its text: the line without prompt or comment, continuation lines joined, as
    /// [`NOT_RUN`] and [`EXIT_STATUS`] name it.
    text: String,
    /// Its words after `concur` (or `cargo run --release --`), as a shell splits them.
    args: Vec<String>,
    /// `export`s earlier in its block.
    env: Vec<(String, String)>,
    /// The output pasted under it: in a block with prompts, the lines up to the next prompt.
    output: Vec<String>,
    /// What the block's `<!-- example: … -->` marker says (the machine its figures are from).
    example: Option<String>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, then `docs/*.md` by name.
fn doc_files() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    let mut files = vec![root().join("README.md")];
    files.extend(docs);
    files
}

/// `line` without a trailing comment: from an unquoted `#` that starts a word.
fn strip_comment(line: &str) -> &str {
    let (mut single, mut double, mut escaped) = (false, false, false);
    let mut prev_space = true;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' && !single {
            escaped = true;
        } else if c == '\'' && !double {
            single = !single;
        } else if c == '"' && !single {
            double = !double;
        } else if c == '#' && !single && !double && prev_space {
            return line[..i].trim_end();
        }
        prev_space = c.is_whitespace();
    }
    line.trim_end()
}

/// A fenced block being read.
struct Block {
    /// Its language (after the fence).
    lang: String,
    /// Its fence's line, from 1.
    fence: usize,
    /// Its lines, numbered from 1.
    lines: Vec<(usize, String)>,
    /// What its example marker says.
    example: Option<String>,
}

/// The commands of one document, in order (see the module's doc for the rules).
fn extract(file: &str, text: &str) -> Vec<DocCommand> {
    let mut out = Vec::new();
    let mut block: Option<Block> = None;
    // The last line that was not blank, outside blocks: an example marker is the line before
    // its block.
    let mut before = String::new();
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start();
        if fence.starts_with("```") || fence.starts_with("~~~") {
            // A block right after another is not under the first one's marker.
            let marker_line = std::mem::replace(&mut before, fence.to_string());
            match block.take() {
                None => {
                    let example = example_marker(&marker_line);
                    assert!(
                        example.as_ref().is_none_or(|why| !why.is_empty()),
                        "{file}:{}: the example marker over this block must say whose figures \
                         these are",
                        i + 1
                    );
                    block = Some(Block {
                        lang: fence[3..].trim().to_string(),
                        fence: i + 1,
                        lines: Vec::new(),
                        example,
                    });
                }
                Some(b) if b.lang != "rust" => {
                    let cmds = block_commands(file, &b.lines, b.example.clone());
                    assert!(
                        b.example.is_none() || cmds.iter().any(|c| !c.output.is_empty()),
                        "{file}:{}: an example marker over a block with no pasted output",
                        b.fence
                    );
                    out.extend(cmds);
                }
                Some(_) => {}
            }
        } else if let Some(b) = block.as_mut() {
            b.lines.push((i + 1, line.to_string()));
        } else if !line.trim().is_empty() {
            before = line.trim().to_string();
        }
    }
    assert!(block.is_none(), "{file}: a code block is never closed");
    out
}

/// `<!-- example: WHY -->`: WHY.
fn example_marker(line: &str) -> Option<String> {
    let rest = line.strip_prefix("<!--")?.strip_suffix("-->")?.trim();
    Some(rest.strip_prefix("example:")?.trim().to_string())
}

/// The commands of one fenced block, `lines` numbered from 1.
fn block_commands(
    file: &str,
    lines: &[(usize, String)],
    example: Option<String>,
) -> Vec<DocCommand> {
    // Logical lines: a trailing backslash continues on the next line.
    let mut logical: Vec<(usize, String)> = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (n, line) in lines {
        let (start, mut joined) = match pending.take() {
            Some((start, head)) => (start, format!("{head} {}", line.trim_start())),
            None => (*n, line.clone()),
        };
        if joined.ends_with('\\') {
            joined.pop();
            pending = Some((start, joined.trim_end().to_string()));
        } else {
            logical.push((start, joined));
        }
    }
    logical.extend(pending);
    let prompted = logical.iter().any(|(_, l)| l.starts_with("$ "));
    let mut env = Vec::new();
    let mut out: Vec<DocCommand> = Vec::new();
    let mut last: Option<usize> = None;
    for (n, line) in logical {
        let line = if prompted {
            match line.strip_prefix("$ ") {
                Some(rest) => rest.to_string(),
                None => {
                    // Output: the last command's, when it was one.
                    if let Some(c) = last.and_then(|i| out.get_mut(i)) {
                        c.output.push(line);
                    }
                    continue;
                }
            }
        } else {
            line
        };
        last = None;
        let text = strip_comment(&line).to_string();
        if !["concur ", "cargo run --release -- ", "export "]
            .iter()
            .any(|p| text.starts_with(p))
        {
            continue;
        }
        let words = shlex::split(&text)
            .unwrap_or_else(|| panic!("{file}:{n}: the shell cannot split {text:?}"));
        if words.first().map(String::as_str) == Some("export") {
            for w in &words[1..] {
                let (k, v) = w
                    .split_once('=')
                    .unwrap_or_else(|| panic!("{file}:{n}: export without a value: {text:?}"));
                env.push((k.to_string(), v.to_string()));
            }
            continue;
        }
        let args = if words.first().map(String::as_str) == Some("concur") {
            // `concur 0.1.0: study …`, `concur serve: listening …` are output.
            let second = text.split_whitespace().nth(1).unwrap_or("");
            if second.ends_with(':') {
                continue;
            }
            words[1..].to_vec()
        } else if words.starts_with(&[
            "cargo".into(),
            "run".into(),
            "--release".into(),
            "--".into(),
        ]) {
            words[4..].to_vec()
        } else {
            continue;
        };
        last = Some(out.len());
        out.push(DocCommand {
            file: file.to_string(),
            line: n,
            text,
            args,
            env: env.clone(),
            output: Vec::new(),
            example: example.clone(),
        });
    }
    out
}

/// Every command of every document, in order.
fn all_commands() -> Vec<DocCommand> {
    let mut out = Vec::new();
    for path in doc_files() {
        let rel = path
            .strip_prefix(root())
            .expect("under the crate")
            .display()
            .to_string();
        let text = std::fs::read_to_string(&path).expect("a doc");
        out.extend(extract(&rel, &text));
    }
    out
}

/// A free loopback port (the listener is closed again at once).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A process the test started, killed (with its process group) when dropped.
struct Background {
    child: Child,
    what: String,
}

impl Background {
    fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group this test created for the child.
        unsafe { libc::kill(-self.pid(), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// A `redis-server` on a free loopback port, persisting nothing.
fn redis(dir: &Path, password: Option<&str>) -> (Background, u16) {
    let port = free_port();
    let data = dir.join(format!("redis-{port}"));
    std::fs::create_dir_all(&data).expect("redis dir");
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(&data)
        .args(password.iter().flat_map(|p| ["--requirepass", p]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    let child = cmd
        .spawn()
        .expect("redis-server must be installed (.ci/run installs it)");
    let bg = Background {
        child,
        what: format!("redis-server on {port}"),
    };
    wait_for(&bg.what, Duration::from_secs(20), || {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        let mut buf = [0u8; 16];
        s.write_all(b"PING\r\n").is_ok()
            && s.read(&mut buf)
                .is_ok_and(|n| buf[..n].starts_with(b"+PONG") || buf[..n].starts_with(b"-NOAUTH"))
    });
    (bg, port)
}

/// One GET of `/add` on a plain server: whether it answered 200.
fn answers_http(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let req = "GET /add?name=doc&delay=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    let mut reply = String::new();
    s.write_all(req.as_bytes()).is_ok()
        && s.read_to_string(&mut reply).is_ok()
        && reply.starts_with("HTTP/1.1 200")
        && reply.ends_with("ok: added\n")
}

/// Whether an HTTPS server answers a ClientHello in TLS: a handshake (0x16) or alert (0x15)
/// record comes back (this bare hello may offer too little to agree on; a server speaking
/// plain HTTP would answer with text, and a dead one not at all).
fn answers_tls(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    // A minimal TLS 1.2 ClientHello (one cipher suite, no extensions).
    let hello: &[u8] = &[
        0x16, 0x03, 0x01, 0x00, 0x2d, // record: handshake, 45 bytes
        0x01, 0x00, 0x00, 0x29, // ClientHello, 41 bytes
        0x03, 0x03, // TLS 1.2
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
        26, 27, 28, 29, 30, 31, 32,   // random
        0x00, // session id
        0x00, 0x02, 0xc0, 0x2f, // TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        0x01, 0x00, // no compression
    ];
    let mut first = [0u8; 1];
    s.write_all(hello).is_ok()
        && s.read_exact(&mut first).is_ok()
        && (first[0] == 0x16 || first[0] == 0x15)
}

/// Starts `concur ARGS` (a server) with stderr to `log`, and waits until it says it listens.
fn start_server(env: &Env, args: &[String], log: &Path) -> Result<Background, String> {
    start_background(env, args, log, "listening on")
}

/// Starts `concur ARGS` in the background and waits until its stderr says `ready`.
fn start_background(
    env: &Env,
    args: &[String],
    log: &Path,
    ready: &str,
) -> Result<Background, String> {
    let err = std::fs::File::create(log).expect("log file");
    let mut cmd = env.concur();
    cmd.args(args)
        .stdout(Stdio::null())
        .stderr(err)
        .process_group(0);
    let child = cmd.spawn().map_err(|e| format!("cannot start: {e}"))?;
    let mut bg = Background {
        child,
        what: format!("concur {}", args.join(" ")),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let said = std::fs::read_to_string(log).unwrap_or_default();
        if said.contains(ready) {
            return Ok(bg);
        }
        if let Ok(Some(st)) = bg.child.try_wait() {
            return Err(format!(
                "{} exited ({st}) before it said '{ready}': {said}",
                bg.what
            ));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{} did not say '{ready}' within 30 s: {said}",
                bg.what
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What the commands run against: the directory, the servers, the binary on `PATH`.
struct Env {
    dir: PathBuf,
    tmp: PathBuf,
    bin_dir: PathBuf,
    http_port: u16,
    https_port: u16,
    /// The HTTPS server's certificate, where it said it wrote it.
    pem: PathBuf,
    redis_port: u16,
    redis_auth_port: u16,
}

impl Env {
    /// The binary, with the environment every doc command gets.
    fn concur(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_concur"));
        self.prepare(&mut c);
        c
    }

    fn prepare(&self, c: &mut Command) {
        let path = std::env::var("PATH").unwrap_or_default();
        c.current_dir(&self.dir)
            .env_remove("CONCUR_JOBS_BACKEND")
            .env_remove("CONCUR_HUB")
            .env("TMPDIR", &self.tmp)
            .env("PATH", format!("{}:{path}", self.bin_dir.display()));
    }

    /// A word with the docs' placeholders replaced by what this test started.
    fn substitute(&self, word: &str) -> String {
        let w = self.hosts(word);
        if w.contains('…') {
            self.glob(&w)
        } else {
            w
        }
    }

    /// `text` with the docs' hosts, ports and certificate replaced by what this test started.
    fn hosts(&self, text: &str) -> String {
        let https = format!("127.0.0.1:{}", self.https_port);
        let http = format!("127.0.0.1:{}", self.http_port);
        text.replace(
            "/tmp/concur-serve-x1Yz2W/concur-serve-8443.pem",
            &self.pem.display().to_string(),
        )
        .replace("127.0.0.1:8443", &https)
        .replace("localhost:8443", &https)
        .replace("127.0.0.1:8080", &http)
        .replace("localhost:8080", &http)
        .replace(
            ":PASSWORD@queue-host:6379",
            &format!(":PASSWORD@127.0.0.1:{}", self.redis_auth_port),
        )
        .replace("queue-host:6379", &format!("127.0.0.1:{}", self.redis_port))
        .replace("hub-host:6379", &format!("127.0.0.1:{}", self.redis_port))
        // The docs' agents list their private network; here the study's server is on
        // loopback, which they must list too.
        .replace("10.0.0.0/8", "10.0.0.0/8,127.0.0.1")
    }

    /// `…` as `*` in the directory: the last match by name (or the word as it was).
    fn glob(&self, word: &str) -> String {
        let (head, tail) = word.split_once('…').expect("a …");
        let (parent, prefix) = match head.rfind('/') {
            Some(i) => (&head[..=i], &head[i + 1..]),
            None => ("", head),
        };
        let mut names: Vec<String> = std::fs::read_dir(self.dir.join(parent))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with(prefix) && n.ends_with(tail))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
            .pop()
            .map_or_else(|| word.to_string(), |n| format!("{parent}{n}"))
    }
}

/// The index of `flag`'s value in `args` (`-n 4`, `--tasks 4`, `--tasks=4`).
fn flag_value(args: &[String], names: &[&str]) -> Option<usize> {
    args.iter()
        .position(|a| names.contains(&a.as_str()))
        .map(|i| i + 1)
        .or_else(|| {
            args.iter().position(|a| {
                names
                    .iter()
                    .any(|n| n.starts_with("--") && a.starts_with(&format!("{n}=")))
            })
        })
}

/// Sets `flag`'s value (in place, keeping the form it was given in), or adds `flag value`
/// when it is absent and `add` says so.
fn set_flag(args: &mut Vec<String>, names: &[&str], value: &str, add: bool) {
    match flag_value(args, names) {
        Some(i) if i < args.len() => match args[i].split_once('=') {
            Some((name, _)) if names.contains(&name) => args[i] = format!("{name}={value}"),
            _ => args[i] = value.to_string(),
        },
        Some(_) => {}
        None if add => args.extend([names[0].to_string(), value.to_string()]),
        None => {}
    }
}

/// Keeps the counts of a `-n` value up to [`SMALL`] (`1,2,4,8` → `1,2,4`, `1000` → `4`).
fn shrink_counts(value: &str) -> String {
    let (prefix, list) = match value.split_once('=') {
        Some((p, l)) => (format!("{p}="), l),
        None => (String::new(), value),
    };
    let Ok(counts) = list
        .split(',')
        .map(|c| c.trim().parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
    else {
        return value.to_string();
    };
    let kept: Vec<String> = counts
        .iter()
        .filter(|c| **c <= SMALL)
        .map(|c| c.to_string())
        .collect();
    if kept.is_empty() {
        format!("{prefix}{SMALL}")
    } else {
        format!("{prefix}{}", kept.join(","))
    }
}

fn has(args: &[String], names: &[&str]) -> bool {
    flag_value(args, names).is_some()
}

/// The command made small (see the module's doc); `serve` and pipelines are handled apart.
fn shrink(args: &[String]) -> Vec<String> {
    let mut a = args.to_vec();
    let sub = a.first().cloned().unwrap_or_default();
    let counts: &[&str] = match sub.as_str() {
        "crawl" => &["-n", "--requests"],
        "run" | "advise" => &["-n", "--tasks"],
        "jobs" => &["-n"],
        _ => &[],
    };
    if let Some(i) = flag_value(&a, counts) {
        if i < a.len() {
            a[i] = shrink_counts(&a[i]);
        }
    }
    let rate = flag_value(&a, &["--rate"]).and_then(|i| a.get(i).cloned());
    let auto = rate.as_deref() == Some("auto");
    if rate.is_some() {
        let d = if auto { "200ms" } else { "1s" };
        set_flag(&mut a, &["--duration"], d, auto);
    }
    // The regression gate refuses sizes at which it could never fail (fewer than 4 runs a
    // side): a command that saves a baseline or is judged against one keeps 4.
    let repeat = if has(&a, &["--save-baseline", "--fail-on-regression"]) {
        GATE_REPEAT
    } else {
        "1"
    };
    match sub.as_str() {
        "run" => {
            set_flag(&mut a, &["-r", "--repeat"], repeat, !auto);
            if !auto {
                set_flag(&mut a, &["--warmup"], "0", true);
            }
            let freeform = has(&a, &["-w", "--workload", "-m", "--model", "-n", "--tasks"]);
            if !freeform && !a.iter().any(|x| x == "--quick") {
                a.push("--quick".into());
            }
        }
        "advise" => set_flag(&mut a, &["-r", "--repeat"], repeat, !auto),
        "crawl" if rate.is_none() => {
            set_flag(&mut a, &["-n", "--requests"], &SMALL.to_string(), true);
        }
        "jobs"
            if a.get(1).map(String::as_str) == Some("work")
                && !a.iter().any(|x| x == "--until-empty") =>
        {
            a.push("--until-empty".into());
        }
        _ => {}
    }
    a
}

/// What identifies a command for running it once: its leading words, then its options as a
/// set (the same options in another order run the same cells).
fn run_key(args: &[String], env: &[(String, String)]) -> String {
    let lead: Vec<&String> = args.iter().take_while(|a| !a.starts_with('-')).collect();
    let mut groups: Vec<Vec<&String>> = Vec::new();
    for a in &args[lead.len()..] {
        match groups.last_mut() {
            Some(g) if !a.starts_with('-') || a == "-" => g.push(a),
            _ => groups.push(vec![a]),
        }
    }
    groups.sort();
    format!("{lead:?} {groups:?} {env:?}")
}

/// How one command ended.
enum Outcome {
    Exited(ExitStatus, Duration),
    Failed(String),
}

/// Runs `cmd` to its end within [`DEADLINE`], stdout and stderr to files under `logs`.
fn run_to_end(mut cmd: Command, logs: &Path, n: usize) -> Outcome {
    let out = logs.join(format!("{n}.out"));
    let err = logs.join(format!("{n}.err"));
    cmd.stdout(std::fs::File::create(&out).expect("log"))
        .stderr(std::fs::File::create(&err).expect("log"))
        .stdin(Stdio::null())
        .process_group(0);
    let start = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(format!("cannot start: {e}")),
    };
    let pid = child.id() as i32;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if start.elapsed() > DEADLINE => break None,
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Outcome::Failed(format!("wait: {e}")),
        }
    };
    // Whatever the command left in its process group goes too (a command that leaves
    // processes behind is a bug the other tests look for; here it must not outlive the test).
    // SAFETY: kill(2) on the process group this test created.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    match status {
        Some(st) => Outcome::Exited(st, start.elapsed()),
        None => {
            let _ = child.wait();
            Outcome::Failed(format!(
                "still running after {DEADLINE:?}; stderr: {}",
                tail(&err)
            ))
        }
    }
}

/// The last lines of a log file.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}

/// Runs a `concur serve` line: it must listen, answer, and exit 0 on SIGTERM.
fn check_serve(env: &Env, args: &[String], logs: &Path, n: usize) -> Result<Duration, String> {
    let start = Instant::now();
    let mut a = args.to_vec();
    let port = free_port();
    set_flag(&mut a, &["--addr"], &format!("127.0.0.1:{port}"), true);
    let log = logs.join(format!("{n}.err"));
    let mut server = start_server(env, &a, &log)?;
    let tls = a
        .iter()
        .any(|x| x == "--tls-self-signed" || x == "--tls-cert");
    let answered = if tls {
        answers_tls(port)
    } else {
        answers_http(port)
    };
    if !answered {
        return Err(format!("it listens on {port} but does not answer"));
    }
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(server.pid(), libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match server.child.try_wait() {
            Ok(Some(st)) if st.success() => return Ok(start.elapsed()),
            Ok(Some(st)) => return Err(format!("after SIGTERM: {st}; {}", tail(&log))),
            Ok(None) if Instant::now() > deadline => {
                return Err("still running 30 s after SIGTERM".into())
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("wait: {e}")),
        }
    }
}

/// The files the docs' commands read.
fn fixtures(dir: &Path) {
    std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")).expect("Cargo.lock");
    let line = "2026-12-01T12:00:00Z INFO concur doc fixture: a line of a log file\n";
    std::fs::write(dir.join("big.log"), line.repeat(65536 / line.len())).expect("big.log");
    let convert = dir.join("convert");
    std::fs::write(
        &convert,
        "#!/bin/sh\n# A stand-in for an image converter: reads its input.\nexec cat \"$1\"\n",
    )
    .expect("convert");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&convert, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for i in 0..20 {
        std::fs::write(dir.join(format!("in-{i}.png")), [0x89, b'P', b'N', b'G']).expect("png");
    }
}

#[test]
fn the_lists_name_only_commands_the_docs_show() {
    let texts: BTreeSet<String> = all_commands().into_iter().map(|c| c.text).collect();
    for (text, _) in NOT_RUN {
        assert!(
            texts.contains(*text),
            "NOT_RUN names a command the docs no longer show: {text}"
        );
    }
    for (text, _) in EXIT_STATUS {
        assert!(
            texts.contains(*text),
            "EXIT_STATUS names a command the docs no longer show: {text}"
        );
    }
}

#[test]
fn the_extraction_tells_commands_from_output() {
    let doc = "```sh\nconcur run gil   # a comment\nexport X='a b'\nconcur run -w 'cmd:ls #x' \\\n  -n 2\n```\n\n\
```\nconcur 0.1.0: study 'gil'\nconcur serve: listening\n```\n\n\
```console\n$ concur list\nconcur list (output, not a command)\n```\n\n\
```rust\nconcur run in rust\n```\n";
    let cmds = extract("x.md", doc);
    let texts: Vec<&str> = cmds.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "concur run gil",
            "concur run -w 'cmd:ls #x' -n 2",
            "concur list"
        ]
    );
    assert_eq!(cmds[1].args, ["run", "-w", "cmd:ls #x", "-n", "2"]);
    assert_eq!(cmds[1].env, [("X".to_string(), "a b".to_string())]);
    assert_eq!(cmds[1].line, 4);
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        shrink(&s(&[
            "run", "-w", "fib:30", "-m", "seq", "-n", "1,2,4,8", "-r", "10"
        ])),
        s(&["run", "-w", "fib:30", "-m", "seq", "-n", "1,2,4", "-r", "1", "--warmup", "0"])
    );
    assert_eq!(
        shrink(&s(&["run", "gil"])),
        s(&["run", "gil", "-r", "1", "--warmup", "0", "--quick"])
    );
    // Saving a baseline or gating on one keeps the fewest runs the gate can fail at.
    for flags in [
        &["--save-baseline", "main"][..],
        &["--baseline", "main", "--fail-on-regression"],
    ] {
        let mut cmd = s(&["run", "-w", "fib:30", "-r", "5"]);
        cmd.extend(s(flags));
        let mut want = s(&["run", "-w", "fib:30", "-r", "4"]);
        want.extend(s(flags));
        want.extend(s(&["--warmup", "0"]));
        assert_eq!(shrink(&cmd), want);
    }
    assert_eq!(
        shrink(&s(&["run", "-w", "x", "--rate", "auto", "--slo", "p99<1s"])),
        s(&[
            "run",
            "-w",
            "x",
            "--rate",
            "auto",
            "--slo",
            "p99<1s",
            "--duration",
            "200ms"
        ])
    );
    assert_eq!(
        shrink(&s(&["crawl", "u", "--requests=100"])),
        s(&["crawl", "u", "--requests=4"])
    );
    assert_eq!(
        shrink(&s(&["jobs", "work", "-c", "10"])),
        s(&["jobs", "work", "-c", "10", "--until-empty"])
    );
}

#[test]
#[ignore = "full tier: needs redis-server"]
fn every_command_in_the_docs_runs() {
    common::require(&[common::Need::Redis]);
    let _alone = common::alone();
    let commands = all_commands();
    assert!(
        commands.len() >= 20,
        "found only {} commands in the docs: is the extraction broken?",
        commands.len()
    );
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path().join("reader");
    let tmp = work.path().join("tmp");
    let logs = work.path().join("logs");
    let bin_dir = work.path().join("bin");
    for d in [&dir, &tmp, &logs, &bin_dir] {
        std::fs::create_dir_all(d).expect("dir");
    }
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_concur"), bin_dir.join("concur"))
        .expect("symlink");
    fixtures(&dir);

    let (_redis, redis_port) = redis(work.path(), None);
    let (_redis_auth, redis_auth_port) = redis(work.path(), Some("PASSWORD"));
    let mut env = Env {
        dir: dir.clone(),
        tmp: tmp.clone(),
        bin_dir,
        http_port: free_port(),
        https_port: 0,
        pem: PathBuf::new(),
        redis_port,
        redis_auth_port,
    };
    let http_args: Vec<String> = ["serve", "--addr", &format!("127.0.0.1:{}", env.http_port)]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let _http = start_server(&env, &http_args, &logs.join("http-server.err"))
        .unwrap_or_else(|e| panic!("the test's HTTP server: {e}"));
    env.https_port = free_port();
    let https_args: Vec<String> = [
        "serve",
        "--tls-self-signed",
        "--addr",
        &format!("127.0.0.1:{}", env.https_port),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let https_log = logs.join("https-server.err");
    let _https = start_server(&env, &https_args, &https_log)
        .unwrap_or_else(|e| panic!("the test's HTTPS server: {e}"));
    // `…, written to PATH (trust it …`: a new private folder each start.
    env.pem = std::fs::read_to_string(&https_log)
        .unwrap_or_default()
        .split(", written to ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .map(PathBuf::from)
        .expect("the HTTPS server names its certificate");
    std::fs::copy(&env.pem, dir.join("cert.pem")).expect("the HTTPS server's certificate");

    let not_run: BTreeMap<&str, &str> = NOT_RUN.iter().copied().collect();
    let statuses: BTreeMap<&str, i32> = EXIT_STATUS.iter().copied().collect();
    let mut seen = BTreeMap::new();
    // (the command, the run whose logs hold its output, how it was sized).
    let mut pasted: Vec<(usize, usize, Size)> = Vec::new();
    let mut failures = Vec::new();
    let mut report = Vec::new();
    // `concur agent` lines: each stays joined to the hub for the later commands.
    let mut agents: Vec<Background> = Vec::new();
    let total = Instant::now();
    for (n, c) in commands.iter().enumerate() {
        let place = format!("{}:{}", c.file, c.line);
        if not_run.contains_key(c.text.as_str()) {
            report.push(format!("{place}: not run ({})", not_run[c.text.as_str()]));
            continue;
        }
        let args: Vec<String> = c.args.iter().map(|w| env.substitute(w)).collect();
        let block_env: Vec<(String, String)> = c
            .env
            .iter()
            .map(|(k, v)| (k.clone(), env.substitute(v)))
            .collect();
        let op = args.iter().position(|w| SHELL_OPS.contains(&w.as_str()));
        let (written, rest) = args.split_at(op.unwrap_or(args.len()));
        let head = if written.first().map(String::as_str) == Some("serve") {
            written.to_vec()
        } else {
            shrink(written)
        };
        let key = run_key(&[head.clone(), rest.to_vec()].concat(), &block_env);
        let size = size_of(written, &head);
        if let Some(&first) = seen.get(&key) {
            // Run once already: its pasted output is held against that run's.
            pasted.push((n, first, size));
            continue;
        }
        seen.insert(key, n);
        pasted.push((n, n, size));
        let want = statuses.get(c.text.as_str()).copied().unwrap_or(0);
        if head.first().map(String::as_str) == Some("agent") && rest.is_empty() {
            let log = logs.join(format!("{n}.err"));
            let started = Instant::now();
            match start_background(&env, &head, &log, "joined the hub") {
                Ok(a) => {
                    agents.push(a);
                    report.push(format!(
                        "{place}: {:.1} s  {} (kept running)",
                        started.elapsed().as_secs_f64(),
                        c.text
                    ));
                }
                Err(e) => failures.push(format!("{place}: {}\n  {e}", c.text)),
            }
            continue;
        }
        if head.first().map(String::as_str) == Some("serve") && rest.is_empty() {
            match check_serve(&env, &head, &logs, n) {
                Ok(took) => {
                    report.push(format!("{place}: {:.1} s  {}", took.as_secs_f64(), c.text))
                }
                Err(e) => failures.push(format!("{place}: {}\n  {e}", c.text)),
            }
            continue;
        }
        let mut cmd = if op.is_some() {
            let line: Vec<String> = std::iter::once("concur".to_string())
                .chain(head.iter().cloned())
                .map(|w| shlex::try_quote(&w).expect("quotable").into_owned())
                .chain(rest.iter().cloned())
                .collect();
            let mut sh = Command::new("sh");
            sh.arg("-c").arg(line.join(" "));
            env.prepare(&mut sh);
            sh
        } else {
            let mut cc = env.concur();
            cc.args(&head);
            cc
        };
        cmd.envs(block_env.iter().map(|(k, v)| (k, v)));
        match run_to_end(cmd, &logs, n) {
            // A gate's verdict is the machine's: a slower second run on a shared machine is a
            // real regression (1); a refusal (2) is not.
            Outcome::Exited(st, took)
                if st.code() == Some(want)
                    || (want == 0
                        && st.code() == Some(1)
                        && has(&head, &["--fail-on-regression"])) =>
            {
                report.push(format!("{place}: {:.1} s  {}", took.as_secs_f64(), c.text));
            }
            Outcome::Exited(st, _) => failures.push(format!(
                "{place}: {}\n  ran: concur {}\n  {st}, the docs say {want}; stderr:\n{}",
                c.text,
                head.join(" "),
                tail(&logs.join(format!("{n}.err")))
            )),
            Outcome::Failed(e) => failures.push(format!("{place}: {}\n  {e}", c.text)),
        }
    }
    // Every pasted output against its command's fresh one.
    let mut compared = 0;
    for &(n, run, size) in &pasted {
        let c = &commands[n];
        if c.output.is_empty() {
            continue;
        }
        compared += 1;
        let fresh = [".out", ".err"]
            .map(|ext| {
                std::fs::read_to_string(logs.join(format!("{run}{ext}"))).unwrap_or_default()
            })
            .join("\n");
        let diffs = compare_output(&c.output, &fresh, size, c.example.is_some(), &|t| {
            env.hosts(t)
        });
        if !diffs.is_empty() {
            failures.push(format!(
                "{}:{}: {}\n  its pasted output differs from a fresh run's ({size:?}{}):\n  {}\n  the fresh run's output:\n{}",
                c.file,
                c.line,
                c.text,
                if c.example.is_some() { ", an example block" } else { "" },
                diffs.join("\n  "),
                fresh
            ));
        }
    }
    report.push(format!(
        "{compared} pasted outputs compared with a fresh run"
    ));
    eprintln!(
        "{} doc commands in {:.0} s:\n{}",
        report.len(),
        total.elapsed().as_secs_f64(),
        report.join("\n")
    );
    assert!(
        failures.is_empty(),
        "{} doc command(s) failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// How the harness sized a command, which decides what of its pasted output a fresh run can
/// confirm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Size {
    /// As written, but for its runs (`-r`, `--warmup`): the same cells, rows and task counts.
    AsWritten,
    /// Its task counts or `--duration` made small: the same models, other counts.
    Counts,
    /// A built-in study given `--quick`: other workloads and counts, the same columns.
    Quick,
}

/// How `ran` (the command as the harness ran it) differs from `written` (as the docs show it).
fn size_of(written: &[String], ran: &[String]) -> Size {
    let quick = |a: &[String]| a.iter().any(|w| w == "--quick");
    if quick(ran) && !quick(written) {
        return Size::Quick;
    }
    // Without the flags that only set how many runs a cell gets.
    let sizes = |a: &[String]| {
        let mut out = Vec::new();
        let mut skip = false;
        for w in a {
            if std::mem::take(&mut skip) {
                continue;
            }
            if ["-r", "--repeat", "--warmup"].contains(&w.as_str()) {
                skip = true;
            } else if !w.starts_with("--repeat=") && !w.starts_with("--warmup=") {
                out.push(w.clone());
            }
        }
        out
    };
    if sizes(written) == sizes(ran) {
        Size::AsWritten
    } else {
        Size::Counts
    }
}

/// A table as the terminal format prints it (`src/report/table.rs`): its title (the line above
/// its top rule), its header's names, its rows' cells.
#[derive(Debug, Clone, PartialEq)]
struct Table {
    title: Option<String>,
    columns: Vec<String>,
    rows: Vec<Vec<String>>,
}

/// Whether `line` is a rule of `ch` (`─` above and below a table, `═` under its header).
fn is_rule(line: &str, ch: char) -> bool {
    let t = line.trim();
    !t.is_empty() && t.chars().all(|c| c == ch)
}

/// A header's names with where each ends (in characters): names hold single spaces (`peak
/// RSS`), and two spaces part them.
fn header_names(line: &str) -> Vec<(String, usize)> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == ' ' {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && !(chars[i] == ' ' && chars.get(i + 1).is_none_or(|c| *c == ' ')) {
            i += 1;
        }
        out.push((chars[start..i].iter().collect(), i));
    }
    out
}

/// A row's cells. Every column but the first is right-aligned, so its cells end where its
/// header's name ends; the first runs to the first two spaces.
fn row_cells(line: &str, ends: &[usize]) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    let cut = |a: usize, b: usize| -> String {
        let (a, b) = (a.min(chars.len()), b.min(chars.len()));
        chars[a..b.max(a)]
            .iter()
            .collect::<String>()
            .trim()
            .to_string()
    };
    let start = chars.iter().position(|c| *c != ' ').unwrap_or(0);
    let mut end = start;
    while end < chars.len() && !(chars[end] == ' ' && chars.get(end + 1) == Some(&' ')) {
        end += 1;
    }
    let mut cells = vec![cut(start, end)];
    let mut left = end;
    for &e in &ends[1..] {
        cells.push(cut(left, e));
        left = left.max(e);
    }
    cells
}

/// The tables in a command's output: a header is the line above a `═` rule, or (in a pasted
/// table trimmed of its rules) a line whose first name is `model`; its rows follow until a
/// blank line, a rule, or a line that does not start with the table's padding.
fn parse_tables(lines: &[&str]) -> Vec<Table> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let names = header_names(line);
        let ruled = lines.get(i + 1).is_some_and(|l| is_rule(l, '═'));
        let bare = line.starts_with(' ')
            && names.len() >= 3
            && names[0].0 == "model"
            && !lines.get(i + 1).is_some_and(|l| is_rule(l, '═'));
        if !(ruled || bare) || names.is_empty() || is_rule(line, '─') {
            i += 1;
            continue;
        }
        let title = (i >= 2 && is_rule(lines[i - 1], '─') && !lines[i - 2].trim().is_empty())
            .then(|| lines[i - 2].trim().to_string());
        let ends: Vec<usize> = names.iter().map(|n| n.1).collect();
        let mut rows = Vec::new();
        let mut j = i + if ruled { 2 } else { 1 };
        while let Some(l) = lines.get(j) {
            if l.trim().is_empty() || !l.starts_with(' ') || is_rule(l, '─') || is_rule(l, '═')
            {
                break;
            }
            rows.push(row_cells(l, &ends));
            j += 1;
        }
        out.push(Table {
            title,
            columns: names.into_iter().map(|n| n.0).collect(),
            rows,
        });
        i = j;
    }
    out
}

/// What a cell is measured in, the figure taken away: `53.6 ms` → time, `8.5 MiB` → bytes,
/// `±2.6%` → `± %`, `1.00×` → `×`, `100/100` → `/`, `1/1 runs` → `/ runs`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Unit {
    /// Nothing in the cell (no failure, no error).
    Empty,
    /// `-`: not measured in this cell (no TLS, a failed cell's per-task memory).
    Dash,
    /// ns, µs, ms and s: one dimension, the scale chosen for the figure's size.
    Time,
    /// B, KiB, MiB, GiB, TiB: likewise.
    Bytes,
    /// A word alone (`yes`, `BEHIND`): a verdict, not a unit.
    Word,
    /// Whatever else is left around the figures, exactly.
    Other(String),
}

fn unit(cell: &str) -> Unit {
    let c = cell.trim();
    if c.is_empty() {
        return Unit::Empty;
    }
    if c == "-" {
        return Unit::Dash;
    }
    if c.chars().all(char::is_alphabetic) {
        return Unit::Word;
    }
    // A number's digits, and its sign where one leads it (a memory per task below the
    // 1-task cell's prints as "-12 B"): what is left is the unit.
    let chars: Vec<char> = c.chars().collect();
    let rest: String = chars
        .iter()
        .enumerate()
        .map(|(i, &ch)| {
            let sign = (ch == '-' || ch == '−')
                && chars.get(i + 1).is_some_and(char::is_ascii_digit)
                && (i == 0 || chars[i - 1].is_whitespace());
            if ch.is_ascii_digit() || ch == '.' || ch == ',' || sign {
                ' '
            } else {
                ch
            }
        })
        .collect();
    let words: Vec<&str> = rest.split_whitespace().collect();
    match words.as_slice() {
        ["ns" | "µs" | "ms" | "s"] => Unit::Time,
        ["B" | "KiB" | "MiB" | "GiB" | "TiB"] => Unit::Bytes,
        _ => Unit::Other(words.join(" ")),
    }
}

/// A time in seconds or a size in bytes, from a cell whose [`unit`] is time or bytes.
fn magnitude(cell: &str) -> Option<f64> {
    let (number, scale) = cell.trim().split_once(' ')?;
    let factor = match scale {
        "ns" => 1e-9,
        "µs" => 1e-6,
        "ms" => 1e-3,
        "s" | "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some(number.replace(',', "").parse::<f64>().ok()? * factor)
}

/// A pasted time or size agrees with a fresh one when it is within this factor of it either
/// way, or this close to it ([`TIME_SLACK`] seconds, [`BYTES_SLACK`] bytes): wide enough for
/// one machine's noise and `-r 1` against the docs' medians, narrow enough for a figure from
/// before a change that doubled or halved it.
const FIGURE_FACTOR: f64 = 2.0;
const TIME_SLACK: f64 = 0.010;
const BYTES_SLACK: f64 = 4.0 * 1024.0 * 1024.0;

/// The columns whose cells are counts the command sets (compared exactly when the harness ran
/// it at the docs' size); `tasks` also tells a table's rows apart.
const COUNT_COLUMNS: &[&str] = &["tasks", "asked/s"];

/// The prefixes of the lines outside tables that a fresh run must print again (bad input,
/// failures, warnings); `warning:` lines only outside example blocks, where they report the
/// machine (busy, noisy) as its figures do.
const MESSAGES: &[&str] = &["concur: ", "error: ", "warning: "];

/// `line` with each run of digits as `#`: a message's words, whatever its figures.
fn skeleton(line: &str) -> String {
    let mut out = String::new();
    for c in line.trim().chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether a fresh line says what a pasted one says: the same skeleton, where the pasted
/// line's `…` stands for any text.
fn says(pasted: &str, fresh: &str) -> bool {
    let (p, f) = (skeleton(pasted), skeleton(fresh));
    let parts: Vec<&str> = p.split('…').collect();
    if parts.len() == 1 {
        return p == f;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !f.starts_with(first) || !f[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &f[first.len()..f.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

/// Where a pasted output and a fresh run's differ in shape, one line each (none: the same).
/// `norm` turns the docs' hosts into the test's (`127.0.0.1:8080` → the server it started), for
/// titles and messages. See the module's doc for the rules.
fn compare_output(
    pasted: &[String],
    fresh: &str,
    size: Size,
    example: bool,
    norm: &dyn Fn(&str) -> String,
) -> Vec<String> {
    let mut out = Vec::new();
    let pasted_lines: Vec<&str> = pasted.iter().map(String::as_str).collect();
    let fresh_lines: Vec<&str> = fresh.lines().collect();
    let fresh_tables = parse_tables(&fresh_lines);
    let mut used = vec![false; fresh_tables.len()];
    for p in parse_tables(&pasted_lines) {
        let name = p.title.clone().unwrap_or_else(|| p.columns.join(" | "));
        // The fresh table of the same title (a `--quick` study's titles name other sizes, so
        // there the next one with the same columns, then the next one); an untitled one by
        // its columns.
        let title = p.title.as_deref().map(norm);
        let pick = |want: &dyn Fn(&Table) -> bool| {
            (0..fresh_tables.len()).find(|&k| !used[k] && want(&fresh_tables[k]))
        };
        let found = match (&title, size) {
            (Some(t), Size::AsWritten | Size::Counts) => pick(&|f| f.title.as_ref() == Some(t)),
            _ => pick(&|f| f.columns == p.columns).or_else(|| pick(&|_| true)),
        };
        let Some(k) = found else {
            out.push(format!(
                "table '{name}': the fresh run has no such table (its tables: {:?})",
                fresh_tables
                    .iter()
                    .map(|f| f.title.clone().unwrap_or_default())
                    .collect::<Vec<_>>()
            ));
            continue;
        };
        used[k] = true;
        let f = &fresh_tables[k];
        if p.columns != f.columns {
            out.push(format!(
                "table '{name}': columns {:?}, the fresh run's {:?}",
                p.columns, f.columns
            ));
            continue;
        }
        compare_rows(&p, f, size, example, &name, &mut out);
    }
    for line in pasted.iter().map(|l| l.trim()) {
        let Some(prefix) = MESSAGES.iter().find(|m| line.starts_with(*m)) else {
            continue;
        };
        if example && *prefix == "warning: " {
            continue;
        }
        let line = norm(line);
        if !fresh_lines.iter().any(|f| says(&line, f)) {
            out.push(format!("the fresh run never says: {line}"));
        }
    }
    out
}

/// The rows of two tables with the same columns: see [`compare_output`].
fn compare_rows(
    p: &Table,
    f: &Table,
    size: Size,
    example: bool,
    name: &str,
    out: &mut Vec<String>,
) {
    let tasks = p.columns.iter().position(|c| c == "tasks");
    if size == Size::Quick {
        // Other counts, in the rows' labels too: each pasted label, numbers aside, is a fresh
        // one (`async:1000000` → `async:#`); and what each column is measured in, where both
        // show any.
        let labels: BTreeSet<String> = f.rows.iter().map(|r| skeleton(&r[0])).collect();
        for pr in &p.rows {
            if !labels.contains(&skeleton(&pr[0])) {
                out.push(format!(
                    "table '{name}': no row like {} in the fresh run (its rows: {labels:?})",
                    pr[0]
                ));
            }
        }
        for (j, col) in p.columns.iter().enumerate().skip(1) {
            let units = |t: &Table| -> BTreeSet<String> {
                t.rows
                    .iter()
                    .map(|r| unit(&r[j]))
                    .filter(|u| *u != Unit::Empty && *u != Unit::Dash)
                    .map(|u| format!("{u:?}"))
                    .collect()
            };
            let (pu, fu) = (units(p), units(f));
            if !pu.is_empty() && !fu.is_empty() && pu != fu {
                out.push(format!(
                    "table '{name}', column '{col}': in {pu:?}, the fresh run's in {fu:?}"
                ));
            }
        }
        return;
    }
    // Each pasted row (a pasted table may keep some rows) is a fresh row of the same label,
    // and at the docs' size of the same task count.
    let mut taken = vec![false; f.rows.len()];
    for pr in &p.rows {
        let label = &pr[0];
        let same = |fr: &Vec<String>| {
            fr[0] == *label && (size != Size::AsWritten || tasks.is_none_or(|t| fr[t] == pr[t]))
        };
        let Some(k) = (0..f.rows.len()).find(|&k| !taken[k] && same(&f.rows[k])) else {
            let what = match (size, tasks) {
                (Size::AsWritten, Some(t)) => format!("{label} ×{}", pr[t]),
                _ => label.clone(),
            };
            out.push(format!(
                "table '{name}': row {what} is not in the fresh run (its rows: {:?})",
                f.rows
                    .iter()
                    .map(|r| match tasks {
                        Some(t) => format!("{} ×{}", r[0], r[t]),
                        None => r[0].clone(),
                    })
                    .collect::<Vec<_>>()
            ));
            continue;
        };
        taken[k] = true;
        let fr = &f.rows[k];
        for (j, col) in p.columns.iter().enumerate().skip(1) {
            let (pc, fc) = (&pr[j], &fr[j]);
            let place = format!("table '{name}', row {label}, column '{col}'");
            let (pu, fu) = (unit(pc), unit(fc));
            if pu != fu {
                out.push(format!(
                    "{place}: '{pc}', the fresh run '{fc}' (another unit)"
                ));
                continue;
            }
            let count = COUNT_COLUMNS.contains(&col.as_str()) && !pc.contains("(auto)");
            if count && (size == Size::AsWritten || col != "tasks") && pc != fc {
                out.push(format!("{place}: {pc}, the fresh run {fc}"));
            }
            if example || size != Size::AsWritten {
                continue;
            }
            let slack = match pu {
                Unit::Time => TIME_SLACK,
                Unit::Bytes => BYTES_SLACK,
                _ => continue,
            };
            if let (Some(a), Some(b)) = (magnitude(pc), magnitude(fc)) {
                let ratio = a.max(b) / a.min(b).max(f64::MIN_POSITIVE);
                if ratio > FIGURE_FACTOR && (a - b).abs() > slack {
                    out.push(format!(
                        "{place}: {pc}, the fresh run {fc} (more than {FIGURE_FACTOR}× apart; \
                         a figure only this machine gives belongs in an example block)"
                    ));
                }
            }
        }
    }
}

/// A table as `concur run` prints it, for the comparison's own tests.
const FRESH: &str = "\
machine: Intel(R) Xeon(R) Processor, 2 cores, Linux 6.18, 0% busy before start

custom · sleep:100ms · no interpreter lock
───────────────────────────────────────────────────────────────────────────────
 model    tasks       wall    ±95%   peak RSS   kept up     failed 
═══════════════════════════════════════════════════════════════════════════════
 seq          4   401.2 ms   ±0.0%    8.5 MiB       yes          
 pool:2       4   201.3 ms   ±0.0%    9.1 MiB       yes          
 pool:2       8   401.0 ms   ±0.0%    9.2 MiB    BEHIND   1/1 runs 
───────────────────────────────────────────────────────────────────────────────
  ! pool:2 ×8: one failed
concur: bad model 'pool:0': workers '0' must be a whole number from 1 to 1000000
warning: the machine was 100% busy with other work when the study started
";

/// [`FRESH`] with `edit` made to it, as pasted lines.
fn pasted_from(edit: &dyn Fn(String) -> String) -> Vec<String> {
    edit(FRESH.to_string()).lines().map(String::from).collect()
}

fn differences(pasted: &[String], size: Size, example: bool) -> Vec<String> {
    compare_output(pasted, FRESH, size, example, &|t| {
        t.replace("queue-host", "127.0.0.1")
    })
}

#[test]
fn a_table_is_read_by_its_columns() {
    let lines: Vec<&str> = FRESH.lines().collect();
    let t = parse_tables(&lines);
    assert_eq!(t.len(), 1);
    assert_eq!(
        t[0].title.as_deref(),
        Some("custom · sleep:100ms · no interpreter lock")
    );
    assert_eq!(
        t[0].columns,
        ["model", "tasks", "wall", "±95%", "peak RSS", "kept up", "failed"]
    );
    assert_eq!(
        t[0].rows,
        [
            ["seq", "4", "401.2 ms", "±0.0%", "8.5 MiB", "yes", ""],
            ["pool:2", "4", "201.3 ms", "±0.0%", "9.1 MiB", "yes", ""],
            ["pool:2", "8", "401.0 ms", "±0.0%", "9.2 MiB", "BEHIND", "1/1 runs"],
        ]
    );
    assert_eq!(
        [
            unit("53.6 ms"),
            unit("4.2 s"),
            unit("0 µs"),
            unit("1.9 KiB"),
            unit("-")
        ],
        [Unit::Time, Unit::Time, Unit::Time, Unit::Bytes, Unit::Dash]
    );
    assert_eq!(unit("±2.6%"), Unit::Other("± %".into()));
    // A negative figure is a figure of its unit (PSS/task below the 1-task cell's).
    assert_eq!(unit("-12 B"), Unit::Bytes);
    assert_eq!(unit("-1.5 KiB"), Unit::Bytes);
    assert_eq!(unit("1/1 runs"), Unit::Other("/ runs".into()));
    assert_eq!(magnitude("1.5 ms"), Some(0.0015));
    // A table pasted without its rules, trailing spaces trimmed, is read the same.
    let bare = [
        " model    tasks       wall    ±95%",
        " seq          4   401.2 ms   ±0.0%",
    ];
    let t = parse_tables(&bare);
    assert_eq!(t[0].title, None);
    assert_eq!(t[0].rows, [["seq", "4", "401.2 ms", "±0.0%"]]);
}

#[test]
fn a_pasted_output_of_the_same_shape_passes() {
    let same = pasted_from(&|s| s);
    assert_eq!(
        differences(&same, Size::AsWritten, false),
        Vec::<String>::new()
    );
    // Another scale of the same dimension, figures within the tolerance, a row left out.
    let rescaled = pasted_from(&|s| {
        s.replace("401.2 ms", " 0.42 s").replace(
            " pool:2       4   201.3 ms   ±0.0%    9.1 MiB       yes          \n",
            "",
        )
    });
    assert_eq!(
        differences(&rescaled, Size::AsWritten, false),
        Vec::<String>::new()
    );
    // Another machine's figures, in a block marked as an example; its warnings are its own.
    let other = pasted_from(&|s| {
        s.replace("401.2 ms", " 3.912 s")
            .replace("8.5 MiB", " 85 MiB")
            .replace("100% busy", "0% busy")
            .replace("warning: the machine", "warning: a machine")
    });
    assert_eq!(
        differences(&other, Size::AsWritten, true),
        Vec::<String>::new()
    );
    // Fewer tasks than the docs show, once the harness made the command small.
    let counts = pasted_from(&|s| s.replace("     4   401.2 ms", "   100   401.2 ms"));
    assert_eq!(
        differences(&counts, Size::Counts, false),
        Vec::<String>::new()
    );
    // Other counts in the labels too, for a study the harness gave `--quick`.
    let quick = pasted_from(&|s| s.replace(" pool:2   ", " pool:200 "));
    assert_eq!(
        differences(&quick, Size::Quick, false),
        Vec::<String>::new()
    );
}

#[test]
fn a_pasted_output_of_another_shape_fails() {
    let fails = |edit: &dyn Fn(String) -> String, size: Size, example: bool, want: &str| {
        let d = differences(&pasted_from(edit), size, example);
        assert!(
            d.iter().any(|l| l.contains(want)),
            "expected a difference saying {want:?}, got {d:#?}"
        );
    };
    // A column renamed.
    fails(
        &|s| s.replace("peak RSS", "peak RSZ"),
        Size::Counts,
        true,
        "columns",
    );
    // A unit of another dimension (a size where the run gives a time).
    fails(
        &|s| s.replace("401.2 ms", "401.2 MB"),
        Size::Quick,
        true,
        "column 'wall'",
    );
    fails(
        &|s| s.replace(" pool:2 ", " curl:2 "),
        Size::Quick,
        true,
        "no row like curl:2",
    );
    fails(
        &|s| s.replace("401.2 ms", "401.2 MB"),
        Size::Counts,
        true,
        "(another unit)",
    );
    // A `-` where the run measures (the server peak the docs showed empty).
    fails(
        &|s| s.replace("   8.5 MiB", "         -"),
        Size::Counts,
        true,
        "another unit",
    );
    // A task count the command does not give, at the docs' size.
    fails(
        &|s| s.replace(" seq          4", " seq        100"),
        Size::AsWritten,
        true,
        "row seq ×100",
    );
    // A model the run does not have.
    fails(
        &|s| s.replace(" seq   ", " fork  "),
        Size::Counts,
        true,
        "row fork",
    );
    // A table the run does not print.
    fails(
        &|s| s.replace("sleep:100ms", "sleep:50ms"),
        Size::Counts,
        true,
        "no such table",
    );
    // A time beyond the tolerance, outside an example block.
    fails(
        &|s| s.replace("201.3 ms", "  1.01 s"),
        Size::AsWritten,
        false,
        "more than",
    );
    fails(
        &|s| s.replace("9.1 MiB", " 29 MiB"),
        Size::AsWritten,
        false,
        "more than",
    );
    // A message the run no longer prints, numbers aside.
    fails(
        &|s| s.replace("must be a whole", "must be a"),
        Size::AsWritten,
        true,
        "never says",
    );
    fails(
        &|s| s.replace("100% busy", "100% loaded"),
        Size::AsWritten,
        false,
        "never says",
    );
    // `…` stands for text, not for what is around it.
    assert!(says(
        "concur: bad model 'pool:0': … to 1000000",
        "concur: bad model 'pool:0': workers '0' must be a whole number from 1 to 1000000"
    ));
    assert!(!says(
        "concur: bad model 'pool:0': … to 100",
        "concur: bad model 'pool:0': workers '0' must be a whole number from 1 to 1000000 x"
    ));
}

#[test]
fn the_harness_says_how_it_sized_a_command() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let cases: &[(&[&str], Size)] = &[
        (&["run", "mailer", "--quick"], Size::AsWritten),
        (
            &["run", "-w", "fib:30", "-n", "4", "-r", "3"],
            Size::AsWritten,
        ),
        (&["run", "-w", "fib:30", "-n", "100"], Size::Counts),
        (&["run", "tasks"], Size::Quick),
    ];
    for (written, want) in cases {
        let written = s(written);
        assert_eq!(size_of(&written, &shrink(&written)), *want, "{written:?}");
    }
    // An example marker is read from the line before its block, and must have a block with
    // output under it.
    let doc = "<!-- example: a 2-core VM -->\n```console\n$ concur list\nseq\n```\n";
    let c = extract("x.md", doc);
    assert_eq!(c[0].example.as_deref(), Some("a 2-core VM"));
    assert_eq!(c[0].output, ["seq"]);
    let two = format!("{doc}\n```console\n$ concur list\nseq\n```\n");
    assert_eq!(
        extract("x.md", &two)[1].example,
        None,
        "the marker is its block's alone"
    );
    let bad = std::panic::catch_unwind(|| {
        extract("x.md", "<!-- example: x -->\n```sh\nconcur list\n```\n")
    });
    assert!(
        bad.is_err(),
        "a marker over a block without output must be refused"
    );
}

#[test]
fn every_pasted_table_is_read() {
    // A table the parser cannot read would be compared with nothing, and pass: every pasted
    // output with a header rule must give tables, each with its columns and rows.
    let mut tables = 0;
    for c in all_commands() {
        let lines: Vec<&str> = c.output.iter().map(String::as_str).collect();
        let ruled = lines.iter().filter(|l| is_rule(l, '═')).count();
        let found = parse_tables(&lines);
        assert!(
            found.len() >= ruled,
            "{}:{}: {ruled} header rules, {} tables read",
            c.file,
            c.line,
            found.len()
        );
        for t in &found {
            assert!(
                t.columns.len() >= 3 && !t.rows.is_empty(),
                "{}:{}: a table read without its columns or rows: {t:?}",
                c.file,
                c.line
            );
            assert!(
                t.rows.iter().all(|r| !r[0].is_empty()),
                "{}:{}: a row without its label: {t:?}",
                c.file,
                c.line
            );
        }
        tables += found.len();
    }
    assert!(
        tables >= 15,
        "only {tables} pasted tables read: is the parser broken?"
    );
}
