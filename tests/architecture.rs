//! docs/architecture.md's module table names every module under src/ and nothing else: a
//! new file without its row, or a row for a file that is gone, fails here.

use std::collections::BTreeSet;
use std::path::Path;

/// Every `.rs` file under `src/`, as paths relative to it (`plan/presets.rs`).
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
    assert!(rows.len() > 15, "too few rows read: {rows:?}");
    // The folders are the layers: only the entry points stand loose at `src/`'s root.
    let loose: Vec<&String> = rows.iter().filter(|r| !r.contains('/')).collect();
    assert_eq!(
        loose,
        ["main.rs", "lib.rs", "lab.rs", "fuzzing.rs"],
        "files at src/'s root other than the entry points"
    );
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

/// A module path of `src/` for a file (`runner/convert.rs` → `runner::convert`,
/// `hub/mod.rs` → `hub`, `lib.rs` → the crate root, empty).
fn module_of(rel: &str) -> Vec<String> {
    let rel = rel.strip_suffix(".rs").expect("a .rs file");
    let mut path: Vec<String> = rel.split('/').map(str::to_string).collect();
    if matches!(path.last().map(String::as_str), Some("mod" | "lib")) {
        path.pop();
    }
    path
}

/// The paths a source names through `crate::`, `super::` and `self::`, each made absolute
/// (from the crate root), with their line numbers. Comment lines and the `#[cfg(test)]`
/// module at a file's end are not read.
fn named_paths(text: &str, module: &[String]) -> Vec<(usize, Vec<String>)> {
    // An inline `mod tests { ... }` under `#[cfg(test)]` ends what is read.
    let lines: Vec<&str> = text.lines().collect();
    let end = (0..lines.len())
        .find(|&i| {
            lines[i].trim() == "#[cfg(test)]"
                && lines.get(i + 1).is_some_and(|l| {
                    l.trim_start().starts_with("mod ") && l.trim_end().ends_with('{')
                })
        })
        .unwrap_or(lines.len());
    let text = lines[..end].join("\n");
    let text = text.as_str();
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        // A `use` over several lines is read whole from its first line.
        let starts_use = ["use ", "pub use ", "pub(crate) use "]
            .iter()
            .any(|u| line.trim_start().starts_with(u));
        let rest = if starts_use && !line.contains(';') {
            text.lines()
                .skip(n)
                .take_while(|l| !l.contains(';'))
                .chain(text.lines().skip(n).find(|l| l.contains(';')))
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            line.to_string()
        };
        let chars: Vec<char> = rest.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let at_word = i == 0
                || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_' || chars[i - 1] == ':');
            let tail: String = chars[i..].iter().take(8).collect();
            let start = if tail.starts_with("crate::") {
                Some((Vec::new(), 7))
            } else if tail.starts_with("super::") {
                Some((module[..module.len().saturating_sub(1)].to_vec(), 7))
            } else if tail.starts_with("self::") {
                Some((module.to_vec(), 6))
            } else {
                None
            };
            match start {
                Some((mut base, skip)) if at_word => {
                    i += skip;
                    // Further `super::`s climb on.
                    while chars[i..].iter().take(7).collect::<String>() == "super::" {
                        base.pop();
                        i += 7;
                    }
                    let (trees, used) = use_tree(&chars[i..]);
                    i += used.max(1);
                    for t in trees {
                        let mut p = base.clone();
                        p.extend(t);
                        out.push((n + 1, p));
                    }
                }
                _ => i += 1,
            }
        }
    }
    out
}

/// Reads a path or a use-tree (`a::b`, `a::{b::c, d}`) from `s`: every path it names and
/// how many characters it took.
fn use_tree(s: &[char]) -> (Vec<Vec<String>>, usize) {
    let mut i = 0;
    let mut prefix: Vec<String> = Vec::new();
    loop {
        let start = i;
        while i < s.len() && (s[i].is_alphanumeric() || s[i] == '_') {
            i += 1;
        }
        if i > start {
            prefix.push(s[start..i].iter().collect());
        }
        if i + 1 < s.len() && s[i] == ':' && s[i + 1] == ':' {
            i += 2;
            if i < s.len() && s[i] == '{' {
                i += 1;
                let mut all = Vec::new();
                loop {
                    while i < s.len() && (s[i].is_whitespace() || s[i] == ',') {
                        i += 1;
                    }
                    if i >= s.len() || s[i] == '}' {
                        i += 1;
                        break;
                    }
                    let (trees, used) = use_tree(&s[i..]);
                    i += used.max(1);
                    for t in trees {
                        let mut p = prefix.clone();
                        // `self` in a group names the prefix itself.
                        p.extend(t.into_iter().filter(|seg| seg != "self"));
                        all.push(p);
                    }
                }
                return (all, i);
            }
            continue;
        }
        return (vec![prefix], i);
    }
}

/// The unit of the import table a module path belongs to: its first segment (a folder of
/// `src/`, or one of the files at its root); items named on the crate root are `lib`.
fn unit_of(path: &[String], src: &Path) -> String {
    let Some(first) = path.first() else {
        return "lib".into();
    };
    let is_module = src.join(format!("{first}.rs")).exists() || src.join(first).is_dir();
    if !is_module {
        return "lib".into();
    }
    first.clone()
}

/// The import table's module a file of `src/` belongs to: `main` and `lib` for the crate's two
/// roots, else the unit its module path is in.
fn own_unit(rel: &str, module: &[String], src: &Path) -> String {
    match rel {
        "main.rs" => "main".to_string(),
        "lib.rs" => "lib".to_string(),
        _ => unit_of(module, src),
    }
}

/// The file of `src/` a module path names: the longest prefix of it that is a file
/// (`a/b.rs`) or a folder's `mod.rs`; `lib.rs` for the crate root's own items.
fn file_of(path: &[String], src: &Path) -> String {
    for n in (1..=path.len()).rev() {
        let p = path[..n].join("/");
        if src.join(format!("{p}.rs")).exists() {
            return format!("{p}.rs");
        }
        if src.join(&p).join("mod.rs").exists() {
            return format!("{p}/mod.rs");
        }
    }
    "lib.rs".into()
}

/// Whether `a` is a folder's `mod.rs` and `b` one of the entries it lists (a file beside it,
/// or a folder beside it by its `mod.rs`), or the other way round: a registry and its entries
/// count as one room.
fn registry_and_entry(a: &str, b: &str) -> bool {
    let dir = |f: &str| {
        Path::new(f)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    };
    let lists = |reg: &str, entry: &str| {
        (reg.ends_with("mod.rs") || reg == "lib.rs")
            && (dir(entry) == dir(reg)
                || (entry.ends_with("mod.rs") && dir(&dir(entry).to_string_lossy()) == dir(reg)))
    };
    lists(a, b) || lists(b, a)
}

/// No two files of `src/` import each other, directly or round a longer loop (a folder's
/// `mod.rs` and the entries it lists excepted): a circle means neither file can be read,
/// tested or moved without the other, which the layers above cannot see inside a folder.
#[test]
fn no_circle_between_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let mut files = BTreeSet::new();
    sources(&src, &src, &mut files);
    let mut edges: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for rel in &files {
        let module = module_of(rel);
        let text = std::fs::read_to_string(src.join(rel)).expect("a source");
        for (_, path) in named_paths(&text, &module) {
            let to = file_of(&path, &src);
            if to != *rel && !registry_and_entry(rel, &to) {
                edges.entry(rel.clone()).or_default().insert(to);
            }
        }
    }
    assert!(
        edges.values().map(BTreeSet::len).sum::<usize>() > 300,
        "too few imports between files read"
    );
    // A circle is a file that reaches itself; each is named once, by its smallest file.
    let mut circles = Vec::new();
    for start in &files {
        let mut path = vec![start.clone()];
        let mut seen = BTreeSet::new();
        if let Some(c) = reach(start, start, &edges, &mut path, &mut seen) {
            if c.iter().min() == Some(start) {
                circles.push(c.join(" -> "));
            }
        }
    }
    assert!(
        circles.is_empty(),
        "files that import each other:\n{}",
        circles.join("\n")
    );
}

/// A path of imports from `at` back to `goal`, if there is one (depth first).
fn reach(
    at: &str,
    goal: &str,
    edges: &std::collections::BTreeMap<String, BTreeSet<String>>,
    path: &mut Vec<String>,
    seen: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    for next in edges.get(at).into_iter().flatten() {
        if next == goal {
            return Some(path.clone());
        }
        if seen.insert(next.clone()) {
            path.push(next.clone());
            if let Some(c) = reach(next, goal, edges, path, seen) {
                return Some(c);
            }
            path.pop();
        }
    }
    None
}

/// The import table (docs/architecture.md, "Which module may import which"): the pipeline's
/// layers from the top (the crate's entry points) to the bottom (its foundations), and a
/// test that every `crate::`, `super::` and `self::` path in `src/` names a module of a
/// lower layer than its own. The drawing is thereby a test: a module reaching back up the
/// pipeline (or across its own layer) fails here, and so does a module the table forgets.
#[test]
fn every_import_runs_down_the_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let layer = layers(root);
    assert!(layer.len() > 15, "too few modules read: {layer:?}");
    let mut files = BTreeSet::new();
    sources(&src, &src, &mut files);
    let mut problems = Vec::new();
    let mut seen = 0;
    for rel in &files {
        let module = module_of(rel);
        let own = own_unit(rel, &module, &src);
        let Some(&mine) = layer.get(&own) else {
            problems.push(format!(
                "src/{rel}: its module `{own}` is not in the import table"
            ));
            continue;
        };
        let text = std::fs::read_to_string(src.join(rel)).expect("a source");
        for (line, path) in named_paths(&text, &module) {
            seen += 1;
            let to = unit_of(&path, &src);
            if to == own {
                continue;
            }
            let name = path.join("::");
            if to == "lib" {
                // Only the entry points may name the crate root's public face.
                if !matches!(own.as_str(), "main" | "lib" | "lab" | "fuzzing") {
                    problems.push(format!(
                        "src/{rel}:{line}: `crate::{name}` names the crate root; name it by its \
                         own module's path (the root is the public face, not a floor)"
                    ));
                }
                continue;
            }
            match layer.get(&to) {
                None => problems.push(format!(
                    "src/{rel}:{line}: `{name}` is in `{to}`, which the import table does not name"
                )),
                Some(&theirs) if theirs <= mine => problems.push(format!(
                    "src/{rel}:{line}: `{own}` (layer {mine}) imports `{name}` from `{to}` \
                     (layer {theirs}): a module imports only from layers below its own"
                )),
                Some(_) => {}
            }
        }
    }
    assert!(seen > 500, "too few paths read: {seen}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The import table's layers (docs/architecture.md, "Which module may import which"): each
/// module's layer, from 1 at the top.
fn layers(root: &Path) -> std::collections::BTreeMap<String, usize> {
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).expect("the doc");
    let table = doc
        .split("## Which module may import which")
        .nth(1)
        .expect("the import table's section");
    // Rows `| N | `a`, `b` | ... |`: layer N holds modules a and b.
    let mut layer: std::collections::BTreeMap<String, usize> = Default::default();
    for line in table.lines().take_while(|l| !l.starts_with("## ")) {
        let cols: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(n) = cols.get(1).and_then(|c| c.parse::<usize>().ok()) else {
            continue;
        };
        for m in cols[2].split(',').map(|m| m.trim().trim_matches('`')) {
            assert!(
                layer.insert(m.to_string(), n).is_none(),
                "the import table names `{m}` twice"
            );
        }
    }
    layer
}

/// The floors' drawing in docs/architecture.md, between its two markers, is drawn from the
/// code: which floor imports from which, read from every `crate::`, `super::` and `self::`
/// path. A stale drawing fails here; `UPDATE_ARCHITECTURE=1 cargo test --test architecture`
/// draws it again.
#[test]
fn the_floors_drawing_is_drawn_from_the_code() {
    const BEGIN: &str = "<!-- floors: drawn by tests/architecture.rs -->";
    const END: &str = "<!-- floors: end -->";
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let layer = layers(root);
    let floors = layer.values().copied().max().unwrap_or(0);
    let mut files = BTreeSet::new();
    sources(&src, &src, &mut files);
    // imports[a][b]: how many paths floor a names in floor b.
    let mut imports = vec![vec![0usize; floors + 1]; floors + 1];
    for rel in &files {
        let module = module_of(rel);
        let own = own_unit(rel, &module, &src);
        let mine = layer[&own];
        let text = std::fs::read_to_string(src.join(rel)).expect("a source");
        for (_, path) in named_paths(&text, &module) {
            if let Some(&theirs) = layer.get(&unit_of(&path, &src)) {
                if theirs != mine {
                    imports[mine][theirs] += 1;
                }
            }
        }
    }
    let mut names = vec![Vec::new(); floors + 1];
    for (m, &n) in &layer {
        names[n].push(m.as_str());
    }
    let mut drawing = String::from("```\n");
    drawing.push_str(&format!("{:<30}imports from floor\n", ""));
    drawing.push_str(&format!("{:<30}", "floor"));
    for b in 1..=floors {
        drawing.push_str(&format!("{b:>3}"));
    }
    drawing.push('\n');
    let mut up = 0;
    for (a, row) in imports.iter().enumerate().skip(1) {
        let label = format!("{a:>2} {}", names[a].join(" "));
        drawing.push_str(&format!("{label:<30}"));
        for (b, &n) in row.iter().enumerate().skip(1) {
            let mark = match (b.cmp(&a), n) {
                (std::cmp::Ordering::Equal, _) => "\\",
                (_, 0) => ".",
                (std::cmp::Ordering::Greater, _) => "●",
                _ => {
                    up += 1;
                    "▲"
                }
            };
            drawing.push_str(&format!("{mark:>3}"));
        }
        drawing.push('\n');
    }
    drawing.push_str(&format!(
        "\n● a floor imports from one below it; ▲ from one above it (imports back up: {up})\n```\n"
    ));
    let doc_path = root.join("docs/architecture.md");
    let doc = std::fs::read_to_string(&doc_path).expect("the doc");
    let (Some(b), Some(e)) = (doc.find(BEGIN), doc.find(END)) else {
        panic!("docs/architecture.md has no floors drawing between {BEGIN} and {END}");
    };
    let shown = &doc[b + BEGIN.len() + 1..e];
    // Drawn again or not, an import back up fails.
    assert_eq!(up, 0, "imports back up the floors:\n{drawing}");
    if std::env::var_os("UPDATE_ARCHITECTURE").is_some() {
        let new = format!("{}{BEGIN}\n{drawing}{}", &doc[..b], &doc[e..]);
        std::fs::write(&doc_path, new).expect("the doc written");
        return;
    }
    assert_eq!(
        shown, drawing,
        "docs/architecture.md's floors drawing is not the code's; draw it again with \
         UPDATE_ARCHITECTURE=1 cargo test --release --test architecture"
    );
}
