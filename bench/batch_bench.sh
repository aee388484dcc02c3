#!/bin/sh
# Batches (issue 17): N short specs through `capsule batch` (local engine, then Slurm on a private single-node
# cluster) beside the same N commands as `capsule run` processes, C at a time by xargs -P, on one capsuled.
# Prints each wall time, runs per second and the ratio to the xargs baseline measured in the same run.
# Usage: bench/batch_bench.sh [BUILD_DIR] [N] [CONCURRENCY]   (default build, 200, 4). NO_SLURM=1 skips Slurm.
set -eu
cd "$(dirname "$0")/.."
build="$(cd "${1:-build}" && pwd)"
n="${2:-200}"
c="${3:-4}"
capsule="$build/bin/capsule"
[ -x "$capsule" ] || { echo "batch_bench: $capsule is not built" >&2; exit 1; }

. bench/support/bench_daemon.sh
bench_daemon batch-bench "$build"
export CAPSULE_BATCH_ROOT="$work/batches"
now_ms() { date +%s%3N; }

# Distinct commands, so that no spec is served from the manifest cache.
i=0
while [ $i -lt "$n" ]; do
  printf '{"key": "s%d", "argv": ["sh", "-c", "echo %d"]}\n' "$i" "$i"
  i=$((i + 1))
done >"$work/specs.jsonl"

start=$(now_ms)
i=0
while [ $i -lt "$n" ]; do echo "echo x$i"; i=$((i + 1)); done |
  xargs -P "$c" -I CMD "$capsule" --socket "$socket" run -- sh -c CMD >/dev/null 2>&1
xargs_ms=$(($(now_ms) - start))

start=$(now_ms)
id=$("$capsule" --socket "$socket" batch submit "$work/specs.jsonl" --concurrency "$c")
"$capsule" --socket "$socket" batch wait "$id" >/dev/null
local_ms=$(($(now_ms) - start))

start=$(now_ms)
id=$("$capsule" --socket "$socket" batch submit "$work/specs.jsonl")  # every manifest cached now
"$capsule" --socket "$socket" batch wait "$id" >/dev/null
cached_ms=$(($(now_ms) - start))

report() { awk -v name="$1" -v ms="$2" -v n="$n" -v base="$xargs_ms" \
  'BEGIN { printf "%-44s %8d ms  %7.1f runs/s  %5.2fx the xargs time\n", name, ms, n * 1000 / ms, ms / base }'; }
echo "$n specs, $c at a time, one capsuled ($(nproc) CPUs)"
report "xargs -P $c capsule run (baseline)" "$xargs_ms"
report "capsule batch --engine local" "$local_ms"
report "capsule batch, all from the manifest cache" "$cached_ms"

if [ -z "${NO_SLURM:-}" ]; then
  cluster="$work/slurm"
  start=$(now_ms)
  eval "$(tests/support/slurm_cluster.sh start "$cluster")"
  cluster_ms=$(($(now_ms) - start))
  trap 'tests/support/slurm_cluster.sh stop "$cluster"; bench_daemon_stop' EXIT
  start=$(now_ms)
  id=$("$capsule" --socket "$socket" batch submit "$work/specs.jsonl" --engine slurm --partition test --rerun \
    --chunk-size 20 --concurrency "$c")
  "$capsule" --socket "$socket" batch wait "$id" >/dev/null
  slurm_ms=$(($(now_ms) - start))
  report "capsule batch --engine slurm (chunks of 20)" "$slurm_ms"
  echo "(the private Slurm cluster took $cluster_ms ms to start)"
fi
