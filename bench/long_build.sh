#!/bin/sh
# A long build through capsule against the same build natively and in bwrap (issue 13: "long builds within 1.03x
# of native"). The build is real and needs nothing from the network: a generated C project of FILES sources,
# compiled with gcc -O2 by make -j(nproc) into the project dir, linked, and the program run to check its result.
# Usage: bench/long_build.sh [BUILD_DIR] [ROUNDS] [FILES]   (default build, 3, 160)
# Each round runs native, bwrap and capsule once, starting with a different one each round; each run starts from
# a clean tree (native and bwrap: `make clean` before; capsule: a copy-on-write workspace, so its objects land in
# the run's own upper on the sandbox's disk and the host tree stays clean). Prints p50 wall times and ratios.
set -eu
cd "$(dirname "$0")/.."
build="$(cd "${1:-build}" && pwd)"
rounds="${2:-3}"
files="${3:-160}"
case "$rounds$files" in *[!0-9]*) echo "long_build: ROUNDS and FILES are whole numbers" >&2; exit 2 ;; esac
capsule="$build/bin/capsule"
[ -x "$capsule" ] || { echo "long_build: $capsule is not built" >&2; exit 1; }
if ! command -v bwrap >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1 || ! command -v gcc >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap make gcc libc6-dev >/dev/null
fi

. bench/support/bench_daemon.sh
bench_daemon long-build "$build"

# The project: FILES sources of 24 functions each (loops and switches, enough for -O2 to work on), a main that
# calls every function and prints a checksum, and a Makefile. Readable by the sandbox's user.
project="$work/project"
mkdir -p "$project"
i=0
while [ "$i" -lt "$files" ]; do
  {
    echo '#include <stdint.h>'
    f=0
    while [ "$f" -lt 24 ]; do
      cat <<C
uint64_t f${i}_${f}(uint64_t x) {
  uint64_t a = x ^ ${i}u;
  for (int k = 0; k < 64; ++k) {
    switch ((a + k) % 7) {
      case 0: a = a * 6364136223846793005ull + ${f}u; break;
      case 1: a ^= a >> 13; break;
      case 2: a += (a << 7) | ${i}u; break;
      case 3: a = (a >> 3) * 2862933555777941757ull; break;
      case 4: a -= k * ${f}u; break;
      case 5: a ^= (a << 17) + ${i}u; break;
      default: a = ~a; break;
    }
  }
  return a;
}
C
      f=$((f + 1))
    done
    echo "uint64_t unit${i}(uint64_t x) {"
    f=0
    while [ "$f" -lt 24 ]; do echo "  x = f${i}_${f}(x);"; f=$((f + 1)); done
    echo "  return x;"
    echo "}"
  } >"$project/unit$i.c"
  i=$((i + 1))
done
{
  echo '#include <stdint.h>'
  echo '#include <stdio.h>'
  i=0
  while [ "$i" -lt "$files" ]; do echo "uint64_t unit$i(uint64_t);"; i=$((i + 1)); done
  echo 'int main(void) {'
  echo '  uint64_t x = 1;'
  i=0
  while [ "$i" -lt "$files" ]; do echo "  x = unit$i(x);"; i=$((i + 1)); done
  printf '  printf("%%llu\\n", (unsigned long long)x);\n'
  echo '  return 0;'
  echo '}'
} >"$project/main.c"
cat >"$project/Makefile" <<'MAKE'
SOURCES := $(wildcard *.c)
OBJECTS := $(SOURCES:.c=.o)
app: $(OBJECTS)
	gcc -o $@ $(OBJECTS)
%.o: %.c
	gcc -O2 -c -o $@ $<
clean:
	rm -f app *.o
.PHONY: clean
MAKE
chmod -R a+rX "$project"
jobs="$(nproc)"
script="make -s -j$jobs && ./app"

expected="$(cd "$project" && sh -c "$script")"
(cd "$project" && make -s clean)

bwrap_base="bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib"
bwrap_base="$bwrap_base --symlink usr/lib64 /lib64 --proc /proc --dev /dev --tmpfs /tmp"
results="$work/results"
: >"$results"

run_native() { (cd "$project" && sh -c "$script"); }
run_bwrap() { $bwrap_base --bind "$project" /workspace --chdir /workspace -- /bin/sh -c "$script"; }
run_capsule() { "$capsule" --socket "$socket" run --workspace "$project" -- /bin/sh -c "$script" 2>/dev/null; }

timed() {  # NAME: runs it from a clean tree, checks its output, appends "NAME SECONDS"
  (cd "$project" && make -s clean)
  start="$(date +%s.%N)"
  out="$("run_$1")" || { echo "long_build: the $1 build failed" >&2; exit 1; }
  end="$(date +%s.%N)"
  [ "$out" = "$expected" ] || { echo "long_build: the $1 build printed '$out', not '$expected'" >&2; exit 1; }
  echo "$1 $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')" >>"$results"
}

round=0
while [ "$round" -lt "$rounds" ]; do
  case $((round % 3)) in
    0) order="native bwrap capsule" ;;
    1) order="bwrap capsule native" ;;
    *) order="capsule native bwrap" ;;
  esac
  for method in $order; do timed "$method"; done
  round=$((round + 1))
done
(cd "$project" && make -s clean)

echo "long build: $files C files, gcc -O2 with make -j$jobs, then the program ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
python3 - "$results" "$rounds" <<'EOF'
import statistics, sys
times = {}
for line in open(sys.argv[1]):
    name, seconds = line.split()
    times.setdefault(name, []).append(float(seconds))
native = statistics.median(times["native"])
for name in ("native", "bwrap", "capsule"):
    t = times[name]
    p50 = statistics.median(t)
    runs = " ".join(f"{x:.2f}" for x in t)
    print(f"  {name:<8} p50 {p50:7.2f} s   {p50 / native:5.3f}x native   ({len(t)} runs: {runs})")
print("  target: capsule <= 1.03x native")
EOF
