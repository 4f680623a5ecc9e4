#!/bin/sh
# An nvidia-smi that never answers (issue 40): the side effect puts it first in the self-audit
# service's PATH (/usr/local/sbin) for one run; test_self_audit_hung_tool.py runs the bundle with it
# locally first. Like a wedged driver it writes nothing and never exits, and it leaves a child in a
# session of its own holding its stdout (tests/integration/test_hung_tool.py's HUNG_SMI).
# $GPUHOST_TEST_HUNG (default /run/gpuhost-test-hung-smi, writable under ProtectSystem=full) gets
#   pids   its own pid and the child's;
#   ended  when the child was gone (date +%s.%N), noted by a watcher that holds no pipe of the tool, in
#          a session of its own, so the runner leaves it alone; it exits once it has noted it. The runner
#          must end the child at nvidia-smi's bound, before the run writes its textfile; systemd would
#          end what is left only after the run, and the watcher with it (no ended file).
dir=${GPUHOST_TEST_HUNG:-/run/gpuhost-test-hung-smi}
echo $$ >> "$dir/pids"
# shellcheck disable=SC2016 # the single-quoted $$, $1 and $2 are the child shell's, expanded there
setsid sh -c 'echo $$ >> "$1/pids"; exec sleep 3607' hung "$dir" &
# shellcheck disable=SC2016 # the single-quoted $$, $1 and $2 are the child shell's, expanded there
setsid sh -c 'while s=$(cut -d" " -f3 "/proc/$1/stat" 2>/dev/null) && [ "$s" != Z ]; do sleep 0.05; done
date +%s.%N > "$2/ended"' watch "$!" "$dir" </dev/null >/dev/null 2>&1 &
exec sleep 3607
