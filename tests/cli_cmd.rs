//! Your own programs in the lab: the `cmd:` workload under every model that accepts it, its
//! failures and refusals, `--timeout` killing a command's whole process group, external cells
//! (`--peer`, with and without the `CONCUR` line), hooks, worker scans and `--classic`.

mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;

/// `printf 'task I of N\n'`: 12 bytes a task for N < 10, whatever the model.
const PRINTF: &str = "cmd:printf 'task %s of %s\\n' {i} {n}";

/// Every registered model (3 workers where it takes them) that must run a `cmd:` workload:
/// all but `curl` (http only), `green` (a command blocks its hub) and `jobs-redis` (run by
/// tests/jobs_queue.rs, which starts a server); checked against the registry's own checks, so
/// that a model that starts refusing commands fails here instead of dropping out.
fn cmd_models() -> Vec<String> {
    common::models_accepting_exactly(
        "cmd:true",
        3,
        &[
            "seq",
            "thread",
            "spawn",
            "fork",
            "pool:3",
            "rayon:3",
            "async:3",
            "async-local:3",
            "actor:3",
            "jobs:3",
            "jobs-memory:3",
            "jobs-procs:3",
        ],
    )
}

#[test]
fn every_compatible_model_runs_cmd_with_the_same_exact_checksum() {
    let models = cmd_models();
    let mut args = vec!["-w", PRINTF, "-n", "6", "-r", "1"];
    for m in &models {
        args.extend(["-m", m.as_str()]);
    }
    let (_, lines) = run_study(&args);
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), models.len());
    for r in runs {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["bytes"], 6 * 12, "{}: {r}", r["model"]);
        assert_eq!(r["tasks_ok"], 6);
        assert_eq!(r["nature"], "measured");
    }
}

#[test]
fn braces_become_the_task_index_and_count() {
    // `printf %s {i}` for i = 0..12 writes 10 one-digit and 2 two-digit numbers.
    let (_, lines) = run_study(&[
        "-w",
        "cmd:printf %s {i}",
        "-m",
        "seq",
        "-n",
        "12",
        "-r",
        "1",
    ]);
    assert_eq!(of_type(&lines, "run")[0]["bytes"], 14);
}

#[test]
fn shell_runs_sh_c_and_without_it_words_are_arguments() {
    let spec = "cmd:echo a | wc -c";
    let (_, lines) = run_study(&["-w", spec, "-m", "seq", "-n", "3", "-r", "1", "--shell"]);
    // wc prints "2\n" per task.
    assert_eq!(of_type(&lines, "run")[0]["bytes"], 3 * 2);
    let (_, lines) = run_study(&["-w", spec, "-m", "seq", "-n", "3", "-r", "1"]);
    // Without a shell, echo prints its arguments: "a | wc -c\n".
    assert_eq!(of_type(&lines, "run")[0]["bytes"], 3 * 10);
    // The spec is recorded as typed.
    assert_eq!(of_type(&lines, "run")[0]["workload"], spec);
}

#[test]
fn failing_commands_carry_their_exit_code_or_signal_and_first_stderr_line() {
    let script = "if [ {i} = 1 ]; then echo boom >&2; echo more >&2; exit 3; fi; \
                  if [ {i} = 2 ]; then kill -KILL $$; fi; printf ok";
    let spec = format!("cmd:{script}");
    for model in ["seq", "async:2"] {
        let (_, lines) =
            run_failing_study(&["-w", &spec, "--shell", "-m", model, "-n", "4", "-r", "1"]);
        let r = of_type(&lines, "run")[0];
        assert_eq!(r["status"], "failed", "{r}");
        assert_eq!(
            (r["tasks_ok"].as_u64(), r["tasks_failed"].as_u64()),
            (Some(2), Some(2))
        );
        assert_eq!(r["failures"]["exit:3"], 1, "{r}");
        assert_eq!(r["failures"]["signal:SIGKILL"], 1, "{r}");
        assert_eq!(r["bytes"], 4, "the two good tasks' 'ok'");
        let err = r["error"].as_str().unwrap();
        assert!(err.contains("boom") && !err.contains("more"), "{err}");
    }
}

fn alive(pid: u32) -> bool {
    // A zombie has ended: only its parent's wait is missing.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let state = s.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z')
        })
        .unwrap_or(false)
}

#[test]
fn timeout_kills_the_commands_whole_process_group_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    // Each task leaves two grandchildren sleeping, records every pid, and waits.
    let script = format!(
        "sleep 300 & echo $! >> {p}; sleep 300 & echo $! >> {p}; echo $$ >> {p}; wait",
        p = pids.display()
    );
    let spec = format!("cmd:{script}");
    let started = std::time::Instant::now();
    let (_, lines) = run_failing_study(&[
        "-w",
        &spec,
        "--shell",
        "-m",
        "pool:2",
        "-m",
        "async:2",
        "-n",
        "2",
        "-r",
        "1",
        "--timeout",
        "1s",
    ]);
    assert!(started.elapsed() < Duration::from_secs(60));
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), 2, "one run per cell: {runs:?}");
    for r in runs {
        assert_eq!(r["status"], "timeout", "{r}");
    }
    let recorded: Vec<u32> = std::fs::read_to_string(&pids)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(recorded.len(), 2 * 2 * 3, "2 cells × 2 tasks × 3 processes");
    wait_for(
        "every command process to die",
        Duration::from_secs(10),
        || recorded.iter().all(|p| !alive(*p)),
    );
}

#[test]
fn programs_that_cannot_run_are_refused_before_any_run() {
    for (args, needle) in [
        (
            &["-w", "cmd:no-such-program-xyz --flag", "-m", "seq"][..],
            "'no-such-program-xyz' is not found on PATH",
        ),
        (
            &["-w", "cmd:/nonexistent/prog", "-m", "seq"][..],
            "'/nonexistent/prog' does not exist",
        ),
        (&["-w", "cmd:echo 'open", "-m", "seq"][..], "unclosed quote"),
        (
            &["-w", "cmd:true", "-m", "curl:2"][..],
            "curl runs http workloads only",
        ),
        (
            &["-w", "cmd:true", "-m", "green:2"][..],
            "model 'green:2' cannot run workload 'cmd:true'",
        ),
        (
            &["-w", "cmd:true", "-m", "thread", "--gil"][..],
            "a lock inside concur does not govern another process",
        ),
        (
            &["-w", "cmd:true", "-m", "pool:8..2"][..],
            "bad model 'pool:8..2'",
        ),
        (
            &["-w", "cmd:true", "-m", "seq", "--peer", "nolabel"][..],
            "--peer 'nolabel' must be LABEL=COMMAND",
        ),
        (
            &["-w", "cmd:true", "-m", "seq", "--peer", "pool:2=true"][..],
            "names one of concur's models",
        ),
    ] {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        all.push("-q");
        let err = refused_before_any_run(&all);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // The marker does show a run: the same hook beside a command that can run.
    let dir = tempfile::tempdir().unwrap();
    let (hook, marker) = prepare_marker(dir.path());
    succeeds(
        concur()
            .current_dir(dir.path())
            .args(["run", "-w", "cmd:true", "-m", "seq", "-n", "1", "-r", "1"])
            .args(["--warmup", "0", "-q", "--prepare", &hook]),
    );
    assert!(marker.exists(), "the --prepare hook left no marker");
}

#[test]
fn cmd_output_keeps_each_tasks_stdout_and_stderr_of_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    // Each task writes its own pid: the runs are told apart by what they wrote, not only by
    // where it went.
    let spec = "cmd:echo out-{i}-$$; echo err-{i} >&2";
    let (_results, path) = results_path();
    succeeds(
        concur()
            .args(["run", "-w", spec, "--shell", "-m", "pool:2", "-n", "3"])
            .args(["-r", "3", "--warmup", "1", "-q", "--json"])
            .arg(&path)
            .arg("--cmd-output")
            .arg(&out_dir),
    );
    let cell = out_dir.join("pool:2-x3");
    let mut folders: Vec<String> = std::fs::read_dir(&cell)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    folders.sort();
    assert_eq!(folders, ["rep-0", "rep-1", "rep-2", "warmup-0"]);
    let mut pids = std::collections::BTreeSet::new();
    for run in &folders {
        for i in 0..3 {
            let read = |ext: &str| {
                std::fs::read_to_string(cell.join(run).join(format!("task-{i}.{ext}"))).unwrap()
            };
            let stdout = read("out");
            let pid = stdout
                .strip_prefix(&format!("out-{i}-"))
                .and_then(|p| p.strip_suffix('\n'))
                .unwrap_or_else(|| panic!("{run} task {i}: {stdout:?}"));
            assert!(
                pids.insert(pid.to_string()),
                "{run} task {i}: pid {pid} seen before"
            );
            assert_eq!(read("err"), format!("err-{i}\n"), "{run} task {i}");
        }
    }
    // Every counted run's line is there, and its `rep` names its folder.
    let reps: Vec<u64> = of_type(&read_lines(&path), "run")
        .iter()
        .map(|r| r["rep"].as_u64().unwrap())
        .collect();
    assert_eq!(reps, [0, 1, 2]);
}

#[test]
fn cmd_output_keeps_two_workloads_of_one_model_apart() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    run_study(&[
        "-w",
        "cmd:echo first",
        "-w",
        "cmd:echo second",
        "-m",
        "seq",
        "-n",
        "1",
        "-r",
        "1",
        "--cmd-output",
        out_dir.to_str().unwrap(),
    ]);
    for (folder, said) in [("w1-seq-x1", "first\n"), ("w2-seq-x1", "second\n")] {
        let out = out_dir.join(folder).join("rep-0").join("task-0.out");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), said, "{folder}");
    }
}

#[test]
fn a_run_whose_output_folder_cannot_be_made_fails_and_says_why() {
    // A file where the cell's folder would go: the run cannot make its folder in it.
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::write(out_dir.join("seq-x1"), "in the way").unwrap();
    let json = dir.path().join("r.jsonl");
    let out = concur()
        .args(["run", "-w", "cmd:true", "-m", "seq", "-n", "1", "-r", "1"])
        .args(["--warmup", "0", "-q", "--json"])
        .arg(&json)
        .arg("--cmd-output")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = read_lines(&json);
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_ne!(run["status"], "ok", "{run}");
    let said = run.to_string();
    assert!(
        said.contains("creating the run's --cmd-output folder") && said.contains("seq-x1/rep-0"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(out_dir.join("seq-x1")).unwrap(),
        "in the way"
    );
}

fn external(lines: &[Value], label: &str) -> Vec<Value> {
    runs_of(lines, label).into_iter().cloned().collect()
}

#[test]
fn external_cells_use_the_concur_line_when_there_is_one_and_the_whole_process_otherwise() {
    let (dir, path) = results_path();
    let out = run_into(
        dir.path(),
        &path,
        &[
            "-w",
            "cmd:true",
            "-m",
            "seq",
            "-n",
            "2",
            "-n",
            "3",
            "-r",
            "2",
            "--peer",
            r#"reported:4=sleep 0.3; echo 'CONCUR {"wall_s": 0.125, "bytes": 7, "tasks_ok": {tasks}}'"#,
            "--peer",
            "whole=sleep 0.2; echo {tasks} {workers}",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = read_lines(&path);
    let reported = external(&lines, "reported:4");
    assert_eq!(
        reported.len(),
        2 * 2,
        "one cell per task count, two runs each"
    );
    for r in &reported {
        assert_eq!(r["external"], true);
        assert_eq!(r["status"], "ok");
        assert_eq!(r["wall_s"], 0.125);
        assert_eq!(r["bytes"], 7);
        assert_eq!(r["tasks_ok"], r["tasks"]);
        assert_eq!(r["workers"], 4);
        assert_eq!(r["family"], "reported");
        assert!(r["startup_s"].as_f64().unwrap() >= 0.1, "{r}");
        assert!(r["tree_pss_kib"].is_u64() && r["user_s"].is_f64(), "{r}");
    }
    let whole = external(&lines, "whole");
    assert_eq!(whole.len(), 4);
    for r in &whole {
        assert!(r["wall_s"].as_f64().unwrap() >= 0.2, "{r}");
        assert!(r.get("startup_s").is_none(), "{r}");
        assert_eq!(r["tasks_ok"], r["tasks"]);
        assert!(r["workers"].is_null());
    }
    // Concur's own rows are not external; the table says which wall each external row shows.
    assert!(runs_of(&lines, "seq")
        .iter()
        .all(|r| r["external"] == false));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("reported:4: external program; wall is the work it reported"),
        "{table}"
    );
    assert!(
        table.contains("whole: external program; wall is its whole process"),
        "{table}"
    );
}

#[test]
fn a_failing_external_program_fails_its_runs_with_its_exit_and_stderr() {
    let (_, lines) = run_failing_study(&[
        "-w",
        "cmd:true",
        "-m",
        "seq",
        "-n",
        "2",
        "-r",
        "1",
        "--peer",
        "bad=echo broken >&2; exit 5",
    ]);
    let r = &external(&lines, "bad")[0];
    assert_eq!(r["status"], "crashed");
    assert_eq!(r["error"], "exited with code 5: broken");
    assert_eq!(r["tasks_failed"], 2);
}

#[test]
fn a_failing_prepare_hook_fails_every_run_of_the_cell_and_the_study_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let (_, lines) = run_failing_study(&[
        "-w",
        "cmd:true",
        "-m",
        "seq",
        "-m",
        "pool:2",
        "-n",
        "2",
        "-r",
        "2",
        "--setup",
        &format!("echo setup >> {}", log.display()),
        "--prepare",
        "echo nope >&2; exit 4",
        "--cleanup",
        &format!("echo cleanup >> {}", log.display()),
    ]);
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), 4, "every run is written");
    for r in runs {
        assert_eq!(r["status"], "hook", "{r}");
        assert_eq!(
            r["error"],
            "--prepare 'echo nope >&2; exit 4' exited with code 4: nope"
        );
    }
    assert_eq!(of_type(&lines, "cell").len(), 2);
    // Each cell was set up once and cleaned up once.
    let log = std::fs::read_to_string(&log).unwrap();
    assert_eq!(log.lines().filter(|l| *l == "setup").count(), 2, "{log}");
    assert_eq!(log.lines().filter(|l| *l == "cleanup").count(), 2, "{log}");
}

#[test]
fn prepare_and_conclude_run_around_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let l = log.display();
    run_study(&[
        "-w",
        &format!("cmd:sh -c 'echo run >> {l}'"),
        "-m",
        "seq",
        "-n",
        "1",
        "-r",
        "3",
        "--prepare",
        &format!("echo prepare >> {l}"),
        "--conclude",
        &format!("echo conclude >> {l}"),
    ]);
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text, "prepare\nrun\nconclude\n".repeat(3));
}

#[test]
fn a_worker_scan_is_one_cell_per_worker_count() {
    let (_, lines) = run_study(&[
        "-w",
        "cmd:true",
        "-m",
        "pool:1,2",
        "-m",
        "async:1..4",
        "-n",
        "4",
        "-r",
        "1",
    ]);
    let models: Vec<&str> = of_type(&lines, "cell")
        .iter()
        .map(|c| c["model"].as_str().unwrap())
        .collect();
    assert_eq!(
        models,
        ["pool:1", "pool:2", "async:1", "async:2", "async:4"]
    );
}

/// `--classic` really runs CPython (CI installs python3): the gil study's py: rows, measured
/// like concur's, sized on this machine, with the sizes in the notes.
#[test]
fn classic_runs_cpython_beside_concur() {
    let (out, lines) = run_study(&["gil", "--quick", "--classic", "-r", "1"]);
    let meta = &of_type(&lines, "meta")[0];
    let notes: Vec<&str> = meta["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("classic: CPython") && n.contains("iterations")),
        "{notes:?} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for label in ["py:plain", "py:threads", "py:processes"] {
        let runs = runs_of(&lines, label);
        // K = 1, 2, 6, 10 on the CPU body and the read body.
        assert_eq!(runs.len(), 8, "{label}");
        for r in runs {
            assert_eq!(r["status"], "ok", "{r}");
            assert_eq!(r["external"], true);
            assert_eq!(
                r["gil"], true,
                "the py: rows sit in the tables with the lock"
            );
            assert!(r["startup_s"].is_f64(), "{r}");
        }
    }
}

#[test]
fn classic_show_prints_the_shipped_program() {
    let out = concur().args(["classic", "show", "gil"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        include_str!("../src/classic/gil.py")
    );
    let out = concur().args(["classic", "show", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Compiles every shipped program whose file ends with `ext` with `prog ARGS FILE`; how many.
fn compile_shipped(ext: &str, prog: &str, args: &[&str]) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let mut compiled = 0;
    for p in concur::classic::PROGRAMS
        .iter()
        .filter(|p| p.file.ends_with(ext))
    {
        let path = dir.path().join(p.file);
        std::fs::write(&path, p.text).unwrap();
        let out = std::process::Command::new(prog)
            .args(args)
            .arg(&path)
            .output()
            .unwrap_or_else(|e| panic!("{prog}: {e}"));
        assert!(
            out.status.success(),
            "{}: {}",
            p.file,
            String::from_utf8_lossy(&out.stderr)
        );
        compiled += 1;
    }
    compiled
}

/// The languages of the shipped programs: each has a compile check below.
const SHIPPED: &[&str] = &[".py", ".rb", ".go", ".js", ".java", ".exs", ".cpp", ".cs"];

/// The shipped Python programs are valid Python, and every shipped program is in a language
/// checked here.
#[test]
fn the_shipped_python_programs_compile() {
    let all = concur::classic::PROGRAMS;
    let others: Vec<&str> = all
        .iter()
        .map(|p| p.file)
        .filter(|f| !SHIPPED.iter().any(|ext| f.ends_with(ext)))
        .collect();
    assert!(others.is_empty(), "{others:?}");
    let python = compile_shipped(".py", "python3", &["-m", "py_compile"]);
    assert!(python >= 2, "{python} Python programs");
}

/// The shipped Ruby programs are valid Ruby.
#[test]
#[ignore = "full tier: needs ruby"]
fn the_shipped_ruby_programs_compile() {
    common::require(&[Need::Ruby]);
    let ruby = compile_shipped(".rb", "ruby", &["-c"]);
    assert!(ruby >= 1, "{ruby} Ruby programs");
}

/// The tasks study's programs in Go, Node.js, Java and Elixir compile (or parse) with the
/// toolchains `.ci/run` installs.
#[test]
#[ignore = "full tier: needs Go, Node.js, a JDK and Elixir"]
fn the_shipped_runtime_programs_compile() {
    common::require(&[Need::Runtimes]);
    assert_eq!(compile_shipped(".go", "go", &["vet"]), 3);
    assert_eq!(compile_shipped(".js", "node", &["--check"]), 3);
    let classes = tempfile::tempdir().unwrap();
    let out = classes.path().to_str().expect("a UTF-8 temporary path");
    assert_eq!(compile_shipped(".java", "javac", &["-d", out]), 3);
    let parse = "Code.string_to_quoted!(File.read!(hd(System.argv())))";
    assert_eq!(compile_shipped(".exs", "elixir", &["-e", parse]), 1);
}

/// The tasks study's C++ program compiles with g++ against asio, and its C# program with
/// Mono's mcs.
#[test]
#[ignore = "full tier: needs g++ with asio (libasio-dev) and Mono (mono-mcs)"]
fn the_shipped_cpp_and_csharp_programs_compile() {
    common::require(&[Need::Asio, Need::Mono]);
    assert_eq!(
        compile_shipped(".cpp", "g++", &["-std=c++20", "-fsyntax-only"]),
        1
    );
    let out = tempfile::tempdir().unwrap();
    let exe = format!("-out:{}", out.path().join("tasks.exe").display());
    assert_eq!(compile_shipped(".cs", "mcs", &[&exe]), 1);
}

/// `crawl --classic` runs the classic's Python clients against the study's own server:
/// requests, gevent, tornado's curl client and aiohttp (the full tier installs them all), each
/// row present and every request answered.
#[test]
#[ignore = "full tier: needs python3 with requests, aiohttp, gevent, tornado and pycurl"]
fn classic_crawl_runs_every_python_client() {
    common::require(&[Need::PyClients]);
    let (_, lines) = run_study(&["crawl", "--quick", "--classic", "-r", "1"]);
    assert_classic_crawl_rows(&lines);
}

#[test]
fn timeout_kills_an_external_programs_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let peer = format!(
        "slow=sleep 300 & echo $! >> {p}; echo $$ >> {p}; wait",
        p = pids.display()
    );
    let (_, lines) = run_failing_study(&[
        "-w",
        "cmd:true",
        "-m",
        "seq",
        "-n",
        "1",
        "-r",
        "1",
        "--timeout",
        "1s",
        "--peer",
        &peer,
    ]);
    let r = &external(&lines, "slow")[0];
    assert_eq!(r["status"], "timeout", "{r}");
    let recorded: Vec<u32> = std::fs::read_to_string(&pids)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(recorded.len(), 2);
    wait_for(
        "the external program's processes to die",
        Duration::from_secs(10),
        || recorded.iter().all(|p| !alive(*p)),
    );
}
