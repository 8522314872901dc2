# gpucluster.fabric developer and CI entry point.
#   make test   — what CI runs: host packages, venv, lab images, lint, unit, sanity, scenario site with the fault
#                 tests, the role scenarios, the version matrix, the qemu lab (docs/ci.md)
#   make lab    — the main job: bring up the local lab and run the site playbook against it
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
VENV ?= $(ROOT)/.venv
PYTHON ?= python3
BIN := $(VENV)/bin
COLLECTIONS := $(ROOT)/.build/collections
COLLECTION_LINK := $(COLLECTIONS)/ansible_collections/gpucluster/fabric
LAB_SUITES ?= bookworm bullseye
LAB_IMAGE_REPO ?= localhost/gpucluster-lab
# Molecule scenarios run on the container lab images; kernel_* scenarios need qemu (make kernel-lab).
CONTAINER_SCENARIOS := $(sort $(filter-out kernel_%,$(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml)))))
# `make molecule` runs SCENARIOS: scenario `site` (every role end to end on a three-container lab, and the fault tests
# on that lab) on SITE_SUITES, the role scenarios on ROLE_SUITES. `make test` (CI: 90 minutes on two cores) runs the
# role scenarios on the first suite (bookworm) and scenario site in `make matrix`, from the installed tarball with the
# newest ansible-core (docs/ci.md). `make molecule-all` runs every scenario on every suite.
SCENARIOS ?= $(CONTAINER_SCENARIOS)
ROLE_SUITES ?= $(firstword $(LAB_SUITES))
SITE_SUITES ?= $(lastword $(LAB_SUITES))

export PATH := $(BIN):$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)
# A project-local Ansible home: a copy of this collection that some tool installed into ~/.ansible would
# otherwise shadow the working tree (ansible-lint puts ~/.ansible/collections first).
export ANSIBLE_HOME := $(ROOT)/.ansible
export ANSIBLE_ROLES_PATH := $(ROOT)/roles
CONTAINER_ULIMITS := $(shell tests/lab/container-ulimits.sh)
export MOLECULE_ULIMIT_NOFILE := $(word 1,$(CONTAINER_ULIMITS))
export MOLECULE_ULIMIT_NPROC := $(word 2,$(CONTAINER_ULIMITS))
export LAB_MEMLOCK_KIB := $(shell tests/lab/memlock-kib.sh)
# What scenario rdma_core asks for (optional there: "unlimited" without it).
export GPUCLUSTER_MOLECULE_MEMLOCK_KIB := $(LAB_MEMLOCK_KIB)
# Part of every Molecule instance name (.config/molecule/config.yml): one per checkout, so that CI runs in two clones
# on this machine never share a container, while a re-run in the same clone removes what an aborted run left.
export GPUCLUSTER_MOLECULE_RUN_ID ?= $(shell printf %s "$(ROOT)" | cksum | cut -d' ' -f1)
# The lab's SSH material (login key pair, host keys, known_hosts; one directory per lab), never committed.
export LAB_SSH_ROOT := $(ROOT)/.build/lab-ssh
LAB_ANSIBLE_CONFIG := $(ROOT)/tests/lab/ansible.cfg

.PHONY: help
help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: host-deps
host-deps:  ## install the Debian packages the harness needs and configure podman (root)
	tests/lab/setup-host.sh

$(VENV)/.stamp: requirements.txt constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -r requirements.txt -c constraints.txt
	touch $@

.PHONY: venv
venv: $(VENV)/.stamp $(COLLECTION_LINK)  ## create the virtual environment from pinned requirements

$(COLLECTION_LINK):
	mkdir -p $(dir $@)
	ln -sfn $(ROOT) $@

.PHONY: images
images: host-deps  ## build (or reuse cached) lab images for LAB_SUITES
	for suite in $(LAB_SUITES); do LAB_IMAGE_REPO=$(LAB_IMAGE_REPO) tests/lab/images/build-image.sh $$suite; done

.PHONY: lint
lint: venv  ## yamllint, ansible-lint (production profile), ruff, Jinja logic <= 200 characters, generated files, release notes, alert rules
	$(BIN)/yamllint --strict .
	$(BIN)/ansible-lint
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python tools/role_docs.py --check
	$(BIN)/python tools/concern_docs.py --check
	$(BIN)/python tools/mlxconfig_catalogue.py --check
	$(BIN)/python tools/bool_uses.py
	$(BIN)/python tools/jinja_logic.py
	$(BIN)/antsibull-changelog lint
	$(BIN)/python tools/release_notes.py --check
	tests/lab/promtool.sh check rules roles/node_check/files/gpucluster-fabric.rules.yml
	tests/lab/promtool.sh test rules tests/prometheus/gpucluster-fabric.test.yml

.PHONY: docs
docs: venv  ## regenerate the variable tables in roles/*/README.md and docs/architecture.md's table of concerns
	$(BIN)/python tools/role_docs.py
	$(BIN)/python tools/concern_docs.py

.PHONY: unit
unit: venv  ## pytest unit tests for plugins and module_utils
	$(BIN)/pytest tests/unit tests/repo

# Each (scenario, suite) pair runs as its own job with its own Molecule ephemeral directory, so that
# MOLECULE_JOBS of them can run at once; each job's output goes to .build/molecule-logs/ and is shown on failure.
# Scenario site, the longest job, starts first; the others run at nice MOLECULE_NICE, so that site, which alone
# does not keep two cores busy, gets the CPU it waits for and the rest fills the gaps.
MOLECULE_JOBS ?= 4
MOLECULE_NICE ?= 10
# Base configs (molecule -c, in order; empty: Molecule's default, .config/molecule/config.yml). By default the role
# scenarios run over SSH (.config/molecule/ssh.yml: Molecule's default driver, containers made by
# molecule/_shared/ssh/create.yml); `make molecule-all` runs them with the podman driver, as users' CI does. make test
# adds .config/molecule/ci.yml: the default test sequence without `check` and `idempotence` (see that file).
MOLECULE_BASE_CONFIGS ?= .config/molecule/config.yml .config/molecule/ssh.yml
MOLECULE_LOGS := $(ROOT)/.build/molecule-logs
MOLECULE_RUNS := $(foreach suite,$(SITE_SUITES),$(if $(filter site,$(SCENARIOS)),molecule-run/site/$(suite))) \
  $(foreach scenario,$(filter-out site,$(SCENARIOS)),$(foreach suite,$(ROLE_SUITES),molecule-run/$(scenario)/$(suite)))

# The lab CUDA apt mirror (tests/lab/mirror) is built once here (cached by recipe); scenarios' prepare starts it too.
.PHONY: mirror
mirror: venv host-deps  ## build (cached) and serve the lab CUDA apt mirror
	tests/lab/mirror/mirror.sh start

.PHONY: molecule
molecule: venv images mirror  ## container scenarios (SCENARIOS=, ROLE_SUITES=, SITE_SUITES=, MOLECULE_JOBS=)
	rm -rf $(MOLECULE_LOGS) && mkdir -p $(MOLECULE_LOGS)
	$(MAKE) --no-print-directory -k -j$(MOLECULE_JOBS) $(MOLECULE_RUNS)

.PHONY: molecule-all
molecule-all:  ## every container scenario on every lab suite (longer than CI allows)
	$(MAKE) --no-print-directory molecule SCENARIOS="$(CONTAINER_SCENARIOS)" ROLE_SUITES="$(LAB_SUITES)" \
	  SITE_SUITES="$(LAB_SUITES)" MOLECULE_BASE_CONFIGS=

.PHONY: site-tests
site-tests: venv images mirror  ## scenario site (site.yml end to end, and the fault tests) on SITE_SUITES
	rm -rf $(MOLECULE_LOGS) && mkdir -p $(MOLECULE_LOGS)
	$(MAKE) --no-print-directory -k -j$(MOLECULE_JOBS) $(foreach suite,$(SITE_SUITES),molecule-run/site/$(suite))

molecule-run/%:
	@scenario=$(word 1,$(subst /, ,$*)); suite=$(word 2,$(subst /, ,$*)); \
	log=$(MOLECULE_LOGS)/$$scenario-$$suite.log; start=$$(date +%s); \
	echo "START molecule test -s $$scenario on $$suite"; \
	nice=""; [ "$$scenario" = site ] || nice="nice -n $(MOLECULE_NICE)"; \
	if MOLECULE_SUITE=$$suite MOLECULE_IMAGE=$(LAB_IMAGE_REPO):$$suite \
	  MOLECULE_EPHEMERAL_DIRECTORY=$(ROOT)/.cache/molecule/$$scenario-$$suite \
	  $$nice $(BIN)/molecule $(foreach config,$(MOLECULE_BASE_CONFIGS),-c $(ROOT)/$(config)) test -s $$scenario >$$log 2>&1; then \
	  echo "PASS  molecule test -s $$scenario on $$suite ($$(( $$(date +%s) - start )) s)"; \
	else \
	  echo "FAIL  molecule test -s $$scenario on $$suite ($$(( $$(date +%s) - start )) s); last lines of $$log:"; \
	  tail -n 120 $$log; $(ROOT)/tests/lab/why-failed.sh "molecule test -s $$scenario on $$suite" $$log; exit 1; \
	fi

KERNEL_SCENARIOS ?= $(sort $(filter kernel_%,$(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml)))))

.PHONY: kernel-lab
kernel-lab: venv  ## real-kernel lab: kernel_* scenarios on qemu VMs (Debian kernel, Soft-RoCE, reboot)
	tests/lab/setup-host.sh --kernel-lab
	for scenario in $(KERNEL_SCENARIOS); do \
	  echo "=== molecule test -s $$scenario (qemu) ==="; $(BIN)/molecule test -s $$scenario; \
	done
	$(MAKE) --no-print-directory kernel-acs

.PHONY: kernel-lab-reduced
kernel-lab-reduced: venv  ## kernel lab without syntax/idempotence (data path and reboot checks kept)
	tests/lab/setup-host.sh --kernel-lab
	mkdir -p $(ROOT)/.build/kernel-lab
	for scenario in $(KERNEL_SCENARIOS); do \
	  start=$$(date +%s); log=$(ROOT)/.build/kernel-lab/$$scenario.log; \
	  echo "START kernel lab (reduced) -s $$scenario ($$log)"; \
	  rc=0; { $(BIN)/molecule create -s $$scenario && $(BIN)/molecule converge -s $$scenario \
	    && $(BIN)/molecule verify -s $$scenario; } >$$log 2>&1 || rc=$$?; \
	  $(BIN)/molecule destroy -s $$scenario >>$$log 2>&1; \
	  if [ $$rc -eq 0 ]; then echo "PASS  kernel lab (reduced) -s $$scenario ($$(( $$(date +%s) - start )) s)"; else \
	    echo "FAIL  kernel lab (reduced) -s $$scenario ($$(( $$(date +%s) - start )) s); last lines of $$log:"; \
	    tail -n 150 $$log; $(ROOT)/tests/lab/why-failed.sh "kernel lab (reduced) -s $$scenario" $$log; exit $$rc; \
	  fi; \
	done
	$(MAKE) --no-print-directory kernel-acs

.PHONY: kernel-acs
kernel-acs:  ## ACS clearing (rdma_modules_acs_clear) through a real kernel's sysfs, on a qemu VM with an IOMMU
	start=$$(date +%s); log=$(ROOT)/.build/kernel-lab/acs_clear.log; mkdir -p $(ROOT)/.build/kernel-lab; \
	echo "START kernel lab: ACS clearing ($$log)"; \
	if tests/lab/kernel/acs_clear.sh >$$log 2>&1; then echo "PASS  kernel lab: ACS clearing ($$(( $$(date +%s) - start )) s)"; \
	else echo "FAIL  kernel lab: ACS clearing; $$log:"; cat $$log; exit 1; fi

.PHONY: build
build: venv  ## build the collection tarball
	$(BIN)/ansible-galaxy collection build --force --output-path $(ROOT)/.build

# The execution environment (tests/lab/ee/): a base image built here with debootstrap, then ansible-builder puts
# ansible-core, ansible-runner, this collection's tarball and its Python requirements on top. `make lab-ee` runs
# gpucluster.fabric.site from inside it with ansible-navigator against the lab `make lab` brought up.
.PHONY: ee
ee: build host-deps  ## build the execution environment image localhost/gpucluster-ee:lab (ansible-builder)
	tests/lab/ee/build-base.sh
	mkdir -p $(ROOT)/.build/ee && cp $(TARBALL) $(ROOT)/.build/ee/gpucluster-fabric.tar.gz
	$(BIN)/ansible-builder build --file tests/lab/ee/execution-environment.yml --context $(ROOT)/.build/ee/context \
	  --container-runtime podman --verbosity 2

.PHONY: lab-ee
lab-ee: ee  ## run gpucluster.fabric.site inside the execution environment (ansible-navigator) against the lab
	tests/lab/ee/run-site.sh

TEST_START := $(shell date +%s)
VERSION := $(shell sed -n 's/^version: *//p' galaxy.yml)
TARBALL := $(ROOT)/.build/gpucluster-fabric-$(VERSION).tar.gz
# Outside the git checkout: ansible-test inside a git work tree only sees files git tracks there.
SANITY_ROOT := $(or $(TMPDIR),/tmp)/gpucluster-fabric-sanity-$(shell echo $(ROOT) | md5sum | cut -c1-8)

# ansible-test on what we ship: the built tarball, installed into a clean path (tests/lab/ansible-test/sanity.sh).
.PHONY: sanity
sanity: build  ## ansible-test sanity on the built collection installed into a clean path
	tests/lab/ansible-test/sanity.sh $(TARBALL) $(SANITY_ROOT) sanity --python 3.11

# The unit tests again, under ansible-test in the installed tarball (CI runs them with pytest on every release of the
# version matrix instead).
.PHONY: units
units: build  ## ansible-test units on the built collection installed into a clean path
	tests/lab/ansible-test/sanity.sh $(TARBALL) $(SANITY_ROOT) units --venv --python 3.11

# Version matrix (README "Support matrix", tests/lab/matrix/matrix.py): every ansible-core release with a lock in
# tests/lab/matrix/ — unit tests, ansible-test sanity and the tarball smoke on each; scenario site from the installed
# tarball on the newer ones (every step on the newest). Releases that need Python >= 3.12 run on a Debian trixie
# controller container (tests/lab/controller/); the oldest runs here, in .venv-core-<version>. The main venv (2.19.14,
# Debian 12's Python 3.11) runs lint, unit, `make sanity`, the role scenarios and `make lab`.
MATRIX_HOST_CORES := $(patsubst tests/lab/matrix/core-%.txt,%,$(shell grep -l '^\# matrix-controller: host' tests/lab/matrix/core-*.txt))
MATRIX_HOST_STAMPS := $(foreach core,$(MATRIX_HOST_CORES),$(ROOT)/.venv-core-$(core)/.stamp)
MATRIX_OUT := $(ROOT)/.build/matrix

$(ROOT)/.venv-core-%/.stamp: tests/lab/matrix/core-%.txt
	rm -rf $(ROOT)/.venv-core-$* && $(PYTHON) -m venv $(ROOT)/.venv-core-$*
	$(ROOT)/.venv-core-$*/bin/pip install --quiet --no-deps -r $<
	touch $@

.PHONY: controller-image
controller-image: host-deps  ## build (or reuse cached) the trixie controller image of the version matrix
	tests/lab/controller/build-image.sh

.PHONY: matrix
MATRIX_JOBS ?= $(MOLECULE_JOBS)
matrix: venv images build mirror controller-image $(MATRIX_HOST_STAMPS)  ## every ansible-core release with a lock (MATRIX_ONLY=<regex> of job titles); checks the README matrix
	nice -n $(MOLECULE_NICE) $(BIN)/python tests/lab/matrix/matrix.py run --out $(MATRIX_OUT) --tarball $(TARBALL) \
	  --jobs $(MATRIX_JOBS) --suites $(LAB_SUITES) $(if $(MATRIX_ONLY),--only "$(MATRIX_ONLY)")
	$(if $(MATRIX_ONLY),,$(BIN)/python tests/lab/matrix/matrix.py readme --check $(MATRIX_OUT)/results.json README.md)

.PHONY: support-matrix
support-matrix: venv  ## write the README support matrix from the last `make matrix` results
	$(BIN)/python tests/lab/matrix/matrix.py readme --write $(MATRIX_OUT)/results.json README.md

.PHONY: tarball-smoke
tarball-smoke: venv images build  ## install the built tarball into a clean path; run FQCN roles and playbooks from it
	tests/lab/tarball-smoke/run.sh $(VENV) $(TARBALL) $(ROOT)/.build/tarball-smoke $(LAB_SUITES)

# make test's scenarios and version matrix at once: the role scenarios (`make molecule`) and `make matrix`, which runs
# scenario site (every step, the fault tests included) with the newest ansible-core. CI leaves out the scenarios whose
# checks run anyway: site (in the matrix), rdma_core (the role and its checks run in the tarball smoke of every release,
# and in scenario site), fabric_interfaces_ifupdown (scenario site persists its interfaces with ifupdown) and default
# (site.yml's syntax check, which scenario site's `syntax` step makes from the installed tarball). Of the other
# fabric_interfaces backends CI runs netplan (Ubuntu's, rendered to systemd-networkd, whose files its test reads);
# fabric_interfaces_networkd and _networkmanager run in `make molecule-all` (before a release, and after a change to
# their backend). `make molecule-all` runs every scenario on every suite.
CI_SKIPPED_SCENARIOS := site rdma_core fabric_interfaces_ifupdown default fabric_interfaces_networkd \
  fabric_interfaces_networkmanager
CI_SCENARIOS := $(filter-out $(CI_SKIPPED_SCENARIOS),$(CONTAINER_SCENARIOS))
.PHONY: scenarios
scenarios: venv images mirror build controller-image $(MATRIX_HOST_STAMPS)
	$(MAKE) --no-print-directory -k -j2 molecule matrix SCENARIOS="$(CI_SCENARIOS)" MOLECULE_JOBS=2 MATRIX_JOBS=3 \
	  MOLECULE_BASE_CONFIGS=".config/molecule/config.yml .config/molecule/ci.yml .config/molecule/ssh.yml"

# make test runs its phases one after the other and prints how long each took (also on failure). The unit tests run in
# `make scenarios`, on every release of the version matrix (`make unit` runs them on the main venv).
TEST_PHASES := new-machine-ci host-deps venv images lint build sanity scenarios kernel-lab-reduced
TEST_TIMINGS := $(ROOT)/.build/test-timings.txt
# What each failed run's log says of why (tests/lab/why-failed.sh writes it; make test prints it last on failure).
TEST_FAILURES := $(ROOT)/.build/test-failures.txt
.PHONY: test
test:  ## the test suite (what CI runs), with per-phase timings
	@mkdir -p $(dir $(TEST_TIMINGS)) && : >$(TEST_TIMINGS) && rm -f $(TEST_FAILURES); \
	for phase in $(TEST_PHASES); do \
	  start=$$(date +%s); echo "=== make test: phase $$phase ($$(date -u +%H:%M:%S) UTC)"; rc=0; \
	  $(MAKE) --no-print-directory $$phase || rc=$$?; \
	  printf '%-20s %6s s  %s\n' "$$phase" "$$(( $$(date +%s) - start ))" "$$([ $$rc -eq 0 ] && echo passed || echo FAILED)" \
	    >>$(TEST_TIMINGS); \
	  if [ $$rc -ne 0 ]; then echo "make test: phase timings"; cat $(TEST_TIMINGS); \
	    if [ -s $(TEST_FAILURES) ]; then echo "make test: why (tests/lab/why-failed.sh)"; cat $(TEST_FAILURES); fi; \
	    exit $$rc; fi; \
	done; \
	echo "make test: phase timings"; cat $(TEST_TIMINGS)
	@echo "make test: all passed in $$(( $$(date +%s) - $(TEST_START) )) s"

.PHONY: lab
LAB_SUITE ?= bookworm
export LAB_SUITE
export LAB_REPORT_DIR := $(ROOT)/reports
lab: venv host-deps  ## the main job: bring up the lab (LAB_SUITE=bookworm) and run the site playbook against it
	LAB_IMAGE_REPO=$(LAB_IMAGE_REPO) tests/lab/images/build-image.sh $(LAB_SUITE)
	ANSIBLE_CONFIG=$(LAB_ANSIBLE_CONFIG) $(BIN)/ansible-playbook -i inventories/lab tests/lab/playbooks/lab_up.yml
	ANSIBLE_CONFIG=$(LAB_ANSIBLE_CONFIG) $(BIN)/ansible-playbook -i inventories/lab playbooks/site.yml
	@report=$$(ls -td $(LAB_REPORT_DIR)/*/ | head -n1); echo; echo "Validation report: $${report}summary.md"; \
	  $(BIN)/python -c 'import json, sys; r = json.load(open(sys.argv[1])); s = r["summary"]; \
	    print("Tiers: %s: %d passed, %d failed, %d skipped (%d checks; skipped means not measured)" \
	          % (", ".join(r["tiers"]), s["passed"], s["failed"], s["skipped"], s["total"]))' $${report}report.json

# What a new machine's first `make lab` meets, made again here: tests/lab/new-machine.sh removes the lab's containers,
# networks, images, mirror and podman's default bridge, then runs `make lab` twice and `make lab-down` in a fresh clone.
.PHONY: new-machine
new-machine:  ## remove what a first `make lab` could depend on; then `make lab` (twice) in a fresh clone of HEAD
	tests/lab/new-machine.sh $(ROOT)

# make test's form of it: the lab images kept (they hold no address), no re-run (scenario site proves idempotence).
.PHONY: new-machine-ci
new-machine-ci:
	NEW_MACHINE_KEEP_IMAGES=1 NEW_MACHINE_NO_RERUN=1 tests/lab/new-machine.sh $(ROOT)

.PHONY: lab-down
lab-down: venv  ## tear the lab down
	ANSIBLE_CONFIG=$(LAB_ANSIBLE_CONFIG) $(BIN)/ansible-playbook -i inventories/lab tests/lab/playbooks/lab_down.yml

.PHONY: bench-site
bench-site: venv host-deps mirror  ## benchmark site.yml against the blog's script on 1-32 lab nodes (BENCH_ARGS=...)
	LAB_IMAGE_REPO=$(LAB_IMAGE_REPO) tests/lab/images/build-image.sh $(LAB_SUITE)
	$(BIN)/python tests/bench/site_bench.py $(BENCH_ARGS)

.PHONY: bench-opensm
bench-opensm: venv host-deps  ## benchmark partitions rendering, OpenSM and the node check's isolation on 1,000 ibsim HCAs
	LAB_IMAGE_REPO=$(LAB_IMAGE_REPO) tests/lab/images/build-image.sh $(LAB_SUITE)
	LAB_IMAGE_REPO=$(LAB_IMAGE_REPO) LAB_SUITE=$(LAB_SUITE) tests/bench/opensm_bench.sh $(BENCH_ARGS)

.PHONY: clean
clean:  ## remove the venvs and build outputs (lab images stay cached in podman)
	rm -rf $(VENV) $(ROOT)/.venv-core-* $(ROOT)/.build
