#!/usr/bin/env bash
# `make matrix`: the collection under every ansible-core it supports (docs/development.md,
# "ansible-core support matrix").
#
# Each version gets a venv installed from its lock (tests/matrix/ansible-core-X.Y.txt, pip
# --require-hashes), then tests/matrix/check_version.py runs the demo, an audit of the demo
# snapshots against the golden reports, remediate.yml --check --diff, learn.yml and ansible-doc of
# every module, and tools/sanity.sh runs that version's ansible-test sanity. The main suite's
# venv (.venv, ansible-core 2.19) runs first: it is the reference leg the others are compared with.
#
# ansible-core 2.20 and later need Python 3.12+; the controller has 3.11. Their legs run in a
# Debian 13 (trixie) chroot with its own python3 (3.13), built once with debootstrap from the mirror
# this machine's apt uses (tests/vm/lib.sh), in a private mount namespace (unshare), the checkout
# bind-mounted at the same path. Venvs and the chroot are kept under .cache/matrix and rebuilt when
# their lock (or this script's chroot recipe) changes.
#
# The reference leg runs first; then two lanes side by side, one a core: the versions of this
# machine's Python one after another, and the chroot's (each leg's sanity in its own copy,
# build/matrix/<version>-sanity).
#
# Usage: tools/matrix.sh [X.Y ...]   (default: $MATRIX, set by the Makefile)
# Env:   MATRIX_SANITY=0 skips ansible-test sanity in the legs (the main suite's sanity still runs
#        in `make sanity`); VENV (default .venv) is the reference leg.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
cache=$repo/.cache/matrix
venv=${VENV:-.venv}
case $venv in /*) ;; *) venv=$repo/$venv ;; esac
sanity=${MATRIX_SANITY:-1}
read -r -a versions <<<"${*:-${MATRIX:-}}"
[ "${#versions[@]}" -gt 0 ] || { echo "matrix.sh: ERROR: no versions (arguments or MATRIX)" >&2; exit 2; }
[ -d build/snapshots ] || { echo "matrix.sh: ERROR: build/snapshots missing: make fixtures" >&2; exit 2; }
[ -z "${PIP_CERT:-}" ] && [ -f /etc/ssl/certs/ca-certificates.crt ] && export PIP_CERT=/etc/ssl/certs/ca-certificates.crt
export PIP_DISABLE_PIP_VERSION_CHECK=1

failed=()
timings=()
stamp_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

# --- Debian 13 chroot for the Python 3.12+ versions -------------------------------------------
chroot_root=$cache/trixie
chroot_packages=python3,python3-venv,ca-certificates,shellcheck,git
chroot_stamp=$(printf '%s\n' "$chroot_packages" | sha256sum | cut -d' ' -f1)

ensure_chroot() {
  if [ -f "$chroot_root/.gpuhost-stamp" ] && [ "$(cat "$chroot_root/.gpuhost-stamp")" = "$chroot_stamp" ]; then
    return 0
  fi
  [ "$(id -u)" -eq 0 ] || { echo "matrix.sh: ERROR: the Debian 13 chroot needs root (debootstrap, chroot)" >&2; return 2; }
  command -v debootstrap >/dev/null || { echo "matrix.sh: ERROR: debootstrap not found (make test-deps)" >&2; return 2; }
  # shellcheck source=../tests/vm/lib.sh
  . "$repo/tests/vm/lib.sh"
  local mirror
  mirror=${MATRIX_DEBIAN_MIRROR:-$(apt_mirror_for trixie)}
  # a Debian archive serves every suite it carries: the one apt uses for bookworm will do
  [ -n "$mirror" ] || mirror=$(apt_mirror_for bookworm)
  [ -n "$mirror" ] || { echo "matrix.sh: ERROR: no Debian mirror in /etc/apt/sources.list{,.d}: set MATRIX_DEBIAN_MIRROR" >&2; return 2; }
  rm -rf "$chroot_root"
  mkdir -p "$cache"
  echo "matrix.sh: debootstrap trixie into $chroot_root"
  local t0=$SECONDS
  debootstrap --variant=minbase --include="$chroot_packages" trixie "$chroot_root" "$mirror" \
    >"$cache/debootstrap.log" 2>&1 || { tail -n 30 "$cache/debootstrap.log" >&2; echo "matrix.sh: ERROR: debootstrap failed" >&2; return 2; }
  timings+=("chroot (debootstrap trixie)	$((SECONDS - t0))	ok")
  echo "$chroot_stamp" >"$chroot_root/.gpuhost-stamp"
}

# Run a command in the chroot: a private mount namespace with /proc, /dev and the checkout mounted,
# the machine's name resolution, CA bundle and pip configuration copied in (pip there reads the same
# index as pip here).
in_chroot() {
  local f
  for f in /etc/resolv.conf /etc/hosts /etc/pip.conf; do
    [ -f "$f" ] && cp -L "$f" "$chroot_root$f"
  done
  if [ -d /etc/xdg/pip ]; then mkdir -p "$chroot_root/etc/xdg"; rm -rf "$chroot_root/etc/xdg/pip"; cp -rL /etc/xdg/pip "$chroot_root/etc/xdg/pip"; fi
  # the CA bundle this machine trusts (PIP_CERT, else the system's): a site's own CA is not in the
  # chroot's bundle
  local cert=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
  [ -f "$cert" ] && cp -L "$cert" "$chroot_root/etc/ssl/certs/ca-certificates.crt"
  mkdir -p "$chroot_root$repo"
  # shellcheck disable=SC2016  # the script is expanded by the inner bash, from its arguments
  unshare --mount --propagation private -- bash -c '
    set -e
    root=$1 repo=$2; shift 2
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --bind "$repo" "$root$repo"
    exec chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 \
      PIP_DISABLE_PIP_VERSION_CHECK=1 NO_COLOR=1 ANSIBLE_NOCOLOR=1 "$@"
  ' in_chroot "$chroot_root" "$repo" "$@"
}

# --- one leg ------------------------------------------------------------------------------------
# ensure_venv VERSION: prints the venv's bin directory as the leg sees it (in the chroot for 3.12+)
ensure_venv() {
  local v=$1 lock=tests/matrix/ansible-core-$1.txt stamp dir
  [ -f "$lock" ] || { echo "matrix.sh: ERROR: $lock missing: add tests/matrix/ansible-core-$v.in, make lock" >&2; return 2; }
  stamp=$(stamp_of "$lock")
  case $v in
    2.1[0-9])
      dir=$cache/$v
      if [ "$(cat "$dir/.gpuhost-stamp" 2>/dev/null)" != "$stamp" ]; then
        rm -rf "$dir"
        python3 -m venv "$dir" >&2
        "$dir/bin/python" -m pip install -q --require-hashes --no-deps -r "$lock" >"$cache/$v-pip.log" 2>&1 \
          || { tail -n 20 "$cache/$v-pip.log" >&2; return 2; }
        echo "$stamp" >"$dir/.gpuhost-stamp"
      fi
      echo "$dir/bin" ;;
    *)
      ensure_chroot >&2
      dir=/opt/ansible-core-$v
      if [ "$(cat "$chroot_root$dir/.gpuhost-stamp" 2>/dev/null)" != "$stamp" ]; then
        rm -rf "${chroot_root:?}$dir"
        in_chroot python3 -m venv "$dir" >&2
        in_chroot "$dir/bin/python" -m pip install -q --require-hashes --no-deps -r "$repo/$lock" \
          >"$cache/$v-pip.log" 2>&1 || { tail -n 20 "$cache/$v-pip.log" >&2; return 2; }
        echo "$stamp" >"$chroot_root$dir/.gpuhost-stamp"
      fi
      echo "$dir/bin" ;;
  esac
}

run_leg() {  # run_leg VERSION BIN [reference dir]
  local v=$1 bin=$2 ref=${3:-} t0=$SECONDS status=ok
  local -a check=("$bin/python" "$repo/tests/matrix/check_version.py" --bin "$bin" --label "$v")
  [ -n "$ref" ] && check+=(--reference "$ref")
  local -a wrap=()
  case $v in 2.1[0-9]) ;; *) wrap=(in_chroot) ;; esac
  "${wrap[@]}" "${check[@]}" || { status=FAILED; failed+=("$v: check_version"); }
  if [ "$sanity" = 1 ] && [ "$v" != 2.19 ]; then
    local python=3.11
    case $v in 2.1[0-9]) ;; *) python=3.13 ;; esac
    # ansible-test 2.16 still checks the Python 2 boilerplate (from __future__ import ...,
    # __metaclass__ = type) that 2.17 dropped with Python 2 targets; this collection's host code
    # needs Python 3.8+ on every version (docs/development.md), so those two tests say nothing here.
    local -a skip=()
    case $v in 2.16) skip=(--skip-test future-import-boilerplate --skip-test metaclass-boilerplate) ;; esac
    echo "matrix $v  sanity (ansible-test sanity --python $python ${skip[*]})"
    "${wrap[@]}" env VENV="${bin%/bin}" SANITY_PYTHON=$python SANITY_DIR="$repo/build/matrix/$v-sanity" \
      "$repo/tools/sanity.sh" "${skip[@]}" >"$repo/build/matrix/$v-sanity.log" 2>&1 \
      || { status=FAILED; failed+=("$v: sanity (log: build/matrix/$v-sanity.log)"); tail -n 30 "$repo/build/matrix/$v-sanity.log"; }
  fi
  timings+=("ansible-core $v	$((SECONDS - t0))	$status")
}

t0=$SECONDS
run_leg 2.19 "$venv/bin"
timings[-1]="ansible-core 2.19 (reference)	$((SECONDS - t0))	${timings[-1]##*	}"

# Two lanes side by side, one a core: the versions on this machine's Python, and those in the
# chroot (its debootstrap included). Each lane's timings and failures go to a file of its own.
lane() {  # lane NAME VERSION...
  local name=$1; shift
  # the lane's own lists (run_leg appends to whichever timings/failed are in scope)
  local -a timings=() failed=()
  local v t0 bin
  for v in "$@"; do
    t0=$SECONDS
    if ! bin=$(ensure_venv "$v"); then
      failed+=("$v: set-up"); timings+=("ansible-core $v	$((SECONDS - t0))	FAILED"); continue
    fi
    timings+=("  set-up $v	$((SECONDS - t0))	ok")
    run_leg "$v" "$bin" "$repo/build/matrix/2.19"
  done
  printf '%s\n' "${timings[@]}" >"$repo/build/matrix/lane-$name.timings"
  printf '%s\n' "${failed[@]+"${failed[@]}"}" >"$repo/build/matrix/lane-$name.failed"
}
host_versions=(); chroot_versions=()
for v in "${versions[@]}"; do
  case $v in 2.19) ;; 2.1[0-9]) host_versions+=("$v") ;; *) chroot_versions+=("$v") ;; esac
done
rm -f "$repo"/build/matrix/lane-*
lane_pid=
if [ "${#chroot_versions[@]}" -gt 0 ]; then
  lane chroot "${chroot_versions[@]}" > >(sed -u 's/^/[chroot] /') 2>&1 &
  lane_pid=$!
fi
[ "${#host_versions[@]}" -eq 0 ] || lane host "${host_versions[@]}"
[ -z "$lane_pid" ] || wait "$lane_pid" || true
for name in host chroot; do
  [ -f "$repo/build/matrix/lane-$name.timings" ] || continue
  while IFS= read -r line; do [ -n "$line" ] && timings+=("$line"); done <"$repo/build/matrix/lane-$name.timings"
  while IFS= read -r line; do [ -n "$line" ] && failed+=("$line"); done <"$repo/build/matrix/lane-$name.failed"
done
[ "${#chroot_versions[@]}" -eq 0 ] || [ -f "$repo/build/matrix/lane-chroot.timings" ] || failed+=("chroot lane: ended without its report")

echo
echo "================ ansible-core matrix ================"
for entry in "${timings[@]}"; do
  IFS=$'\t' read -r name secs status <<<"$entry"
  printf '  %-34s %5ss  %s\n' "$name" "$secs" "$status"
done
if [ "${#failed[@]}" -gt 0 ]; then
  printf '  FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "  every version passed"
