//! Node.js: promises that await a timer in the tasks study (`tasks.js`), fetch with C async
//! workers in the crawl (`crawl.js`), a 32-bit multiply loop plain or in K worker_threads in
//! the gil study (`gil.js`), run by the `node` on `PATH`.

use std::path::Path;
use std::process::Command;

use super::{calibrate, spin_time, Classic, Language, Part, Program, Programs, Row, Sizes, Study};
use crate::classic::toolchain::{on_path, quoted};
use crate::plan::presets;

/// The language.
pub(super) const LANGUAGE: Language = Language {
    name: "node",
    apt: &["nodejs"],
    parts: &[
        Part {
            study: Study::Crawl,
            place: 40,
            programs: Programs::Shipped(&[Program {
                name: "crawl-node",
                file: "crawl.js",
                help: "Node.js: N GETs of the delay server, C async workers, fetch (the crawl study)",
                text: include_str!("../crawl.js"),
            }]),
            rows: &["node:fetch:100"],
            classic: false,
            threads: &[],
            add: crawl,
        },
        Part {
            study: Study::Gil,
            place: 40,
            programs: Programs::Shipped(&[Program {
                name: "gil-node",
                file: "gil.js",
                help: "Node.js: the multiply loop K times, plain or in K worker_threads (the gil study's CPU body)",
                text: include_str!("../gil.js"),
            }]),
            rows: GIL_ROWS,
            classic: false,
            threads: &[],
            add: gil,
        },
        Part {
            study: Study::Tasks,
            place: 30,
            programs: Programs::Shipped(&[Program {
                name: "tasks-node",
                file: "tasks.js",
                help: "Node.js: N promises that each await a timer (the tasks study)",
                text: include_str!("../tasks.js"),
            }]),
            rows: &["node:promises"],
            classic: false,
            threads: &[],
            add: tasks,
        },
    ],
};

const GIL_ROWS: &[&str] = &["node:plain", "node:workers"];

/// `tasks`: N promises that each await a timer.
fn tasks(c: &mut Classic, s: &Sizes) {
    let Some(node) = on_path("node") else {
        return c.missing("node:promises", "node", "nodejs");
    };
    let command = format!(
        "{} {} {}",
        quoted(&node),
        quoted(&c.path("tasks.js")),
        s.tasks_args()
    );
    c.tasks_row("node:promises", command, s.task_counts(), s);
    c.version_note("node:promises", &node, Command::new(&node).arg("--version"));
}

/// `crawl`: fetch, C async workers; Node reads the CA it trusts besides its own from its
/// environment, at start-up.
fn crawl(c: &mut Classic, s: &Sizes) {
    let Some(node) = on_path("node") else {
        return c.missing("node:fetch:100", "node", "nodejs");
    };
    let (n, _) = presets::crawl_sizes(s.quick, s.full);
    let ca = s
        .cacert
        .map(|ca| format!("NODE_EXTRA_CA_CERTS={} ", quoted(ca)))
        .unwrap_or_default();
    let command = format!(
        "{ca}{} {} --url {{url}} -n {{tasks}} -c {{workers}}",
        quoted(&node),
        quoted(&c.path("crawl.js"))
    );
    c.row(
        "node:fetch:100",
        command,
        Row::of(presets::CRAWL_WORKLOAD, s.gil),
        &[n],
    );
    c.version_note(
        "node:fetch:100",
        &node,
        Command::new(&node).arg("--version"),
    );
}

/// `gil`: K worker_threads, or plain calls, of a loop timed here and sized to take as long
/// as concur's task, in the tables without the lock.
fn gil(c: &mut Classic, s: &Sizes) {
    let Some(node) = on_path("node") else {
        return c.missing(&GIL_ROWS.join(", "), "node", "nodejs");
    };
    let spin_n = s.spin_n();
    const PROBE: u64 = 10_000_000;
    let script = c.path("gil.js");
    let probe = calibrate(&node, &script, PROBE);
    let node_s = probe
        .as_ref()
        .ok()
        .and_then(|v| v["seconds"].as_f64())
        .filter(|s| *s > 0.0);
    let (Some(node_s), Some(rust_s)) = (node_s, spin_time(spin_n)) else {
        return cannot_time(c, &node, probe.err());
    };
    let iterations = ((rust_s / (node_s / PROBE as f64)) as u64 / 1000).max(1) * 1000;
    let base = format!(
        "{} {} --tasks {{tasks}} --iterations {iterations}",
        quoted(&node),
        quoted(&script)
    );
    let spin = format!("spin:{spin_n}");
    for (label, mode) in [("node:plain", "plain"), ("node:workers", "workers")] {
        let command = format!("{base} --mode {mode}");
        c.row(label, command, Row::spin(&spin, false), presets::GIL_TASKS);
    }
    let version = probe
        .as_ref()
        .ok()
        .and_then(|v| v["version"].as_str().map(str::to_string))
        .unwrap_or_default();
    c.notes.push(format!(
        "runtimes: node:plain, node:workers: Node.js {version}, {iterations} iterations of its 32-bit loop ≈ {:.0} ms a task, as long as concur's spin:{spin_n} (timed now); go: and java: run concur's loop itself, {spin_n} iterations; these rows sit in the tables without the lock",
        rust_s * 1000.0
    ));
}

/// The note for the gil rows left out when `node` could not time its loop.
fn cannot_time(c: &mut Classic, node: &Path, why: Option<String>) {
    c.notes.push(format!(
        "runtimes: {} left out: {} could not time gil.js ({})",
        GIL_ROWS.join(", "),
        node.display(),
        why.unwrap_or_else(|| "no time".into())
    ));
}
