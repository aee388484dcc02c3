#!/bin/bash
# Two builds side by side from the shell (issue 13): each build's `capsule run -- true` against its own capsuled
# (both pools warm), with bwrap's `true` as the baseline, in interleaved hyperfine rounds. For before/after
# figures of a change that touches both the CLI and the daemon, which shell_bench's BASELINE_CLI cannot give.
# Usage: bench/shell_ab.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR [RUNS_PER_ROUND] [ROUNDS] [THINK_MS]   (20, 5, 0)
# THINK_MS: a pause before each command (hyperfine --prepare), as an agent or a person leaves between commands;
# 0 runs them back to back, where on few CPUs the figure is the machine's throughput, not one command's latency.
set -euo pipefail
cd "$(dirname "$0")/.."
before="$(cd "$1" && pwd)"
after="$(cd "$2" && pwd)"
runs="${3:-20}"
rounds="${4:-5}"
think_ms="${5:-0}"
case "$think_ms" in '' | *[!0-9]*) echo "shell_ab: THINK_MS must be a whole number of ms" >&2; exit 2 ;; esac
prepare=()
[ "$think_ms" = 0 ] || prepare=(--prepare "sleep $(awk -v ms="$think_ms" 'BEGIN { printf "%.3f", ms / 1000 }')")
for build in "$before" "$after"; do
  if [ ! -x "$build/bin/capsule" ] || [ ! -x "$build/bin/capsuled" ]; then
    echo "shell_ab: $build has no bin/capsule and bin/capsuled" >&2
    exit 1
  fi
done
if ! command -v hyperfine >/dev/null || ! command -v bwrap >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends hyperfine bubblewrap >/dev/null
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/capsule-shell-ab.XXXXXX")"
chmod 0711 "$work"  # the sandboxes' ids walk into the state dirs
pids=()
stop() {
  [ ${#pids[@]} -eq 0 ] || { kill -TERM "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; }
  rm -rf "$work"
}
trap stop EXIT
trap 'exit 130' INT TERM
for side in before after; do
  build="${!side}"
  "$build/bin/capsuled" --socket "$work/$side.sock" --state-dir "$work/$side" >"$work/$side.log" 2>&1 &
  pids+=($!)
done
for side in before after; do
  until [ -S "$work/$side.sock" ]; do
    sleep 0.1
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null || { cat "$work"/*.log >&2; exit 1; }; done
  done
done
run_before="$before/bin/capsule --socket $work/before.sock run -- true"
run_after="$after/bin/capsule --socket $work/after.sock run -- true"
bwrap_true="bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib"
bwrap_true="$bwrap_true --symlink usr/lib64 /lib64 --proc /proc --dev /dev -- /usr/bin/true"
$run_before 2>/dev/null
$run_after 2>/dev/null
sleep 1  # both pools refilled
for round in $(seq "$rounds"); do
  hyperfine -N -w 3 -r "$runs" "${prepare[@]}" "$run_before" "$run_after" "$bwrap_true" --export-json "$work/round$round.json" \
    >/dev/null 2>&1
done
echo "capsule run -- true from the shell ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)); p50 of $rounds x $runs," \
  "$([ "$think_ms" = 0 ] && echo "back to back" || echo "$think_ms ms between commands")"
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
times = [[], [], []]
for r in range(1, rounds + 1):
    for i, result in enumerate(json.load(open(f"{work}/round{r}.json"))["results"]):
        times[i] += result["times"]
before, after, bwrap = (statistics.median(t) * 1000 for t in times)
print(f"  before  p50 {before:7.2f} ms  {before / bwrap:5.2f}x bwrap")
print(f"  after   p50 {after:7.2f} ms  {after / bwrap:5.2f}x bwrap   after/before {after / before:.2f}")
print(f"  bwrap   p50 {bwrap:7.2f} ms")
PY
