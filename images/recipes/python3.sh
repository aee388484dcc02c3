#!/bin/bash
# Toolchain image: Debian's python3 with pip, venv and pytest (labels python, pip, pytest).
# usage: python3.sh [--out DIR] [--tar-only]   (root; see README.md)
# shellcheck disable=SC2034  # RECIPE_NAME and RECIPE_PACKAGES are read by lib.sh
RECIPE_NAME=python3
RECIPE_PACKAGES="python3 python3-pip python3-venv python3-pytest"

recipe_verify() {
  local py pip pytest
  in_root python3 -V >&2
  py=$(in_root python3 -c 'import platform; print(platform.python_version())')
  pip=$(in_root pip --version | awk '{print $2}')
  pytest=$(in_root python3 -c 'import pytest; print(pytest.__version__)')
  # a venv with its own pip, and a pytest run, in a throw-away overlay
  in_scratch /bin/sh -ec '
    python3 -m venv /tmp/venv && /tmp/venv/bin/pip --version
    mkdir -p /tmp/t && printf "def test_ok():\n    assert 1 + 1 == 2\n" > /tmp/t/test_ok.py
    cd /tmp/t && python3 -m pytest -q -p no:cacheprovider' >&2
  label python "$py"
  label pip "$pip"
  label pytest "$pytest"
}

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
recipe_main "$@"
