# shellcheck shell=sh
# Sourced by the shell benchmarks: a temp dir of their own and a capsuled on it, stopped (and the dir removed)
# however the script ends. `bench_daemon NAME BUILD [ARGS...]` sets $work, $socket and $daemon.
bench_daemon() {
  work="$(mktemp -d "${TMPDIR:-/tmp}/capsule-$1.XXXXXX")"
  chmod 0711 "$work"  # the sandboxes' ids walk into its state dir
  socket="$work/capsule.sock"
  daemon=""
  trap 'bench_daemon_stop' EXIT
  trap 'exit 130' INT TERM
  bench_build="$2"
  shift 2
  "$bench_build/bin/capsuled" --socket "$socket" --state-dir "$work/state" "$@" >"$work/capsuled.log" 2>&1 &
  daemon=$!
  until [ -S "$socket" ]; do
    kill -0 "$daemon" 2>/dev/null || { cat "$work/capsuled.log" >&2; exit 1; }
    sleep 0.1
  done
}

bench_daemon_stop() {
  [ -z "$daemon" ] || { kill -TERM "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null || true; }
  rm -rf "$work"
}
