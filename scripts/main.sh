#!/bin/sh
# The README's first command: install dependencies, build, and run capsule's main job on its embedded
# defaults: `capsule run` starts capsuled if none is listening, runs a real command in a real sandbox (host
# image, default seccomp policy, copy-on-write workspace) and prints the run's record as JSON.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh default
if [ "$#" -eq 0 ]; then
  set -- python3 -c 'import platform, os; print("hello from Python", platform.python_version(), "as uid", os.getuid(), "in", os.getcwd(), "on", os.uname().nodename)'
fi
exec ./build/bin/capsule run --workspace . --timeout 60s --memory 1g --pids 256 --label job=main --json -- "$@"
