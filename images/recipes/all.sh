#!/bin/bash
# Builds the default toolchain images (python3, python3-base, jdk11-maven, jdk17-maven, jdk21-maven), the stacks
# test's stack-demo image and, stacked on python3, layers of the toolchains this machine carries, into one output
# root; outputs built from the same recipe and arguments are kept. Downloaded .debs are shared between the builds
# (ROOT/.cache).
#
# usage: all.sh [--out ROOT] [--rebuild] [TOOLCHAIN_DIR...]
#   ROOT            default ${CAPSULE_RECIPES_OUT:-/var/tmp/capsule-recipes}; CAPSULE_RECIPE_DIR for the tests
#   --rebuild       build everything again
#   TOOLCHAIN_DIR   toolchains to package with toolchain-layer.sh; default: the newest pyenv CPython 3.10 and
#                   3.12 under /root/.pyenv/versions and the Temurin JDKs under /usr/lib/jvm (none is fine)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RECIPE_NAME=all
# shellcheck source=lib.sh
. "$here/lib.sh"

usage() { sed -n '2,10s/^# \{0,1\}//p' "$0"; }

out=${CAPSULE_RECIPES_OUT:-/var/tmp/capsule-recipes} keep=(--if-changed) toolchains=()
while [ $# -gt 0 ]; do
  case $1 in
    --out) [ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift 2 ;;
    --rebuild) keep=(); shift ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; die "unknown option '$1'" ;;
    *) toolchains+=("$1"); shift ;;
  esac
done
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mounts)"

newest_pyenv() {  # minor
  local d best=""
  for d in /root/.pyenv/versions/"$1".*; do
    [[ $(basename "$d") =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] && [ -x "$d/bin/python3" ] || continue
    if [ -z "$best" ] || [ "$(printf '%s\n%s\n' "$best" "$d" | sort -V | tail -n1)" = "$d" ]; then best=$d; fi
  done
  [ -z "$best" ] || echo "$best"
}
if [ ${#toolchains[@]} -eq 0 ]; then
  for minor in 3.10 3.12; do
    d=$(newest_pyenv "$minor")
    [ -z "$d" ] || toolchains+=("$d")
  done
  for d in /usr/lib/jvm/temurin-*-jdk*; do [ -x "$d/bin/javac" ] && toolchains+=("$d"); done
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
exec 9> "$out/.lock"
flock -n 9 || { log "waiting for another build of $out"; flock 9; }
# Build dirs of builds that were killed (a finished or failed build removes its own).
rm -rf "$out"/*/.build.*

t0=$(date +%s)
CAPSULE_RECIPES_OUT=$out "$here/python3.sh" "${keep[@]}" > /dev/null
for d in "${toolchains[@]}"; do
  CAPSULE_RECIPES_OUT=$out "$here/toolchain-layer.sh" "${keep[@]}" --base "$out/python3/rootfs" "$d" > /dev/null
done
for jdk in 17 11 21; do CAPSULE_RECIPES_OUT=$out "$here/jdk-maven.sh" --jdk "$jdk" "${keep[@]}" > /dev/null; done
CAPSULE_RECIPES_OUT=$out "$here/python3.sh" --without-test-tools "${keep[@]}" > /dev/null
CAPSULE_RECIPES_OUT=$out "$here/stack-demo.sh" "${keep[@]}" > /dev/null
log "all built in $(($(date +%s) - t0)) s: $(cd "$out" && echo */)"
echo "$out"
