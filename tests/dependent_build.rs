//! concur as another crate's dependency, built as a user's crate builds it: in a folder
//! outside this checkout, so that none of the project's `.cargo/config.toml` applies (no
//! `CFLAGS=-DHAVE_POLL`), with the checkout's Cargo.lock. curl-sys then compiles libcurl to
//! wait with `select()`, which cannot watch a descriptor numbered 1,024 or more: before
//! src/model/curl_connect.rs, every connect past the 1,023rd descriptor failed its check and
//! was retried until one below came free, so `curl:1200` over 1.5 s delays never had more
//! than about 1,000 connections open and took 2.4× the ideal (3.65 s; the CLI binary 1.61 s).
//! Heavy (a whole second build of concur and its dependencies, kept in target/dependent for
//! the next run), so in the full tier and alone.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

/// The dependent crate's program: concur's own command line, from the library; with one
/// extra flag that says whether its libcurl waits with `select()`.
const MAIN: &str = r#"fn main() -> std::process::ExitCode {
    if std::env::args().nth(1).as_deref() == Some("--libcurl-waits-with-select") {
        println!("{}", concur::model::libcurl_waits_with_select());
        return std::process::ExitCode::SUCCESS;
    }
    concur::cli::main()
}
"#;

#[test]
#[ignore = "full tier: needs minutes: builds concur again, as another crate's dependency, in target/dependent"]
fn curl_holds_more_than_1024_connections_when_concur_is_a_dependency() {
    require(&[Need::CargoOffline]);
    let _alone = alone();
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::Builder::new()
        .prefix("concur-dependent-")
        .tempdir_in("/tmp")
        .expect("a folder outside the checkout");
    assert!(
        !dir.path().starts_with(checkout),
        "{} is inside the checkout",
        dir.path().display()
    );
    std::fs::write(
        dir.path().join("Cargo.toml"),
        format!(
            "[package]\nname = \"concur-dependent\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             publish = false\n\n[dependencies]\nconcur = {{ path = {:?}, default-features = false }}\n\n\
             [workspace]\n",
            checkout.display().to_string()
        ),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/main.rs"), MAIN).unwrap();
    std::fs::copy(checkout.join("Cargo.lock"), dir.path().join("Cargo.lock")).unwrap();

    // Built as a user would: no CFLAGS (cargo hands the project's `[env]` to the processes it
    // runs, this test among them), the versions of the checkout's lock file (cargo adds the
    // new root package to it; `--offline`: every crate is already downloaded by this build).
    let target = checkout.join("target").join("dependent");
    let built = Command::new(option_env!("CARGO").unwrap_or("cargo"))
        .args(["build", "--release", "--offline", "--target-dir"])
        .arg(&target)
        .current_dir(dir.path())
        .env_remove("CFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("cargo runs");
    assert!(
        built.status.success(),
        "the dependent crate did not build: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let bin = target.join("release").join("concur-dependent");

    // The case this test is about: the dependent's libcurl waits with select().
    let probe = Command::new(&bin)
        .arg("--libcurl-waits-with-select")
        .output()
        .expect("the dependent's binary runs");
    assert_eq!(
        String::from_utf8_lossy(&probe.stdout).trim(),
        "true",
        "built without CFLAGS, libcurl should wait with select(): {probe:?}"
    );

    // 1,200 requests of 1.5 s at once, on the study's own server: every connection open at
    // the same time, so the client's sockets take descriptors past 1,023.
    const W: u64 = 1_200;
    let out = Command::new(&bin)
        .args([
            "run",
            "-w",
            "http:/add?name={rand}&delay=1500",
            "-m",
            "curl:1200",
            "-n",
            "1200",
            "-r",
            "1",
            "--warmup",
            "0",
            "--timeout",
            "60s",
            "--json",
            "-",
        ])
        .env_remove("CONCUR_JOBS_BACKEND")
        .output()
        .expect("the dependent's binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let runs = of_type(&lines, "run");
    assert_eq!(runs.len(), 1, "{stdout}");
    let r = runs[0];
    assert_eq!(r["status"], "ok", "{}", r["error"]);
    assert_eq!(r["tasks_failed"], 0, "{}", r["failures"]);
    assert_eq!(r["tasks_ok"], W);
    assert_eq!(r["bytes"], 10 * W, "10 bytes a reply");
    // The server saw more than 1,100 requests in flight at once: the client held that many
    // sockets, some numbered past 1,023, connected. With libcurl's own connect check on a
    // select() build it never held more than about 1,000.
    let peak = r["server_peak_in_flight"].as_u64().unwrap_or(0);
    assert!(
        (1_100..=W).contains(&peak),
        "only {peak} connections open at once: {r}"
    );
    eprintln!(
        "curl:1200 as a dependency: wall {} s, server peak {peak} in flight",
        r["wall_s"]
    );
}
