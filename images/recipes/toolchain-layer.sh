#!/bin/bash
# Packages an existing toolchain directory (a pyenv Python, a JDK) as a layer to stack on a base image:
# the tree at /opt/python/<version> or /opt/jdk-<major>, its commands linked from /usr/local/bin, labels
# org.capsule.toolchain.<name>=<version> with the version read by running the tool. See README.md.
#
# usage: toolchain-layer.sh [--out DIR] [--base ROOTFS] [--base-ref REF] [--tar-only] [--if-changed] TOOLCHAIN_DIR
#   e.g. toolchain-layer.sh --base-ref capsule/python3:bookworm /root/.pyenv/versions/3.12.1
#        toolchain-layer.sh --base /var/tmp/capsule-recipes/python3/rootfs /usr/lib/jvm/temurin-25-jdk-amd64
# --base: also run the toolchain from the stacked image (overlay of the layer on ROOTFS, chrooted), by PATH.
#   When ROOTFS is a recipe's output (ROOTFS/../labels.json), the layer's base is that recipe's image under its
#   import ref capsule/<recipe>:<suite> (org.capsule.layer.base; see README.md).
# --base-ref: label org.capsule.layer.base=REF, the store image capsuled stacks the layer on when a run's
#   toolchains select it (REF: name:tag or sha256:...); overrides the ref --base implies.
# --if-changed: keep the outputs of an earlier build from the same script, arguments and toolchain version.
set -euo pipefail
RECIPE_NAME=toolchain-layer
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

usage() { sed -n '2,14s/^# \{0,1\}//p' "$0"; }

args=("$@")
out="" base="" base_ref="" tar_only=0 if_changed=0 src=""
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    --base-ref) base_ref=$2; shift 2 ;;
    --tar-only) tar_only=1; shift ;;
    --if-changed) if_changed=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; die "unknown option '$1'" ;;
    *) [ -z "$src" ] || die "one toolchain directory at a time"; src=$1; shift ;;
  esac
done
[ -n "$src" ] || { usage >&2; exit 2; }
[ -d "$src" ] || die "$src is not a directory"
[ "$(id -u)" = 0 ] || die "needs root (mount namespaces for the checks)"
command -v patchelf > /dev/null || die "patchelf is not installed (scripts/install-deps.sh)"
src=$(cd "$src" && pwd -P)
[ -z "$base" ] || [ -x "$base/bin/sh" ] || [ -x "$base/usr/bin/sh" ] || die "--base $base is not a rootfs"

# The import ref of a recipe's image, capsule/<recipe>:<suite>, from the labels.json next to its rootfs (empty
# when there is none).
recipe_image_ref() {  # rootfs
  local labels=$1/../labels.json recipe suite
  [ -f "$labels" ] || return 0
  recipe=$(sed -n 's/^ *"org\.capsule\.recipe": "\([^"]*\)".*/\1/p' "$labels")
  suite=$(sed -n 's/^ *"org\.capsule\.base": "debian:\([^"]*\)".*/\1/p' "$labels")
  [ -z "$recipe" ] || [ -z "$suite" ] || echo "capsule/$recipe:$suite"
}
if [ -z "$base_ref" ] && [ -n "$base" ]; then
  base_ref=$(recipe_image_ref "$base")
  [ -n "$base_ref" ] || log "--base $base is not a recipe output: no org.capsule.layer.base (give --base-ref)"
fi

# ---------------------------------------------------------------------------------------------------------
# Kinds: detect_<kind> succeeds when the directory is one; it sets KIND, NAME (label), VERSION, DEST and
# LINKS (commands to link from /usr/local/bin); check_<kind> runs the toolchain from DEST (argument: a
# scratch dir). Adding a kind = one detect_ and one check_ function.
# ---------------------------------------------------------------------------------------------------------
EXTRA_LABELS=()

detect_python() {
  [ -x "$src/bin/python3" ] || return 1
  KIND=python NAME=python
  VERSION=$("$src/bin/python3" -c 'import platform; print(platform.python_version())')
  DEST=/opt/python/$VERSION
  LINKS=""
  local n
  for n in python3 "python${VERSION%.*}" python pip3 "pip${VERSION%.*}" pip pydoc3 2to3; do
    [ -e "$src/bin/$n" ] && LINKS="$LINKS $n"
  done
  if "$src/bin/python3" -m pip --version > /dev/null 2>&1; then
    EXTRA_LABELS+=("pip" "$("$src/bin/python3" -m pip --version | awk '{print $2}')")
  fi
}
# Every extension module of the stdlib (lib-dynload, test modules aside) imports, and Tcl evaluates when the
# build has _tkinter: what a layer on a base without the libraries they link against would lose.
# shellcheck disable=SC2016  # Python source
STDLIB_CHECK='import importlib, os, sysconfig
d = os.path.join(sysconfig.get_paths()["platstdlib"], "lib-dynload")
names = sorted(n.split(".")[0] for n in os.listdir(d) if n.endswith(".so") and not n.startswith(("_test", "xx")))
bad = []
for n in names:
    try:
        importlib.import_module(n)
    except Exception as e:
        bad.append("%s (%s)" % (n, e))
if bad:
    raise SystemExit("stdlib extension modules that do not import: " + ", ".join(bad))
tcl = ""
if "_tkinter" in names:
    import tkinter
    tcl = ", Tcl " + tkinter.Tcl().eval("info patchlevel")
print("%d stdlib extension modules import%s" % (len(names), tcl))'

check_python() {
  local prefix
  prefix=$("$DEST/bin/python3" -c 'import sys, ssl, sqlite3, zlib, ctypes, bz2, lzma, ensurepip; print(sys.prefix)')
  [ "$prefix" = "$DEST" ] || die "relocated python reports sys.prefix $prefix, not $DEST"
  "$DEST/bin/python3" -V
  "$DEST/bin/python3" -c "$STDLIB_CHECK"
  "$DEST/bin/python3" -m venv --without-pip "$1/venv" && "$1/venv/bin/python" -c 'import sys; assert sys.prefix != sys.base_prefix'
  [ ! -e "$DEST/bin/pip3" ] || "$DEST/bin/pip3" --version
}

detect_java() {
  [ -x "$src/bin/java" ] && [ -x "$src/bin/javac" ] || return 1
  KIND=java NAME=java
  VERSION=$("$src/bin/java" -version 2>&1 | sed -n 's/.* version "\([^"]*\)".*/\1/p' | head -n1)
  [ -n "$VERSION" ] || die "cannot read the version from $src/bin/java -version"
  local major=${VERSION%%.*}
  [ "$major" != 1 ] || { major=${VERSION#1.}; major=${major%%.*}; }  # 1.8.0_392 -> 8
  DEST=/opt/jdk-$major
  LINKS=$(cd "$src/bin" && find . -maxdepth 1 \( -type f -o -type l \) -perm -u+x -printf '%f ')
}
check_java() {
  "$DEST/bin/java" -version
  printf 'public class Hello { public static void main(String[] a) { System.out.println("hello from " + System.getProperty("java.home")); } }\n' > "$1/Hello.java"
  local said home=$DEST
  [ ! -d "$DEST/jre" ] || home=$DEST/jre  # JDK 8 reports its bundled JRE as java.home
  # javac + java -cp rather than the source launcher, which JDK 8 lacks
  "$DEST/bin/javac" -d "$1" "$1/Hello.java"
  said=$("$DEST/bin/java" -cp "$1" Hello)
  [ "$said" = "hello from $home" ] || die "java ran from the wrong home: $said"
}

KIND=""
for k in python java; do
  if "detect_$k"; then break; fi
done
[ -n "$KIND" ] || die "$src holds no known toolchain (bin/python3, or bin/java + bin/javac)"
label "$NAME" "$VERSION"
for ((i = 0; i < ${#EXTRA_LABELS[@]}; i += 2)); do label "${EXTRA_LABELS[i]}" "${EXTRA_LABELS[i + 1]}"; done
RECIPE_NAME=layer-$KIND-$VERSION
out=${out:-${CAPSULE_RECIPES_OUT:-/var/tmp/capsule-recipes}/$RECIPE_NAME}
mkdir -p "$out"
out=$(cd "$out" && pwd)
sha256=$(recipe_sha256 "${args[@]}" "$KIND $VERSION" "$base_ref")
if [ $if_changed = 1 ] && outputs_current "$out" "$sha256"; then exit 0; fi
log "$src: $KIND $VERSION -> $DEST"

WORK=$(mktemp -d "$out/.build.XXXXXX")
ROOT=$WORK/rootfs
# shellcheck disable=SC2064
trap "_recipe_exit_trap '$WORK'" EXIT
t0=$(date +%s.%N)

# ---------------------------------------------------------------------------------------------------------
copy_tree() {
  mkdir -p "$ROOT$(dirname "$DEST")" "$ROOT/usr/local/bin"
  cp -a "$src" "$ROOT$DEST"
  local n
  for n in $LINKS; do ln -sfn "$DEST/bin/$n" "$ROOT/usr/local/bin/$n"; done
}

# Builds configured with an absolute prefix (pyenv) name it in ELF RUNPATHs and script shebangs; point them at
# DEST ($ORIGIN-relative for RUNPATH, so the tree stays movable).
relocate() {
  local f rp new entry rel dir fixed_elf=0 fixed_text=0 entries
  # Only files that mention the old prefix at all (one grep pass), then ELF runpaths or allowed text files.
  # (No process per file unless it is an ELF or an allowed text file: thousands of .pyc files match too.)
  local magic
  while IFS= read -r -d '' f; do
    magic=""
    LC_ALL=C IFS= read -r -n 4 -d '' magic < "$f" 2>/dev/null || true
    if [ "$magic" = $'\x7fELF' ] && rp=$(patchelf --print-rpath "$f" 2>/dev/null); then
      case $rp in *"$src"*) ;; *) continue ;; esac
      dir=$(dirname "${f#"$ROOT$DEST"}")
      new=""
      IFS=: read -ra entries <<< "$rp"
      for entry in "${entries[@]}"; do
        if [ "$entry" = "$src" ] || [[ $entry == "$src"/* ]]; then
          rel=$(realpath -m --relative-to="/r$dir" "/r${entry#"$src"}")
          entry="\$ORIGIN/$rel"
        fi
        new=${new:+$new:}$entry
      done
      patchelf --set-rpath "$new" "$f"
      fixed_elf=$((fixed_elf + 1))
      continue
    fi
    # Text files naming the old prefix: scripts in bin/ (shebangs, *-config), pkg-config files, sysconfig data.
    case ${f#"$ROOT$DEST"/} in
      bin/*|lib/pkgconfig/*|lib/python*/_sysconfigdata*.py) ;;
      *) continue ;;
    esac
    grep -Iq . "$f" || continue  # binary
    sed -i "s|$src|$DEST|g" "$f"
    fixed_text=$((fixed_text + 1))
  done < <(grep -rlZF -- "$src" "$ROOT$DEST" || true)
  log "relocated: $fixed_elf ELF runpaths, $fixed_text text files"
}

# True when the base rootfs has a library named NAME where the host has it at PATH (or in the other half of a
# merged /usr: /lib/x86_64-linux-gnu and /usr/lib/x86_64-linux-gnu are one directory there).
base_has_lib() {  # host-path name
  local dir
  dir=$(dirname "$1")
  [ -e "$base$dir/$2" ] || [ -e "$base/usr${dir#/usr}/$2" ] || [ -e "$base${dir#/usr}/$2" ]
}

# The shared libraries the toolchain loads (ldd of its ELF files, run on the original tree, so the whole
# dependency closure) that the base lacks - pyenv's _tkinter needs libtcl8.6/libtk8.6 and their X11 libraries,
# which the python3 image does not carry - copied from this host into DEST/lib (the relocated RUNPATHs of
# lib-dynload and bin/ point there) with RUNPATH $ORIGIN, so they find each other. A bundled Tcl also needs its
# script library (init.tcl) where that libtcl looks for it: Tcl's and Tk's library directories are copied to
# the same paths in the layer when the base lacks them. Without --base nothing is bundled: the base is unknown.
bundle_libs() {
  [ -n "$base" ] || { log "no --base: no libraries bundled"; return 0; }
  local f magic name path bundled=()
  declare -A seen=()
  while IFS= read -r -d '' f; do
    magic=""
    LC_ALL=C IFS= read -r -n 4 -d '' magic < "$f" 2>/dev/null || true
    [ "$magic" = $'\x7fELF' ] || continue
    while read -r name path; do
      [ -z "${seen[$name]:-}" ] || continue
      seen[$name]=1
      case $path in "$src"/*) continue ;; esac
      base_has_lib "$path" "$name" && continue
      cp -L "$path" "$ROOT$DEST/lib/$name"
      patchelf --set-rpath '$ORIGIN' "$ROOT$DEST/lib/$name"
      bundled+=("$name")
    done < <(ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }')
  done < <(find "$src" -type f \( -name '*.so' -o -name '*.so.*' -o -path "$src/bin/*" \) -print0)
  log "bundled ${#bundled[@]} libraries the base lacks: ${bundled[*]:-none}"
  case " ${bundled[*]:-} " in *" libtcl"*) bundle_tcl_scripts ;; esac
}

bundle_tcl_scripts() {
  local tcl tk d
  tcl=$("$src/bin/python3" -c 'import tkinter; print(tkinter.Tcl().eval("info library"))') ||
    die "the bundled libtcl's script library is unknown (python3 -c 'import tkinter' fails on this host)"
  tk=$(dirname "$tcl")/tk${tcl##*/tcl}
  for d in "$tcl" "$tk"; do
    [ -d "$d" ] && [ ! -e "$base$d" ] || continue
    mkdir -p "$ROOT$(dirname "$d")"
    cp -a "$d" "$ROOT$d"
    log "bundled $d"
  done
}

# Runs check_<kind> with the layer's /opt bound over the host's and the original directory hidden, so a
# reference to the old location cannot go unnoticed.
verify_on_host() {
  local scratch=$WORK/check
  mkdir -p "$scratch"
  # shellcheck disable=SC2016  # the inner script expands its own arguments
  unshare --mount --propagation private -- /bin/bash -c '
    set -e
    mkdir -p /opt
    mount --bind "$1/opt" /opt
    mount -t tmpfs -o size=1m,mode=0755 tmpfs "$2"
    shift 2
    exec "$@"' _ "$ROOT" "$src" /bin/bash -c "$(declare -f die log "check_$KIND"); $(declare -p STDLIB_CHECK); DEST='$DEST'; RECIPE_NAME='$RECIPE_NAME'; check_$KIND '$scratch'" >&2
}

# The layer stacked on --base, chrooted: the toolchain must be the one found by PATH.
verify_stacked() {
  local s=$WORK/stack cmd
  mkdir -p "$s/upper" "$s/work" "$s/merged"
  case $KIND in
    python) cmd="python3 -c 'import sys; print(sys.version.split()[0], sys.prefix)' && python3 -c '$STDLIB_CHECK'" ;;
    java) cmd="java -version 2>&1 | head -n1; readlink -f \$(command -v java)" ;;
  esac
  # shellcheck disable=SC2016  # the inner script expands its own arguments
  unshare --mount --propagation private -- /bin/bash -c '
    set -e
    mount -t overlay overlay -o "lowerdir=$1:$2,upperdir=$3/upper,workdir=$3/work" "$3/merged"
    r=$3/merged
    mount -t proc proc "$r/proc"; mount --rbind /dev "$r/dev"; mount -t tmpfs tmpfs "$r/tmp"
    exec chroot "$r" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
      LANG=C.UTF-8 /bin/sh -c "$4"' _ "$ROOT" "$base" "$s" "$cmd" | tee "$WORK/stacked.txt" >&2
  grep -qF "$DEST" "$WORK/stacked.txt" || grep -qF "$VERSION" "$WORK/stacked.txt" ||
    die "the stacked image does not run $KIND $VERSION from $DEST by PATH"
  rm -rf "$s"
}

_step copy copy_tree
_step relocate relocate
[ "$KIND" != python ] || _step bundle bundle_libs
_step verify verify_on_host
[ -z "$base" ] || _step verify-stacked verify_stacked
label_raw org.capsule.recipe toolchain-layer
label_raw org.capsule.layer.path "$DEST"
[ -z "$base_ref" ] || label_raw org.capsule.layer.base "$base_ref"
label_raw org.opencontainers.image.created "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
write_labels_json "$WORK/labels.json"
_step tarball _tarball "$WORK/rootfs.tar.gz"

rm -rf "$out/rootfs" "$out/rootfs.tar.gz" "$out/labels.json"
mv "$WORK/labels.json" "$WORK/rootfs.tar.gz" "$out/"
if [ $tar_only = 1 ]; then rm -rf "$ROOT"; else mv "$ROOT" "$out/rootfs"; fi
rm -rf "$WORK"
trap - EXIT
t1=$(date +%s.%N)
{
  echo "layer $KIND $VERSION from $src at $DEST"
  echo "recipe_sha256 $sha256"
  printf 'step %s s\n' "${_TIMINGS[@]}"
  echo "total $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
  [ $tar_only = 1 ] || echo "rootfs_bytes $(du -sb "$out/rootfs" | cut -f1)"
  echo "tarball_bytes $(stat -c %s "$out/rootfs.tar.gz")"
} > "$out/build-info.txt"
log "done: $(tr '\n' ';' < "$out/build-info.txt")"
log "labels: $(tr -d '\n' < "$out/labels.json")"
echo "$out/rootfs.tar.gz"
