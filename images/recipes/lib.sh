# shellcheck shell=bash
# Common code for the toolchain image recipes: Debian mirror discovery from the host's apt configuration,
# debootstrap (minbase) + apt-get into a temp dir, checks run inside the built root, labels.json, tarball.
#
# A recipe sets RECIPE_NAME and RECIPE_PACKAGES (and RECIPE_SUITE for another Debian release than the host's),
# may define recipe_setup (runs after the packages are installed; changes persist), must define recipe_verify
# (runs the toolchain inside the image and calls `label NAME VERSION`), then sources this file and calls
# `recipe_main "$@"`. See README.md.
#
# Environment knobs (all optional):
#   CAPSULE_RECIPES_OUT   output root (default /var/tmp/capsule-recipes); a recipe writes <out>/<name>/
#   CAPSULE_DEBIAN_MIRROR mirror URL to use instead of the one found in the host's apt sources
#   CAPSULE_DEBIAN_SUITE  suite to build (default: the recipe's RECIPE_SUITE, else VERSION_CODENAME of the
#                         running system); a suite the host's apt does not list is read from the host's mirror
#   CAPSULE_RECIPE_UPDATES=0   do not add <suite>-updates / <suite>-security entries found on the host
#   CAPSULE_RECIPE_KEEP_FAILED=1  keep the temp build dir when a step fails
#   CAPSULE_RECIPE_CACHE  downloaded .debs kept between builds (default <output root>/.cache; "none" = off);
#                         never part of an image

set -euo pipefail
shopt -s nullglob

declare -A RECIPE_LABELS=()
ROOT=""            # the rootfs being built (set by recipe_main)
WORK=""            # temp build dir (holds ROOT and scratch overlays)

log() { printf '[%s %s] %s\n' "$(date +%H:%M:%S)" "${RECIPE_NAME:-recipe}" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ---------------------------------------------------------------------------------------------------------
# apt sources of the host -> "TYPE URI SUITE COMPONENTS..." lines (one-line and deb822 formats)
# ---------------------------------------------------------------------------------------------------------
_apt_entries_oneline() {  # file...
  local f
  for f in "$@"; do
    # strip comments, drop "[ options ]", keep "type uri suite components..."
    sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" || $1 == "deb-src" { $1 = $1; print }'
  done
}

_apt_entries_deb822() {  # file...
  local f
  for f in "$@"; do
    awk '
      function flush(   nt, ts, nu, us, ns, ss, i, j, k) {
        if (enabled != "no" && types != "" && uris != "" && suites != "") {
          nt = split(types, ts, " "); nu = split(uris, us, " "); ns = split(suites, ss, " ")
          for (i = 1; i <= nt; i++) for (j = 1; j <= nu; j++) for (k = 1; k <= ns; k++)
            print ts[i], us[j], ss[k], comps
        }
        types = uris = suites = comps = enabled = ""; key = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      /^[ \t]/ {  # continuation line of a multi-line field
        line = $0; gsub(/^[ \t]+/, "", line)
        if (key == "types") types = types " " line; else if (key == "uris") uris = uris " " line
        else if (key == "suites") suites = suites " " line; else if (key == "components") comps = comps " " line
        next
      }
      {
        i = index($0, ":"); if (i == 0) next
        key = tolower(substr($0, 1, i - 1)); val = substr($0, i + 1); gsub(/^[ \t]+|[ \t]+$/, "", val)
        if (key == "types") types = val; else if (key == "uris") uris = val; else if (key == "suites") suites = val
        else if (key == "components") comps = val; else if (key == "enabled") enabled = tolower(val)
      }
      END { flush() }
    ' "$f"
  done
}

# All "deb" entries of the host: TYPE URI SUITE COMPONENTS...
host_apt_entries() {
  local etc=${CAPSULE_APT_ETC:-/etc/apt}
  local lists=() sources=()
  [ -f "$etc/sources.list" ] && lists+=("$etc/sources.list")
  lists+=("$etc"/sources.list.d/*.list)
  sources+=("$etc"/sources.list.d/*.sources)
  { [ ${#lists[@]} -eq 0 ] || _apt_entries_oneline "${lists[@]}"
    [ ${#sources[@]} -eq 0 ] || _apt_entries_deb822 "${sources[@]}"; } | awk '$1 == "deb"'
}

# Origin/Label of the Release file apt downloaded for URI SUITE ("" when apt has none).
_apt_release_field() {  # uri suite field
  local base f
  base=$(printf '%s' "$1" | sed -e 's|^[a-z+]*://||' -e 's|/*$||' -e 's|/|_|g')
  for f in "/var/lib/apt/lists/${base}_dists_$2_InRelease" "/var/lib/apt/lists/${base}_dists_$2_Release"; do
    if [ -f "$f" ]; then sed -n "s/^$3: *//p" "$f" | head -n1; return 0; fi
  done
}

# The running system's suite (VERSION_CODENAME).
host_suite() {
  local s
  s=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [ -n "$s" ] || die "cannot tell the running Debian suite (no VERSION_CODENAME in /etc/os-release)"
  echo "$s"
}

# The suite to build: CAPSULE_DEBIAN_SUITE, else the recipe's RECIPE_SUITE, else the host's.
debian_suite() {
  if [ -n "${CAPSULE_DEBIAN_SUITE:-}" ]; then echo "$CAPSULE_DEBIAN_SUITE"; return; fi
  if [ -n "${RECIPE_SUITE:-}" ]; then echo "$RECIPE_SUITE"; return; fi
  host_suite
}

# Entries "URI SUITE" for SUITE with component main that debootstrap can use (http, https, file).
_candidates() {  # suite
  host_apt_entries | awk -v s="$1" '
    $3 == s { for (i = 4; i <= NF; i++) if ($i == "main") { print $2, $3; break } }' |
    awk '$1 ~ /^(https?|file):\/\// && !seen[$1]++'
}

# Candidates for SUITE, best first: the entries whose Release file (as apt last fetched it) says
# Origin: Debian, then - when apt has no lists - those whose path looks like a Debian archive (.../debian,
# .../debian-security), then the rest. Entries whose Release names another origin are dropped.
_ranked_candidates() {  # suite
  local uri s origin rank
  while read -r uri s; do
    origin=$(_apt_release_field "$uri" "$s" Origin)
    if [ "$origin" = Debian ]; then rank=0
    elif [ -n "$origin" ]; then continue
    elif [[ ${uri%/} == */debian || ${uri%/} == */debian-security ]]; then rank=1
    else rank=2; fi
    echo "$rank $uri $s"
  done < <(_candidates "$1") | sort -s -n -k1,1 | cut -d' ' -f2-
}

# Ranked candidates for SUITE (main, -updates or -security); for a suite the host's apt does not list (an
# older or newer Debian release than the host's), those of the host's own suite with the same suffix: the
# archive a host's apt uses carries every current Debian suite.
_suite_candidates() {  # suite
  local all host sfx=""
  all=$(_ranked_candidates "$1")
  if [ -z "$all" ]; then
    host=$(host_suite)
    case $1 in *-*) sfx=-${1#*-} ;; esac
    [ "${1%%-*}" = "$host" ] || all=$(_ranked_candidates "$host$sfx")
  fi
  [ -z "$all" ] || printf '%s\n' "$all" | awk -v s="$1" '{ print $1, s }'
}

# The Debian main archive of the suite to build, read from the host's apt configuration now.
debian_mirror() {
  if [ -n "${CAPSULE_DEBIAN_MIRROR:-}" ]; then echo "${CAPSULE_DEBIAN_MIRROR%/}"; return; fi
  local suite uri s
  suite=$(debian_suite)
  read -r uri s < <(_suite_candidates "$suite") || true
  [ -n "${uri:-}" ] || die "no apt source for the Debian main archive of '$suite' (component main) in" \
    "/etc/apt/sources.list or /etc/apt/sources.list.d/*.{list,sources}; set CAPSULE_DEBIAN_MIRROR"
  echo "${uri%/}"
}

# sources.list lines for the image: the main archive plus the host's <suite>-updates (from the same mirror
# when the host lists it there) and <suite>-security.
image_sources_list() {  # mirror suite
  echo "deb $1 $2 main"
  [ "${CAPSULE_RECIPE_UPDATES:-1}" = 1 ] || return 0
  local sfx uri s all
  for sfx in updates security; do
    all=$(_suite_candidates "$2-$sfx")
    uri=$(awk -v m="$1" '{ u = $1; sub(/\/+$/, "", u) } u == m { print u; exit }' <<< "$all")
    [ -n "$uri" ] || read -r uri s <<< "$all" || true
    [ -z "${uri:-}" ] || echo "deb ${uri%/} $2-$sfx main"
  done
}

# ---------------------------------------------------------------------------------------------------------
# Running things inside the image. Mounts live in a private mount namespace and vanish with it.
# ---------------------------------------------------------------------------------------------------------
_IMAGE_ENV=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root USER=root
            LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive)

_chroot_in_ns() {  # mode(root|scratch) root scratchdir cmd...   (RECIPE_UNSHARE_NET=1: no network either)
  local net=()
  [ "${RECIPE_UNSHARE_NET:-0}" = 1 ] && net=(--net)
  # shellcheck disable=SC2016  # the inner script expands its own arguments
  RECIPE_APT_CACHE=${RECIPE_APT_CACHE:-} unshare --mount --propagation private "${net[@]}" -- /bin/bash -c '
    set -e
    mode=$1 r=$2 scratch=$3 apt_cache=${RECIPE_APT_CACHE:-}; shift 3
    if [ "$mode" = scratch ]; then
      mkdir -p "$scratch/upper" "$scratch/work" "$scratch/merged"
      mount -t overlay overlay -o "lowerdir=$r,upperdir=$scratch/upper,workdir=$scratch/work" "$scratch/merged"
      r=$scratch/merged
    fi
    mkdir -p "$r/proc" "$r/dev" "$r/tmp"
    mount -t proc proc "$r/proc"
    mount --rbind /dev "$r/dev"
    mount -t tmpfs tmpfs "$r/tmp"
    if [ -n "$apt_cache" ]; then
      mkdir -p "$apt_cache/partial" "$r/var/cache/apt/archives"
      mount --bind "$apt_cache" "$r/var/cache/apt/archives"
    fi
    exec chroot "$r" /usr/bin/env -i "$@"' _ "$1" "$2" "$3" "${_IMAGE_ENV[@]}" "${@:4}"
}

# in_root CMD...: run CMD in the image being built; its changes are kept.
in_root() { _chroot_in_ns root "$ROOT" "" "$@"; }

# in_scratch CMD...: run CMD in a throw-away overlay over the image (for checks that write files).
in_scratch() {
  local d rc=0
  d=$(mktemp -d "$WORK/scratch.XXXXXX")
  _chroot_in_ns scratch "$ROOT" "$d" "$@" || rc=$?
  rm -rf "$d"
  return $rc
}

# in_scratch_offline CMD...: the same without network (only loopback), to prove a toolchain works offline.
in_scratch_offline() { RECIPE_UNSHARE_NET=1 in_scratch "$@"; }

# label NAME VERSION: org.capsule.toolchain.NAME=VERSION; label_raw KEY VALUE: any other label.
label() {
  [[ $1 =~ ^[a-z0-9][a-z0-9.-]*$ ]] || die "bad toolchain name '$1'"
  [[ $2 =~ ^[0-9][0-9A-Za-z.+_~-]*$ ]] || die "bad version '$2' for toolchain $1"
  RECIPE_LABELS["org.capsule.toolchain.$1"]=$2
}
label_raw() { RECIPE_LABELS["$1"]=$2; }

_json_str() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"' "$s"; }

write_labels_json() {  # file
  local k first=1
  {
    printf '{\n'
    while read -r k; do
      [ -n "$k" ] || continue
      [ $first = 1 ] || printf ',\n'
      first=0
      printf '  %s: %s' "$(_json_str "$k")" "$(_json_str "${RECIPE_LABELS[$k]}")"
    done < <(printf '%s\n' "${!RECIPE_LABELS[@]}" | LC_ALL=C sort)
    printf '\n}\n'
  } > "$1"
}

# ---------------------------------------------------------------------------------------------------------
# Build steps
# ---------------------------------------------------------------------------------------------------------
declare -a _TIMINGS=()
_step() {  # name cmd...
  local name=$1 t0 t1; shift
  log "== $name"
  t0=$(date +%s.%N)
  "$@"
  t1=$(date +%s.%N)
  _TIMINGS+=("$name $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')")
}

# with_cache_lock NAME CMD...: CMD holding CACHE/NAME.lock, so that builds sharing the .deb cache take turns in
# it (apt-get refuses a cache directory another apt-get has locked; debootstrap does not lock its own).
with_cache_lock() {
  local name=$1 fd rc=0
  shift
  if [ -z "${CACHE:-}" ]; then "$@"; return; fi
  exec {fd}>> "$CACHE/$name.lock"
  flock -n "$fd" || { log "waiting for another build using $CACHE/$name"; flock "$fd"; }
  "$@" || rc=$?
  exec {fd}>&-
  return $rc
}

_debootstrap() {  # suite mirror
  # Private mount namespace: whatever debootstrap mounts in the target is gone when it exits.
  with_cache_lock debootstrap unshare --mount --propagation private -- \
    debootstrap --variant=minbase --components=main ${CACHE:+--cache-dir="$CACHE/debootstrap"} \
      "$1" "$ROOT" "$2" > "$WORK/debootstrap.log" 2>&1 ||
    { tail -n 30 "$WORK/debootstrap.log" >&2; die "debootstrap $1 from $2 failed (log above)"; }
}

_no_docs() {  # keep copyright files; man pages, info and translations are not needed in a build image
  mkdir -p "$ROOT/etc/dpkg/dpkg.cfg.d"
  cat > "$ROOT/etc/dpkg/dpkg.cfg.d/capsule-nodoc" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
EOF
  find "$ROOT/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
  find "$ROOT/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
  rm -rf "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/* "$ROOT"/usr/share/lintian/*
  # update-alternatives fails on slave links into missing man directories (openjdk's postinst does that)
  mkdir -p "$ROOT"/usr/share/man/man{1..9}
  find "$ROOT/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} + 2>/dev/null || true
}

_install_packages() {  # mirror suite
  image_sources_list "$1" "$2" > "$ROOT/etc/apt/sources.list"
  log "image apt sources: $(tr '\n' ';' < "$ROOT/etc/apt/sources.list")"
  printf '#!/bin/sh\nexit 101\n' > "$ROOT/usr/sbin/policy-rc.d"; chmod 755 "$ROOT/usr/sbin/policy-rc.d"
  in_root apt-get update -qq > "$WORK/apt.log" 2>&1 || { tail -n 30 "$WORK/apt.log" >&2; die "apt-get update failed"; }
  # shellcheck disable=SC2086
  RECIPE_APT_CACHE=${CACHE:+$CACHE/apt} \
    with_cache_lock apt in_root apt-get install -y -q --no-install-recommends $RECIPE_PACKAGES >> "$WORK/apt.log" 2>&1 ||
    { tail -n 30 "$WORK/apt.log" >&2; die "apt-get install $RECIPE_PACKAGES failed"; }
  rm -f "$ROOT/usr/sbin/policy-rc.d"
}

_clean() {
  in_root apt-get clean
  rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/*.bin "$ROOT"/var/cache/debconf/*-old \
         "$ROOT"/var/lib/dpkg/*-old "$ROOT"/var/log/apt/* "$ROOT"/var/log/dpkg.log "$ROOT"/var/log/alternatives.log \
         "$ROOT"/var/log/bootstrap.log "$ROOT"/root/.cache "$ROOT"/tmp/* "$ROOT"/var/tmp/*
  mkdir -p "$ROOT/var/lib/apt/lists/partial"
  # Host-specific files debootstrap copied in; the sandbox provides /dev, /proc and its own network view.
  : > "$ROOT/etc/resolv.conf"
  echo capsule > "$ROOT/etc/hostname"
  find "$ROOT/dev" -mindepth 1 -delete
}

_tarball() {  # out
  tar --numeric-owner --sort=name --xattrs -C "$ROOT" -cf - . | gzip -6 > "$1.partial"
  mv "$1.partial" "$1"
}

# What a build's outputs depend on in this repository: the recipe script, this file, the recipe's name, suite and
# packages (a script may build several), and the arguments.
recipe_sha256() {  # args...
  { cat "$0" "${BASH_SOURCE[0]}"; printf '%s\n' "$RECIPE_NAME" "${RECIPE_SUITE:-}" "${RECIPE_PACKAGES:-}" "$@"; } |
    sha256sum | cut -d' ' -f1
}

# True, after printing the tarball path as a build would, when OUT holds a complete build made from the same
# recipe_sha256 (--if-changed then skips the build).
outputs_current() {  # out sha256
  [ -f "$1/rootfs.tar.gz" ] && [ -f "$1/labels.json" ] && grep -qx "recipe_sha256 $2" "$1/build-info.txt" 2>/dev/null ||
    return 1
  log "up to date: $1 (recipe_sha256 $2)"
  echo "$1/rootfs.tar.gz"
}

_usage() {
  cat <<EOF
usage: $0 [--out DIR] [--tar-only] [--if-changed]
Builds the '$RECIPE_NAME' toolchain image ($RECIPE_PACKAGES) from Debian packages with debootstrap.
Writes DIR/rootfs/, DIR/rootfs.tar.gz, DIR/labels.json, DIR/packages.txt, DIR/build-info.txt
(DIR defaults to \${CAPSULE_RECIPES_OUT:-/var/tmp/capsule-recipes}/$RECIPE_NAME) and prints the tarball path.
  --tar-only   do not keep DIR/rootfs/ (only the tarball)
  --if-changed keep DIR's outputs when they were built from the same recipe and arguments
EOF
}

recipe_main() {
  local out="" tar_only=0 if_changed=0 sha256
  sha256=$(recipe_sha256 "$@")
  while [ $# -gt 0 ]; do
    case $1 in
      --out) [ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift 2 ;;
      --out=*) out=${1#--out=}; shift ;;
      --tar-only) tar_only=1; shift ;;
      --if-changed) if_changed=1; shift ;;
      -h|--help) _usage; return 0 ;;
      *) _usage >&2; die "unknown argument '$1'" ;;
    esac
  done
  if [ -z "${RECIPE_NAME:-}" ] || [ -z "${RECIPE_PACKAGES:-}" ]; then die "recipe must set RECIPE_NAME and RECIPE_PACKAGES"; fi
  declare -F recipe_verify > /dev/null || die "recipe $RECIPE_NAME defines no recipe_verify"
  [ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mounts)"
  command -v debootstrap > /dev/null || die "debootstrap is not installed (scripts/install-deps.sh)"
  out=${out:-${CAPSULE_RECIPES_OUT:-/var/tmp/capsule-recipes}/$RECIPE_NAME}
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  if [ $if_changed = 1 ] && outputs_current "$out" "$sha256"; then return 0; fi
  CACHE=${CAPSULE_RECIPE_CACHE:-${CAPSULE_RECIPES_OUT:-/var/tmp/capsule-recipes}/.cache}
  if [ "$CACHE" = none ]; then CACHE=""; else mkdir -p "$CACHE/debootstrap" "$CACHE/apt" && CACHE=$(cd "$CACHE" && pwd); fi

  local suite mirror t0 t1
  suite=$(debian_suite)
  mirror=$(debian_mirror)
  log "suite $suite, mirror $mirror, packages: $RECIPE_PACKAGES"
  WORK=$(mktemp -d "$out/.build.XXXXXX")
  ROOT=$WORK/rootfs
  mkdir -p "$ROOT"
  # shellcheck disable=SC2064
  trap "_recipe_exit_trap '$WORK'" EXIT
  t0=$(date +%s.%N)

  _step debootstrap _debootstrap "$suite" "$mirror"
  _no_docs
  _step install _install_packages "$mirror" "$suite"
  if declare -F recipe_setup > /dev/null; then _step setup recipe_setup; fi
  _step verify recipe_verify
  [ ${#RECIPE_LABELS[@]} -gt 0 ] || die "recipe_verify set no labels"
  _step clean _clean
  label_raw org.capsule.recipe "$RECIPE_NAME"
  label_raw org.capsule.base "debian:$suite"
  label_raw org.opencontainers.image.created "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  write_labels_json "$WORK/labels.json"
  dpkg-query --admindir="$ROOT/var/lib/dpkg" -W -f '${Package}=${Version}\n' | LC_ALL=C sort > "$WORK/packages.txt"
  _step tarball _tarball "$WORK/rootfs.tar.gz"

  # Publish: replace the previous build's outputs.
  rm -rf "$out/rootfs" "$out/rootfs.tar.gz" "$out/labels.json" "$out/packages.txt" "$out"/failed-*.log
  mv "$WORK/labels.json" "$WORK/packages.txt" "$WORK/rootfs.tar.gz" "$out/"
  if [ $tar_only = 1 ]; then rm -rf "$ROOT"; else mv "$ROOT" "$out/rootfs"; fi
  mv "$WORK"/*.log "$out/" 2>/dev/null || true
  rm -rf "$WORK"
  trap - EXIT

  t1=$(date +%s.%N)
  {
    echo "recipe $RECIPE_NAME"; echo "recipe_sha256 $sha256"; echo "suite $suite"; echo "mirror $mirror"
    printf 'step %s s\n' "${_TIMINGS[@]}"
    echo "total $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
    echo "packages $(wc -l < "$out/packages.txt")"
    [ $tar_only = 1 ] || echo "rootfs_bytes $(du -sb "$out/rootfs" | cut -f1)"
    echo "tarball_bytes $(stat -c %s "$out/rootfs.tar.gz")"
  } > "$out/build-info.txt"
  log "done: $(tr '\n' ';' < "$out/build-info.txt")"
  log "labels: $(tr -d '\n' < "$out/labels.json")"
  echo "$out/rootfs.tar.gz"
}

_recipe_exit_trap() {
  local rc=$? work=$1 f
  [ $rc = 0 ] && return 0
  for f in "$work"/*.log; do cp -f "$f" "$(dirname "$work")/failed-$(basename "$f")"; done
  log "failed; logs: $(dirname "$work")/failed-*.log"
  if [ "${CAPSULE_RECIPE_KEEP_FAILED:-0}" = 1 ]; then log "failed; build dir kept: $work"
  else rm -rf "$work"; fi
}
