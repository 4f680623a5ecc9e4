#!/usr/bin/env bash
# Run `ansible-test sanity` on a copy of the collection, offline-safe, with no ignore file.
#
# ansible-test wants the collection physically at .../ansible_collections/<ns>/<name>; the
# checkout's build/collections link is a symlink, which ansible-test resolves away, so the
# files git would ship (tracked + untracked-not-ignored) are copied to
# build/sanity/ansible_collections/gpuhost/baseline and tested there.
#
# ansible-test bootstraps pip in each sanity virtualenv with a get-pip.py it downloads from
# ci-files.testing.ansible.com (unreachable here) unless a cached copy exists; we install
# tools/get_pip_standin.py under the exact cached name the installed ansible-test looks for.
#
# Usage: tools/sanity.sh [extra ansible-test sanity arguments, e.g. --test pep8]
# Env:   VENV (default .venv), SANITY_PYTHON (default 3.11), SANITY_DIR (default build/sanity: where
#        the copy and the log go; tools/matrix.sh gives each leg its own, so that legs run side by side)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
venv=${VENV:-.venv}
case $venv in /*) ;; *) venv=$repo/$venv ;; esac
python_version=${SANITY_PYTHON:-3.11}
ansible_test=$venv/bin/ansible-test
py=$venv/bin/python

die() { printf 'sanity.sh: ERROR: %s\n' "$*" >&2; exit 2; }

[ -x "$ansible_test" ] || die "$ansible_test not found: create the virtualenv first (make venv)"
# ansible-test only warns and skips its shellcheck test when the tool is missing: refuse instead
command -v shellcheck >/dev/null 2>&1 || die "shellcheck not found: install it (Debian package shellcheck, make test-deps)"
[ -z "${PIP_CERT:-}" ] && [ -f /etc/ssl/certs/ca-certificates.crt ] && export PIP_CERT=/etc/ssl/certs/ca-certificates.crt

# --- 1. the get-pip stand-in, under the name this ansible-test asks for -----------------
# The pip version comes from ansible-test's own pin and the cache file name from its
# bootstrap source; if either moves, stop with a message instead of letting ansible-test
# try the download and fail with a network error.
pip_version=$("$py" - "$python_version" <<'EOF'
import sys
from types import SimpleNamespace
try:
    from ansible_test._internal.python_requirements import get_venv_packages
    print(get_venv_packages(SimpleNamespace(version=sys.argv[1]))['pip'])
except Exception as exc:  # any change of that private API lands here
    sys.exit('cannot read the pinned pip version from ansible_test._internal.python_requirements'
             '.get_venv_packages (%s: %s)' % (type(exc).__name__, exc))
EOF
) || die "ansible-test's pip pin moved: update tools/sanity.sh (see docs/development.md, 'Offline sanity')"
[[ $pip_version =~ ^[0-9]+(\.[0-9]+)*$ ]] || die "unexpected pip version '$pip_version' from ansible-test"

bootstrap_src=$("$py" -c 'import ansible_test, os; print(os.path.join(os.path.dirname(ansible_test.__file__), "_util/target/setup/requirements.py"))')
# shellcheck disable=SC2088  # the tilde is part of the literal text looked for in ansible-test's source
grep -q "~/.ansible/test/cache/get_pip_%s.py' % pip_version.replace(\".\", \"_\")" "$bootstrap_src" \
  || die "ansible-test no longer caches get-pip as ~/.ansible/test/cache/get_pip_<version>.py (checked $bootstrap_src): update tools/sanity.sh for the new name"

cache_dir=$HOME/.ansible/test/cache
cached=$cache_dir/get_pip_${pip_version//./_}.py
mkdir -p "$cache_dir"
if [ -f "$cached" ] && ! grep -q 'Offline stand-in for the get-pip.py' "$cached"; then
  echo "sanity.sh: keeping existing $cached (not our stand-in; presumably the real get-pip.py)"
elif ! cmp -s tools/get_pip_standin.py "$cached"; then
  install -m 0644 tools/get_pip_standin.py "$cached"
  echo "sanity.sh: installed get-pip stand-in as $cached"
fi

# --- 2. the collection copy ----------------------------------------------------------------
# One run at a time per checkout: a second run would delete the copy under the first.
mkdir -p "$repo/build"
sanity_dir=${SANITY_DIR:-$repo/build/sanity}
mkdir -p "$sanity_dir"
exec 9>"$sanity_dir.lock"
if ! flock -n 9; then
  echo "sanity.sh: another sanity run holds $sanity_dir.lock; waiting for it"
  flock 9
fi
dest=$sanity_dir/ansible_collections/gpuhost/baseline
rm -rf "$dest"
mkdir -p "$dest"
# Files git would commit: tracked (and still present) plus untracked-but-not-ignored.
# Not build/: its one committed entry is the link build/collections/.../baseline -> the checkout (a
# directory link, which ansible-test's symlinks test refuses, and the copy needs none).
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' f; do case $f in build/*) continue ;; esac; [ -e "$f" ] && printf '%s\0' "$f"; done \
  | tar --null -T - -cf - | tar -xf - -C "$dest"
# ansible-test asks git for the file list when it finds a repository; give the copy its own
# so that exactly the copied files are tested (and nothing under build/ or .venv/).
(cd "$dest" && git init -q && git add -A && git -c user.name=sanity -c user.email=sanity@invalid commit -qm copy --no-verify)

if ls "$dest"/tests/sanity/ignore-*.txt >/dev/null 2>&1; then
  die "tests/sanity/ignore-*.txt exists: this project runs sanity with no ignore file; fix the findings instead"
fi

# --- 3. run -----------------------------------------------------------------------------
log=$sanity_dir/ansible-test.log
echo "sanity.sh: ansible-test sanity --python $python_version --requirements (collection copy: $dest)"
set +e
(cd "$dest" && PATH=$venv/bin:$PATH "$ansible_test" sanity --python "$python_version" --requirements --color no "$@") 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e

if [ "$rc" -ne 0 ]; then
  echo
  echo "================ ansible-test sanity FAILED (exit $rc) ================"
  # Findings are "ERROR: path:line:col: code: message" lines; the summary names the tests.
  grep -E '^ERROR: (Found [0-9]+|The [0-9]+ sanity test)' "$log" || true
  echo "--- findings (paths relative to the collection root) ---"
  grep -E '^ERROR: [^ ]+:[0-9]+' "$log" | sort -u || true
  grep -E '^(FATAL|Download failed)' "$log" || true
  echo "full log: $log"
  exit "$rc"
fi
echo "sanity.sh: all sanity tests passed with no ignore file"
