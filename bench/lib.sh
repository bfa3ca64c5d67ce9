# Sourced by the bench scripts after `cd` to the repository (never run on its own): what every
# one of them needs, in one place.
#   build                      builds the release binary; $bin is its path
#   build_profiling            builds with symbols and line tables (the `profiling` profile,
#                              for perf and heaptrack); $bin is target/profiling/concur
#   start_server NAME [OPT...] starts one `concur serve OPT...` on a free loopback port, in the
#                              background; sets NAME_port, NAME_pid and NAME_url (http:// or,
#                              with --tls-self-signed, https://, whose certificate's path is
#                              then NAME_ca); returns once it answers; stopped on exit
#   stop_on_exit PID           stops another background process when the script exits
#   raise_open_files           lifts the open-files limit as far as allowed (10,000 connections)
#   connections_args N W OUT [ARG...]
#                              the [N] [W] [OUT_DIR] arguments of the scripts that open W
#                              connections (N, W, OUT when absent): sets n, w and out, makes
#                              out, raises the open-files limit

bench_pids=()
trap 'kill "${bench_pids[@]}" 2>/dev/null || true' EXIT

stop_on_exit() { bench_pids+=("$1"); }

build() {
  cargo build --release -q
  bin=${CARGO_TARGET_DIR:-$PWD/target}/release/concur
}

# The release binary ships without debug info; profilers need the symbols and lines.
build_profiling() {
  cargo build --profile profiling -q
  bin=${CARGO_TARGET_DIR:-$PWD/target}/profiling/concur
}

raise_open_files() { ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"; }

connections_args() {
  n=${4:-$1}
  w=${5:-$2}
  out=${6:-$3}
  mkdir -p "$out"
  raise_open_files
}

# A port nothing listens on now: a fixed port would meet a server left from an earlier run, and
# the benchmark would measure that one.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_server() {
  local name=$1 port log scheme=http pid
  shift
  port=$(free_port)
  log=$(mktemp)
  case " $* " in *" --tls-self-signed "*) scheme=https ;; esac
  "$bin" serve --addr "127.0.0.1:$port" "$@" 2> "$log" & pid=$!
  stop_on_exit "$pid"
  until curl -sk "$scheme://127.0.0.1:$port/stats" > /dev/null; do
    kill -0 "$pid" 2> /dev/null || { echo "concur serve did not start: $(cat "$log")" >&2; exit 1; }
    sleep 0.1
  done
  printf -v "${name}_port" '%s' "$port"
  printf -v "${name}_pid" '%s' "$pid"
  printf -v "${name}_url" '%s' "$scheme://127.0.0.1:$port"
  if [ "$scheme" = https ]; then
    printf -v "${name}_ca" '%s' "$(sed -n 's/.*written to \([^ ]*\) .*/\1/p' "$log")"
  fi
  rm -f "$log"
}
