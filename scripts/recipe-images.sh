#!/bin/sh
# The toolchain images the recipe tests run inside, cached by content outside the clone (scripts/test.sh's
# recipe stages): built once per images/recipes/cache-key.sh, and tested in full only when what they test changed.
# usage: recipe-images.sh build OUT    reuse OUT's images while the key holds, else build them (images/recipes/all.sh)
#        recipe-images.sh filter OUT   print the gtest filter of the recipe tests to run now, and why (stderr)
#        recipe-images.sh passed OUT   record that the full recipe tests passed on this tree
set -eu
cd "$(dirname "$0")/.."
[ $# = 2 ] || { sed -n '4,6s/^# \{0,1\}//p' "$0" >&2; exit 2; }
verb=$1 out=$2
key_file=$out/cache-key.txt
tested_file=$out/tested.txt
# A fixed subset for trees whose tested code did not change: every image imported with its labels, Java and Maven
# in each JDK image, a real surefire build, pytest, a cow-workspace Maven build and one stack through its stages.
smoke="CapsuledRecipes.ImportsEveryRecipeImageWithItsLabels:CapsuledRecipes.JdkImagesRunJavaAndMaven"
smoke="$smoke:CapsuledRecipes.TestCasesFromRealSurefireReports:CapsuledRecipes.PythonCommandRunsPytestAndTheBaseImageHasNoTestTools"
smoke="$smoke:CapsuledRecipes.OfflineMavenBuildInCowWorkspace"
smoke="$smoke:CapsuledRecipesStack.ABrokenApplicationFailsAtTheRightStageWithTheRightReason"

# What the recipe tests exercise besides the images: a change here since the last full pass runs them all.
tested_digest() {
  find images proxy spec daemon -type f \( -path 'daemon/resolve*' -o ! -path 'daemon/*' \) -print |
    LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1
}

case $verb in
  build)
    mkdir -p "$out"
    key=$(./images/recipes/cache-key.sh)
    if [ -f "$key_file" ]; then
      # A suite whose Release file could not be read keeps the date the images were built with.
      key=$(printf '%s\n' "$key" | while read -r what suite rest; do
        if [ "$what $rest" = "release unreachable" ]; then
          grep "^release $suite " "$key_file" || echo "release $suite unreachable"
        else
          echo "$what $suite${rest:+ $rest}"
        fi
      done)
      if [ "$key" = "$(cat "$key_file")" ]; then
        echo "recipe images: cached in $out (key $(printf '%s\n' "$key" | sha256sum | cut -c1-12))"
        exit 0
      fi
    fi
    args=""
    if [ ! -f "$key_file" ]; then
      echo "recipe images: none cached in $out: building"
    elif [ "$(grep '^release ' "$key_file")" != "$(printf '%s\n' "$key" | grep '^release ')" ]; then
      echo "recipe images: a new Debian release since they were built: building all again"
      printf '%s\n' "$key" | grep '^release ' | sed 's/^/  now: /'
      args=--rebuild
    else
      echo "recipe images: images/recipes/ changed: building what changed"
    fi
    rm -f "$key_file" "$tested_file"
    # shellcheck disable=SC2086
    ./images/recipes/all.sh --out "$out" $args
    printf '%s\n' "$key" > "$key_file"
    ;;
  filter)
    if [ ! -f "$tested_file" ]; then
      echo "recipe tests: all (no full pass recorded on these images)" >&2
      echo 'CapsuledRecipes*'
    elif [ "$(cat "$tested_file")" != "$(tested_digest)" ]; then
      echo "recipe tests: all (images/, proxy/, spec/ or daemon/resolve* changed since the last full pass)" >&2
      echo 'CapsuledRecipes*'
    else
      echo "recipe tests: smoke subset (nothing they test changed since the last full pass)" >&2
      echo "$smoke"
    fi
    ;;
  passed)
    tested_digest > "$tested_file"
    ;;
  *)
    echo "recipe-images.sh: unknown verb '$verb'" >&2
    exit 2
    ;;
esac
