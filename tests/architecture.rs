//! docs/architecture.md's module table names every module under src/ and nothing else: a
//! new file without its row, or a row for a file that is gone, fails here.

use std::collections::BTreeSet;
use std::path::Path;

/// Every `.rs` file under `src/`, as paths relative to it (`study/plan.rs`).
fn sources(dir: &Path, base: &Path, out: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(dir).expect("src/ is readable") {
        let p = e.expect("a directory entry").path();
        if p.is_dir() {
            sources(&p, base, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p.strip_prefix(base).expect("under src/");
            out.insert(rel.to_string_lossy().into_owned());
        }
    }
}

#[test]
fn the_module_table_names_every_module_and_nothing_else() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).expect("the doc");
    let table = doc
        .split("## Each module's one job")
        .nth(1)
        .expect("the module table's section");
    let rows: Vec<String> = table
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split('`').nth(1).map(str::to_string))
        .collect();
    assert!(rows.len() > 20, "too few rows read: {rows:?}");
    let mut files = BTreeSet::new();
    sources(&root.join("src"), &root.join("src"), &mut files);
    assert!(files.len() > 50, "too few sources found: {files:?}");
    for row in &rows {
        let path = root.join("src").join(row);
        assert!(
            path.exists(),
            "the table names `{row}`, which src/ does not have"
        );
    }
    let unnamed: Vec<&String> = files
        .iter()
        .filter(|f| {
            !rows
                .iter()
                .any(|r| *f == r || (r.ends_with('/') && f.starts_with(r.as_str())))
        })
        .collect();
    assert!(
        unnamed.is_empty(),
        "docs/architecture.md's module table does not name: {unnamed:?}"
    );
}

/// Every `.rs` file under `tests/`, with its text.
fn test_sources(dir: &Path, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).expect("tests/ is readable") {
        let p = e.expect("a directory entry").path();
        if p.is_dir() {
            test_sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&p).expect("a test source");
            out.push((p.display().to_string(), text));
        }
    }
}

/// The tests of a source: (attribute lines, name, body up to the closing brace at column 0).
fn tests_of(text: &str) -> Vec<(Vec<&str>, &str, &str)> {
    let test_attr = concat!("#[", "test]");
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != test_attr {
            i += 1;
            continue;
        }
        let mut attrs = vec![lines[i].trim()];
        let mut j = i + 1;
        while j < lines.len() && lines[j].trim_start().starts_with("#[") {
            attrs.push(lines[j].trim());
            j += 1;
        }
        let Some(fn_line) = lines.get(j) else { break };
        let name = fn_line
            .split("fn ")
            .nth(1)
            .and_then(|r| r.split('(').next())
            .unwrap_or(fn_line);
        let start = text.find(fn_line).unwrap_or(0);
        let rest = &text[start..];
        let body = &rest[..rest.find("\n}\n").map_or(rest.len(), |e| e + 2)];
        out.push((attrs, name, body));
        i = j + 1;
    }
    out
}

/// The tier rule (issue 30): no test skips at run time or reads the old CONCUR_REQUIRE
/// variables; a test that needs more than the fast tier's tools is `#[ignore]`d with a reason
/// starting "full tier: needs" and checks for its tools with `common::require` (which fails
/// it, never passes it, when one is missing); and a test that starts Redis, namespaces,
/// faketime, wrk or ruby is such a test. The patterns are spelt in pieces so that this file
/// does not match itself.
#[test]
fn no_test_skips_at_run_time_and_full_tier_tests_say_so() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    test_sources(&root.join("tests"), &mut files);
    assert!(files.len() > 30, "too few test sources: {}", files.len());
    let require_var = concat!("CONCUR_", "REQUIRE_");
    let eprint = concat!("eprint", "ln!(");
    let ignore = concat!("#[", "ignore");
    let reason = concat!("#[ignore = \"", "full tier: needs ");
    let require_call = concat!("require", "(");
    // A call of common's require (by its path, or its name after a glob import), not of a
    // longer name ending with it.
    let calls_require = |body: &str| {
        body.match_indices(require_call).any(|(i, _)| {
            !body[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
    };
    let full_tier_tools = [
        concat!("Hub::", "start"),
        concat!("NetLab::", "new"),
        concat!("Command::new(\"", "redis-server\")"),
        concat!("Command::new(\"", "redis-cli\")"),
        concat!("Command::new(\"", "faketime\")"),
        concat!("Command::new(\"", "wrk\")"),
        concat!("Command::new(\"", "ruby\")"),
    ];
    let mut problems = Vec::new();
    let mut full_tier = 0;
    for (path, text) in &files {
        for (n, line) in text.lines().enumerate() {
            let at = format!("{path}:{}", n + 1);
            if line.contains(require_var) {
                problems.push(format!("{at}: reads {require_var}*: {}", line.trim()));
            }
            if line.trim_start().starts_with(ignore) && !line.trim_start().starts_with(reason) {
                problems.push(format!(
                    "{at}: an ignore whose reason is not \"full tier: needs ...\": {}",
                    line.trim()
                ));
            }
        }
        let mut rest = text.as_str();
        while let Some(i) = rest.find(eprint) {
            let call = &rest[i..];
            let call = &call[..call.find(");").unwrap_or(call.len())];
            if call.to_lowercase().contains("skip") {
                problems.push(format!("{path}: says it skips: {call}"));
            }
            rest = &rest[i + eprint.len()..];
        }
        for (attrs, name, body) in tests_of(text) {
            let ignored = attrs.iter().any(|a| a.starts_with(reason));
            full_tier += usize::from(ignored);
            let requires = calls_require(body);
            if ignored != requires {
                problems.push(format!(
                    "{path}: {name}: a full-tier test both carries the ignore and calls \
                     common::require (ignored: {ignored}, requires: {requires})"
                ));
            }
            for tool in full_tier_tools {
                if body.contains(tool) && !ignored {
                    problems.push(format!("{path}: {name}: uses {tool} in the fast tier"));
                }
            }
        }
    }
    assert!(full_tier >= 30, "only {full_tier} full-tier tests found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
