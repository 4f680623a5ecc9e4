#!/usr/bin/env bash
# Build the collection artifact, check what went into it, install it and use the installed copy.
#
#   1. ansible-galaxy collection build into a temporary directory;
#   2. the tarball holds no virtualenv, build output, test or run output (reports, snapshots,
#      logs, molecule state), caches or VM images, and
#      holds every plugin, role, rule, profile, schema and report template of the checkout;
#   3. ansible-galaxy collection install of that tarball into a temporary collections path;
#   4. from a temporary working directory, with no ansible.cfg of the checkout and no other
#      collections path, `ansible localhost -m gpuhost.baseline.host_facts -a gather=kernel`
#      must return kernel facts, baseline_validate must check the catalogue against the installed
#      schemas, baseline_report must render its views from the installed templates, and
#      ansible-doc must render every module (and every role with an argument spec) from the
#      installed copy.
#
# Env: VENV (default .venv), KEEP_BUILD_CHECK=1 keeps the temporary directory.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
venv=${VENV:-.venv}
case $venv in /*) ;; *) venv=$repo/$venv ;; esac
bin=$venv/bin
[ -x "$bin/ansible-galaxy" ] || { echo "build_check.sh: ERROR: $bin/ansible-galaxy not found: create the virtualenv first (make venv)" >&2; exit 2; }

fail() { printf '\nbuild_check.sh: FAILED: %s\n' "$*" >&2; exit 1; }
step() { printf '\n== build_check: %s\n' "$*"; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuhost-build-check.XXXXXX")
collections=$tmp/collections
work=$tmp/cwd
mkdir -p "$work"
if [ "${KEEP_BUILD_CHECK:-}" = 1 ]; then
  echo "build_check.sh: keeping $tmp"
else
  trap 'rm -rf "$tmp"' EXIT
fi

namespace=$("$bin/python" -c 'import yaml,sys; print(yaml.safe_load(open("galaxy.yml"))["namespace"])')
name=$("$bin/python" -c 'import yaml,sys; print(yaml.safe_load(open("galaxy.yml"))["name"])')
version=$("$bin/python" -c 'import yaml,sys; print(yaml.safe_load(open("galaxy.yml"))["version"])')
fqcn=$namespace.$name

# ---------------------------------------------------------------------------------------
step "build $fqcn $version"
"$bin/ansible-galaxy" collection build --force --output-path "$tmp/dist" "$repo" \
  || fail "ansible-galaxy collection build failed (see above)"
tarball=$tmp/dist/$namespace-$name-$version.tar.gz
[ -f "$tarball" ] || fail "expected $tarball, found: $(ls "$tmp/dist")"
echo "artifact: $(basename "$tarball"), $(du -k "$tarball" | cut -f1) KiB"

# ---------------------------------------------------------------------------------------
step "check the artifact's contents"
tar -tzf "$tarball" | sed -e 's#^\./##' -e 's#/$##' | sort > "$tmp/contents.txt"
# Things galaxy.yml build_ignore (and ansible-galaxy's defaults) must keep out.
# Top level: virtualenv, build/VM output, run output (reports and snapshots written where
# ansible-playbook ran), development-only content (docs/development.md, "What the collection tarball
# holds"). Any depth: tool caches, molecule state. Any file: logs, VM images,
# tarballs, editor leftovers.
unwanted='^(\.venv|\.cache|\.ansible|build|\.ci|tests|tools|benchmarks|molecule|Makefile|ansible\.cfg|pytest\.ini|requirements-test\.(txt|in)|changelogs/fragments|gpuhost-demo|\.git|ansible_collections|reports|gpuhost-reports|gpuhost-snapshots|\.idea|\.vscode|changelogs/\.plugin-cache\.yaml)(/|$)|(^|/)(__pycache__|\.pytest_cache|\.hypothesis|\.ruff_cache|\.mypy_cache|\.tox|\.nox)(/|$)|^molecule/[^/]+/\.molecule(/|$)|\.(pyc|qcow2|img|iso|tar\.gz|retry|log|swp)$|~$'
if grep -E "$unwanted" "$tmp/contents.txt" > "$tmp/unwanted.txt"; then
  head -n 40 "$tmp/unwanted.txt" >&2
  fail "the artifact holds $(wc -l < "$tmp/unwanted.txt") unwanted paths (above): extend build_ignore in galaxy.yml"
fi
for required in MANIFEST.json FILES.json meta/runtime.yml meta/execution-environment.yml requirements.txt LICENSE; do
  grep -qx "$required" "$tmp/contents.txt" || fail "the artifact lacks $required"
done
# Every plugin and role of the checkout must ship (a too-wide build_ignore would drop them).
missing=0
while IFS= read -r -d '' f; do
  rel=${f#./}
  if ! grep -qxF "$rel" "$tmp/contents.txt"; then
    echo "missing from the artifact: $rel" >&2
    missing=$((missing + 1))
  fi
done < <(find plugins roles meta rules profiles schemas templates -type f ! -name '*.pyc' ! -path '*/__pycache__/*' -print0)
[ "$missing" -eq 0 ] || fail "$missing plugin/role/catalogue/schema/template files of the checkout are not in the artifact"
echo "$(wc -l < "$tmp/contents.txt") entries; no venv, build output, test or run output, caches, logs or VM images"

# ---------------------------------------------------------------------------------------
# Run everything against the installed copy only: a working directory outside the checkout
# (no ./ansible.cfg, no adjacent ansible_collections), no ANSIBLE_CONFIG, and no collections
# found on sys.path (site-packages) or through the checkout's build/collections link.
installed_env() {
  (cd "$work" && env -u ANSIBLE_CONFIG -u ANSIBLE_COLLECTIONS_PATHS \
      ANSIBLE_COLLECTIONS_PATH="$collections" \
      ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false \
      ANSIBLE_LOCALHOST_WARNING=false \
      ANSIBLE_INVENTORY_UNPARSED_WARNING=false \
      ANSIBLE_NOCOLOR=1 \
      PATH="$bin:$PATH" "$@")
}

# ---------------------------------------------------------------------------------------
step "install the artifact into a temporary collections path"
installed_env "$bin/ansible-galaxy" collection install --offline --force -p "$collections" "$tarball" \
  || fail "ansible-galaxy collection install of $(basename "$tarball") failed (see above)"
installed=$collections/ansible_collections/$namespace/$name
[ -f "$installed/MANIFEST.json" ] || fail "no MANIFEST.json under $installed after install"

# ---------------------------------------------------------------------------------------
step "run $fqcn.host_facts from the installed copy"
set +e
# One-line output: "localhost | SUCCESS => {json}" (the json callback is no longer in core).
installed_env "$bin/ansible" localhost --one-line -m "$fqcn.host_facts" -a gather=kernel > "$tmp/adhoc.txt" 2> "$tmp/adhoc.err"
rc=$?
set -e
"$bin/python" - "$tmp/adhoc.txt" "$rc" "$installed" <<'EOF' || { cat "$tmp/adhoc.err" >&2; fail "the module call from the installed copy did not give kernel facts"; }
import json, sys
path, rc, installed = sys.argv[1], int(sys.argv[2]), sys.argv[3]
raw = open(path).read()
try:
    head, sep, body = raw.partition(' => ')
    if not sep or not head.startswith('localhost |'):
        raise ValueError('no "localhost | STATUS => " line')
    result = json.loads(body)
except ValueError as exc:
    sys.exit('cannot read the ad-hoc JSON result (%s); ansible exit %d; output starts: %r' % (exc, rc, raw[:800]))
if rc != 0 or result.get('failed') or result.get('unreachable'):
    sys.exit('host_facts failed (ansible exit %d): %s' % (rc, result.get('msg') or json.dumps(result)[:2000]))
facts = result.get('ansible_facts', {}).get('gpuhost')
if not isinstance(facts, dict):
    sys.exit('no ansible_facts.gpuhost in the result: %s' % json.dumps(result)[:2000])
if 'schema' not in facts or not isinstance(facts.get('kernel'), dict):
    sys.exit('ansible_facts.gpuhost lacks schema or kernel: keys %s' % sorted(facts))
release = facts['kernel'].get('release')
if not release:
    sys.exit('kernel.release is empty: %s' % json.dumps(facts['kernel'])[:1000])
print('host_facts from the installed copy: schema %s, kernel.release %s, %d error(s) recorded'
      % (facts['schema'], release, len(facts.get('errors') or [])))
EOF

# ---------------------------------------------------------------------------------------
step "validate the catalogue (schemas) and write reports (templates) with the installed copy"
cat > "$work/report.yml" <<'EOF'
- name: Installed catalogue schemas and report templates
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Validate the bundled catalogue against the installed schemas
      gpuhost.baseline.baseline_validate: {}
    - name: Write reports from the installed templates
      gpuhost.baseline.baseline_report:
        report_dir: "{{ out_dir }}"
        hosts:
          gpu01:
            findings:
              - {id: NUMA-001, status: fail, expected: 0, observed: 1, message: "<b>numa_balancing</b> is 1"}
EOF
installed_env "$bin/ansible-playbook" -i localhost, "$work/report.yml" -e "out_dir=$tmp/reports" > "$tmp/report-play.txt" 2>&1 \
  || { tail -n 30 "$tmp/report-play.txt" >&2; fail "baseline_validate/baseline_report from the installed copy failed"; }
if ! grep -q 'GPU host baseline report' "$tmp/reports/report.html" \
    || ! grep -q '&lt;b&gt;numa_balancing' "$tmp/reports/report.html" \
    || ! grep -q '^# GPU host baseline report' "$tmp/reports/report.md"; then
  fail "the installed copy did not render report.html/report.md from its templates (escaped)"
fi
echo "catalogue valid against the installed schemas; report.html and report.md rendered from the installed templates"

# ---------------------------------------------------------------------------------------
step "ansible-doc renders every module (and role argument spec) from the installed copy"
doc_failures=0
check_doc() {  # check_doc <type> <fqcn>
  local type=$1 plugin=$2 out=$tmp/doc-$2.txt json=$tmp/doc-$2.json
  if ! installed_env "$bin/ansible-doc" -t "$type" "$plugin" > "$out" 2>&1 \
      || grep -qE '^(\[WARNING\]|\[ERROR\]|ERROR)' "$out" || [ "$(wc -l < "$out")" -lt 5 ]; then
    echo "ansible-doc -t $type $plugin failed:" >&2; sed -n '1,30p' "$out" >&2
    doc_failures=$((doc_failures + 1)); return
  fi
  # The rendered documentation must come from the installed copy, not the checkout.
  if ! installed_env "$bin/ansible-doc" -t "$type" --json "$plugin" > "$json" 2>/dev/null \
      || ! "$bin/python" - "$json" "$plugin" "$installed" <<'EOF'
import json, sys
path, plugin, installed = sys.argv[1:4]
entry = json.load(open(path)).get(plugin) or {}
filename = (entry.get('doc') or {}).get('filename') or entry.get('path') or ''
if filename and not filename.startswith(installed):
    sys.exit('%s documentation read from %s, not from the installed copy %s' % (plugin, filename, installed))
EOF
  then
    doc_failures=$((doc_failures + 1)); return
  fi
  printf '  %-45s %4d lines\n' "$plugin ($type)" "$(wc -l < "$out")"
}
modules=0
for f in "$installed"/plugins/modules/*.py; do
  [ -e "$f" ] || continue
  m=$(basename "$f" .py)
  case $m in __init__) continue ;; esac
  check_doc module "$fqcn.$m"; modules=$((modules + 1))
done
[ "$modules" -gt 0 ] || fail "no modules under $installed/plugins/modules"
for spec in "$installed"/roles/*/meta/argument_specs.y*ml; do
  [ -e "$spec" ] || continue
  role=$(basename "$(dirname "$(dirname "$spec")")")
  check_doc role "$fqcn.$role"
done
[ "$doc_failures" -eq 0 ] || fail "ansible-doc failed for $doc_failures plugin(s) (see above)"

printf '\nbuild_check.sh: OK: %s built, installed and used from %s\n' "$(basename "$tarball")" "$collections"
