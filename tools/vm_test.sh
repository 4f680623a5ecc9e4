#!/usr/bin/env bash
# VM tests: build the guest image and the patched QEMU (cached under .cache/vm),
# run the harness tests (pytest -m vm tests/vm), then every molecule scenario.
# Prints how long each phase took. Whatever happens, no guest is left running.
#
# usage: tools/vm_test.sh            (from anywhere; VENV=path overrides .venv)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
venv=${VENV:-$repo/.venv}
[ -x "$venv/bin/python" ] || { echo "vm_test.sh: no virtualenv at $venv: run 'make venv' first" >&2; exit 1; }
# molecule runs ansible-playbook and the verifier from the venv.
export PATH="$venv/bin:$PATH"
export ANSIBLE_COLLECTIONS_PATH=${ANSIBLE_COLLECTIONS_PATH:-$repo/build/collections}
export ANSIBLE_CONFIG=${ANSIBLE_CONFIG:-$repo/ansible.cfg}
# a loaded CI machine boots TCG guests slower than a quiet one: wait long enough before failing
export GPUHOST_VM_BOOT_TIMEOUT="${GPUHOST_VM_BOOT_TIMEOUT:-600}"
vmctl=("$venv/bin/python" "$repo/tests/vm/vmctl.py")

timings=$(mktemp)
export GPUHOST_VM_TIMINGS=$timings
guard() {
    local rc=$?
    # The guard: stop every guest this checkout registered, even after a failure or Ctrl-C.
    "${vmctl[@]}" down --all || true
    echo
    echo "== VM test phases"
    cat "$timings"
    rm -f "$timings"
    exit $rc
}
trap guard EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

phase() {
    local label=$1 start=$SECONDS rc=0
    shift
    echo "== $label"
    "$@" || rc=$?
    printf '%-28s %5d s%s\n' "$label" $((SECONDS - start)) "$([ $rc = 0 ] || echo "  FAILED (exit $rc)")" >>"$timings"
    return $rc
}

phase "SSDT (iasl)" "${vmctl[@]}" build --only ssdt >/dev/null
phase "image build" "${vmctl[@]}" build --only image >/dev/null
phase "QEMU build" "${vmctl[@]}" build --only qemu >/dev/null
# The harness tests record each guest's boot-to-SSH time in $GPUHOST_VM_TIMINGS.
phase "harness tests" "$venv/bin/pytest" -q -m vm tests/vm

if compgen -G "molecule/*/molecule.yml" >/dev/null; then
    # each scenario step's time goes into the phase table too (tests/vm/step_times.py)
    # shellcheck disable=SC2016  # $0/$1 expand in the inner bash, from the arguments after the script
    phase "molecule test --all" bash -o pipefail -c \
        'molecule test --all 2>&1 | "$0" "$1" "$GPUHOST_VM_TIMINGS"' "$venv/bin/python" "$repo/tests/vm/step_times.py"
else
    echo "== no molecule scenarios yet (molecule/*/molecule.yml)"
fi
