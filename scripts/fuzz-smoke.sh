#!/bin/sh
# Builds the libFuzzer targets (the clang `fuzz` preset, build-fuzz/) and runs each for a bounded number of
# iterations from a copy of its checked-in seed corpus. Exits non-zero on any crash, leak, UB or invariant failure.
# Usage: scripts/fuzz-smoke.sh [runs]   (default 20000 per target; longer campaigns: see docs/design.md)
set -eu
cd "$(dirname "$0")/.."
runs="${1:-20000}"

echo "fuzz-smoke: configure + build (preset fuzz)"
cmake --preset fuzz >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target fuzz_http_request fuzz_run_spec fuzz_pypi_page fuzz_maven_metadata

work="$(mktemp -d "${TMPDIR:-/tmp}/capsule-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

status=0
for target in http_request run_spec pypi_page maven_metadata; do
  corpus="$work/$target"
  mkdir -p "$corpus"
  cp fuzz/corpus/"$target"/* "$corpus"/
  start=$(date +%s)
  # Findings (crash-*, leak-*, timeout-*) land in $work/artifacts; the log is shown only on failure.
  mkdir -p "$work/artifacts"
  if build-fuzz/fuzz/fuzz_"$target" -runs="$runs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
      -dict=fuzz/"$target".dict -artifact_prefix="$work/artifacts/$target-" -print_final_stats=1 \
      "$corpus" >"$work/$target.log" 2>&1; then
    echo "fuzz-smoke: fuzz_$target: $runs runs OK in $(( $(date +%s) - start ))s ($(grep -o 'cov: [0-9]*' "$work/$target.log" | tail -1))"
  else
    status=1
    echo "fuzz-smoke: fuzz_$target FAILED after $(( $(date +%s) - start ))s; its log:" >&2
    tail -n 80 "$work/$target.log" >&2
    for artifact in "$work"/artifacts/"$target"-*; do
      [ -e "$artifact" ] || continue
      mkdir -p build-fuzz/findings
      cp "$artifact" build-fuzz/findings/
      echo "fuzz-smoke: reproducer kept as build-fuzz/findings/$(basename "$artifact")" \
           "(rerun: build-fuzz/fuzz/fuzz_$target build-fuzz/findings/$(basename "$artifact"))" >&2
    done
  fi
done
exit "$status"
