#!/bin/bash
# Prints what the built recipe images depend on, one fact a line: the digest of every file under images/recipes/
# and the Date of the Release file of each Debian suite the recipes install from, which changes with a point
# release (not -updates/-security, re-signed daily). scripts/recipe-images.sh keeps the images while it holds.
# usage: cache-key.sh   (no root needed; reads the mirror from the host's apt configuration)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RECIPE_NAME=cache-key
# shellcheck source=lib.sh
. "$here/lib.sh"

echo "recipes $(cd "$here" && find . -type f -not -name '*.pyc' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum |
  sha256sum | cut -d' ' -f1)"
# The suites: the host's, and every RECIPE_SUITE a recipe names.
suites=$( { host_suite; grep -ho 'RECIPE_SUITE=[a-z]*' "$here"/*.sh | cut -d= -f2; } | grep . | LC_ALL=C sort -u)
for suite in $suites; do
  mirror=$(CAPSULE_DEBIAN_SUITE=$suite debian_mirror)
  date=$(curl -fsS --max-time 20 --max-filesize 16000000 "$mirror/dists/$suite/Release" 2>/dev/null | sed -n 's/^Date: *//p' | head -n1) ||
    true
  echo "release $suite ${date:-unreachable}"
done
