//! What a user who installs concur gets: one crypto provider under every TLS stack, a
//! release build without debug info (symbols live in the `profiling` profile, for the bench
//! scripts that need them), and a package that holds every file its build reads.

use std::collections::BTreeSet;

use serde_json::Value;

/// `cargo tree -i CRATE` for this machine's target: what pulls the crate in (empty when
/// nothing does). Cargo.lock cannot say it: it also lists what other targets would use
/// (rustls-webpki's `ring` is there for Android's platform verifier).
fn dependents(krate: &str) -> String {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["tree", "-i", krate])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn one_crypto_provider_is_compiled() {
    let aws = dependents("aws-lc-rs");
    assert!(
        aws.contains("rustls v0.23"),
        "aws-lc-rs is rustls's provider: {aws}"
    );
    let ring = dependents("ring");
    assert!(
        ring.trim().is_empty(),
        "ring is compiled beside aws-lc-rs, pulled in by:\n{ring}"
    );
}

/// Cargo.toml as a TOML parser reads it: Python's `tomllib` (3.11's standard library, on the
/// fast tier's machine), turned into JSON. A text search would take a commented-out line or
/// a key of another section for the setting.
fn manifest_toml() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import json, sys, tomllib; print(json.dumps(tomllib.load(open(sys.argv[1], 'rb'))))",
        ])
        .arg(&path)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "tomllib: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("tomllib's JSON")
}

/// The names of the sections of an ELF64 little-endian file (as `readelf -S` lists them),
/// read from its section header table.
fn elf_sections(path: &std::path::Path) -> Vec<String> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&b[..4], b"\x7fELF", "{}: not ELF", path.display());
    assert_eq!((b[4], b[5]), (2, 1), "ELF64 little-endian");
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize;
    let (shoff, shentsize, shnum, shstrndx) =
        (u64_at(0x28), u16_at(0x3a), u16_at(0x3c), u16_at(0x3e));
    let header = |i: usize| shoff + i * shentsize;
    // The section names' string table: sh_offset at +0x18 of its header.
    let names = u64_at(header(shstrndx) + 0x18);
    (0..shnum)
        .map(|i| {
            let start = names + u32_at(header(i));
            let end = start + b[start..].iter().position(|&c| c == 0).unwrap();
            String::from_utf8_lossy(&b[start..end]).into_owned()
        })
        .collect()
}

#[test]
fn the_release_build_carries_no_debug_info_and_profiling_does() {
    let toml = manifest_toml();
    let profile = &toml["profile"];
    // `debug = false`, the boolean (a string "false" is not a setting cargo takes).
    assert_eq!(profile["release"]["debug"], Value::Bool(false), "{profile}");
    assert_eq!(profile["profiling"]["inherits"], "release", "{profile}");
    // Any level that keeps line numbers: cargo's `1`/`2`/`true` or their names.
    let kept = &profile["profiling"]["debug"];
    assert!(
        matches!(
            kept,
            Value::Bool(true) | Value::Number(_) | Value::String(_)
        ) && *kept != 0
            && !matches!(kept.as_str(), Some("none" | "false")),
        "[profile.profiling] debug: {kept}"
    );
    // What the setting is for, in the binary these tests run: a release build (`cargo test
    // --release`, the fast tier's command) has no DWARF; a dev build (`debug` on by default)
    // has it, so this check reads the sections, not just the absence of one.
    let sections = elf_sections(std::path::Path::new(env!("CARGO_BIN_EXE_concur")));
    assert!(sections.iter().any(|s| s == ".text"), "{sections:?}");
    let dwarf: Vec<&String> = sections
        .iter()
        .filter(|s| s.starts_with(".debug_"))
        .collect();
    assert_eq!(
        !dwarf.is_empty(),
        cfg!(debug_assertions),
        "debug sections of a {} build: {dwarf:?}",
        if cfg!(debug_assertions) {
            "dev"
        } else {
            "release"
        }
    );
}

/// `cargo package --list`: the files a `cargo install` of the published crate builds from.
fn packaged() -> BTreeSet<String> {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["package", "--list", "--allow-dirty", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo package runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Every file under `dir` (relative to the manifest's folder), recursively.
fn files_under(dir: &str) -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    let mut todo = vec![root.join(dir)];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    out
}

#[test]
fn the_package_ships_what_the_build_reads_and_not_what_it_excludes() {
    let list = packaged();
    // What the build and the registry page read: the manifest and lock file, the readme and
    // licence the manifest names, the build settings (libcurl's poll(): .cargo/config.toml),
    // the classic programs `include_str!` compiles in, and every source file.
    let mut must: Vec<String> = [
        "Cargo.toml",
        "Cargo.lock",
        "README.md",
        "LICENSE",
        ".cargo/config.toml",
        "src/main.rs",
        "src/lib.rs",
        "src/classic/gil.py",
        "src/classic/crawl.py",
        "src/classic/mailer.rb",
    ]
    .map(str::to_string)
    .to_vec();
    let sources = files_under("src");
    assert!(sources.len() > 50, "{sources:?}");
    must.extend(sources);
    let missing: Vec<&String> = must.iter().filter(|f| !list.contains(*f)).collect();
    assert!(missing.is_empty(), "not packaged: {missing:?}");
    // The manifest's `exclude`: the report's screenshot and any local results.
    let shipped_excluded: Vec<&String> = list
        .iter()
        .filter(|f| *f == "docs/report-gil.png" || f.starts_with("concur-results/"))
        .collect();
    assert!(shipped_excluded.is_empty(), "{shipped_excluded:?}");
    assert!(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs/report-gil.png")
            .exists(),
        "the excluded file is in the tree, so its absence from the list is the exclude's work"
    );
}

/// What `.ci/run` installs, as `KIND: NAME` (`apt`, `pip`, `cargo`, `rustup`), from its
/// commands (comments left out).
fn ci_installs() -> BTreeSet<String> {
    let script = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/run")).unwrap();
    let mut found = BTreeSet::new();
    for line in script.lines().filter(|l| !l.trim_start().starts_with('#')) {
        for (kind, marker) in [
            ("apt", "apt-get install"),
            ("pip", "pip install"),
            ("cargo", "cargo install"),
            ("rustup", "rustup component add"),
        ] {
            let Some((_, rest)) = line.split_once(marker) else {
                continue;
            };
            let words = rest.split_whitespace();
            let words = words.take_while(|w| !w.starts_with('>') && !matches!(*w, "||" | "&&"));
            for w in words.filter(|w| !w.starts_with('-')) {
                found.insert(format!("{kind}: {}", w.trim_end_matches([';', ')'])));
            }
        }
    }
    found
}

/// What README.md's Install section says `.ci/run` installs: the table's last column, groups
/// of `KIND: `NAME`, `NAME`` separated by `;`.
fn readme_installs() -> BTreeSet<String> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = readme
        .split("\n## Install\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("README.md has an Install section");
    let mut found = BTreeSet::new();
    for row in section
        .lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---"))
    {
        let last = row.trim_end_matches('|').rsplit('|').next().unwrap();
        for group in last.split(';') {
            let Some((kind, names)) = group.split_once(": ") else {
                continue; // the header row
            };
            let kind = kind.split_whitespace().next().unwrap();
            for name in names.split(',') {
                let name = name.trim().trim_matches('`');
                found.insert(format!("{kind}: {name}"));
            }
        }
    }
    found
}

/// Issue 46: the README names everything `.ci/run` installs, and nothing it does not.
#[test]
fn the_readme_lists_what_ci_installs() {
    let ci = ci_installs();
    let readme = readme_installs();
    assert!(ci.len() >= 20, "{ci:?}");
    assert!(
        ci.contains("rustup: clippy") && ci.contains("apt: redis-server"),
        "{ci:?}"
    );
    let missing: Vec<_> = ci.difference(&readme).collect();
    let extra: Vec<_> = readme.difference(&ci).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "README.md's Install table and .ci/run disagree: installed but not listed {missing:?}; listed but not installed {extra:?}"
    );
}

/// The tests whose body takes `alone()`: each `fn NAME` of tests/*.rs followed, before the
/// next `fn`, by a call of it, `alone();` (comments left out).
fn tests_that_take_alone() -> BTreeSet<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests");
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let mut current: Option<String> = None;
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let code = line.split("//").next().unwrap();
            let words: Vec<&str> = code.split_whitespace().collect();
            if let Some(i) = words.iter().position(|w| *w == "fn") {
                if let Some(name) = words.get(i + 1) {
                    current = Some(name.split(['(', '<']).next().unwrap().to_string());
                }
            }
            let call = concat!("alone", "();");
            let calls = code
                .match_indices(call)
                .any(|(i, _)| !code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_'));
            if calls {
                if let Some(name) = &current {
                    found.insert(name.clone());
                }
            }
        }
    }
    found
}

/// The names in `.config/nextest.toml`'s `alone` group: its `test(=NAME)` terms (the file's
/// only exact-name filters, in the override that sets `test-group = 'alone'`).
fn nextest_alone_group() -> BTreeSet<String> {
    let config =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/.config/nextest.toml"))
            .unwrap();
    assert!(
        config.contains("test-group = 'alone'"),
        "no `alone` group in nextest.toml"
    );
    config
        .split("test(=")
        .skip(1)
        .map(|t| t.split(')').next().unwrap().trim().to_string())
        .collect()
}

/// Every test that takes `alone()` runs in nextest's one-thread `alone` group, so none waits
/// for the lock on nextest's clock (stop 52's CI: doc_commands killed at 300 s while it
/// waited), and the group names no test that does not take it.
#[test]
fn every_test_that_takes_alone_is_in_nextests_serial_group() {
    let sources = tests_that_take_alone();
    let group = nextest_alone_group();
    assert!(sources.len() >= 50, "{sources:?}");
    let missing: Vec<_> = sources.difference(&group).collect();
    let extra: Vec<_> = group.difference(&sources).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "tests that take alone() but are not in .config/nextest.toml's `alone` group: {missing:?}; \
         named there but not taking it: {extra:?}"
    );
}
