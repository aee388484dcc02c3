#!/bin/sh
# The README's second command: install dependencies, build the default and the sanitizer (ASan+UBSan)
# configurations, and run the whole test suite under both, then a bounded libFuzzer run (scripts/fuzz-smoke.sh,
# clang). Exits non-zero on any failure.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
for preset in default asan; do
  echo "== build ($preset)"
  ./scripts/build.sh "$preset"
  echo "== test ($preset)"
  ctest --preset "$preset" -j 2 --timeout 900
done
echo "== fuzz smoke"
./scripts/fuzz-smoke.sh
