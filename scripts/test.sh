#!/bin/sh
# The README's second command: install dependencies, build the default and the sanitizer (ASan+UBSan)
# configurations, and run the whole test suite under both; then the Debian package made from the tested default
# build, installed and run (scripts/package-check.sh), and the tests inside the toolchain recipe images, which
# images/recipes/all.sh builds from Debian packages meanwhile (CAPSULE_RECIPES=0 skips them), with a bounded
# libFuzzer run (scripts/fuzz-smoke.sh, clang) alongside. Exits non-zero on any failure.
set -eu
cd "$(dirname "$0")/.."
started=$(date +%s)
stage_started=""
# stage NAME: prints how long the previous stage took, then NAME.
stage() {
  now=$(date +%s)
  [ -z "$stage_started" ] || echo "   ($((now - stage_started)) s)"
  stage_started=$now
  echo "== $1"
}
stage "dependencies"
./scripts/install-deps.sh

recipes_out=${CAPSULE_RECIPES_OUT:-/var/tmp/capsule-recipes}
recipes=""
fuzz=""
fuzz_log=""
# Background jobs run in sessions of their own, so that an early exit stops each whole (compilers, debootstrap
# and apt included); the fuzz smoke's log goes on any exit, once shown.
trap 'for job in $recipes $fuzz; do kill -TERM "-$job" 2>/dev/null || true; done; rm -f "$fuzz_log"' EXIT
trap 'exit 1' INT TERM HUP
if [ "${CAPSULE_RECIPES:-1}" != 0 ]; then
  mkdir -p "$recipes_out"
  stage "recipe images (in the background; log: $recipes_out/all.log)"
  # At a lower CPU priority: the compiles and tests on the 2 cores are the critical path, the images come last.
  setsid nice -n 10 ./images/recipes/all.sh --out "$recipes_out" > "$recipes_out/all.log" 2>&1 &
  recipes=$!
fi

# The sanitizer pass leaves out the suites that start a Slurm cluster: what they add to the batch tests is slurmd,
# munge and sbatch at work (minutes), while the capsule code they drive (submit, the worker, imports) is the same
# the local-engine batch suites run under the sanitizers.
for preset in default asan; do
  stage "build ($preset)"
  ./scripts/build.sh "$preset"
  stage "test ($preset)"
  if [ "$preset" = asan ]; then
    ctest --preset "$preset" -j 2 --timeout 900 -E '^CapsuledBatch(Slurm|TwoNodes)\.'
  else
    ctest --preset "$preset" -j 2 --timeout 900
  fi
done
# The tests inside the recipe images keep the 2 cores less than half busy (JVM start-ups, Maven, PostgreSQL's
# waits): the fuzz smoke's clang build and runs go alongside them and the package check.
fuzz_log=$(mktemp "${TMPDIR:-/tmp}/capsule-fuzz-smoke.XXXXXX")
stage "fuzz smoke (in the background; log: $fuzz_log)"
setsid nice -n 5 ./scripts/fuzz-smoke.sh > "$fuzz_log" 2>&1 &
fuzz=$!
stage "package (from the default build: install, capsule run through the installed files, purge)"
# The default build's programs, packaged under /usr: the release preset would compile them all again at -O3 (about
# 5 minutes here) to test the same install layout; `scripts/package-check.sh` alone still builds that preset.
cmake build -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
./scripts/package-check.sh build

if [ -n "$recipes" ]; then
  stage "recipe images: waiting for the build"
  if ! wait "$recipes"; then
    recipes=""
    tail -n 40 "$recipes_out/all.log"
    echo "recipe image build failed (log: $recipes_out/all.log)" >&2
    exit 1
  fi
  recipes=""
  grep -h -e '^recipe ' -e '^layer ' -e '^total ' "$recipes_out"/*/build-info.txt || true
  stage "test (default, inside the recipe images)"
  # One process for the suite, so each image is imported once into its shared store.
  CAPSULE_RECIPE_DIR=$recipes_out ./build/bin/e2e_tests --gtest_filter='CapsuledRecipes*'
fi
stage "fuzz smoke: waiting for it"
if ! wait "$fuzz"; then
  fuzz=""
  cat "$fuzz_log"
  echo "fuzz smoke failed" >&2
  exit 1
fi
fuzz=""
grep '^fuzz-smoke: fuzz_' "$fuzz_log"
stage "done"
echo "total: $(( $(date +%s) - started )) s"
