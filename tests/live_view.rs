//! The live view (docs/output.md, "The live view"): on a terminal (tmux's, read with
//! capture-pane and typed into with send-keys) it shows each cell's progress and rate while
//! the study runs, `q` stops the study as Ctrl-C does (exit 130, the finished runs kept in the
//! results file) and the terminal is given back; a study over a hub's hosts lists its agents
//! with their state; `--no-live` keeps the progress bar; off a terminal nothing of it is
//! written.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::{of_type, read_lines, require, wait_for, Need};

/// A tmux server of the test's own (its socket in a temporary folder), killed when dropped.
struct Tmux {
    socket: PathBuf,
    dir: tempfile::TempDir,
}

impl Tmux {
    fn start() -> Tmux {
        let dir = tempfile::tempdir().unwrap();
        Tmux {
            socket: dir.path().join("tmux.sock"),
            dir,
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs")
    }

    /// Starts `script` (sh) in a detached session of 120 × 30.
    fn session(&self, script: &str) {
        let out = self.run(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "120",
            "-y",
            "30",
            script,
        ]);
        assert!(out.status.success(), "tmux new-session: {out:?}");
    }

    /// The pane's text now.
    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "t"]).stdout).into_owned()
    }

    fn keys(&self, keys: &str) {
        let out = self.run(&["send-keys", "-t", "t", keys]);
        assert!(out.status.success(), "tmux send-keys: {out:?}");
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// The shell line that runs concur with `args` (results in `r.jsonl` beside the socket),
/// then writes its exit code to `code` and the terminal's mode to `stty`.
fn script(tmux: &Tmux, args: &str) -> String {
    let bin = assert_cmd::cargo::cargo_bin("concur");
    format!(
        "cd '{dir}' && env -u CONCUR_JOBS_BACKEND '{bin}' run {args} --json r.jsonl; \
         echo $? > code.tmp && mv code.tmp code; stty -a > stty; sleep 600",
        dir = tmux.dir.path().display(),
        bin = bin.display(),
    )
}

/// The run lines written whole so far (the file is written as runs end).
fn finished_runs(results: &Path) -> usize {
    std::fs::read_to_string(results)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("{\"type\":\"run\""))
        .count()
}

/// Waits for the script's exit code.
fn exit_code(tmux: &Tmux) -> i32 {
    let code = tmux.path("code");
    wait_for("concur to exit", Duration::from_secs(30), || code.exists());
    std::fs::read_to_string(&code)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
#[ignore = "full tier: needs tmux"]
fn q_stops_the_study_as_ctrl_c_does_and_the_finished_runs_are_kept() {
    require(&[Need::Tmux]);
    let tmux = Tmux::start();
    // seq takes 4 s a run, pool:4 1 s: long enough to be seen under way and stopped midway.
    tmux.session(&script(
        &tmux,
        "-w sleep:20ms -m seq -m pool:4 -n 200 -r 3 --warmup 0",
    ));
    let results = tmux.path("r.jsonl");
    // Both cells on screen with their runs, the run under way with its tasks and a rate, and
    // one run finished (so there is something to keep).
    let mut seen = String::new();
    let mut kept = 0;
    wait_for(
        "the live view showing both cells, the run under way's tasks and rate, after a finished run",
        Duration::from_secs(60),
        || {
            seen = tmux.screen();
            kept = finished_runs(&results);
            let under_way = seen
                .lines()
                .find(|l| l.trim_start().starts_with('>'))
                .unwrap_or("");
            kept >= 1
                && seen.contains("q: stop")
                && seen.contains("sleep:20ms seq ×200")
                && seen.contains("sleep:20ms pool:4 ×200")
                && under_way.contains("/200")
                && under_way.contains("/s")
                && seen.contains("/3 ")
        },
    );
    tmux.keys("q");
    assert_eq!(
        exit_code(&tmux),
        130,
        "the interrupt's exit code; last screen:\n{seen}"
    );
    let lines = read_lines(&results);
    assert_eq!(lines[0]["type"], "meta");
    let runs = of_type(&lines, "run");
    assert!(
        runs.len() >= kept && runs.len() < 6,
        "{} runs kept, {kept} seen before q",
        runs.len()
    );
    assert!(runs.iter().all(|r| r["status"] == "ok"), "{runs:?}");
    assert!(
        !of_type(&lines, "cell").is_empty(),
        "the cells of the finished runs"
    );
    // The terminal is given back: its normal screen with the closing lines, line editing
    // and echo on again.
    let after = tmux.screen();
    assert!(
        after.contains(&format!("interrupted: {} finished runs kept", runs.len())),
        "{after}"
    );
    assert!(!after.contains("q: stop"), "{after}");
    let stty = std::fs::read_to_string(tmux.path("stty")).unwrap();
    let modes: Vec<&str> = stty.split_whitespace().collect();
    for mode in ["icanon", "echo", "isig"] {
        assert!(modes.contains(&mode), "{mode} not restored: {stty}");
    }
}

#[test]
#[ignore = "full tier: needs tmux"]
fn no_live_keeps_the_progress_bar_on_a_terminal() {
    require(&[Need::Tmux]);
    let tmux = Tmux::start();
    tmux.session(&script(
        &tmux,
        "--no-live -w sleep:20ms -m pool:4 -n 100 -r 2 --warmup 0",
    ));
    let mut seen = String::new();
    wait_for("the progress bar", Duration::from_secs(60), || {
        seen = tmux.screen();
        seen.contains("/2 runs, ") && seen.contains(" elapsed, ")
    });
    assert!(!seen.contains("q: stop"), "{seen}");
    assert_eq!(exit_code(&tmux), 0, "{}", tmux.screen());
}

#[test]
#[ignore = "full tier: needs tmux and redis-server"]
fn a_study_over_two_hosts_lists_its_agents_and_their_states() {
    require(&[Need::Tmux, Need::Redis]);
    let mut hub = common::hub::Hub::start(None);
    let url = hub.url();
    hub.agent("live-a", &[]);
    hub.agent("live-b", &[]);
    common::wait_for_agents(&url, &["live-a", "live-b"]);
    let tmux = Tmux::start();
    // Each host's share: 50 tasks of 20 ms on one worker, 1 s a run.
    tmux.session(&script(
        &tmux,
        &format!("-w sleep:20ms -m pool:2 -n 100 -r 3 --warmup 0 --hub {url} --hosts 2"),
    ));
    let row = |screen: &str, name: &str| {
        screen
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .map(str::to_string)
    };
    let mut seen = String::new();
    wait_for(
        "the live view listing both agents, each running its share of 50 tasks",
        Duration::from_secs(60),
        || {
            seen = tmux.screen();
            seen.contains(" hosts (")
                && ["live-a", "live-b"].iter().all(|n| {
                    row(&seen, n)
                        .is_some_and(|r| r.contains("running its share") && r.contains(" 50"))
                })
        },
    );
    // Each row has its agent's clock offset, as measured against the hub.
    for name in ["live-a", "live-b"] {
        let r = row(&seen, name).unwrap_or_default();
        assert!(r.contains(" ms ± "), "{name}: {r}\n{seen}");
    }
    assert_eq!(exit_code(&tmux), 0, "last screen:\n{seen}");
    assert_eq!(finished_runs(&tmux.path("r.jsonl")), 3);
}

/// Off a terminal (stdout and stderr are pipes here) the study writes what it wrote before
/// the live view: no escape sequence, and the same lines with `--no-live` as without.
#[test]
fn off_a_terminal_the_output_is_the_plain_one() {
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run", "-w", "fib:5", "-m", "seq", "-m", "pool:2", "-n", "4", "-r", "2",
        ];
        args.extend(extra);
        let out = common::concur()
            .current_dir(dir.path())
            .args(&args)
            .args(["--json", "r.jsonl"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        out
    };
    // Numbers (timings and their units, the machine's load) differ from run to run, and so
    // do the warnings that judge timings (how busy the machine was, which cells were too
    // short or varied: pool:2's runs fall either side of the too-short bound); the rest
    // does not.
    let shape = |b: &[u8]| -> String {
        String::from_utf8_lossy(b)
            .lines()
            .filter(|l| {
                !["busy", "too short", "varies"]
                    .iter()
                    .any(|w| l.contains(w))
            })
            .map(|l| {
                l.split(' ')
                    .map(|w| {
                        // A unit alone or closing a bracket or list: "ms", "µs),", "s;".
                        let (bare, tail) =
                            w.split_at(w.trim_end_matches([')', ',', ';', ':']).len());
                        if ["ns", "µs", "ms", "s"].contains(&bare) {
                            return format!("UNIT{tail}");
                        }
                        let mut out = String::new();
                        for c in w.chars() {
                            let digit = c.is_ascii_digit() || c == '.';
                            if !(digit && out.ends_with('0')) {
                                out.push(if digit { '0' } else { c });
                            }
                        }
                        out
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let plain = run(&[]);
    let no_live = run(&["--no-live"]);
    for out in [&plain, &no_live] {
        for stream in [&out.stdout, &out.stderr] {
            assert!(
                !stream.contains(&0x1b),
                "{}",
                String::from_utf8_lossy(stream)
            );
        }
    }
    assert!(
        shape(&plain.stderr).contains("concur 0: study 'custom', 0 cells × 0 runs"),
        "{}",
        shape(&plain.stderr)
    );
    assert_eq!(shape(&plain.stderr), shape(&no_live.stderr));
    let quiet = run(&["-q"]);
    assert!(quiet.stderr.is_empty(), "{}", shape(&quiet.stderr));
}
