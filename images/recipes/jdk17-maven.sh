#!/bin/bash
# The JDK 17 image under its former name: jdk-maven.sh --jdk 17 (same outputs, jdk17-maven).
# usage: jdk17-maven.sh [--out DIR] [--tar-only] [--if-changed]   (root; see README.md)
exec "$(dirname "$0")/jdk-maven.sh" --jdk 17 "$@"
