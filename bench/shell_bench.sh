#!/bin/sh
# From the shell (issue 13): `capsule run -- true` through its own capsuled beside the same `true` in bwrap, then
# two short real suites (30 generated pytest tests; `mvn -q -o validate` of a one-module project) natively, in
# bwrap and through `capsule run`, timed by hyperfine.
# Prints each p50 and the ratio / difference to the baselines measured in the same run; last, where a capsule
# run's time goes (medians over --json runs: the daemon's setup, the command, the daemon's finishing up to its
# "finished" stamp, and the rest: CLI start, request, record write and the event's way back, CLI exit).
# Usage: bench/shell_bench.sh [BUILD_DIR] [RUNS] [SUITE_RUNS] [MVN_RUNS]   (default build, 40, 20, 10)
# BASELINE_CLI=/path/to/another/capsule adds that CLI's rows (e.g. a build from before a change), same daemon.
# ROUNDS=N (default 5): the runs are split into N interleaved rounds (see run_group).
# JSON_DIR=DIR keeps hyperfine's --export-json files there (otherwise they go with the temp dir).
set -eu
cd "$(dirname "$0")/.."
build="$(cd "${1:-build}" && pwd)"
runs="${2:-40}"
suite_runs="${3:-20}"
mvn_runs="${4:-10}"
rounds="${ROUNDS:-5}"
capsule="$build/bin/capsule"
[ -x "$capsule" ] || { echo "shell_bench: $capsule is not built" >&2; exit 1; }
python=/usr/bin/python3  # the host image's interpreter: the same /usr inside the sandbox and out
if ! command -v hyperfine >/dev/null 2>&1 || ! command -v bwrap >/dev/null 2>&1 ||
  ! "$python" -m pytest --version >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends hyperfine bubblewrap python3-pytest \
    maven default-jdk-headless >/dev/null
fi

. bench/support/bench_daemon.sh
bench_daemon shell-bench "$build"
json_dir="${JSON_DIR:-$work}"
mkdir -p "$json_dir"

# The suite: 6 modules of 5 trivial tests each, readable by the sandbox's user.
suite="$work/suite"
mkdir -p "$suite"
for m in 1 2 3 4 5 6; do
  for t in 1 2 3 4 5; do printf 'def test_%s_%s():\n    assert %s + %s == %s\n\n' "$m" "$t" "$m" "$t" $((m + t)); done \
    >"$suite/test_module_$m.py"
done
chmod -R a+rX "$suite"
pytest_args="-m pytest -q -p no:cacheprovider"
# No __pycache__ writes anywhere: every run compiles the same test files (a read-only workspace could not keep them).
export PYTHONDONTWRITEBYTECODE=1
# shellcheck disable=SC2086  # pytest_args is several words
"$python" $pytest_args "$suite" | grep -q "30 passed" ||
  { echo "shell_bench: the suite does not pass natively" >&2; exit 1; }

# The Maven project: one module, no dependencies and no plugin bound to validate, so offline with an empty
# local repository it needs nothing but Maven itself (the JVM's start and Maven's model building: ~4 s here).
project="$work/mvn-project"
mkdir -p "$project"
cat >"$project/pom.xml" <<'POM'
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>bench</groupId>
  <artifactId>validate</artifactId>
  <version>1.0</version>
</project>
POM
chmod -R a+rX "$project"
mvn_args="-q -o -B validate -Dmaven.repo.local=/tmp/m2"
# shellcheck disable=SC2086  # mvn_args is several words
(cd "$project" && mvn $mvn_args) || { echo "shell_bench: mvn validate fails natively" >&2; exit 1; }

bwrap_base="bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib"
bwrap_base="$bwrap_base --symlink usr/lib64 /lib64 --proc /proc --dev /dev"
run_cmd() { echo "$1 --socket $socket run"; }
in_suite="-e PYTHONDONTWRITEBYTECODE -- $python $pytest_args /workspace"

# hyperfine -N (no shell in between: both sides are exec'd alike). A group is NAME COMMAND pairs, run in ROUNDS
# rounds of RUNS/ROUNDS each (group after group, round after round) so that a change in the machine's load
# falls on every command alike; the p50 is over all rounds' times.
define_group() {  # GROUP NAME COMMAND [NAME COMMAND]...
  group="$1"
  shift
  : >"$json_dir/$group.names"
  : >"$work/$group.commands"
  while [ $# -gt 0 ]; do
    echo "$1" >>"$json_dir/$group.names"
    echo "$2" >>"$work/$group.commands"
    shift 2
  done
}
run_group() {  # GROUP ROUND WARMUP RUNS
  tr '\n' '\0' <"$work/$1.commands" | xargs -0 hyperfine -N --style basic --warmup "$3" --runs "$4" \
    --export-json "$json_dir/$1.$2.json" >"$work/$1.out" 2>&1 || { cat "$work/$1.out" >&2; exit 1; }
}

set -- capsule-run-true "$(run_cmd "$capsule") -- true"
[ -z "${BASELINE_CLI:-}" ] || set -- "$@" baseline-cli-run-true "$(run_cmd "$BASELINE_CLI") -- true"
set -- "$@" bwrap-true "$bwrap_base -- /usr/bin/true" cli-start-only "$capsule run --help"
define_group true "$@"

set -- native-pytest "$python $pytest_args $suite"
in_bwrap_suite="--tmpfs /tmp --ro-bind $suite /workspace --chdir /workspace -- $python $pytest_args /workspace"
set -- "$@" bwrap-pytest "$bwrap_base $in_bwrap_suite"
set -- "$@" capsule-run-pytest-ro "$(run_cmd "$capsule") --workspace $suite --mode ro $in_suite"
set -- "$@" capsule-run-pytest-cow "$(run_cmd "$capsule") --workspace $suite $in_suite"
[ -z "${BASELINE_CLI:-}" ] ||
  set -- "$@" baseline-cli-run-pytest-ro "$(run_cmd "$BASELINE_CLI") --workspace $suite --mode ro $in_suite"
define_group pytest "$@"

set -- native-mvn "mvn -f $project/pom.xml $mvn_args"
set -- "$@" bwrap-mvn "$bwrap_base --tmpfs /tmp --ro-bind /etc /etc --ro-bind $project /workspace --chdir /workspace -- mvn $mvn_args"
set -- "$@" capsule-run-mvn-ro "$(run_cmd "$capsule") --workspace $project --mode ro -- mvn $mvn_args"
define_group mvn "$@"

round=1
while [ "$round" -le "$rounds" ]; do
  warmup=1
  [ "$round" -gt 1 ] || warmup=3
  run_group true "$round" "$warmup" $(((runs + rounds - 1) / rounds))
  run_group pytest "$round" "$warmup" $(((suite_runs + rounds - 1) / rounds))
  run_group mvn "$round" 1 $(((mvn_runs + rounds - 1) / rounds))
  round=$((round + 1))
done

echo "capsule run from the shell ($(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)); hyperfine -N p50"
"$python" - "$json_dir" "$suite_runs" "$(run_cmd "$capsule") --json -- true" \
  "$(run_cmd "$capsule") --json --workspace $suite --mode ro $in_suite" <<'EOF'
import glob, json, statistics, subprocess, sys, time

json_dir, suite_runs = sys.argv[1], int(sys.argv[2])

def show(group, title, baseline):
    names = open(f"{json_dir}/{group}.names").read().split()
    times = {name: [] for name in names}
    for path in glob.glob(f"{json_dir}/{group}.*.json"):
        for name, result in zip(names, json.load(open(path))["results"]):
            times[name] += result["times"]
    p50 = {name: statistics.median(t) * 1000 for name, t in times.items()}
    print(f"{title} ({len(times[baseline])} runs each in {len(glob.glob(f'{json_dir}/{group}.*.json'))} rounds)")
    for name, ms in p50.items():
        line = f"  {name:<28} p50 {ms:8.1f} ms"
        if name != baseline:
            line += f"   {ms / p50[baseline]:5.2f}x {baseline}, {ms - p50[baseline]:+7.1f} ms"
        print(line)

show("true", "`true`", "bwrap-true")
show("pytest", "30-test pytest suite", "native-pytest")
show("mvn", "mvn -q -o validate", "native-mvn")

print(f"where a capsule run's time goes (p50 of {suite_runs} --json runs, ms; the daemon's stamps are whole ms)")
print(f"  {'':<16}{'total':>8}{'setup':>8}{'command':>9}{'finishing':>11}{'rest':>7}")
for name, args in (("true", sys.argv[3]), ("pytest (ro)", sys.argv[4])):
    rows, parts = [], []
    for _ in range(suite_runs):
        begin = time.perf_counter()
        out = subprocess.run(args.split(), capture_output=True, check=True).stdout
        total = (time.perf_counter() - begin) * 1000
        run = json.loads(out)
        result, times = run["result"], run["times"]
        setup = result["setup_ms"]["total"]
        daemon = times["finished"] - times["created"]  # POST taken .. "finished" stamped
        finishing = times["finished"] - times["started"] - result["wall_ms"]  # exit .. stamp: teardown, record
        rows.append((total, setup, result["wall_ms"] - setup, finishing, total - daemon))
        parts.append({k: v for k, v in result["setup_ms"].items() if k != "total"})
    p50 = [statistics.median(column) for column in zip(*rows)]
    print(f"  {name:<16}" + "".join(f"{v:{w}.1f}" for v, w in zip(p50, (8, 8, 9, 11, 7))))
    print(f"  {'':<16}setup parts p50: " +
          ", ".join(f"{k} {statistics.median(p[k] for p in parts):.1f}" for k in parts[0]))
EOF
