# SQLite Production Lab. `make` alone lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# Python keeps its compiled bytecode (__pycache__/) for everything make starts: with
# PYTHONDONTWRITEBYTECODE set (some images set it), every Locust process, kernel and pytest
# worker would compile its imports again (seconds each; pytest's assertion rewriting too).
unexport PYTHONDONTWRITEBYTECODE

VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := .setup
KERNEL := sqlitelab
# Every Python dependency at an exact version and hash (`make lock` refreshes it from
# pyproject.toml); installed with uv from PyPI when it can be, pip otherwise.
LOCK   := requirements.lock
UV_VERSION := 0.13.9
UV     := $(VENV)/bin/uv
LAB_PORT ?= 8888
# pytest-xdist workers for the fast tier: one per CPU, at most 4 (each collects the suite).
FAST_WORKERS ?= $(shell n=$$(nproc); echo $$(( n < 4 ? n : 4 )))
# ... and for the contract and notebook tiers, one more: their tests wait on servers' and
# kernels' start-ups and on Ruby's stalls more than they compute (on 2 CPUs, 3 workers ran the
# tiers in 273.5 s with 1.77 CPUs busy, where 2 had taken 347.5 s; 2026-11-28). The
# harness tier measures under load, its server and generator each on a CPU: one process.
SHARED_WORKERS ?= $(shell echo $$(( $(FAST_WORKERS) + 1 )))
BROWSE_PORT ?= 8001
SCALE ?= quick  # make report: the scale whose newest runs it reports
# Debian packages the lab needs (Ruby, Puma, the sqlite3 gem and Rails 6.1: no RubyGems here; util-linux's
# fincore for page-cache shares; strace for notebook 04's sync counts and slow-storage emulation;
# wrk, the reference client the load generators are calibrated and cross-checked against;
# chromium, the browser the JupyterLab test drives through Playwright; iproute2 for network
# namespaces, openssh-client for the ssh runner; openssh-server: see $(STAMP)/sshd; PostgreSQL 15
# and Ruby's pg gem for the Postgres backend of issue 15).
APT_PACKAGES := ruby puma ruby-sqlite3 ruby-rack ruby-rails util-linux strace wrk chromium iproute2 \
                openssh-client postgresql ruby-pg fuse3

# What the lab keeps for this machine rather than for one clone (sqlitelab/core/config.py says
# where): oha's build below, cargo's build directory of rust-axum, the generators' calibrations.
# A fresh clone on a machine that ran the set-up before compiles and calibrates none of them again.
MACHINE_CACHE := $(shell python3 -c 'import runpy; print(runpy.run_path("sqlitelab/core/config.py")["MACHINE_CACHE"])')

# hey's and oha's versions, as sqlitelab/load/hey.py and oha.py name them (their builds: below)
HEY_VERSION := $(shell sed -n 's/^VERSION = "\(v[0-9.]*\)".*/\1/p' sqlitelab/load/hey.py)
OHA_VERSION := $(shell sed -n 's/^VERSION = "\([0-9.]*\)".*/\1/p' sqlitelab/load/oha.py)

.PHONY: help setup oha calibrated test test-fast test-contract test-harness test-notebooks run seed report lab browse lock servers calibrate clean distclean

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | \
	  awk 'BEGIN {FS = ":.*## "}; {printf "  make %-10s %s\n", $$1, $$2}'

setup: $(STAMP)/apt $(STAMP)/sshd $(STAMP)/venv $(STAMP)/kernel $(STAMP)/bin/litestream $(STAMP)/hey-$(HEY_VERSION) servers calibrated ## install everything the lab needs but oha (idempotent; quick the second time)

oha: $(STAMP)/oha-$(OHA_VERSION) ## build oha, seed 001's load tool (minutes of compiling, once): make seed and make test build it, make run needs none

$(STAMP)/apt: Makefile
	@mkdir -p $(STAMP)
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "setup: installing Debian packages: $$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi
	@touch $@

# openssh-server is there for one test only: the ssh runner against a throw-away sshd that the
# test starts in a network namespace. Installed without starting or enabling its service
# (a policy-rc.d that refuses for the install, then `systemctl disable --now` under systemd).
$(STAMP)/sshd: $(STAMP)/apt
	@if ! dpkg -s openssh-server >/dev/null 2>&1; then \
	  echo "setup: installing openssh-server for the ssh runner's test (its service stays off)"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  guard=""; \
	  if [ ! -e /usr/sbin/policy-rc.d ]; then \
	    guard=1; printf '#!/bin/sh\nexit 101\n' | $$SUDO tee /usr/sbin/policy-rc.d >/dev/null; \
	    $$SUDO chmod +x /usr/sbin/policy-rc.d; \
	  fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq openssh-server >/dev/null; \
	  rc=$$?; \
	  if [ -n "$$guard" ]; then $$SUDO rm -f /usr/sbin/policy-rc.d; fi; \
	  if [ -d /run/systemd/system ]; then $$SUDO systemctl disable --now ssh.service ssh.socket >/dev/null 2>&1 || true; fi; \
	  exit $$rc; \
	fi
	@touch $@

$(STAMP)/venv: $(LOCK) pyproject.toml
	@mkdir -p $(STAMP)
	@test -x $(PY) || python3 -m venv $(VENV)
	@echo "setup: installing the locked Python dependencies ($(LOCK)) into $(VENV)"
	@if $(PY) -m pip install -q --disable-pip-version-check "uv==$(UV_VERSION)" 2>/dev/null; then \
	  $(UV) pip install -q --python $(PY) --compile-bytecode --require-hashes -r $(LOCK) && \
	  $(UV) pip install -q --python $(PY) --no-deps -e . ; \
	else \
	  echo "setup: uv unavailable, installing with pip"; \
	  $(PY) -m pip install -q --disable-pip-version-check --require-hashes -r $(LOCK) && \
	  $(PY) -m pip install -q --disable-pip-version-check --no-deps -e . ; \
	fi
	@touch $@

$(STAMP)/kernel: $(STAMP)/venv
	@$(PY) -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python (sqlitelab)" >/dev/null
	@touch $@

# Litestream, for notebook 08's replication under load (issue 16): built from its Go module at the
# version sqlitelab/infra/operations.py names (through the Go module proxy; cgo, Debian's gcc), once.
LITESTREAM_VERSION := $(shell sed -n 's/^LITESTREAM_VERSION = "\(v[0-9.]*\)".*/\1/p' sqlitelab/infra/operations.py)
$(STAMP)/bin/litestream:
	@mkdir -p $(STAMP)/bin
	@echo "setup: building Litestream $(LITESTREAM_VERSION) from its Go module (about a minute, once)"
	@cd $(STAMP) && GOBIN=$(CURDIR)/$(STAMP)/bin go install github.com/benbjohnson/litestream/cmd/litestream@$(LITESTREAM_VERSION)

# The articles' own load tools, run as the cross-checks of notebooks 01 and 02 (issue 30): hey
# (seed 000) from its Go module, oha (seed 001) from its crate on crates.io (minutes of compiling
# on 2 cores, once per machine: installed in the machine's cache and copied from there; its own
# target, `oha`, which the targets that use it depend on — quick scale cross-checks no level with
# it), each at the version its module in sqlitelab/load/ names (a stamp per version: a new
# version is built again, an edit of the module is not).
OHA_CACHE = $(MACHINE_CACHE)/oha-$(OHA_VERSION)
$(STAMP)/hey-$(HEY_VERSION):
	@mkdir -p $(STAMP)/bin
	@echo "setup: building hey $(HEY_VERSION) from its Go module (seconds, once)"
	@cd $(STAMP) && GOBIN=$(CURDIR)/$(STAMP)/bin go install github.com/rakyll/hey@$(HEY_VERSION)
	@touch $@

$(STAMP)/oha-$(OHA_VERSION):
	@mkdir -p $(STAMP)/bin
	@if ! "$(OHA_CACHE)/bin/oha" --version >/dev/null 2>&1; then \
	  echo "setup: building oha $(OHA_VERSION) from crates.io (several minutes, once per machine: $(OHA_CACHE))"; \
	  mkdir -p "$(OHA_CACHE)" && \
	  flock "$(OHA_CACHE).lock" env CARGO_TARGET_DIR="$(OHA_CACHE)/build" cargo install oha \
	    --version $(OHA_VERSION) --locked --quiet --root "$(OHA_CACHE)" && \
	  rm -rf "$(OHA_CACHE)/build"; \
	fi
	@cp "$(OHA_CACHE)/bin/oha" $(STAMP)/bin/oha.tmp && mv $(STAMP)/bin/oha.tmp $(STAMP)/bin/oha
	@touch $@

servers: $(STAMP)/venv $(STAMP)/apt ## build every bundled server, the Go load generator and the link's delay proxy (cached)
	@$(PY) -m sqlitelab.build build

# The load generators measured against wrk on this machine (sqlitelab.load.calibrate: a minute or
# two, once per machine and generator version, kept in the machine's cache too, so another clone
# takes it; a lookup after). Every sweep reads it, and a test session copies it
# (tests/conftest.py), so neither `make run` nor `make test` pays for it.
calibrated: servers
	@$(PY) -m sqlitelab.calibrate ensure

# The whole suite: the fast tier on FAST_WORKERS CPUs first (it needs nothing running); then the
# contract and notebook tiers on SHARED_WORKERS (their tests check what servers answer and what a
# notebook stores, not how fast: several at once only share the CPUs; handed out one at a time, the
# notebooks' first: tests/conftest.py), with the harness tests marked shares_cpus (they check what
# their processes leave behind, not how fast); then the rest of the harness tier in one
# process (it measures under load, its server and generator each on a CPU of their own). The 25
# slowest of each named.
test: setup oha ## run the whole test suite: fast, contract, notebook and harness tiers
	$(PY) -m pytest -q -n $(FAST_WORKERS) -m "not contract and not harness and not notebook"
	$(PY) -m pytest -q -n $(SHARED_WORKERS) --maxschedchunk 1 -m "shares_cpus or ((contract or notebook) and not harness)" --durations=25
	$(PY) -m pytest -q -m "harness and not shares_cpus" --durations=25

test-fast: setup ## the fast tier: no server, no load (tests/conftest.py keeps it so), on up to 4 CPUs
	$(PY) -m pytest -q -n $(FAST_WORKERS) -m "not contract and not harness and not notebook"

test-contract: setup ## the contract tier: every stack started against the contract, no load
	$(PY) -m pytest -q -m contract

test-harness: setup oha ## the harness tier: levels, sweeps, generators and calibrations under load
	$(PY) -m pytest -q -m harness

test-notebooks: setup oha ## the notebook tier: papermill smoke runs and JupyterLab in a browser
	$(PY) -m pytest -q -m notebook

run: setup ## run every notebook in the quick scale with papermill, then summarise
	$(PY) -m sqlitelab.batch --scale quick

seed: setup oha ## run every notebook in the seed scale (the articles' own settings)
	$(PY) -m sqlitelab.batch --scale seed

calibrate: setup ## measure Locust and loadgen against wrk on this machine again (sweeps reuse it)
	$(PY) -m sqlitelab.calibrate --force

lab: setup ## open JupyterLab on the notebooks (loopback only; prints the URL with its token)
	@$(PY) -m sqlitelab.lab --port $(LAB_PORT)

report: setup ## the newest run of each notebook as a report without code, Markdown + HTML (SCALE=quick|seed)
	$(PY) -m sqlitelab.replay --missing --scale $(SCALE)
	$(PY) -m sqlitelab.report --scale $(SCALE)

browse: setup ## explore data/results.db in Datasette (loopback), with canned queries
	@$(PY) -m sqlitelab.browse --port $(BROWSE_PORT)

lock: ## re-resolve every Python dependency of pyproject.toml into requirements.lock
	@test -x $(UV) || $(PY) -m pip install -q --disable-pip-version-check "uv==$(UV_VERSION)"
	$(UV) pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes -q \
	  --custom-compile-command "make lock" -o $(LOCK)

clean: ## remove results, runs and scratch databases (keeps the environment)
	rm -rf data/results.db* data/runs data/tmp data/power

# Every stack's build outputs, as its servers/<stack>/stack.toml declares them (`build_outputs`,
# on one line): a new stack's need no edit here (tests/test_stacks.py checks this reads them).
STACK_BUILDS = $(strip $(foreach m,$(wildcard servers/*/stack.toml),$(addprefix $(dir $(m)),\
  $(shell sed -n 's/^build_outputs *= *\[\([^]]*\)\].*/\1/p' $(m) | tr -d '",'))))

distclean: clean ## also remove the environment and server builds
	rm -rf $(VENV) $(STAMP) $(STACK_BUILDS) sqlitelab/load/loadgen/bin \
	  sqlitelab/infra/delayproxy/target
