#!/bin/sh
# The README's second command: install dependencies, build, and pass every test, fastest verdict first: the unit
# lane of the default build (stops at the first red), its e2e suites, then the ASan+UBSan build's unit suites and
# hostile-input e2e suites (ctest label asan), then the tests inside the toolchain recipe images (cached by
# content; scripts/recipe-images.sh) with the fuzz smoke, the unity check and the release (non-unity) build beside
# them, and last the release build's Debian package installed and used. Compiles go through ccache. Prints a
# table of the stages (seconds, tests, cache hits).
# usage: scripts/test.sh [--all]   --all: the sanitizer pass runs every suite, as for a release (not CI)
set -eu
cd "$(dirname "$0")/.."
all=0
case "${1:-}" in
  --all) all=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--all]" >&2; exit 2 ;;
esac
started=$(date +%s)
export CCACHE_DIR="${CCACHE_DIR:-/var/cache/capsule/ccache}"
recipes_out=${CAPSULE_RECIPES_OUT:-/var/tmp/capsule-recipes}
work=$(mktemp -d "${TMPDIR:-/tmp}/capsule-test.XXXXXX")
recipes=""
fuzz=""
unity=""
release=""

# The stage table: one row per stage, printed at the end (and on a failure, up to the stage that failed).
stage_name="" stage_started="" stage_tests="" stage_cache=""
end_stage() {
  [ -n "$stage_name" ] || return 0
  seconds=$(( $(date +%s) - stage_started ))
  echo "   ($seconds s)"
  printf '| %s | %s | %s | %s |\n' "$stage_name" "$seconds" "${stage_tests:--}" "${stage_cache:--}" >> "$work/table"
  stage_name=""
}
stage() {
  end_stage
  stage_name=$1 stage_started=$(date +%s) stage_tests="" stage_cache=""
  echo "== $1"
}
print_table() {
  echo "| stage | seconds | tests | cache hits |"
  echo "|---|---|---|---|"
  cat "$work/table" 2>/dev/null || true
  echo "total: $(( $(date +%s) - started )) s"
}
# Background jobs run in sessions of their own, so that an early exit stops each whole (compilers, debootstrap
# and apt included).
on_exit() {
  rc=$?
  for job in $recipes $fuzz $unity $release; do kill -TERM "-$job" 2>/dev/null || true; done
  if [ "$rc" != 0 ]; then end_stage; print_table; echo "test.sh: failed in the stage above (exit $rc)" >&2; fi
  rm -rf "$work"
}
trap on_exit EXIT
trap 'exit 1' INT TERM HUP

# cache_counts LOG: "HITS OF" for the compiles ccache wrote to the stats log LOG (one line per outcome). Each
# stage has its own log, so compiles running beside it (the fuzz smoke's, the images') do not count in it.
cache_counts() {
  [ -f "$1" ] || { echo "0/0"; return; }
  hits=$(grep -c -x -e direct_cache_hit -e preprocessed_cache_hit "$1" || true)
  echo "$hits/$((hits + $(grep -c -x cache_miss "$1" || true)))"
}
# counting_cache CMD...: CMD, then its compiles' ccache hits printed and kept for the stage table.
counting_cache() {
  log="$work/ccache.$(date +%s%N).log"
  CCACHE_STATSLOG=$log "$@"
  stage_cache=$(cache_counts "$log")
  echo "ccache: $stage_cache hits ($CCACHE_DIR)"
}
# run_ctest ARGS...: ctest with the output shown and kept; the stage's tests column from its summary line.
run_ctest() {
  rc=0
  { ctest "$@" -j 2 --timeout 900 || echo $? > "$work/ctest.rc"; } 2>&1 | tee "$work/ctest.log"
  [ ! -f "$work/ctest.rc" ] || { rc=$(cat "$work/ctest.rc"); rm -f "$work/ctest.rc"; }
  stage_tests=$(sed -n 's/.*tests passed, \([0-9]*\) tests\{0,1\} failed out of \([0-9]*\)$/\2 run, \1 failed/p' \
    "$work/ctest.log" | tail -n1)
  return "$rc"
}

stage "dependencies"
./scripts/install-deps.sh
ccache --max-size=20G >/dev/null

if [ "${CAPSULE_RECIPES:-1}" != 0 ]; then
  mkdir -p "$recipes_out"
  stage "recipe images (in the background; log: $recipes_out/images.log)"
  # At a lower CPU priority: the compiles and tests on the 2 cores are the critical path, the images come last.
  setsid nice -n 10 ./scripts/recipe-images.sh build "$recipes_out" > "$recipes_out/images.log" 2>&1 &
  recipes=$!
fi

stage "build (default)"
counting_cache ./scripts/build.sh default
stage "test (default, unit: stops at the first failure)"
run_ctest --preset default -L '^unit$' --stop-on-failure
stage "test (default, e2e)"
run_ctest --preset default -L '^e2e$'

stage "build (asan)"
counting_cache ./scripts/build.sh asan
if [ "$all" = 1 ]; then
  stage "test (asan, every suite)"
  run_ctest --preset asan -LE '^recipes$'
else
  # Every unit suite and the e2e suites that feed hostile bytes, callers or archives to the daemon (label asan;
  # tests/CMakeLists.txt lists them); the other e2e suites drive the same daemon code through Maven, pip and pytest.
  stage "test (asan, unit + hostile-input e2e)"
  run_ctest --preset asan -L '^(unit|asan)$'
fi

# The tests inside the recipe images keep the 2 cores less than half busy (JVM start-ups, Maven, PostgreSQL's
# waits): the fuzz smoke's clang build and runs, the unity check and the release build go alongside them.
stage "fuzz smoke (in the background; log: $work/fuzz.log)"
setsid nice -n 5 ./scripts/fuzz-smoke.sh > "$work/fuzz.log" 2>&1 &
fuzz=$!
# Every target's batched files as one translation unit: a name two of them share fails here, not in whichever
# future batch puts them together.
stage "unity check (in the background; log: $work/unity.log)"
setsid nice -n 5 ./scripts/unity-check.py build > "$work/unity.log" 2>&1 &
unity=$!
# The release preset is not a unity build: a file that compiles only beside the others in its batch (a missing
# include) fails here. It compiles beside the recipe-image tests, which leave the cores more than half idle; its
# package is installed and checked after them, so that nothing installed on the host meets a running test.
stage "build (release, not unity; in the background; log: $work/release.log)"
CCACHE_STATSLOG=$work/ccache.release.log setsid nice -n 5 ./scripts/build.sh release > "$work/release.log" 2>&1 &
release=$!

if [ -n "$recipes" ]; then
  stage "recipe images: waiting for them"
  if ! wait "$recipes"; then
    recipes=""
    tail -n 40 "$recipes_out/images.log"
    echo "recipe images failed (log: $recipes_out/images.log)" >&2
    exit 1
  fi
  recipes=""
  grep '^recipe images' "$recipes_out/images.log"
  grep -h -e '^recipe ' -e '^layer ' -e '^total ' "$recipes_out"/*/build-info.txt || true
  filter=$(./scripts/recipe-images.sh filter "$recipes_out")
  stage "test (default, inside the recipe images)"
  # One process for the suite, so each image is imported once into its shared store.
  CAPSULE_RECIPE_DIR=$recipes_out ./build/bin/e2e_tests --gtest_filter="$filter" 2>&1 | tee "$work/recipes.log"
  grep -q '^\[  PASSED  \]' "$work/recipes.log" && ! grep -q '^\[  FAILED  \]' "$work/recipes.log" ||
    { echo "recipe-image tests failed" >&2; exit 1; }
  stage_tests="$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\.$/\1 passed/p' "$work/recipes.log")"
  [ "$filter" != 'CapsuledRecipes*' ] || ./scripts/recipe-images.sh passed "$recipes_out"
fi
stage "build (release): waiting for it"
if ! wait "$release"; then
  release=""
  tail -n 60 "$work/release.log"
  echo "release build failed" >&2
  exit 1
fi
release=""
stage_cache=$(cache_counts "$work/ccache.release.log")
stage "release package: install, capsule run through the installed files, purge"
./scripts/package-check.sh
stage "fuzz smoke: waiting for it"
if ! wait "$fuzz"; then
  fuzz=""
  cat "$work/fuzz.log"
  echo "fuzz smoke failed" >&2
  exit 1
fi
fuzz=""
grep '^fuzz-smoke: fuzz_' "$work/fuzz.log"
stage "unity check: waiting for it"
if ! wait "$unity"; then
  unity=""
  cat "$work/unity.log"
  echo "unity check failed" >&2
  exit 1
fi
unity=""
stage_tests="$(grep -c ' OK$' "$work/unity.log") targets"
end_stage
print_table
