#!/bin/bash
# Toolchain image: Debian's python3 with pip, venv, a `python` command (python-is-python3) and pytest (labels
# python, pip, pytest); with --without-test-tools the same without pytest (image python3-base, labels python,
# pip), so that the test tools come from the run's own, date-masked install.
# usage: python3.sh [--without-test-tools] [--out DIR] [--tar-only] [--if-changed]   (root; see README.md)
# shellcheck disable=SC2034  # RECIPE_NAME and RECIPE_PACKAGES are read by lib.sh
test_tools=1 args=()
for arg in "$@"; do
  if [ "$arg" = --without-test-tools ]; then test_tools=0; else args+=("$arg"); fi
done
RECIPE_NAME=python3
RECIPE_PACKAGES="python3 python3-pip python3-venv python-is-python3"
if [ $test_tools = 1 ]; then RECIPE_PACKAGES="$RECIPE_PACKAGES python3-pytest"; else RECIPE_NAME=python3-base; fi

recipe_verify() {
  local py pip pytest
  in_root python3 -V >&2
  py=$(in_root python3 -c 'import platform; print(platform.python_version())')
  [ "$(in_root python -c 'import platform; print(platform.python_version())')" = "$py" ] ||
    die "python is not python3"
  pip=$(in_root pip --version | awk '{print $2}')
  # a venv with its own pip in a throw-away overlay
  in_scratch /bin/sh -ec 'python3 -m venv /tmp/venv && /tmp/venv/bin/pip --version' >&2
  label python "$py"
  label pip "$pip"
  if [ $test_tools = 0 ]; then
    if in_root python3 -c 'import pytest' 2> /dev/null; then die "pytest is installed in a base image"; fi
    return 0
  fi
  pytest=$(in_root python3 -c 'import pytest; print(pytest.__version__)')
  in_scratch /bin/sh -ec '
    mkdir -p /tmp/t && printf "def test_ok():\n    assert 1 + 1 == 2\n" > /tmp/t/test_ok.py
    cd /tmp/t && python -m pytest -q -p no:cacheprovider' >&2
  label pytest "$pytest"
}

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
recipe_main ${args[@]+"${args[@]}"}
