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
# promtool, headless chromium, and the VM tool chain.
DEB_TEST_PACKAGES := pciutils numactl linux-cpupower prometheus chromium qemu-system-x86 qemu-utils debootstrap acpica-tools

.PHONY: venv link fixtures audit test test-deps unit integration sanity lint build-check vm-test clean

$(VENV)/.installed: requirements.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $@

venv: $(VENV)/.installed

link:
	@mkdir -p $(dir $(COLL))
	@ln -sfn $(CURDIR) $(COLL)

fixtures: venv link
	$(PY) tools/make_fixtures.py $(SNAPSHOTS)

audit: venv link fixtures
	$(BIN)/ansible-playbook -i inventory/demo playbooks/audit.yml --check -e gpuhost_report_dir=$(REPORT_DIR)
	@echo "Reports: $(REPORT_DIR)/report.html report.md report.json junit.xml metrics.prom"

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

test: test-deps venv link fixtures
	$(BIN)/pytest -q tests
	$(MAKE) --no-print-directory sanity lint build-check

sanity: venv link
	tools/sanity.sh

lint: venv link
	$(BIN)/ansible-lint --offline --profile production playbooks roles

build-check: venv link
	tools/build_check.sh

vm-test: venv link
	tools/vm_test.sh

clean:
	rm -rf build .pytest_cache .hypothesis
