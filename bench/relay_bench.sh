#!/bin/sh
# Output relay benchmark: bytes per second from a sandboxed command's stdout to its caller, through capsuled
# (`capsule run` streaming to a reader; `?wait=true` with nobody reading), beside the same command in bwrap and
# natively piped, measured in the same run; then N runs at once (aggregate). Prints MB/s and the ratios.
# Last, head-of-line blocking: how far past its 3 s wall-time limit a neighbour ends while 4 runs flood stdout
# and 4 leave 150 sparse 63 MiB "JUnit reports" each for the daemon to collect.
# Usage: bench/relay_bench.sh [BUILD_DIR] [MIB] [N]   (default build, 1024 MiB per run, 4 concurrent runs)
set -eu
cd "$(dirname "$0")/.."
build="${1:-build}"
mib="${2:-1024}"
concurrent="${3:-4}"
capsule="$build/bin/capsule"
[ -x "$capsule" ] || { echo "relay_bench: $capsule is not built" >&2; exit 1; }
for tool in curl bwrap; do
  command -v "$tool" >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    curl bubblewrap >/dev/null
done

. bench/support/bench_daemon.sh
bench_daemon relay-bench "$build" --max-concurrent 9

now() { date +%s.%N; }
# rate NAME SECONDS BYTES: one line, MB/s (10^6 bytes per second).
rate() { awk -v name="$1" -v s="$2" -v b="$3" 'BEGIN { printf "%-38s %8.0f MB/s  (%.2f s)\n", name, b / s / 1e6, s }'; }
bytes=$((mib * 1048576))
producer="head -c $bytes /dev/zero"

t0=$(now); sh -c "$producer" | cat >/dev/null; t1=$(now)
native=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
t0=$(now); bwrap --unshare-all --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib \
  --symlink usr/lib64 /lib64 --proc /proc --dev /dev sh -c "$producer" | cat >/dev/null; t1=$(now)
bwrap_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
t0=$(now); "$capsule" --socket "$socket" run --memory 1g -- sh -c "$producer" >/dev/null; t1=$(now)
streamed=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
t0=$(now)
curl -sf --unix-socket "$socket" -H 'Content-Type: application/json' \
  -d "{\"argv\": [\"sh\", \"-c\", \"$producer\"]}" 'http://capsule/v1/runs?wait=true' >/dev/null
t1=$(now)
unread=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')

t0=$(now)
i=0; pids=""
while [ "$i" -lt "$concurrent" ]; do
  "$capsule" --socket "$socket" run --memory 1g -- sh -c "$producer" >/dev/null & pids="$pids $!"; i=$((i + 1))
done
for pid in $pids; do wait "$pid"; done
t1=$(now)
together=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
t0=$(now)
i=0; pids=""
while [ "$i" -lt "$concurrent" ]; do (sh -c "$producer" | cat >/dev/null) & pids="$pids $!"; i=$((i + 1)); done
for pid in $pids; do wait "$pid"; done
t1=$(now)
native_together=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')

echo "relay of $mib MiB of stdout per run ($(nproc) CPUs)"
rate "native pipe" "$native" "$bytes"
rate "bwrap --unshare-all, piped" "$bwrap_s" "$bytes"
rate "capsule run (streamed to a reader)" "$streamed" "$bytes"
rate "capsuled ?wait=true (logged, not streamed)" "$unread" "$bytes"
rate "$concurrent x capsule run, aggregate" "$together" $((bytes * concurrent))
rate "$concurrent x native pipe, aggregate" "$native_together" $((bytes * concurrent))
awk -v a="$streamed" -v b="$bwrap_s" -v n="$native" 'BEGIN { printf "ratio capsule run / bwrap throughput: %.2f, / native: %.2f\n", b / a, n / a }'
# Head-of-line blocking: 8 hostile neighbours, then a run with a 3 s limit; its recorded wall time.
mkdir -p "$work/ws"
chmod 0755 "$work/ws"
post() { curl -sf --unix-socket "$socket" -H 'Content-Type: application/json' -d "$1" "http://capsule/v1/runs$2"; }
i=0
while [ "$i" -lt 4 ]; do
  post '{"argv": ["sh", "-c", "yes flood | head -c 2000000000"]}' "" >/dev/null
  post "{\"argv\": [\"sh\", \"-c\", \"mkdir -p r && for n in \$(seq 150); do truncate -s 63M r/\$n.xml; done\"],
         \"workspace\": \"$work/ws\", \"collect\": {\"junit\": [\"r/*.xml\"]}}" "" >/dev/null
  i=$((i + 1))
done
sleep 1
neighbour=$(post '{"argv": ["sleep", "60"], "limits": {"wall_time": "3s"}}' '?wait=true')
wall_ms=$(printf '%s' "$neighbour" | python3 -c 'import json, sys; print(json.load(sys.stdin)["result"]["wall_ms"])')
echo "neighbour with a 3 s limit beside 4 flooders and 4 report spammers: ended after $wall_ms ms (overshoot $(awk -v w="$wall_ms" 'BEGIN { printf "%.0f", w - 3000 }') ms)"

echo "{\"mib\": $mib, \"native_s\": $native, \"bwrap_s\": $bwrap_s, \"capsule_run_s\": $streamed, \"wait_s\": $unread, \"concurrent\": $concurrent, \"concurrent_s\": $together, \"native_concurrent_s\": $native_together, \"neighbour_wall_ms\": $wall_ms}"
