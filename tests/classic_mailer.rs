//! `--classic` runs MRI for the mailer study: the `rb:` rows (sequential, fork, threads, a pool
//! of 10, Celluloid's pool of 10) beside concur's, each a program of `src/classic/mailer.rb`.
//! Full tier: Ruby with Celluloid (`.ci/run` installs them), and then every row must be there.
//! In a binary of its own, holding `common::alone()`: the study includes the 10,000-thread
//! cell, which must not run beside other tests' timing checks.

mod common;

use common::*;

/// The rows that need Ruby and the `celluloid` gem only (`rb:sidekiq:10` also needs the
/// study's Redis, which this test does not give it).
const MRI_ROWS: &[&str] = &[
    "rb:seq",
    "rb:fork",
    "rb:threads",
    "rb:pool:10",
    "rb:celluloid:10",
];

#[test]
#[ignore = "full tier: needs ruby with celluloid"]
fn classic_mailer_runs_mri_beside_concur() {
    common::require(&[Need::Ruby]);
    let _alone = alone();
    let (out, lines) = run_study(&["mailer", "--quick", "--classic", "-r", "1"]);
    let notes = of_type(&lines, "meta")[0]["notes"].to_string();
    assert!(
        notes.contains("classic: MRI "),
        "{notes} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut checksums = std::collections::BTreeSet::new();
    for label in MRI_ROWS {
        let runs = runs_of(&lines, label);
        assert_eq!(runs.len(), 1, "{label} did not run: {notes}");
        let r = runs[0];
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["external"], true, "{r}");
        assert_eq!(r["tasks_ok"], 100, "{r}");
        assert!(r["startup_s"].is_f64(), "{r}");
        checksums.insert(r["bytes"].as_u64().unwrap_or(0));
    }
    // Every Ruby row rendered the same 100 mails.
    assert_eq!(checksums.len(), 1, "the rb: rows disagree: {checksums:?}");
    assert!(checksums.iter().all(|&b| b >= 100 * 50), "{checksums:?}");
}
