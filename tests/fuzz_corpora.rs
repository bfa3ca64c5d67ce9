//! Every committed input of every fuzz target (`fuzz/corpus/TARGET/`, and the crashes kept in
//! `fuzz/regressions/TARGET/`) replayed through the target's own harness
//! (`concur::fuzzing::TARGETS`, the functions the targets in `fuzz/fuzz_targets/` call), so
//! that `cargo test` catches a regression without cargo-fuzz. A failure names the input.
//!
//! The hub and histogram targets' seeds (real messages as concur sends them, and the forgeries
//! of issue 29) are made by this file's `hub_seeds` and must equal the committed ones.

use std::collections::BTreeMap;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use base64::Engine;
use concur::fuzzing::{self, TEST_AGENT, TEST_HUB_NS, TEST_RUN};
use concur::hub::sign;
use concur::measure::latency::LatencyRecorder;
use serde_json::{json, Value};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The files of `dir`, sorted; none when it does not exist.
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// The process's peak resident set, KiB (`VmHWM`).
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM in /proc/self/status");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Runs `harness` on `path`'s bytes: the panic's message, if it panics.
fn replay(harness: fuzzing::Harness, path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).unwrap();
    panic::catch_unwind(AssertUnwindSafe(|| harness(&bytes)))
        .err()
        .map(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic without a message".into())
        })
}

#[test]
fn every_fuzz_target_is_replayed_and_every_corpus_passes() {
    let fuzz = fuzz_dir();
    // Every target file is registered in fuzz/Cargo.toml and has a harness here, and every
    // corpus belongs to a target.
    let manifest = std::fs::read_to_string(fuzz.join("Cargo.toml")).unwrap();
    let harnesses: BTreeMap<&str, fuzzing::Harness> = fuzzing::TARGETS.iter().copied().collect();
    let files: Vec<String> = inputs(&fuzz.join("fuzz_targets"))
        .iter()
        .filter_map(|p| Some(p.file_name()?.to_str()?.strip_suffix(".rs")?.to_string()))
        .collect();
    assert_eq!(
        files,
        harnesses.keys().map(|s| s.to_string()).collect::<Vec<_>>(),
        "fuzz/fuzz_targets/ against concur::fuzzing::TARGETS"
    );
    for t in &files {
        assert!(
            manifest.contains(&format!("name = \"{t}\"")),
            "fuzz target {t} is not in fuzz/Cargo.toml"
        );
        let source = std::fs::read_to_string(fuzz.join(format!("fuzz_targets/{t}.rs"))).unwrap();
        assert!(
            source.contains(&format!("concur::fuzzing::{t}(data)")),
            "fuzz/fuzz_targets/{t}.rs does not call concur::fuzzing::{t}, which this test replays"
        );
    }
    for folder in ["corpus", "regressions"] {
        if let Ok(dirs) = std::fs::read_dir(fuzz.join(folder)) {
            for d in dirs {
                let name = d.unwrap().file_name().into_string().unwrap();
                assert!(
                    harnesses.contains_key(name.as_str()),
                    "fuzz/{folder}/{name} belongs to no target"
                );
            }
        }
    }

    let mut failures = Vec::new();
    let mut counts = BTreeMap::new();
    for (&name, &harness) in &harnesses {
        let corpus = inputs(&fuzz.join("corpus").join(name));
        let kept = inputs(&fuzz.join("regressions").join(name));
        counts.insert(name, (corpus.len(), kept.len()));
        for path in corpus.iter().chain(&kept) {
            if let Some(why) = replay(harness, path) {
                failures.push(format!("{}: {why}", path.display()));
            }
        }
    }
    eprintln!("replayed (corpus, regressions): {counts:?}");
    assert!(
        failures.is_empty(),
        "inputs that fail:\n{}",
        failures.join("\n")
    );
    for (name, (corpus, _)) in &counts {
        assert!(
            *corpus >= 3,
            "fuzz/corpus/{name} holds {corpus} inputs (at least 3 seeds)"
        );
    }
}

/// The forged histogram of issue 29's point 5: the recorder's own bounds and digits, a header
/// declaring `declared` payload bytes, and two bytes of payload (56 base64 characters).
fn forged_v2(declared: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(0x1c84_9313u32.to_be_bytes());
    b.extend(declared.to_be_bytes());
    b.extend(0u32.to_be_bytes());
    b.extend(3u32.to_be_bytes());
    b.extend(1u64.to_be_bytes());
    b.extend(3_600_000_000u64.to_be_bytes());
    b.extend(1.0f64.to_bits().to_be_bytes());
    b.extend([2, 0]);
    b
}

fn forged_wire(declared: u32) -> Value {
    let b64 = base64::engine::general_purpose::STANDARD.encode(forged_v2(declared));
    assert_eq!(b64.len(), 56);
    json!({"hdr_v2": b64, "count": 1, "min_us": 10, "max_us": 10, "sum_us": 10})
}

#[test]
fn the_forged_histogram_allocates_nothing_it_declares() {
    let histograms = inputs(&fuzz_dir().join("corpus/histogram"));
    assert!(
        histograms
            .iter()
            .any(|p| p.file_name().is_some_and(|n| n == "seed-forged-4gib.json")),
        "fuzz/corpus/histogram keeps the 4 GiB forgery"
    );
    for p in &histograms {
        if let Some(why) = replay(fuzzing::histogram, p) {
            panic!("{}: {why}", p.display());
        }
    }
    // The forgery itself, whatever the corpus holds: as JSON, as raw bytes, and inside an answer.
    fuzzing::histogram(forged_wire(u32::MAX).to_string().as_bytes());
    fuzzing::histogram(&forged_v2(u32::MAX));
    let mut a = honest_answer();
    a["ended"]["report"]["latency_hdr"] = forged_wire(u32::MAX);
    fuzzing::hub_answer(a.to_string().as_bytes());
    // The other tests of this file run in the same process: all of them together stay far
    // below what the forgery declares.
    let peak = peak_rss_kib();
    assert!(
        peak < 500 << 10,
        "peak RSS {peak} KiB after the forged histograms (allowed: below 500 MB)"
    );
}

/// An honest share of [`TEST_RUN`] for [`TEST_AGENT`] (the shape of tests/hub_agent_trust.rs).
fn honest_share() -> Value {
    json!({
        "work": "part",
        "run": TEST_RUN,
        "part": 0,
        "of": 2,
        "version": env!("CARGO_PKG_VERSION"),
        "request": {
            "recipe": {
                "workload": "fib:5",
                "options": {"mail_sink": "discard"},
                "gil": false,
                "settings": {"switch_interval": {"secs": 0, "nanos": 5_000_000}, "stack_size": 2 << 20},
                "jobs_backend": null
            },
            "model": "seq",
            "tasks": 4,
            "part": {
                "segment": {"index": 0, "of": 2, "whole_tasks": 8},
                "start_mono_ns": 0
            }
        },
        "start_hub_ns": TEST_HUB_NS + 200_000_000,
        "timeout_s": 30.0
    })
}

/// An honest answer for [`honest_share`] (the shape of tests/hub_answers.rs).
fn honest_answer() -> Value {
    let mut latency = LatencyRecorder::new();
    for us in [120, 95, 310, 101] {
        latency.record_us(us);
    }
    json!({
        "run": TEST_RUN, "part": 0, "agent": TEST_AGENT,
        "ended": {
            "waited": {"Ok": {
                "exit_code": 0, "signal": null, "user_s": 0.01, "sys_s": 0.01,
                "max_rss_kib": 5000, "ctx_voluntary": 1, "ctx_involuntary": 1
            }},
            "killed_for": null, "wall_s": 0.05, "tree_pss_kib": 5000,
            "report": {
                "wall_s": 0.01, "tasks_ok": 4, "tasks_failed": 0, "failures": {},
                "bytes": 0, "error": null, "latency_us": null, "threads_created": 0,
                "processes_created": 0, "pid": 1, "gil_switches": 0,
                "latency_hdr": latency.to_wire()
            },
            "stderr_tail": ["fib:5 done"]
        },
        "clock": {"offset_ns": 1200, "uncertainty_ns": 51000, "mono_offset_ns": 7}
    })
}

/// An agent's heartbeat (the shape of tests/hub_answers.rs's planted agents).
fn heartbeat(name: &str, host: &str, doing: &str) -> Value {
    json!({
        "name": name, "host": host, "addr": "10.77.0.11", "cores": 2,
        "mem_total_kib": 4_000_000, "version": env!("CARGO_PKG_VERSION"), "pid": 4242,
        "allow_commands": false,
        "clock_offset_ns": -5_000_000_000i64, "clock_uncertainty_ns": 1000, "mono_offset_ns": 0,
        "beat_hub_ns": TEST_HUB_NS, "doing": doing
    })
}

/// The hub and histogram targets' seeds, as (target, name, bytes): real messages as concur
/// sends them and the forgeries of issue 29, built by concur's own code (sealing is an HMAC at
/// a fixed instant, so the bytes are the same on every run).
fn hub_seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    let key = fuzzing::test_hub_key();
    let seal = |to: &str, scope: &str, v: &Value| {
        sign::seal(Some(&key), to, scope, TEST_HUB_NS, v.to_string())
    };
    let share = honest_share();
    let with = |f: &dyn Fn(&mut Value)| {
        let mut w = honest_share();
        f(&mut w);
        w.to_string()
    };
    let work: Vec<(&str, String)> = vec![
        ("part", share.to_string()),
        ("part-sealed", seal(TEST_AGENT, TEST_RUN, &share)),
        ("stop", json!({"work": "stop"}).to_string()),
        (
            "serve",
            json!({"work": "serve", "study": TEST_RUN, "tls": true,
                   "reply": format!("concur:hub:serve:{TEST_RUN}:ready")})
            .to_string(),
        ),
        (
            "unserve",
            json!({"work": "unserve", "study": TEST_RUN}).to_string(),
        ),
        (
            "usage",
            json!({"work": "usage", "reply": "concur:hub:usage:r1"}).to_string(),
        ),
        (
            "part-cmd",
            with(&|w| w["request"]["recipe"]["workload"] = json!("cmd:touch /tmp/pwned")),
        ),
        (
            "part-timeout-1e300",
            with(&|w| w["timeout_s"] = json!(1e300)),
        ),
        (
            "part-ten-years-ahead",
            with(&|w| w["start_hub_ns"] = json!(TEST_HUB_NS + 315_360_000_000_000_000)),
        ),
        (
            "part-crlf-header",
            with(&|w| {
                w["request"]["recipe"]["options"]["headers"] =
                    json!([["X-A", "v\r\n\r\nDELETE /x HTTP/1.1\r\nHost: h"]])
            }),
        ),
        (
            "part-read-shadow",
            with(&|w| w["request"]["recipe"]["workload"] = json!("read:/etc/shadow")),
        ),
        (
            "part-http-address",
            with(&|w| w["request"]["recipe"]["workload"] = json!("http://192.0.2.7:8080/x")),
        ),
        (
            "part-jobs-backend",
            with(&|w| w["request"]["recipe"]["jobs_backend"] = json!("redis://10.0.0.1:6379/0")),
        ),
        (
            "serve-bad-reply",
            json!({"work": "serve", "study": "s", "tls": false, "reply": "x\u{1b}[2J"}).to_string(),
        ),
        // A share sealed to an agent's X25519 key, in its form (an ephemeral key and a
        // ciphertext of fixed bytes: a real one is new each time), signed by the study's key.
        (
            "part-x25519",
            sign::seal_with(
                sign::Sealer::Own(fuzzing::test_study_key()),
                &sign::Address {
                    to: TEST_AGENT,
                    scope: TEST_RUN,
                    epoch: fuzzing::TEST_EPOCH,
                    at_ns: TEST_HUB_NS,
                },
                json!({"work": "sealed", "part": 0,
                       "blob": base64::engine::general_purpose::STANDARD.encode([7u8; 96])})
                .to_string(),
            ),
        ),
    ];
    let answer = honest_answer();
    let answer_with = |f: &dyn Fn(&mut Value)| {
        let mut a = honest_answer();
        f(&mut a);
        a.to_string()
    };
    let answers: Vec<(&str, String)> = vec![
        ("honest", answer.to_string()),
        ("honest-sealed", seal("study", TEST_RUN, &answer)),
        (
            "refused",
            json!({"run": TEST_RUN, "part": 1, "agent": "a2",
                   "refused": "'cmd:id' runs a command",
                   "clock": {"offset_ns": 0, "uncertainty_ns": 0, "mono_offset_ns": 0}})
            .to_string(),
        ),
        (
            "user-s-1.5e308",
            answer_with(&|a| a["ended"]["waited"]["Ok"]["user_s"] = json!(1.5e308)),
        ),
        (
            "tasks-do-not-add-up",
            answer_with(&|a| a["ended"]["report"]["tasks_ok"] = json!(5)),
        ),
        (
            "forged-histogram",
            answer_with(&|a| a["ended"]["report"]["latency_hdr"] = forged_wire(u32::MAX)),
        ),
        (
            "long-stderr",
            answer_with(&|a| {
                a["ended"]["stderr_tail"] = json!((0..30)
                    .map(|i| format!("line {i} {}", "x".repeat(1200)))
                    .collect::<Vec<_>>())
            }),
        ),
        (
            "killed",
            answer_with(&|a| {
                a["ended"]["waited"] = json!({"Err": "no such process"});
                a["ended"]["report"] = Value::Null;
            }),
        ),
        // An agent's refusal notice (`concur:hub:agent:NAME:refused`), which the study reads
        // beside the answers.
        (
            "refusal-notice",
            json!({"scope": TEST_RUN, "why": "a message whose signature does not match the hub key"})
                .to_string(),
        ),
    ];
    let beats: Vec<(&str, String)> = vec![
        ("idle", heartbeat("a1", "lab-1", "idle").to_string()),
        (
            "busy",
            heartbeat("a2", "lab-2", &format!("run {TEST_RUN} share 1 of 2")).to_string(),
        ),
        (
            "escapes",
            heartbeat("a3", "\u{1b}]0;pwned\u{7}\u{1b}[2J", "idle\u{9b}2J\u{202e}").to_string(),
        ),
        ("no-addr", {
            let mut b = heartbeat("a4", "lab-4", "idle");
            b["addr"] = Value::Null;
            b["mem_total_kib"] = Value::Null;
            b["clock_offset_ns"] = json!(i64::MIN);
            b.to_string()
        }),
    ];
    let mut real = LatencyRecorder::new();
    for us in (1..2000u64).map(|i| i * i % 50_000 + 1) {
        real.record_us(us);
    }
    let real = real.to_wire().unwrap();
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&real.hdr_v2)
        .unwrap();
    let histograms: Vec<(&str, Vec<u8>)> = vec![
        ("real.json", serde_json::to_vec(&real).unwrap()),
        ("real-v2.bin", raw),
        (
            "forged-4gib.json",
            forged_wire(u32::MAX).to_string().into_bytes(),
        ),
        ("forged-4gib-v2.bin", forged_v2(u32::MAX)),
        (
            "forged-honest-length.json",
            forged_wire(2).to_string().into_bytes(),
        ),
    ];
    let mut seeds = Vec::new();
    for (target, list) in [
        ("hub_work", work),
        ("hub_answer", answers),
        ("hub_heartbeat", beats),
    ] {
        for (n, t) in list {
            seeds.push((target, format!("seed-{n}"), t.into_bytes()));
        }
    }
    for (n, b) in histograms {
        seeds.push(("histogram", format!("seed-{n}"), b));
    }
    seeds
}

/// The committed hub and histogram seeds are exactly what concur's code makes today, so a
/// change of the messages' format shows here and the fuzzers keep starting from real ones.
/// `CONCUR_WRITE_SEEDS=1 cargo test --release --test fuzz_corpora hub_seeds` writes them
/// again (then the same check runs on what it wrote).
#[test]
fn the_hub_seeds_are_the_committed_ones() {
    let dir = fuzz_dir().join("corpus");
    let seeds = hub_seeds();
    assert_eq!(seeds.len(), 15 + 9 + 4 + 5, "seeds made");
    if std::env::var_os("CONCUR_WRITE_SEEDS").is_some() {
        for (target, name, bytes) in &seeds {
            std::fs::create_dir_all(dir.join(target)).unwrap();
            std::fs::write(dir.join(target).join(name), bytes).unwrap();
        }
    }
    for (target, name, bytes) in &seeds {
        let path = dir.join(target).join(name);
        let committed = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (CONCUR_WRITE_SEEDS=1 writes it)", path.display()));
        assert!(
            committed == *bytes,
            "{} differs from what concur makes today (CONCUR_WRITE_SEEDS=1 writes it again)",
            path.display()
        );
    }
}
