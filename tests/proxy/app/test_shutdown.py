"""Graceful shutdown on SIGTERM (issue 6): stop accepting, let attached requests finish, then refuse
held pushes and cancel their upstream calls, close sessions and processes, and exit 0.

`mrtr-bridge serve` runs as a subprocess in front of `tests/peers/journal_server.py` (mcp 1.x),
which journals what it saw: the refusal of each held push, the cancellation of each held call
and, over stdio, its own clean stop once the bridge closed its stdin.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from integration.harness import (
    CLIENT_INFO,
    ModernPoster,
    PeerProcess,
    Peers,
    bridge_env,
    legacy_stdio_command,
)
from safety_harness import (
    CAPABILITIES,
    JOURNAL_SERVER,
    JournalPeer,
    call,
    journal_peer,
    start_held,
    text_of,
)

from translators.protocol.eras import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    MODERN_VERSION,
    RESULT_INPUT_REQUIRED,
    TOOLS_CALL,
)

TIMEOUT_S = 40.0
EXIT_WAIT_S = 25.0


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JournalPeer]:
    """One journaling legacy server (HTTP) for the module."""
    with journal_peer(tmp_path_factory.mktemp("shutdown")) as peer:
        yield peer


def entries_of(journal: JournalPeer, tag: str) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in entry.items() if k != "tag"}
        for entry in journal.entries()
        if entry.get("tag") == tag
    ]


async def terminate(bridge: PeerProcess) -> int:
    """SIGTERM to the bridge process alone (not its group); its exit status."""
    os.kill(bridge.popen.pid, signal.SIGTERM)
    return await asyncio.to_thread(bridge.popen.wait, EXIT_WAIT_S)


async def refuses_connections(url: str) -> bool:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as fresh:
        try:
            async with fresh.post(url, json={}):
                return False
        except aiohttp.ClientConnectorError:
            return True
        # accepted in the instant the socket closed, then reset: ask again
        except aiohttp.ClientOSError:
            return False


async def test_sigterm_drains_then_abandons_held_calls(
    upstream: JournalPeer, tmp_path: Path
) -> None:
    """An attached request completes after SIGTERM; held pushes are refused and their calls
    cancelled; exit 0."""
    peers = Peers(log_dir=tmp_path)
    try:
        bridge = peers.bridge(upstream.url)
        async with asyncio.timeout(TIMEOUT_S), aiohttp.ClientSession() as http:
            poster = ModernPoster(http, bridge.url, capabilities=CAPABILITIES)
            await start_held(poster, "ask", tag="down-elicit", linger=30)
            await start_held(poster, "sample", tag="down-sample", linger=30)
            attached = asyncio.create_task(
                call(poster, "slow_echo", text="down-attached", seconds=1.5)
            )
            await upstream.wait_for(
                lambda entries: (
                    {"event": "call_started", "tag": "down-attached", "tool": "slow_echo"}
                    in entries
                )
            )
            status = await terminate(bridge)
            assert text_of(await attached) == "down-attached"
            assert await refuses_connections(bridge.url)
            await upstream.wait_for(
                lambda entries: sum(entry["event"] == "cancelled" for entry in entries) >= 2
            )
    finally:
        peers.close()
    assert status == 0
    assert entries_of(upstream, "down-attached") == [
        {"event": "call_started", "tool": "slow_echo"},
        {"event": "finished"},
    ]
    assert entries_of(upstream, "down-elicit") == [
        {"event": "call_started", "tool": "ask"},
        {"event": "elicit_answered", "action": "cancel"},
        {"event": "cancelled"},
    ]
    sample = entries_of(upstream, "down-sample")
    assert [entry["event"] for entry in sample] == ["call_started", "sample_failed", "cancelled"]
    log = bridge.log_text(200_000)
    assert "bridge_stopping" in log and "upstream_sessions_closed" in log


async def test_sigterm_with_a_stdio_upstream_stops_its_processes(tmp_path: Path) -> None:
    """Over stdio, the held call's push is refused, the call cancelled and the legacy process stops
    cleanly."""
    journal = JournalPeer(tmp_path / "stdio-journal.jsonl")
    command = legacy_stdio_command(JOURNAL_SERVER, "--journal", str(journal.path))
    peers = Peers(log_dir=tmp_path)
    try:
        bridge = peers.bridge(None, env=bridge_env({"upstream": {"command": command}}))
        async with asyncio.timeout(TIMEOUT_S), aiohttp.ClientSession() as http:
            poster = ModernPoster(http, bridge.url, capabilities=CAPABILITIES)
            await start_held(poster, "ask", tag="stdio-elicit", linger=30)
            assert text_of(await call(poster, "echo", text="stdio works")) == "stdio works"
            status = await terminate(bridge)
            await journal.wait_for(
                lambda entries: any(entry["event"] == "stopped" for entry in entries)
            )
    finally:
        peers.close()
    assert status == 0
    assert entries_of(journal, "stdio-elicit") == [
        {"event": "call_started", "tool": "ask"},
        {"event": "elicit_answered", "action": "cancel"},
        {"event": "cancelled"},
    ]
    stopped = [entry for entry in journal.entries() if entry["event"] == "stopped"]
    assert (
        stopped == [{"event": "stopped", "transport": "stdio"}] * len(stopped) and len(stopped) >= 2
    )


def stdio_line(request_id: int, tool: str, **arguments: Any) -> bytes:
    """One modern `tools/call` line for the stdio front."""
    meta = {
        META_PROTOCOL_VERSION: MODERN_VERSION,
        META_CLIENT_INFO: CLIENT_INFO,
        META_CLIENT_CAPABILITIES: CAPABILITIES,
    }
    params = {"name": tool, "arguments": arguments, "_meta": meta}
    return (
        json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": TOOLS_CALL, "params": params}
        ).encode()
        + b"\n"
    )


async def read_response(stdout: asyncio.StreamReader, request_id: int) -> dict[str, Any]:
    while True:
        message: dict[str, Any] = json.loads(await stdout.readline())
        if message.get("id") == request_id:
            return message


async def test_sigterm_on_the_stdio_front_drains_then_abandons(
    upstream: JournalPeer, tmp_path: Path
) -> None:
    """`mrtr-bridge stdio` takes SIGTERM as stdin EOF: the attached call is answered, the held one
    refused; exit 0."""
    exe = Path(sys.executable).parent / "mrtr-bridge"
    with (tmp_path / "bridge-stdio.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            str(exe),
            "stdio",
            "--upstream",
            upstream.url,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            env={**os.environ, "MRTR_BRIDGE_LOG_FORMAT": "json"},
        )
    assert process.stdin is not None and process.stdout is not None
    try:
        async with asyncio.timeout(TIMEOUT_S):
            process.stdin.write(stdio_line(1, "ask", tag="stdio-front-held", linger=30))
            held = await read_response(process.stdout, 1)
            assert held["result"]["resultType"] == RESULT_INPUT_REQUIRED
            process.stdin.write(
                stdio_line(2, "slow_echo", text="stdio-front-attached", seconds=0.3)
            )
            await upstream.wait_for(
                lambda entries: (
                    {"event": "call_started", "tag": "stdio-front-attached", "tool": "slow_echo"}
                    in entries
                )
            )
            process.send_signal(signal.SIGTERM)
            attached = await read_response(process.stdout, 2)
            status = await process.wait()
            await upstream.wait_for(
                lambda entries: {"event": "cancelled", "tag": "stdio-front-held"} in entries
            )
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert attached["result"]["content"][0]["text"] == "stdio-front-attached"
    assert status == 0
    assert entries_of(upstream, "stdio-front-held") == [
        {"event": "call_started", "tool": "ask"},
        {"event": "elicit_answered", "action": "cancel"},
        {"event": "cancelled"},
    ]
