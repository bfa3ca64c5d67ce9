#!/usr/bin/env bash
# `curl:1200` over 1.5 s delays when concur is another crate's dependency (issue 45): libcurl
# then waits with select(), which cannot watch a descriptor numbered 1,024 or more (curl-sys
# builds it without HAVE_POLL, and concur's .cargo/config.toml, which adds it, does not apply
# to a dependency). Each REV is checked out in a worktree and built as the dependency of a
# crate in /tmp (no CFLAGS, the checkout's Cargo.lock), its binary being concur's command line
# from the library, as tests/dependent_build.rs builds it; the concur binary of this checkout
# (built with the flag) runs beside them. ROUNDS rounds alternate the binaries; each run's wall
# time and the study server's peak of requests in flight are printed, then the medians and
# each median's ratio to the ideal (1.5 s: every request at once).
#
# Usage: bench/curl-dependent.sh [ROUNDS] [REV...]
#   ROUNDS  default 5
#   REV     commits to build as a dependency (default: HEAD)
# The dependents share one target folder with tests/dependent_build.rs, target/dependent: the
# first build takes minutes (every dependency again, without CFLAGS), a later REV only concur.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive number, not '$rounds'" >&2; exit 2; }
shift || true
revs=("$@")
[ ${#revs[@]} -gt 0 ] || revs=(HEAD)
source bench/lib.sh
raise_open_files
build
root=/tmp/concur-dependent
mkdir -p "$root"
target=${CARGO_TARGET_DIR:-$PWD/target}/dependent
names=(cli)
bins=("$root/concur-cli")
cp "$bin" "$root/concur-cli"
for rev in "${revs[@]}"; do
  sha=$(git rev-parse --short "$rev")
  tree=$root/tree-$sha
  [ -d "$tree" ] || git worktree add -q --detach "$tree" "$sha"
  crate=$root/crate-$sha
  mkdir -p "$crate/src"
  cat > "$crate/Cargo.toml" <<EOF
[package]
name = "concur-dependent-$sha"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
concur = { path = "$tree", default-features = false }

[workspace]
EOF
  echo 'fn main() -> std::process::ExitCode { concur::cli::main() }' > "$crate/src/main.rs"
  cp "$tree/Cargo.lock" "$crate/Cargo.lock"
  echo "building $rev ($sha) as a dependency, without CFLAGS..."
  (cd "$crate" && env -u CFLAGS cargo build --release --offline --target-dir "$target" 2>&1 | tail -1)
  names+=("dep-$sha")
  bins+=("$target/release/concur-dependent-$sha")
done
echo "machine: $(nproc) cores, $(uname -r); load $(cut -d' ' -f1 /proc/loadavg)"
out=$root/runs.txt
: > "$out"
for r in $(seq "$rounds"); do
  for k in "${!bins[@]}"; do
    line=$("${bins[$k]}" run -w 'http:/add?name={rand}&delay=1500' -m curl:1200 -n 1200 -r 1 \
      --warmup 0 --timeout 60s --json - 2>/dev/null \
      | python3 -c '
import json, sys
for l in sys.stdin:
    d = json.loads(l)
    if d.get("type") == "run":
        print(d["wall_s"], d.get("server_peak_in_flight"), d["tasks_ok"], d["tasks_failed"])
')
    echo "${names[$k]} $line" >> "$out"
    echo "  round $r: ${names[$k]}: wall ${line%% *} s, peak/ok/failed ${line#* }"
  done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
walls, peaks = collections.defaultdict(list), collections.defaultdict(list)
for l in open(sys.argv[1]):
    name, wall, peak, ok, failed = l.split()
    walls[name].append(float(wall))
    peaks[name].append(int(peak) if peak != "None" else 0)
print()
print("| binary | wall (median) | rounds | × ideal (1.5 s) | server peak in flight (median) |")
print("|---|---:|---:|---:|---:|")
for name in walls:
    w = statistics.median(walls[name])
    print(f"| {name} | {w:.3f} s | {min(walls[name]):.3f}–{max(walls[name]):.3f} s | {w / 1.5:.2f}× | {statistics.median(peaks[name]):.0f} |")
PY
