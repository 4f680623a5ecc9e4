#!/usr/bin/env bash
# VM tests: build the guest images (bookworm, bullseye) and the patched QEMU (cached under .cache/vm),
# run the harness tests (pytest -m vm tests/vm), then each molecule scenario.
# Prints how long each phase took, once, at the end. Whatever happens, no guest is left running.
#
# usage: tools/vm_test.sh            (from anywhere; VENV=path overrides .venv)
#
# A phase that runs long (debootstrap, the QEMU build, boots, scenarios) says
# "== <phase>: still running, N s" every GPUHOST_PROGRESS_SECONDS (default 50) seconds,
# so a log never goes quiet for a minute.
#
# Sourcing the file defines the functions without running anything (tests/unit/tools).
set -euo pipefail

progress_every=${GPUHOST_PROGRESS_SECONDS:-50}
ticker_pid=
bg_pid='' bg_label='' bg_out=''
# The progress lines go to the script's own stdout, also for a phase whose output is thrown away
# (`phase "image build" ... >/dev/null` redirects the ticker along with the command).
exec {progress_out}>&1
timings=${timings:-}

# ticker LABEL: print a progress line every $progress_every s until killed or until the script
# that started it ($$) is gone. It sleeps with bash's own `read -t` on a pipe nobody writes to,
# not with sleep(1): no child process exists that could outlive it.
ticker() {
    local label=$1 start=$SECONDS nap
    exec {nap}<> <(:)
    while :; do
        read -r -t "$progress_every" -u "$nap" || true
        kill -0 "$$" 2>/dev/null || exit 0
        echo "== $label: still running, $((SECONDS - start)) s" >&"$progress_out"
    done
}

stop_ticker() {
    if [ -n "$ticker_pid" ]; then
        kill "$ticker_pid" 2>/dev/null || true
        wait "$ticker_pid" 2>/dev/null || true
        ticker_pid=
    fi
}

# phase LABEL COMMAND...: run COMMAND with a progress ticker and add a row to the phase table
# ($timings). Rows the command writes to $GPUHOST_VM_TIMINGS (the harness tests' boot times,
# step_times.py's scenario steps) follow the phase's own row, indented.
phase() {
    local label=$1 start=$SECONDS rc=0 rows outer=${GPUHOST_VM_TIMINGS:-}
    shift
    echo "== $label" >&"$progress_out"
    # beside the phase table, so whoever removes the table (the guard, a test's directory) removes it
    # too, also when the script is killed before the rm below
    rows=$(mktemp "$timings.rows.XXXXXX")
    export GPUHOST_VM_TIMINGS=$rows
    ticker "$label" &
    ticker_pid=$!
    "$@" || rc=$?
    stop_ticker
    GPUHOST_VM_TIMINGS=$outer
    printf '%-28s %5d s%s\n' "$label" $((SECONDS - start)) "$([ $rc = 0 ] || echo "  FAILED (exit $rc)")" >>"$timings"
    sed 's/^/  /' "$rows" >>"$timings"
    rm -f "$rows"
    return $rc
}

# background LABEL COMMAND...: start COMMAND beside the phases that follow (the QEMU build, CPU-bound
# ninja, beside the image builds, mostly debootstrap waiting on the network and the disk). It runs in
# a session of its own, so its process group is $bg_pid and the guard can kill it with every child
# (vmctl.py, build_qemu.sh, ninja, the compilers); Ctrl-C reaches only the foreground. Its output
# (stdout and stderr) is held in a file that wait_background prints, so it does not interleave with
# the image builds' output. A non-interactive shell never makes a background child a process-group
# leader, so setsid(1) does not fork: $! is the new session's (and group's) id.
background() {
    bg_label=$1
    shift
    bg_out=$(mktemp "$timings.bg.XXXXXX")
    echo "== $bg_label: started in the background" >&"$progress_out"
    # shellcheck disable=SC2016  # expanded by the inner bash
    setsid bash -c 'start=$SECONDS; rc=0; "${@:2}" || rc=$?; echo "$((SECONDS - start)) $rc" >"$1"; exit $rc' \
        background "$bg_out.done" "$@" >"$bg_out" 2>&1 </dev/null {progress_out}>&- &
    bg_pid=$!
}

# wait_background: wait for the background command (run as a phase: the wait has a ticker and a row),
# print its output, and add its own row, the seconds it ran from start to end (overlapping the rows
# of the phases it ran beside), above the wait's row. Returns its exit status.
wait_background() {
    local rc=0 seconds status
    wait "$bg_pid" || rc=$?
    bg_pid=
    cat "$bg_out"
    read -r seconds status <"$bg_out.done" 2>/dev/null || { seconds=0 status=$rc; }
    printf '%-28s %5d s%s\n' "$bg_label (background)" "$seconds" "$([ "$status" = 0 ] || echo "  FAILED (exit $status)")" >>"$timings"
    rm -f "$bg_out" "$bg_out.done"
    return $rc
}

# stop_background: the guard's part: TERM the background command's whole process group, KILL what
# is left after 10 s.
stop_background() {
    [ -n "$bg_pid" ] || return 0
    kill -TERM -- "-$bg_pid" 2>/dev/null || kill -TERM "$bg_pid" 2>/dev/null || true
    local _
    for _ in $(seq 1 100); do
        kill -0 -- "-$bg_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL -- "-$bg_pid" 2>/dev/null || true
    wait "$bg_pid" 2>/dev/null || true
    echo "== $bg_label: stopped (it was still running in the background)"
    bg_pid=
}

# run_scenario NAME: `molecule test` of molecule/NAME, its output through step_times.py.
#   MOLECULE_GLOB names the one scenario: molecule's default glob (molecule/*/molecule.yml) makes it
#     look for a scenario called "default" on every run (shared state), and there is none here, so it
#     logged "CRITICAL 'molecule/default/molecule.yml' glob failed. Exiting." and carried on. With a
#     glob that has no '*', the default lookup resolves to this scenario and finds it (unused:
#     no scenario sets shared_state). It also stops the "should migrate to extensions/molecule"
#     warning molecule gives in a collection root.
#   MOLECULE_EPHEMERAL_DIRECTORY keeps molecule's working files (state, inventory, the guest's
#     overlay, reports) in build/molecule/NAME instead of ~/.ansible/tmp/molecule.<hash>.NAME.
run_scenario() {
    local name=$1
    MOLECULE_GLOB="molecule/$name/molecule.yml" MOLECULE_EPHEMERAL_DIRECTORY="$repo/build/molecule/$name" \
        molecule test -s "$name" 2>&1 | "$venv/bin/python" "$repo/tests/vm/step_times.py" "$GPUHOST_VM_TIMINGS"
}

guard() {
    local rc=$?
    stop_ticker
    stop_background
    # The guard: stop every guest this checkout registered, even after a failure or Ctrl-C.
    "${vmctl[@]}" down --all || true
    echo
    echo "== VM test phases"
    cat "$timings"
    rm -f "$timings" "$timings".rows.* "$timings".bg.*
    exit $rc
}

main() {
    repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    cd "$repo"
    venv=${VENV:-$repo/.venv}
    [ -x "$venv/bin/python" ] || { echo "vm_test.sh: no virtualenv at $venv: run 'make venv' first" >&2; exit 1; }
    # molecule runs ansible-playbook and the verifier from the venv.
    export PATH="$venv/bin:$PATH"
    export ANSIBLE_COLLECTIONS_PATH=${ANSIBLE_COLLECTIONS_PATH:-$repo/build/collections}
    export ANSIBLE_CONFIG=${ANSIBLE_CONFIG:-$repo/ansible.cfg}
    # Ansible's local temporary files (ansible-local-*) stay in the checkout too.
    export ANSIBLE_LOCAL_TEMP=${ANSIBLE_LOCAL_TEMP:-$repo/build/ansible-tmp}
    # a loaded CI machine boots TCG guests slower than a quiet one: wait long enough before failing
    export GPUHOST_VM_BOOT_TIMEOUT="${GPUHOST_VM_BOOT_TIMEOUT:-600}"
    vmctl=("$venv/bin/python" "$repo/tests/vm/vmctl.py")

    timings=$(mktemp)
    trap guard EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM

    phase "SSDT (iasl)" "${vmctl[@]}" build --only ssdt >/dev/null
    # QEMU (ninja: CPU) builds beside the two images (debootstrap: mostly network and disk waits);
    # vmctl.py builds each component into a temporary name under its own lock, so they do not meet.
    # Its JSON on stdout is thrown away as before; its progress (stderr) is printed when it is waited for.
    background "QEMU build" bash -c '"$@" >/dev/null' vmctl "${vmctl[@]}" build --only qemu
    phase "image build" "${vmctl[@]}" build --only image >/dev/null
    # the Debian 11 guest of molecule/self_audit_debian11 (Python 3.9, kernel 5.10)
    phase "image build (bullseye)" "${vmctl[@]}" build --only image-bullseye >/dev/null
    phase "QEMU build: wait" wait_background
    # The harness tests record each guest's boot-to-SSH time in $GPUHOST_VM_TIMINGS.
    phase "harness tests" "$venv/bin/pytest" -q -m vm tests/vm

    local file name failed=0
    for file in molecule/*/molecule.yml; do
        [ -f "$file" ] || { echo "== no molecule scenarios (molecule/*/molecule.yml)"; break; }
        name=$(basename "$(dirname "$file")")
        # Every scenario runs, each from destroy to destroy, even after one failed.
        phase "molecule $name" run_scenario "$name" || failed=1
    done
    return $failed
}

# `return` works only in a sourced file: sourced, define the functions and stop here.
if ! (return 0 2>/dev/null); then
    main "$@"
fi
