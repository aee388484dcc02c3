#!/bin/sh
# CI: builds the Debian package from the release preset (Release, -O3, warnings as errors: what a distribution
# builds), installs it, and runs real commands through the installed files only: the installed capsule starts the
# installed capsuled (on a temporary state dir and socket, never /var/lib/capsule), which finds capsule-init and
# its policies where the package put them; then the installed Python client. Prints the run's record, stops the
# daemon and purges the package. Idempotent: leaves nothing behind (a group capsule it created is removed again).
# Usage: scripts/package-check.sh [BUILD_DIR]   (default: the release preset's build-release, built whole; else a
#        configured build dir, where only the installed programs are built: e.g. build, configured with
#        -DCMAKE_INSTALL_PREFIX=/usr, for a quick check)
set -eu
cd "$(dirname "$0")/.."
say() { echo "package-check: $*"; }
fail() { echo "package-check: $*" >&2; exit 1; }

if dpkg-query -W -f='${Status}' capsule 2>/dev/null | grep -q "installed"; then
  fail "a capsule package is installed on this machine; this check installs and purges its own, so purge that first"
fi

started=$(date +%s)
build=${1:-build-release}
if [ "$#" -eq 0 ]; then
  ./scripts/build.sh release
else
  cmake --build "$build" -j "$(nproc)" --target capsule capsuled capsule-init
fi
rm -f "$build"/capsule_*.deb
(cd "$build" && cpack -G DEB >/dev/null)
deb=$(realpath "$build"/capsule_*.deb)
say "built $deb in $(( $(date +%s) - started )) s"
dpkg-deb --field "$deb"
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")

group_existed=1
getent group capsule >/dev/null || group_existed=0
work=$(mktemp -d /tmp/capsule-package-check-XXXXXX)
chmod 0755 "$work"  # sandbox setup walks into the state dir as unprivileged ids
daemon=""
cleanup() {
  status=$?
  if [ -n "$daemon" ]; then
    kill -TERM "$daemon" 2>/dev/null || true
    wait "$daemon" 2>/dev/null || true
  fi
  if [ -f "$work/capsuled.log" ] && [ "$status" != 0 ]; then tail -n 40 "$work/capsuled.log" >&2; fi
  # capsuled unmounts its scratch tmpfs when it stops; one left by a crash must not be deleted through.
  grep -o " $work[^ ]*" /proc/self/mounts | sort -r | while read -r m; do umount -l "$m" || true; done
  rm -rf --one-file-system "$work"
  if dpkg-query -W -f='${Status}' capsule 2>/dev/null | grep -q "installed\|config-files"; then
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq capsule >/dev/null || status=1
  fi
  if [ "$group_existed" = 0 ] && getent group capsule >/dev/null; then groupdel capsule || status=1; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

say "installing $deb"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$deb" >/dev/null
for f in /bin/capsule /sbin/capsuled /libexec/capsule/capsule-init /libexec/capsule/capsule-full /share/capsule/policies/default.json \
         /share/capsule/data/python-releases.json /lib/systemd/system/capsuled.service \
         /lib/python3/dist-packages/capsule.py; do
  [ -e "$prefix$f" ] || fail "the package did not install $prefix$f"
done
getent group capsule >/dev/null || fail "the package did not create the group capsule"
grep -q "^ExecStart=$prefix/sbin/capsuled " "$prefix/lib/systemd/system/capsuled.service" ||
  fail "the unit does not start $prefix/sbin/capsuled"

# Only installed files from here on: no PATH, no build tree. `capsule daemon` finds capsuled from its own place.
socket=$work/capsule.sock
env -i "$prefix/bin/capsule" daemon --socket "$socket" --state-dir "$work/state" > "$work/capsuled.log" 2>&1 &
daemon=$!
for _ in $(seq 1 100); do
  env -i "$prefix/bin/capsule" --socket "$socket" version >/dev/null 2>&1 && break
  kill -0 "$daemon" 2>/dev/null || fail "capsuled exited at start"
  sleep 0.2
done
env -i "$prefix/bin/capsule" --socket "$socket" version
[ "$(stat -c %G:%a "$socket")" = capsule:660 ] || fail "the socket is $(stat -c %G:%a "$socket"), not capsule:660"
grep -q "capsule-init $prefix/libexec/capsule/capsule-init, policies $prefix/share/capsule/policies" "$work/capsuled.log" ||
  fail "capsuled does not use the installed capsule-init and policies: $(grep capsule-init "$work/capsuled.log")"

say "capsule run through the installed files"
env -i "$prefix/bin/capsule" --socket "$socket" run --json --timeout 60s -- \
  /bin/sh -c 'echo "hello from the installed capsule as uid $(id -u)"' > "$work/record.json"
cat "$work/record.json"
/usr/bin/python3 - "$work/record.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
assert run["state"] == "succeeded", run["state"]
out = run["result"]["stdout"]
assert "hello from the installed capsule" in out.get("head", "") + out.get("tail", ""), out
PY

say "session cp through the installed files: capsule hands it to capsule-full, which finds capsuled's socket alike"
cli="$prefix/bin/capsule --socket $socket"
session=$(env -i $cli session create --quiet)
env -i $cli session exec "$session" -- /bin/sh -c 'mkdir -p /tmp/out && echo copied > /tmp/out/file'
env -i $cli session cp "$session:/tmp/out" "$work/out"
[ "$(cat "$work/out/file")" = copied ] || fail "session cp did not copy the directory out of the session"
env -i $cli session rm "$session" >/dev/null

say "the installed Python client (Debian's python3 searches $prefix/lib/python3/dist-packages)"
env -i /usr/bin/python3 -c '
import sys, capsule
assert capsule.__file__ == sys.argv[2] + "/lib/python3/dist-packages/capsule.py", capsule.__file__
run = capsule.Client(sys.argv[1]).run(["true"])
assert run["state"] == "succeeded", run
print("python client:", run["id"], run["state"])
' "$socket" "$prefix"

kill -TERM "$daemon"
wait "$daemon" || fail "capsuled did not stop cleanly"
daemon=""
say "ok"
