# mrtr-bridge: modern MCP (2026-07-28) clients -> legacy MCP (2025-11-25) servers.
#
#   make test         ruff + mypy + pytest (unit, proxy, integration) on PYTEST_WORKERS=4 workers
#                     (PYTEST_WORKERS=1: one process, in order)
#   make run          legacy demo server on 127.0.0.1:8931 behind the bridge on 127.0.0.1:8080
#   make test-lb      the bridge's and a legacy server's replicas behind a real HAProxy
#                     (and the deploy files checked by their tools, promtool for the alert
#                     rules, the status page in headless Chromium, the upstream behind
#                     tinyproxy)
#   make conformance  the official MCP conformance suite through the bridge (docs/conformance*.md)
#   make compat       published MCP servers (tests/compat/servers.toml) directly and through the
#                     bridge, compared: docs/compatibility.md (ONLY=name,name for some rows)
#   make bench        benchmarks (bench/run.py -> bench/results/)
#   make lint         ruff + mypy only
#   make clean        caches and run output; `make distclean` also drops .venv* and .tools
#
# Needs python3 >= 3.11, make, node and npm, and network to PyPI and npm (`make test` installs npm
# test servers into .tools/, and uv into .tools/uv: `make run` builds its two virtualenvs with it,
# and tests/integration/test_install.py runs the README's `uv tool install .`). Virtualenvs are
# created on demand and refreshed when their requirements change:
#   .venv         the bridge, editable, with its test extras (pytest, ruff, mypy, mcp 2.x client)
#   .venv-legacy  mcp 1.x, for the legacy servers in tests/peers/
#   .venv-<rev>   an older mcp 1.x that negotiates <rev> (2024-11-05, 2025-03-26, 2025-06-18),
#                 for tests/peers/revision_server.py (tests/peers/requirements-<rev>.txt)
# and the TypeScript SDK test servers are installed with npm into .tools/ts-peers/ (`make ts-peers`).
# A stamp file inside each records the install; an existing venv without a stamp is adopted
# when it already satisfies its requirements (.ci/venv_satisfied.py), else reinstalled.
# The OAuth tests also need a real authorization server: npm `oauth2-mock-server`, installed
# once with the machine's npm into .tools/oauth-as (stamped, git-ignored).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
LEGACY_VENV := .venv-legacy
BIN := $(VENV)/bin
VENV_STAMP := $(VENV)/.mrtr-installed
# The bridge alone (no test tools), all that `make run` needs in .venv; `make test` adds the rest.
VENV_RUN_STAMP := $(VENV)/.mrtr-installed-run
LEGACY_STAMP := $(LEGACY_VENV)/.mrtr-installed
LEGACY_REQUIREMENTS := tests/peers/requirements-legacy.txt
OLD_REVISIONS := 2024-11-05 2025-03-26 2025-06-18
REVISION_STAMPS := $(foreach rev,$(OLD_REVISIONS),.venv-$(rev)/.mrtr-installed)
PIP_FLAGS := --quiet --disable-pip-version-check

OAUTH_AS_DIR := .tools/oauth-as
OAUTH_AS_VERSION := 7.2.1
OAUTH_AS_STAMP := $(OAUTH_AS_DIR)/.stamp-oauth2-mock-server-$(OAUTH_AS_VERSION)

DEMO_PORT ?= 8931
BRIDGE_LISTEN ?= 127.0.0.1:8080
RUN_DIR := .run

.PHONY: help venv ts-peers npm-servers test-tools compat-fast test-deps test test-lb lint pytest run conformance compat bench clean distclean

help:
	@sed -n 's/^#   make /  make /p' $(firstword $(MAKEFILE_LIST))

define check_python
	$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required, found " + sys.version.split()[0])'
endef

# uv (pinned, in .tools/uv, installed once with pip) builds `make run`'s two virtualenvs in seconds
# where pip takes a minute or more; INSTALLER=uv selects it, and its venvs are seeded with pip so
# that `make test` can add to them. Everything else installs with pip.
UV_VERSION := 0.13.9
UV_DIR := .tools/uv
UV := $(UV_DIR)/bin/uv
UV_STAMP := $(UV_DIR)/.stamp-uv-$(UV_VERSION)
INSTALLER ?= pip
INSTALLER_DEPS := $(if $(filter uv,$(INSTALLER)),$(UV_STAMP))

# Into a --target folder with the interpreter's own pip when it has one (seconds), else a venv.
$(UV_STAMP):
	@echo "installing uv $(UV_VERSION) into $(UV_DIR) (once, with pip)"
	@rm -rf $(UV_DIR) && $(check_python)
	@$(PYTHON) -m pip install $(PIP_FLAGS) --no-compile --no-deps --target $(UV_DIR) uv==$(UV_VERSION) \
		2>/dev/null || { rm -rf $(UV_DIR) && $(PYTHON) -m venv $(UV_DIR) && \
		$(UV_DIR)/bin/python -m pip install $(PIP_FLAGS) --no-compile uv==$(UV_VERSION); }
	@$(UV) --version >/dev/null
	@touch $@

# $(call new_venv,DIR) and $(call venv_install,DIR,PIP_ARGS), with pip or uv (INSTALLER)
new_venv = $(if $(filter uv,$(INSTALLER)),$(UV) venv --quiet --seed --python $(PYTHON) $(1),$(PYTHON) -m venv $(1))
venv_install = $(if $(filter uv,$(INSTALLER)),$(UV) pip install --quiet --python $(1)/bin/python $(2),$(1)/bin/python -m pip install $(PIP_FLAGS) $(2))

# $(call ensure_venv,DIR,STAMP,CHECK_ARGS,PIP_ARGS)
define ensure_venv
	@if [ -x $(1)/bin/python ] && [ ! -e $(2) ] && $(1)/bin/python .ci/venv_satisfied.py $(3); then \
		echo "adopting existing $(1) (requirements already satisfied)"; \
	else \
		if [ ! -x $(1)/bin/python ]; then $(check_python) && $(call new_venv,$(1)); fi; \
		echo "installing into $(1): $(INSTALLER) install $(4)"; \
		$(call venv_install,$(1),$(4)); \
	fi
	@touch $(2)
endef

$(VENV_STAMP): pyproject.toml | $(INSTALLER_DEPS)
	$(call ensure_venv,$(VENV),$@,pyproject.toml test,-e '.[test]')

$(VENV_RUN_STAMP): pyproject.toml | $(INSTALLER_DEPS)
	$(call ensure_venv,$(VENV),$@,pyproject.toml,-e .)

$(LEGACY_STAMP): $(LEGACY_REQUIREMENTS) | $(INSTALLER_DEPS)
	$(call ensure_venv,$(LEGACY_VENV),$@,$(LEGACY_REQUIREMENTS),-r $(LEGACY_REQUIREMENTS))

.venv-%/.mrtr-installed: tests/peers/requirements-%.txt
	$(call ensure_venv,.venv-$*,$@,$<,-r $<)

venv: $(VENV_STAMP) $(LEGACY_STAMP) $(REVISION_STAMPS)

$(OAUTH_AS_STAMP):
	@command -v npm >/dev/null || { echo "npm is needed once, to install oauth2-mock-server for the OAuth tests" >&2; exit 1; }
	npm install --prefix $(OAUTH_AS_DIR) --no-audit --no-fund --loglevel=error oauth2-mock-server@$(OAUTH_AS_VERSION)
	@touch $@

# TypeScript SDK servers of old releases for the integration tests (tests/peers/ts_sdk_server.cjs):
# one folder per exact SDK version (a caret range would pull in the newest 1.x), each stamped.
# 1.12.3 speaks 2025-03-26, 1.13.3 speaks 2025-06-18. Needs npm (and node) once.
TS_SDK_VERSIONS := 1.12.3 1.13.3
TS_PEERS := .tools/ts-peers
TS_STAMPS := $(foreach version,$(TS_SDK_VERSIONS),$(TS_PEERS)/sdk-$(version)/.mrtr-installed)

$(TS_PEERS)/sdk-%/.mrtr-installed:
	@command -v npm >/dev/null || { echo "npm is needed once, to install @modelcontextprotocol/sdk@$* for the tests" >&2; exit 1; }
	npm install --prefix $(TS_PEERS)/sdk-$* --no-audit --no-fund --loglevel=error --save-exact "@modelcontextprotocol/sdk@$*"
	@touch $@

# server-everything 2025.5.12, which works with one upstream session at a time, pinned to SDK 1.12.3
# by npm overrides (tests/peers/server-everything/package.json).
EVERYTHING_DIR := $(TS_PEERS)/everything-2025.5.12
EVERYTHING_STAMP := $(EVERYTHING_DIR)/.mrtr-installed

$(EVERYTHING_STAMP): tests/peers/server-everything/package.json
	@command -v npm >/dev/null || { echo "npm is needed once, to install server-everything for the tests" >&2; exit 1; }
	mkdir -p $(EVERYTHING_DIR)
	cp tests/peers/server-everything/package.json $(EVERYTHING_DIR)/package.json
	npm install --prefix $(EVERYTHING_DIR) --no-audit --no-fund --loglevel=error
	@touch $@

ts-peers: $(TS_STAMPS) $(EVERYTHING_STAMP)

# The real @modelcontextprotocol/server-filesystem, pinned, for tests/integration/test_server_filesystem.py
# (run by the system `node`); installed once into its own prefix under the git-ignored .tools/.
FS_SERVER_VERSION := 2026.8.31
FS_SERVER_DIR := .tools/server-filesystem
FS_SERVER_STAMP := $(FS_SERVER_DIR)/.stamp-$(FS_SERVER_VERSION)

$(FS_SERVER_STAMP):
	@command -v npm >/dev/null || { echo "npm is needed once, to install @modelcontextprotocol/server-filesystem@$(FS_SERVER_VERSION) for the tests" >&2; exit 1; }
	rm -rf $(FS_SERVER_DIR) && mkdir -p $(FS_SERVER_DIR)
	npm install --prefix $(FS_SERVER_DIR) --no-audit --no-fund --loglevel=error \
		@modelcontextprotocol/server-filesystem@$(FS_SERVER_VERSION)
	@touch $@

# Real npm peers for the routing tests (tests/integration/test_real_server*.py): server-everything
# of two ages (2026.8.31 and 2025.11.25, both speaking 2025-11-25 over stdio and Streamable HTTP),
# server-gitlab 2025.4.25 (2024-11-05, loose tool inputSchemas) and the TypeScript SDK's modern
# client 2.4.0 (tests/peers/ts_modern_client.mjs), each pinned in its own stamped prefix.
NPM_SERVERS := server-everything@2026.8.31 server-everything@2025.11.25 server-gitlab@2025.4.25 \
	client@2.4.0
NPM_SERVER_STAMPS := $(foreach server,$(NPM_SERVERS),.tools/npm-servers/$(server)/.mrtr-installed)

.tools/npm-servers/%/.mrtr-installed:
	@command -v npm >/dev/null || { echo "npm is needed once, to install @modelcontextprotocol/$* for the tests" >&2; exit 1; }
	rm -rf .tools/npm-servers/$* && mkdir -p .tools/npm-servers/$*
	npm install --prefix .tools/npm-servers/$* --no-audit --no-fund --loglevel=error --save-exact \
		"@modelcontextprotocol/$*"
	@touch $@

npm-servers: $(NPM_SERVER_STAMPS)

test-tools: $(FS_SERVER_STAMP) $(NPM_SERVER_STAMPS)

# The compatibility list's CI subset (the rows marked `fast` in tests/compat/servers.toml): its npm
# servers are the ones above; its PyPI servers go into one virtualenv each under .tools/compat/
# with uv (stamped: a second run installs nothing).
compat-fast: $(UV_STAMP) | $(NPM_SERVER_STAMPS) $(FS_SERVER_STAMP) $(EVERYTHING_STAMP)
	@PYTHONPATH=tests $(PYTHON) -m compat.install --fast

lint: $(VENV_STAMP)
	$(BIN)/ruff check --extend-exclude '$(LEGACY_VENV),.venv-*,.tools,.conformance-results,$(RUN_DIR)' .
	$(BIN)/ruff format --check --extend-exclude '$(LEGACY_VENV),.venv-*,.tools,.conformance-results,$(RUN_DIR)' .
	$(BIN)/mypy

# Everything `make pytest` needs, installed by independent jobs at once (pip into five virtualenvs,
# npm into separate prefixes): a cold `make test` spends minutes here otherwise.
INSTALL_JOBS ?= 6
TEST_DEPS := venv ts-peers test-tools compat-fast $(OAUTH_AS_STAMP) $(UV_STAMP)

test-deps:
	@$(MAKE) --no-print-directory -j $(INSTALL_JOBS) $(TEST_DEPS)

# The suite on PYTEST_WORKERS pytest-xdist workers (most tests wait on real peers' I/O and timers,
# so more workers than cores pay off), then the tests marked `serial` (load-sensitive) alone.
# PYTEST_WORKERS=1 runs the whole suite in one process, in order (for debugging).
PYTEST_WORKERS ?= 4
PYTEST_ARGS := -q --ignore=tests/integration/lb

pytest: test-deps
ifeq ($(PYTEST_WORKERS),1)
	$(BIN)/pytest $(PYTEST_ARGS)
else
	@status=0; \
	echo "==> pytest on $(PYTEST_WORKERS) workers (the tests not marked serial)"; \
	$(BIN)/pytest $(PYTEST_ARGS) -n $(PYTEST_WORKERS) --dist worksteal -m 'not serial' || status=$$?; \
	echo "==> pytest, the tests marked serial, alone"; \
	$(BIN)/pytest $(PYTEST_ARGS) -m serial || status=$$?; \
	exit $$status
endif

# The installs and lint at once (lint needs .venv only, and starts as soon as it is there, while
# npm and the other virtualenvs are still installing), then pytest; each wall time printed.
test:
	@began=$$SECONDS; $(MAKE) --no-print-directory -j $(INSTALL_JOBS) $(TEST_DEPS) lint; \
	echo "==> make test: installs and lint took $$((SECONDS - began)) s"; began=$$SECONDS; \
	$(MAKE) --no-print-directory pytest; \
	echo "==> make test: pytest took $$((SECONDS - began)) s"

# Needs haproxy, docker-compose, promtool, chromium and tinyproxy on the PATH (Debian: apt-get
# install haproxy docker-compose prometheus chromium tinyproxy; .ci/run installs them when missing).
test-lb: venv
	@for tool in haproxy docker-compose promtool chromium tinyproxy; do command -v $$tool >/dev/null || \
		{ echo "make test-lb needs $$tool (apt-get install -y haproxy docker-compose prometheus chromium tinyproxy)" >&2; exit 1; }; done
	$(BIN)/pytest -q tests/integration/lb

# A literal backslash for the banner (a backslash before a newline would join the lines).
BS := $(subst x,,\x)

define RUN_BANNER

  mrtr-bridge is serving modern MCP (2026-07-28) at  http://$(BRIDGE_LISTEN)/mcp
  in front of the legacy demo server (2025-11-25) at http://127.0.0.1:$(DEMO_PORT)/mcp
  (demo server log: $(RUN_DIR)/demo_server.log; Ctrl-C stops both)

  Try a modern tools/call:

  curl -sN http://$(BRIDGE_LISTEN)/mcp $(BS)
    -H 'Content-Type: application/json' $(BS)
    -H 'Accept: application/json, text/event-stream' $(BS)
    -H 'MCP-Protocol-Version: 2026-07-28' $(BS)
    -H 'Mcp-Method: tools/call' $(BS)
    -H 'Mcp-Name: echo' $(BS)
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"curl","version":"1.0"},"io.modelcontextprotocol/clientCapabilities":{}}}}'

endef
export RUN_BANNER

# Only what the demo needs: .venv with the bridge alone (no test tools) and .venv-legacy (mcp 1.x)
# for the demo server; no older-revision venvs, no npm. Each step says what it does.
# The demo server runs in the background; the EXIT trap stops it when the bridge exits.
# The two virtualenvs are installed with uv (bootstrapped once into .tools/uv by pip).
# First of all, both addresses must be free: a second `make run` stops there, before it prints
# anything of its own or touches the first one's demo log.
run:
	@for address in 127.0.0.1:$(DEMO_PORT) $(BRIDGE_LISTEN); do \
		host=$${address%:*}; host=$${host#[}; host=$${host%]}; port=$${address##*:}; \
		case $$host in 0.0.0.0|::) host=127.0.0.1;; esac; \
		if (exec 3<>/dev/tcp/$$host/$$port) 2>/dev/null; then \
			echo "make run: $$address is in use (another make run?): stop it, or choose other ports: make run DEMO_PORT=8932 BRIDGE_LISTEN=127.0.0.1:8081" >&2; \
			exit 1; \
		fi; \
	done
	@echo "==> [1/4] uv $(UV_VERSION), to install the virtualenvs ($(UV_DIR); skipped when installed)"
	@$(MAKE) -s --no-print-directory $(UV_STAMP)
	@echo "==> [2/4] .venv (the bridge: install -e .) and .venv-legacy (mcp 1.x for the demo server); skipped when installed"
	@$(MAKE) -s -j2 --no-print-directory INSTALLER=uv $(VENV_RUN_STAMP) $(LEGACY_STAMP)
	@echo "==> [3/4] starting the legacy demo server on 127.0.0.1:$(DEMO_PORT) (log: $(RUN_DIR)/demo_server.log)"
	@mkdir -p $(RUN_DIR)
	@$(LEGACY_VENV)/bin/python tests/peers/demo_server.py --port $(DEMO_PORT) >$(RUN_DIR)/demo_server.log 2>&1 & \
	demo=$$!; \
	trap 'kill $$demo 2>/dev/null || true; wait $$demo 2>/dev/null || true' EXIT; \
	trap 'exit 130' INT TERM; \
	for _ in $$(seq 200); do \
		kill -0 $$demo 2>/dev/null || { echo "demo server exited; see $(RUN_DIR)/demo_server.log" >&2; exit 1; }; \
		(exec 3<>/dev/tcp/127.0.0.1/$(DEMO_PORT)) 2>/dev/null && break; \
		sleep 0.1; \
	done; \
	(exec 3<>/dev/tcp/127.0.0.1/$(DEMO_PORT)) 2>/dev/null || { echo "demo server did not listen on $(DEMO_PORT)" >&2; exit 1; }; \
	echo "==> [4/4] starting mrtr-bridge on $(BRIDGE_LISTEN) in front of it"; \
	printf '%s\n' "$$RUN_BANNER"; \
	$(BIN)/mrtr-bridge serve --upstream http://127.0.0.1:$(DEMO_PORT)/mcp --listen $(BRIDGE_LISTEN)

# The 2026-07-28 suite through the bridge, in front of the fixture as a 2025-11-25 server and as a
# 2025-06-18 one (mcp 1.12.4); UPSTREAM=stdio runs both over stdio. Then legacy clients, directly and
# in both directions, and a modern upstream. Reports: .conformance-results/.
# The first run clears .conformance-results/ (and installs the pinned Node and CLI); the other four
# are independent (own fixture, bridge, free ports and report folder) and can run at once,
# CONFORMANCE_JOBS at a time. One at a time by default: on two cores the runs are CPU-bound (the
# Node CLI, the fixture, the bridge), and four at once took longer (docs/ci.md).
CONFORMANCE_JOBS ?= 1
CONFORMANCE_RUNS := conformance-2025-06-18 conformance-legacy-clients conformance-reverse \
	conformance-modern conformance-named
.PHONY: $(CONFORMANCE_RUNS)

conformance: venv
	tests/conformance/run.sh
	@$(MAKE) --no-print-directory -j $(CONFORMANCE_JOBS) $(CONFORMANCE_RUNS)

# the fixture as a 2025-06-18 server (mcp 1.12.4)
conformance-2025-06-18:
	REVISION=2025-06-18 OUTDIR=$(CURDIR)/.conformance-results/2025-06-18 tests/conformance/run.sh

# legacy clients through the bridge: 2025-11-25 scenarios, fixture directly vs. through the bridge (#13)
conformance-legacy-clients:
	tests/conformance/run_legacy_clients.sh

# legacy clients in front of a modern-only fixture (the reverse direction, #27): the same scenarios
conformance-reverse:
	REVERSE=1 tests/conformance/run_legacy_clients.sh

# a modern upstream (mcp 2.x SDK server): the 2026-07-28 suite directly vs. through the bridge (#13)
conformance-modern:
	MODERN=1 OUTDIR=$(CURDIR)/.conformance-results/modern tests/conformance/run.sh

# several servers behind one bridge: the fixture as the named upstream at /servers/fixture/mcp
conformance-named:
	NAMED=fixture OUTDIR=$(CURDIR)/.conformance-results/named tests/conformance/run.sh

# Every server of tests/compat/servers.toml installed under .tools/compat/ (npm prefixes, uv
# virtualenvs; stamped), run directly with the mcp 1.x client and through the bridge with the mcp
# 2.x client, two servers at a time, and docs/compatibility.md written (11 minutes on two shared
# cores once installed, 641 s measured; the first install adds about 4). ONLY=name,name: some rows.
compat: test-deps
	PYTHONPATH=tests:. $(BIN)/python -m compat $(if $(ONLY),--only $(ONLY))

bench: venv
	INSTALL_ONLY=1 tests/conformance/run.sh
	$(BIN)/python bench/run.py

clean:
	rm -rf .pytest_cache .mypy_cache .ruff_cache .hypothesis .conformance-results $(RUN_DIR) *.egg-info build dist
	find . -path './$(VENV)*' -prune -o -path ./.tools -prune -o \
		-name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(LEGACY_VENV) $(foreach rev,$(OLD_REVISIONS),.venv-$(rev)) .tools
