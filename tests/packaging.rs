//! What a user who installs concur gets: one crypto provider under every TLS stack, and a
//! release build without debug info (symbols live in the `profiling` profile, for the bench
//! scripts that need them).

fn manifest(name: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

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

#[test]
fn the_release_build_carries_no_debug_info_and_profiling_does() {
    let toml = manifest("Cargo.toml");
    let section = |name: &str| -> String {
        toml.split(&format!("[profile.{name}]"))
            .nth(1)
            .unwrap_or_else(|| panic!("no [profile.{name}] in Cargo.toml"))
            .split("\n[")
            .next()
            .unwrap_or_default()
            .to_string()
    };
    let release = section("release");
    assert!(
        release.contains("debug = false"),
        "[profile.release]: {release}"
    );
    let profiling = section("profiling");
    assert!(
        profiling.contains("inherits = \"release\"") && profiling.contains("debug ="),
        "[profile.profiling]: {profiling}"
    );
}
