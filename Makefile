# gpuhost.baseline: one entry point for set-up, the demo audit and the tests.
# `make audit` and `make test` are the two commands of the README.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(CURDIR)/$(VENV)/bin
COLL_ROOT := $(CURDIR)/build/collections
COLL := $(COLL_ROOT)/ansible_collections/gpuhost/baseline
SNAPSHOTS := $(CURDIR)/build/snapshots
REPORT_DIR ?= $(CURDIR)/build/reports
export ANSIBLE_COLLECTIONS_PATH := $(COLL_ROOT)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(BIN):$(PATH)
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# Debian packages the tests use: lspci/setpci (reference decoder), numastat, cpupower,
# promtool, prometheus and node_exporter (the Grafana dashboard test), headless chromium and
# poppler-utils (report.html on screen and printed to PDF: pdftotext, pdftoppm), the VM
# tool chain, shellcheck (ansible-test sanity skips its shellcheck test without it; tools/sanity.sh
# refuses to run then), and python3-venv (Debian's python3 has no ensurepip without it;
# tools/get_pip_standin.py and `python3 -m venv` need it).
# munge, slurmctld, slurmd and slurm-client: tests/integration/test_slurm_action.py starts its own
# munged, slurmctld and slurmd with its own config, ports, socket and key (it uses no service the
# packages may enable on a systemd host, and changes none).
# openssh-server: tests/integration/test_live_benchmark.py starts its own sshd on 127.0.0.1 with its own config
# and keys (benchmarks/live.py, the audit over real SSH); the package's own service is not used.
DEB_TEST_PACKAGES := python3-venv shellcheck pciutils numactl linux-cpupower prometheus prometheus-node-exporter chromium qemu-system-x86 qemu-utils debootstrap acpica-tools jq munge slurmctld slurmd slurm-client mbw sqlite3 poppler-utils openssh-server

MATRIX := 2.16 2.17 2.18 2.20 2.21

.PHONY: lock matrix venv link fixtures audit test test-deps unit integration gates sanity lint changelog-lint docs-lint build-check vm-test clean

# requirements-test.txt is the lock (`make lock` writes it from requirements-test.in, which includes
# requirements.txt): every package pinned exactly, with hashes; the venv is installed from it alone
# (pip --require-hashes, --no-deps: nothing is resolved on the day of the install). A change of the
# lock redoes the install.
$(VENV)/.installed: requirements-test.txt
	@# Debian's own python3 has no ensurepip without python3-venv: install it when we can.
	@python3 -m venv --help >/dev/null 2>&1 && python3 -c 'import ensurepip' 2>/dev/null || \
	  { [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null && apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; } || true
	rm -rf $(VENV)
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --require-hashes --no-deps -r requirements-test.txt
	touch $@

venv: $(VENV)/.installed

# Regenerate every lock from its input (tools/lock.sh): requirements-test.txt and the ansible-core
# matrix's tests/matrix/ansible-core-X.Y.txt. `make lock ARGS=--upgrade` moves every package to the
# newest version its input allows.
lock: venv
	tools/lock.sh $(ARGS)

# The link is committed (relative, so any clone has it: ansible-lint and ansible-playbook find
# gpuhost.baseline.* in a plain clone); this puts it back where it is missing.
link:
	@mkdir -p $(dir $(COLL))
	@[ "$$(readlink $(COLL))" = ../../../.. ] || ln -sfn ../../../.. $(COLL)

fixtures: venv link
	$(PY) tools/make_fixtures.py $(SNAPSHOTS)

audit: venv link fixtures
	$(BIN)/ansible-playbook -i inventory/demo playbooks/audit.yml --check -e gpuhost_report_dir=$(REPORT_DIR)
	@echo "Reports: $(REPORT_DIR)/report.html report.md report.json findings.csv junit.xml metrics.prom"

test-deps:
	@missing=""; for p in $(DEB_TEST_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

unit: venv link
	$(BIN)/pytest -q tests/unit

integration: venv link fixtures
	$(BIN)/pytest -q tests/integration

# `make test`: Debian packages, venv, fixtures, every test, then every quality gate.
# "=== phase: NAME [epoch]" lines mark where each phase starts; .ci/run turns them into timings.
phase = @echo "=== phase: $(1) [$$(date +%s)]"

test: test-deps venv link fixtures
	$(call phase,pytest)
	@# The gates run even when pytest failed, so one run reports everything; -k runs every
	@# gate even after one fails. pytest's exit status wins when both failed.
	@$(BIN)/pytest -q tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then \
	  echo "make test: ERROR: pytest collected no tests (exit 5): tests/ is empty or its collection broke" >&2; \
	elif [ $$rc -ne 0 ]; then \
	  echo "make test: pytest failed (exit $$rc)" >&2; \
	fi; \
	$(MAKE) --no-print-directory -k gates; gates=$$?; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; exit $$gates

gates: sanity lint changelog-lint build-check docs-lint matrix

# The ansible-core support matrix (tools/matrix.sh): the demo, the golden audit, remediate --check
# --diff, learn, ansible-doc and ansible-test sanity under every version of MATRIX (2.19 is the main
# suite's); 2.20 and later in a Debian 13 chroot (Python 3.13).
matrix: venv link fixtures
	$(call phase,matrix)
	MATRIX="$(MATRIX)" tools/matrix.sh

sanity: venv link
	$(call phase,sanity)
	tools/sanity.sh

# The whole collection (playbooks, roles, rules, profiles, inventory, changelogs); see .ansible-lint.
lint: venv link
	$(call phase,lint)
	$(BIN)/ansible-lint --offline --profile production

changelog-lint: venv
	$(call phase,changelog-lint)
	$(BIN)/antsibull-changelog lint
	$(BIN)/antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml

build-check: venv link
	$(call phase,build-check)
	tools/build_check.sh

# antsibull-docs: every module's and role's documentation (schema, markup, references, the RST
# it renders) and docs/docsite (extra-docs.yml, links.yml, rst/), as the Ansible docsite renders
# them. Run on the build/collections link: antsibull-docs needs an ansible_collections/ path.
docs-lint: venv link
	$(call phase,docs-lint)
	$(BIN)/antsibull-docs lint-collection-docs --plugin-docs --check-extra-docs-refs $(COLL)

vm-test: venv link
	tools/vm_test.sh

clean:
	[ ! -d build ] || find build -mindepth 1 -maxdepth 1 ! -name collections -exec rm -rf {} +
	rm -rf .pytest_cache .hypothesis
