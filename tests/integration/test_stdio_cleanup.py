"""No legacy process outlives the bridge (issue 18): closed the way stdio clients close it,
SIGTERMed, SIGINTed or SIGKILLed.

Every process of the bridge's tree (the bridge, each legacy server, their children) inherits one
marker in its environment, and is found by it in /proc/<pid>/environ, never by name. The stdio
front is closed with the sequence of the `mcp` 2.x and TypeScript clients: close stdin, wait 2 s,
SIGTERM, wait 2 s, SIGKILL (signals to the bridge's process group). The pool keeps its default 2
spare processes throughout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import PROCESS_TERMINATION_TIMEOUT

from config import ENV_PREFIX
from translators.protocol.eras import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    MODERN_VERSION,
)

from .harness import (
    BRIDGE_EXE,
    CLIENT_INFO,
    PEERS_DIR,
    REPO_ROOT,
    ModernPoster,
    PeerProcess,
    Peers,
    bridge_env,
    legacy_stdio_command,
)

MARKER_VAR = "MRTR_TEST_TREE_MARKER"
CLIENT_WAIT_S = 2.0  # each wait of the client's close sequence
SPARES = 2  # the default upstream.spare_processes
BRIDGE_AND_KEEPER = 2  # the bridge and its group keeper
TIMEOUT_S = 30.0
POLL_S = 0.05
LINGERING = [
    sys.executable,
    str(PEERS_DIR / "stdio_misbehaving.py"),
    "--on-eof",
    "linger",
    "--ignore-sigterm",
]


def tree_pids(marker: str) -> list[int]:
    """Every live process whose environment holds the marker (zombies have an empty environ)."""
    needle = f"{MARKER_VAR}={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                environ = Path("/proc", entry, "environ").read_bytes()
            except OSError:  # gone meanwhile, or not ours
                continue
            if needle in environ.split(b"\0"):
                found.append(int(entry))
    return sorted(found)


def kill_tree(marker: str) -> None:
    """Teardown after a failure: SIGKILL to the group of every process still carrying the marker."""
    for pid in tree_pids(marker):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


@pytest.fixture
def marker() -> Iterator[str]:
    """A fresh marker; whatever still carries it at the end of the test is killed."""
    value = uuid.uuid4().hex
    yield value
    kill_tree(value)


async def wait_for_tree(marker: str, predicate: Callable[[list[int]], bool]) -> list[int]:
    """The tree's pids once `predicate` holds (bounded by TIMEOUT_S)."""
    async with asyncio.timeout(TIMEOUT_S):
        while not predicate(pids := tree_pids(marker)):
            await asyncio.sleep(POLL_S)
    return pids


def lingering_command(*extra: str) -> str:
    """A legacy stdio server that keeps running after stdin EOF and ignores SIGTERM."""
    return shlex.join([*LINGERING, *extra])


def tools_call_line(request_id: int, tool: str, **arguments: Any) -> bytes:
    meta = {
        META_PROTOCOL_VERSION: MODERN_VERSION,
        META_CLIENT_INFO: CLIENT_INFO,
        META_CLIENT_CAPABILITIES: {},
    }
    params = {"name": tool, "arguments": arguments, "_meta": meta}
    return (
        json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        ).encode()
        + b"\n"
    )


def bridge_environment(marker: str) -> dict[str, str]:
    base = {key: value for key, value in os.environ.items() if not key.startswith(ENV_PREFIX)}
    return {**base, MARKER_VAR: marker, **bridge_env({"log": {"format": "json", "level": "info"}})}


@dataclass
class Closed:
    status: int
    step: str  # what ended the bridge: "stdin closed", "SIGTERM" or "SIGKILL"
    seconds: float


async def exits_within(process: asyncio.subprocess.Process, timeout: float) -> bool:
    """Whether the process exited within `timeout` (its return code, as the clients poll it)."""
    deadline = time.monotonic() + timeout
    while process.returncode is None and time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)
    return process.returncode is not None


async def close_like_a_client(process: asyncio.subprocess.Process) -> Closed:
    """Close stdin, wait 2 s, SIGTERM the group, wait 2 s, SIGKILL the group."""
    assert process.stdin is not None
    started = time.monotonic()
    process.stdin.close()
    for step, escalation in (("stdin closed", signal.SIGTERM), ("SIGTERM", signal.SIGKILL)):
        if await exits_within(process, CLIENT_WAIT_S):
            return Closed(process.returncode or 0, step, time.monotonic() - started)
        os.killpg(process.pid, escalation)
    await process.wait()
    return Closed(process.returncode or 0, "SIGKILL", time.monotonic() - started)


@dataclass
class StdioBridge:
    process: asyncio.subprocess.Process
    marker: str
    log_path: Path

    async def call(self, request_id: int, tool: str, **arguments: Any) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(tools_call_line(request_id, tool, **arguments))
        while True:
            message: dict[str, Any] = json.loads(await self.process.stdout.readline())
            if message.get("id") == request_id:
                return message

    def log_events(self, event: str) -> list[dict[str, Any]]:
        lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        entries = [json.loads(line) for line in lines if line.startswith("{")]
        return [entry for entry in entries if entry.get("event") == event]


@pytest.fixture
async def stdio_bridge(tmp_path: Path) -> AsyncIterator[Callable[[str], Any]]:
    """Starts `mrtr-bridge stdio --upstream-command CMD` in its own session, as clients
    launch it."""
    started: list[StdioBridge] = []

    async def start(command: str) -> StdioBridge:
        marker = uuid.uuid4().hex
        log_path = tmp_path / f"bridge-{len(started)}.log"
        with log_path.open("wb") as log:
            process = await asyncio.create_subprocess_exec(
                str(BRIDGE_EXE),
                "stdio",
                "--upstream-command",
                command,
                cwd=REPO_ROOT,
                env=bridge_environment(marker),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        started.append(StdioBridge(process, marker, log_path))
        return started[-1]

    yield start
    for bridge in started:
        kill_tree(bridge.marker)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(bridge.process.pid, signal.SIGKILL)
        if bridge.process.returncode is None:
            await bridge.process.wait()


async def served_with_spares(
    bridge: StdioBridge, tool: str, processes_per_server: int = 1
) -> list[int]:
    """One call answered, then the tree: the bridge, its keeper, the server that answered and the
    spares."""
    answer = await bridge.call(1, tool)
    assert "result" in answer, answer
    expected = BRIDGE_AND_KEEPER + (1 + SPARES) * processes_per_server
    return await wait_for_tree(bridge.marker, lambda pids: len(pids) == expected)


async def busy_with_unanswered_calls(bridge: StdioBridge) -> None:
    """One call answered, then two the server never answers, each on a process of its own, and the
    spares."""
    await served_with_spares(bridge, "echo")
    assert bridge.process.stdin is not None
    for request_id in (2, 3):
        bridge.process.stdin.write(tools_call_line(request_id, "slow"))
    await bridge.process.stdin.drain()
    await wait_for_tree(bridge.marker, lambda pids: len(pids) == BRIDGE_AND_KEEPER + 2 + SPARES)


async def assert_closed_cleanly(bridge: StdioBridge) -> None:
    """The client's close sequence: the bridge exits 0 before the SIGTERM, and its tree is gone
    (waited for, bounded: a process left behind lingers, and fails it)."""
    closed = await close_like_a_client(bridge.process)
    assert (closed.status, closed.step) == (0, "stdin closed")
    assert await wait_for_tree(bridge.marker, lambda pids: pids == []) == []
    assert closed.seconds < CLIENT_WAIT_S


async def test_close_sequence_with_an_mcp1_server(stdio_bridge: Callable[[str], Any]) -> None:
    """An `mcp` 1.x server and its 2 spares: all stopped, the bridge exits 0 within the
    first 2 s."""
    bridge = await stdio_bridge(legacy_stdio_command())
    pids = await served_with_spares(bridge, "test_simple_text")
    assert bridge.process.pid in pids
    await assert_closed_cleanly(bridge)
    stopped = bridge.log_events("upstream_process_stopped")
    assert len(stopped) == 1 + SPARES  # it ends on stdin EOF, or on SIGTERM if the machine is slow
    assert {entry["how"] for entry in stopped} <= {"exited", "terminated"}


async def test_stdin_closed_while_the_first_process_starts_stops_it_at_once(
    stdio_bridge: Callable[[str], Any],
) -> None:
    """stdin closed before any line, while the process started ahead of the bridge's imports is
    still starting (an `mcp` 1.x server imports for about half a second, and reads its stdin EOF
    only after that): it was never initialized, so it is stopped with SIGTERM at once instead of
    waiting for the EOF to work, no spare is ever started (they wait for a first answer), and the
    stop's deadline (the hurry) is never needed."""
    bridge = await stdio_bridge(legacy_stdio_command())
    await wait_for_tree(bridge.marker, lambda pids: len(pids) == BRIDGE_AND_KEEPER + 1)
    await assert_closed_cleanly(bridge)
    assert bridge.log_events("bridge_stop_hurried") == []
    assert bridge.log_events("upstream_spare_started") == []
    stopped = bridge.log_events("upstream_process_stopped")
    killed = sum(entry["count"] for entry in bridge.log_events("upstream_processes_killed_at_exit"))
    assert {entry["how"] for entry in stopped} <= {"terminated"}
    assert len(stopped) + killed == 1  # a spawn the stop cut short is killed at exit


async def test_close_sequence_with_a_server_that_ignores_stdin_eof(
    stdio_bridge: Callable[[str], Any],
) -> None:
    """A server that ignores stdin EOF and SIGTERM, and its spares: SIGKILLed in parallel,
    in time."""
    bridge = await stdio_bridge(lingering_command())
    await served_with_spares(bridge, "echo")
    await assert_closed_cleanly(bridge)
    stopped = bridge.log_events("upstream_process_stopped")
    hows = sorted((entry["how"], entry["code"]) for entry in stopped)
    # the server that answered ignores EOF and SIGTERM: killed; a spare is sent SIGTERM at once,
    # which ends it if it has not started ignoring SIGTERM yet (never the SIGINT)
    assert len(hows) == 1 + SPARES and ("killed", -signal.SIGKILL) in hows
    assert set(hows) <= {("killed", -signal.SIGKILL), ("terminated", -signal.SIGTERM)}


async def test_close_sequence_stops_the_servers_children_too(
    stdio_bridge: Callable[[str], Any],
) -> None:
    """Each server started a child of its own that ignores EOF and SIGTERM: the process
    groups go."""
    bridge = await stdio_bridge(lingering_command("--grandchild"))
    await served_with_spares(bridge, "echo", processes_per_server=2)
    await assert_closed_cleanly(bridge)


async def test_close_sequence_stops_what_a_server_left_behind(
    stdio_bridge: Callable[[str], Any],
) -> None:
    """Each server ends on stdin EOF but leaves a child of its own running (it ignores EOF and
    SIGTERM): the rest of each process group is stopped too."""
    bridge = await stdio_bridge(
        shlex.join([sys.executable, str(PEERS_DIR / "stdio_misbehaving.py"), "--grandchild"])
    )
    await served_with_spares(bridge, "echo", processes_per_server=2)
    await assert_closed_cleanly(bridge)
    # the server that answered ended on EOF and left its child; the spares, never initialized, are
    # stopped with SIGTERM to their group at once, which may reach their child before it starts
    # ignoring SIGTERM (then nothing is left of that group)
    leftovers = bridge.log_events("upstream_process_group_leftovers_stopped")
    assert 1 <= len(leftovers) <= 1 + SPARES


async def test_close_sequence_with_requests_in_flight(stdio_bridge: Callable[[str], Any]) -> None:
    """Requests still running at the close (the server never answers them) do not hold the bridge
    up."""
    bridge = await stdio_bridge(lingering_command())
    await busy_with_unanswered_calls(bridge)
    await assert_closed_cleanly(bridge)


async def test_the_mcp2_client_closes_the_bridge_without_signals(marker: str) -> None:
    """The real `mcp` 2.x client: its close returns before its SIGTERM step, and nothing is left."""
    server = StdioServerParameters(
        command=str(BRIDGE_EXE),
        args=["stdio", "--upstream-command", lingering_command(), "--log-level", "warning"],
        env={"PATH": os.environ.get("PATH", ""), MARKER_VAR: marker},
        cwd=str(REPO_ROOT),
    )
    async with asyncio.timeout(TIMEOUT_S):
        async with Client(server, mode=MODERN_VERSION, cache=None) as client:
            result = await client.call_tool("echo", {"text": "hi"})
            assert [block.text for block in result.content] == ["echo:hi"]  # type: ignore[union-attr]
            await wait_for_tree(marker, lambda pids: len(pids) == BRIDGE_AND_KEEPER + 1 + SPARES)
            closing = time.monotonic()
        closed_in = time.monotonic() - closing
    assert await wait_for_tree(marker, lambda pids: pids == []) == []
    assert closed_in < PROCESS_TERMINATION_TIMEOUT


async def test_sigkill_of_the_stdio_front_leaves_no_child(
    stdio_bridge: Callable[[str], Any],
) -> None:
    """A SIGKILLed bridge runs no code: its children die with it (PR_SET_PDEATHSIG)."""
    bridge = await stdio_bridge(lingering_command())
    await served_with_spares(bridge, "echo")
    os.kill(bridge.process.pid, signal.SIGKILL)
    assert await asyncio.wait_for(bridge.process.wait(), TIMEOUT_S) == -signal.SIGKILL
    assert await wait_for_tree(bridge.marker, lambda pids: pids == []) == []


async def test_sigkill_of_the_stdio_front_leaves_no_grandchild(
    stdio_bridge: Callable[[str], Any],
) -> None:
    """The servers' own children (which the death signal does not reach, and which ignore EOF
    and SIGTERM) are killed by the group keeper."""
    bridge = await stdio_bridge(lingering_command("--grandchild"))
    await served_with_spares(bridge, "echo", processes_per_server=2)
    os.kill(bridge.process.pid, signal.SIGKILL)
    assert await asyncio.wait_for(bridge.process.wait(), TIMEOUT_S) == -signal.SIGKILL
    assert await wait_for_tree(bridge.marker, lambda pids: pids == []) == []


async def test_sigterm_while_starting_stops_the_servers(stdio_bridge: Callable[[str], Any]) -> None:
    """SIGTERM as soon as the first legacy process is started (the spares are still starting)."""
    bridge = await stdio_bridge(lingering_command())
    await wait_for_tree(bridge.marker, lambda pids: len(pids) >= BRIDGE_AND_KEEPER)
    os.kill(bridge.process.pid, signal.SIGTERM)
    assert await asyncio.wait_for(bridge.process.wait(), TIMEOUT_S) == 0
    assert await wait_for_tree(bridge.marker, lambda pids: pids == []) == []


async def test_sigterm_during_calls_stops_the_servers(stdio_bridge: Callable[[str], Any]) -> None:
    """SIGTERM while calls run that the server never answers: the bridge exits 0 within a client's 2
    s."""
    bridge = await stdio_bridge(lingering_command())
    await busy_with_unanswered_calls(bridge)
    os.kill(bridge.process.pid, signal.SIGTERM)
    assert await exits_within(bridge.process, CLIENT_WAIT_S)
    assert bridge.process.returncode == 0
    assert await wait_for_tree(bridge.marker, lambda pids: pids == []) == []


async def test_ctrl_c_to_the_bridges_group_reaches_the_bridge_only(
    stdio_bridge: Callable[[str], Any],
) -> None:
    """SIGINT to the bridge's process group (a terminal's Ctrl-C) does not reach the servers, which
    have their own: none dies of it (a Python server would, at once); the bridge stops them all
    itself."""
    bridge = await stdio_bridge(lingering_command())
    await served_with_spares(bridge, "echo")
    os.killpg(bridge.process.pid, signal.SIGINT)
    assert await asyncio.wait_for(bridge.process.wait(), TIMEOUT_S) == 0
    assert tree_pids(bridge.marker) == []
    assert bridge.log_events("upstream_process_exited") == []
    stopped = bridge.log_events("upstream_process_stopped")
    hows = sorted((entry["how"], entry["code"]) for entry in stopped)
    # the server that answered ignores EOF and SIGTERM: killed; a spare is sent SIGTERM at once,
    # which ends it if it has not started ignoring SIGTERM yet (never the SIGINT)
    assert len(hows) == 1 + SPARES and ("killed", -signal.SIGKILL) in hows
    assert set(hows) <= {("killed", -signal.SIGKILL), ("terminated", -signal.SIGTERM)}


# ---- mrtr-bridge serve --upstream-command --------------------------------------------------------


@pytest.fixture
def serve_bridge(tmp_path: Path) -> Iterator[Callable[[str], tuple[PeerProcess, str]]]:
    """Starts `mrtr-bridge serve --upstream-command CMD` (own session, marker in its
    environment), which lets attached requests finish for up to 60 s when stopped."""
    peers = Peers(log_dir=tmp_path)
    markers: list[str] = []

    def start(command: str) -> tuple[PeerProcess, str]:
        markers.append(uuid.uuid4().hex)
        settings = {
            "upstream": {"command": command},
            "log": {"format": "json"},
            "front": {"shutdown_grace_s": 60},
        }
        env = {MARKER_VAR: markers[-1], **bridge_env(settings)}
        return peers.bridge(None, env=env), markers[-1]

    try:
        yield start
    finally:
        peers.close()
        for marker in markers:
            kill_tree(marker)


async def serving_with_spares(bridge: PeerProcess, marker: str) -> None:
    """One call answered over HTTP, then the tree: the bridge, the server that answered and the
    spares."""
    async with aiohttp.ClientSession() as http:
        reply = await ModernPoster(http, bridge.url).post(
            "tools/call", {"name": "echo", "arguments": {"text": "x"}}
        )
    assert reply.response["result"]["content"] == [{"type": "text", "text": "echo:x"}]
    await wait_for_tree(marker, lambda pids: len(pids) == BRIDGE_AND_KEEPER + 1 + SPARES)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_serve_stops_its_servers_on_a_stop_signal(
    serve_bridge: Callable[[str], tuple[PeerProcess, str]], signum: signal.Signals
) -> None:
    """`serve` on SIGTERM or SIGINT: exit 0, every legacy process (EOF- and SIGTERM-proof ones too)
    gone."""
    bridge, marker = serve_bridge(lingering_command())
    await serving_with_spares(bridge, marker)
    os.kill(bridge.popen.pid, signum)
    assert await asyncio.to_thread(bridge.popen.wait, TIMEOUT_S) == 0
    assert await wait_for_tree(marker, lambda pids: pids == []) == []


async def test_serve_sigkilled_leaves_no_child(
    serve_bridge: Callable[[str], tuple[PeerProcess, str]],
) -> None:
    bridge, marker = serve_bridge(lingering_command())
    await serving_with_spares(bridge, marker)
    bridge.popen.kill()
    assert await asyncio.to_thread(bridge.popen.wait, TIMEOUT_S) == -signal.SIGKILL
    assert await wait_for_tree(marker, lambda pids: pids == []) == []


async def test_serve_second_sigterm_stops_the_servers_at_once(
    serve_bridge: Callable[[str], tuple[PeerProcess, str]],
) -> None:
    """A call the server never answers would hold the graceful stop for 60 s: a second SIGTERM stops
    the legacy processes at once, the call fails, and the bridge exits 0 long before."""
    bridge, marker = serve_bridge(lingering_command())
    await serving_with_spares(bridge, marker)
    async with aiohttp.ClientSession() as http:
        # a process of its own
        poster = ModernPoster(http, bridge.url, capabilities={"elicitation": {}})
        attached = asyncio.create_task(poster.post("tools/call", {"name": "slow"}))
        await wait_for_tree(marker, lambda pids: len(pids) == BRIDGE_AND_KEEPER + 2 + SPARES)
        os.kill(bridge.popen.pid, signal.SIGTERM)
        async with asyncio.timeout(TIMEOUT_S):
            while '"bridge_stopping"' not in bridge.log_text():
                await asyncio.sleep(POLL_S)
        os.kill(bridge.popen.pid, signal.SIGTERM)
        assert await asyncio.to_thread(bridge.popen.wait, TIMEOUT_S) == 0
        reply = await attached
    assert reply.response["error"]["message"].startswith(
        "The upstream session was lost: legacy server process exited with code -9"
    )
    assert await wait_for_tree(marker, lambda pids: pids == []) == []
