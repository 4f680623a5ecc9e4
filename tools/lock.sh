#!/usr/bin/env bash
# `make lock`: regenerate every lock file from its input with uv (pinned in requirements-test.in).
#
#   requirements-test.in          -> requirements-test.txt          (Python 3.11: the main suite, CI's venv)
#   tests/matrix/ansible-core-X.Y.in -> tests/matrix/ansible-core-X.Y.txt (the ansible-core matrix; 2.20
#                                    and later need Python 3.12+, locked for Python 3.13)
#
# Every package is pinned exactly, transitive ones included, with the sha256 of every file of the
# release, so that pip installs them with --require-hashes. The index is the machine's own: pip's
# configured index-url, when it has one, is handed to uv (uv does not read pip's configuration);
# no index address is written into a lock (uv writes none unless asked).
# Usage: tools/lock.sh [--upgrade]   (--upgrade: newest versions the inputs allow, not the locked ones)
# Env:   UV (default .venv/bin/uv)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
uv=${UV:-$repo/.venv/bin/uv}
[ -x "$uv" ] || { echo "lock.sh: ERROR: $uv not found: make venv installs it (requirements-test.in pins uv)" >&2; exit 2; }

upgrade=()
[ "${1:-}" = --upgrade ] && upgrade=(--upgrade)

# the machine's index and certificate authority, read from pip's own configuration
py=$repo/.venv/bin/python
index=$("$py" -m pip config get global.index-url 2>/dev/null || true)
[ -n "$index" ] && export UV_DEFAULT_INDEX=$index
cert=${PIP_CERT:-$("$py" -m pip config get global.cert 2>/dev/null || true)}
[ -n "$cert" ] && [ -f "$cert" ] && export SSL_CERT_FILE=$cert
export UV_CACHE_DIR=${UV_CACHE_DIR:-$repo/.cache/uv}

compile() {  # compile <python version> <input> <output>
  # an existing lock is the starting point: versions move only when the input asks (or --upgrade)
  "$uv" pip compile --quiet --python-version "$1" --generate-hashes --custom-compile-command "make lock" \
    "${upgrade[@]}" "$2" -o "$3"
  echo "lock.sh: $3 (Python $1) from $2"
}

compile 3.11 requirements-test.in requirements-test.txt
for input in tests/matrix/ansible-core-*.in; do
  version=${input##*/ansible-core-}; version=${version%.in}
  # ansible-core 2.20 and later require Python 3.12+: locked for Debian 13's python3 (3.13)
  case $version in 2.1[0-9]) python=3.11 ;; *) python=3.13 ;; esac
  compile "$python" "$input" "${input%.in}.txt"
done
