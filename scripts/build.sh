#!/bin/sh
# Configures and builds one CMake preset (default: "default"; "asan" for ASan+UBSan; "release" for the package).
# Usage: scripts/build.sh [preset]
set -eu
cd "$(dirname "$0")/.."
preset="${1:-default}"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
