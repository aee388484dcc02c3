#!/bin/sh
# Stacks (issue 16): time from POST /v1/stacks to every service ready (a web service probed by HTTP, a worker
# probed by TCP, a driver) against the same two processes started by hand on the host and polled the same way
# (every 100 ms), one at a time and 8 at once. Prints medians and the ratio to the by-hand baseline of the same run.
# Usage: bench/stack_bench.sh [BUILD_DIR] [ROUNDS]   (default build, 5)
set -eu
cd "$(dirname "$0")/.."
build="$(cd "${1:-build}" && pwd)"
rounds="${2:-5}"
[ -x "$build/bin/capsuled" ] || { echo "stack_bench: $build/bin/capsuled is not built" >&2; exit 1; }
. bench/support/bench_daemon.sh
bench_daemon stack-bench "$build"
SOCKET="$socket" ROUNDS="$rounds" /usr/bin/python3 bench/stack_bench.py
