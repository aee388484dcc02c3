#!/bin/sh
# Installs capsule's build and test dependencies from Debian packages (idempotent).
# Runs `apt-get update` once per invocation only when something is missing.
set -eu
PACKAGES="build-essential cmake ninja-build pkg-config
  libseccomp-dev libcap-dev libboost-dev nlohmann-json3-dev libssl-dev zlib1g-dev
  libsqlite3-dev libarchive-dev libpugixml-dev libcli11-dev libspdlog-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev
  clang libclang-rt-14-dev
  bubblewrap util-linux e2fsprogs iproute2 debootstrap patchelf git tar
  openjdk-17-jdk-headless maven python3 python3-pip python3-venv python3-pytest python3-coverage
  hyperfine slurmctld slurmd slurm-client munge ccache curl"
missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "install-deps: installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing
fi

# The OpenAPI 3.1 validator that ctest's openapi_validate runs (tests/openapi/validate.mjs): packages from the npm
# registry, since no Debian package validates OpenAPI 3.1. Pinned by tests/openapi/package-lock.json; installed
# again only when that file changes.
if ! command -v npm >/dev/null 2>&1; then
  echo "install-deps: installing: nodejs npm"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm
fi
# The same for the Kubernetes schema check of docs/kubernetes/ (tests/kubernetes/validate.mjs).
for node_dir in openapi kubernetes; do
  dir="$(dirname "$0")/../tests/$node_dir"
  if [ ! "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]; then
    echo "install-deps: npm ci in tests/$node_dir"
    npm ci --prefix "$dir" --no-audit --no-fund
  fi
done
