#!/bin/sh
# The README's first command: install dependencies, build, and run capsule's main job on its embedded
# defaults: a real command in a real sandbox (host image, default seccomp policy), its record printed as JSON.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh default
if [ "$#" -eq 0 ]; then
  set -- python3 -c 'import platform, os; print("hello from", platform.python_version(), "as uid", os.getuid(), "on", os.uname().nodename)'
fi
exec ./build/bin/capsule-launch --timeout 60s --memory 1g --pids 256 -- "$@"
