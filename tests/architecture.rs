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
