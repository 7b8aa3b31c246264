"""Start-up over stdio: the legacy process starts before the bridge's heavy imports, a legacy client
gets that very process (probed, then initialized), and spares start only after the first answer.

Order is observed, never timed: the interpreter's audit events (each import and each
`subprocess.Popen`, in the order they happen in the bridge) and the order of the bridge's own log
lines on stderr.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs
from test_upstream_stdio import CAPABILITIES, WAIT_S, fixture_command, settings

from proxy.app.early_start import guess_launch, start_early
from proxy.upstream.base import Inbound
from proxy.upstream.stdio.early import EarlyProcess, Launch
from proxy.upstream.stdio.early import start_early as start_launch
from proxy.upstream.stdio.spares import SpareProcesses
from translators.protocol.eras import (
    LEGACY_VERSION,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    MODERN_VERSION,
)

ROOT = Path(__file__).resolve().parents[3]
FIXTURE_NAME = "legacy_fixture_server.py"
HEAVY = ("aiohttp", "pydantic", "structlog", "uvloop", "config", "proxy.app.cli")
NOT_FOR_LEGACY = ("proxy.engine", "proxy.app.compose", "aiohttp")
# Runs the real entry point with an audit hook that records, in order, every module imported and
# every process started (asyncio's own loop spawns through subprocess.Popen, so spares show too).
AUDITED = """
import json, sys
events = []

def hook(event, args):
    if event == "import":
        events.append(["import", args[0]])
    elif event == "subprocess.Popen":
        events.append(["spawn", " ".join(map(str, args[1] or [args[0]]))])

sys.addaudithook(hook)
out, sys.argv = sys.argv[1], ["mrtr-bridge", *sys.argv[2:]]
import proxy.__main__ as entry
try:
    entry.main()
finally:
    with open(out, "w") as file:
        json.dump(events, file)
"""
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": LEGACY_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "order-test", "version": "0"},
    },
}
MODERN_META = {
    META_PROTOCOL_VERSION: MODERN_VERSION,
    META_CLIENT_CAPABILITIES: {},
    META_CLIENT_INFO: {"name": "order-test", "version": "0"},
}


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


@asynccontextmanager
async def _bridge(events: Path, *flags: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """`mrtr-bridge stdio --upstream-command <fixture> --event-loop asyncio FLAGS` under the audit
    hook; stdin is closed and the exit awaited on leaving."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        AUDITED,
        str(events),
        "stdio",
        "--upstream-command",
        fixture_command(),
        "--event-loop",
        "asyncio",
        *flags,
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        yield process
    finally:
        assert process.stdin is not None
        process.stdin.close()
        async with asyncio.timeout(WAIT_S):
            await process.wait()


async def _answer(process: asyncio.subprocess.Process, request_id: int) -> dict[str, Any]:
    assert process.stdout is not None
    async with asyncio.timeout(3 * WAIT_S):
        while True:
            message = json.loads(await process.stdout.readline())
            if message.get("id") == request_id:
                return dict(message)


def _first(events: list[list[str]], kind: str, names: tuple[str, ...]) -> int:
    """Index of the first `kind` event naming one of `names` (a module or its submodule, or a
    command line containing it); len(events) if none."""
    for index, (event, what) in enumerate(events):
        if event != kind:
            continue
        if kind == "spawn" and any(name in what for name in names):
            return index
        if kind == "import" and any(what == n or what.startswith(n + ".") for n in names):
            return index
    return len(events)


async def test_a_legacy_client_gets_the_process_started_before_the_bridges_imports(
    tmp_path: Path,
) -> None:
    """The fixture server is spawned before aiohttp, pydantic, structlog, uvloop or the settings are
    imported; the legacy client's session (era probe, then initialize and tools/list) runs on that
    one process, so no other is started, and neither the engine nor aiohttp is ever imported."""
    events_path = tmp_path / "events.json"
    async with _bridge(events_path) as bridge:
        assert bridge.stdin is not None
        bridge.stdin.write(_line(INITIALIZE))
        assert "result" in await _answer(bridge, 1)
        bridge.stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        bridge.stdin.write(_line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        listed = await _answer(bridge, 2)
    assert bridge.returncode == 0
    assert "test_simple_text" in [tool["name"] for tool in listed["result"]["tools"]]
    events = json.loads(events_path.read_text())
    spawns = [what for event, what in events if event == "spawn" and FIXTURE_NAME in what]
    assert len(spawns) == 1
    assert _first(events, "spawn", (FIXTURE_NAME,)) < _first(events, "import", HEAVY) < len(events)
    assert _first(events, "import", NOT_FOR_LEGACY) == len(events)


async def test_spares_start_only_after_the_first_modern_answer(tmp_path: Path) -> None:
    """A modern client: its first request runs on the process started first; the spares are started
    only after that answer is written, and both of them start."""
    async with _bridge(
        tmp_path / "events.json", "--log-level", "debug", "--log-format", "json"
    ) as (bridge):
        assert bridge.stdin is not None and bridge.stderr is not None
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        bridge.stdin.write(_line({**request, "params": {"_meta": MODERN_META}}))
        assert "test_simple_text" in [
            tool["name"] for tool in (await _answer(bridge, 1))["result"]["tools"]
        ]
        logged: list[dict[str, Any]] = []
        async with asyncio.timeout(3 * WAIT_S):
            while sum(entry.get("event") == "upstream_spare_started" for entry in logged) < 2:
                line = await bridge.stderr.readline()
                assert line, "the bridge ended before both spares started"
                if line.startswith(b"{"):  # a log line, not a stray print
                    logged.append(json.loads(line))
    names = [entry.get("event") for entry in logged]
    adopted = logged[names.index("upstream_first_process_adopted")]["pid"]
    initialized = logged[names.index("upstream_process_initialized")]["pid"]
    assert initialized == adopted
    answered = names.index("front_request_finished")
    released = names.index("upstream_spares_released")
    first_spare = names.index("upstream_spare_started")
    assert answered < released < first_spare


def _ignore(inbound: Inbound) -> None:
    return None


def _early(command: str) -> EarlyProcess:
    launch = Launch.of(command, {}, None)
    assert launch is not None
    early = start_launch(launch, os.environ)
    assert early is not None
    return early


async def test_spares_wait_for_the_release_and_for_the_first_process_to_settle() -> None:
    """Released while the first process has not answered `initialize` yet, the spares still wait:
    they start once it has. Order is observed in the log, not timed: a release that did not wait
    would be logged at the loop's first turn, before `initialize` (which needs many) could end."""
    spares = SpareProcesses(settings(fixture_command(), spare_processes=1))
    early = _early(fixture_command())
    try:
        await spares.adopt_first(early)
        session = await spares.take()
        assert session.pid == early.pid
        with capture_logs() as logged:
            spares.release()
            assert spares._refilling is None and spares._spares == []
            await session.initialize(CAPABILITIES, on_unrelated=_ignore)
            async with asyncio.timeout(WAIT_S):
                while len(spares._spares) < 1:
                    await asyncio.sleep(0.02)
        assert spares._spares[0].pid != session.pid
        await session.aclose()
    finally:
        await spares.aclose()
    names = [entry["event"] for entry in logged]
    initialized = names.index("upstream_process_initialized")
    assert (
        initialized
        < names.index("upstream_spares_released")
        < names.index("upstream_spare_started")
    )


async def test_an_unclaimed_first_process_is_stopped_with_the_spares() -> None:
    """The first process, never handed out, is stopped when the spares close (SIGTERM at once)."""
    spares = SpareProcesses(settings(fixture_command(), spare_processes=1))
    early = _early(fixture_command())
    await spares.adopt_first(early)
    process = spares._first
    assert process is not None
    await spares.aclose()
    assert process.returncode is not None


async def test_an_adopted_process_pipes_and_exit_code() -> None:
    """Adopted, a process started with subprocess.Popen reads, writes and exits like an asyncio
    one."""
    early = _early("cat")
    process = await early.adopt()
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(b"hello\n")
    await process.stdin.drain()
    async with asyncio.timeout(WAIT_S):
        assert await process.stdout.readline() == b"hello\n"
        process.stdin.close()
        assert await process.wait() == 0
    assert process.returncode == 0


def test_a_process_started_for_other_settings_is_stopped_when_claimed() -> None:
    """claim() keeps the process only for the exact launch it was started with."""
    early = _early("sleep 30")
    popen = early._popen
    assert popen is not None
    assert early.claim(Launch(("sleep", "31"), {}, None)) is False
    assert popen.returncode is not None
    kept = _early("sleep 30")
    assert kept.claim(Launch(("sleep", "30"), {}, None)) is True
    kept.discard()


def test_the_guess_reads_flags_over_environment_over_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "bridge.toml"
    config.write_text(
        '[upstream]\ncommand = "from-file --x"\ncwd = "/tmp"\nenv = { A = "1" }\n', "utf-8"
    )
    env = {"MRTR_BRIDGE_CONFIG": str(config)}
    assert guess_launch(["stdio"], env) == Launch(("from-file", "--x"), {"A": "1"}, "/tmp")
    env["MRTR_BRIDGE_UPSTREAM_COMMAND"] = "from-env"
    env["MRTR_BRIDGE_UPSTREAM_ENV"] = "B=2,C=3"
    assert guess_launch(["stdio"], env) == Launch(("from-env",), {"B": "2", "C": "3"}, "/tmp")
    flags = ["stdio", "--upstream-command=from-flag 'a b'", "--upstream-cwd", "/"]
    assert guess_launch(flags, env) == Launch(("from-flag", "a b"), {"B": "2", "C": "3"}, "/")


def test_the_guess_starts_nothing_it_should_not() -> None:
    """Not `stdio`, help, an HTTP upstream, or no command: no guess."""
    command = ["--upstream-command", shlex.join(["server", "--stdio"])]
    assert guess_launch(["serve", *command], {}) is None
    assert guess_launch(["stdio", *command, "--help"], {}) is None
    assert guess_launch(["stdio", *command, "--upstream", "http://127.0.0.1:1/mcp"], {}) is None
    assert guess_launch(["stdio"], {}) is None
    assert guess_launch(["stdio", "--upstream-command", "'unbalanced"], {}) is None
    assert start_early(["check", *command], {}) is None
