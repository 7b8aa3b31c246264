"""A legacy client on `mrtr-bridge stdio --upstream <url>` sending a line far past the limit: the
line is cut as the modern stdio front cuts it (linear, at most `front.max_body_bytes` buffered),
never reaches the real legacy server, and the client gets the same -32600 with its request's id;
the session goes on. The other way, a JSON answer past `upstream.max_line_bytes` is never read
whole: the client gets -32603 naming the limit (the one reader of every path,
`proxy.upstream.http.wire.read_body`), and the session goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from typing import Any

from translators.wire.errors import BRIDGE_MARKER, INTERNAL_ERROR, INVALID_REQUEST

from .harness import BRIDGE_EXE, Peers, bridge_env

T = 60.0
BIG = 24 * 1024 * 1024  # the probe used 50 MB: 54 s of CPU and 162 MB before the fix
LIMIT = 1_048_576  # front.max_body_bytes, the default
FIXTURE_TOOLS = 27


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


async def read_answer(stdout: asyncio.StreamReader, request_id: int) -> dict[str, Any]:
    while True:
        raw = await stdout.readline()
        assert raw, "the bridge closed stdout"
        message: dict[str, Any] = json.loads(raw)
        if message.get("id") == request_id and "method" not in message:
            return message


@contextlib.asynccontextmanager
async def legacy_session(
    url: str, **sections: dict[str, Any]
) -> AsyncIterator[tuple[asyncio.subprocess.Process, asyncio.StreamWriter, asyncio.StreamReader]]:
    """`mrtr-bridge stdio --upstream url` (settings overridden by `sections`) with a legacy
    session opened on it; the bridge must exit 0 once the block closes its stdin."""
    bridge = await asyncio.create_subprocess_exec(
        str(BRIDGE_EXE),
        "stdio",
        "--log-level",
        "warning",
        "--upstream",
        url,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, **bridge_env(sections)},
        limit=16 * 1024 * 1024,
    )
    assert bridge.stdin is not None and bridge.stdout is not None
    stdin, stdout = bridge.stdin, bridge.stdout
    try:
        async with asyncio.timeout(T):
            init = {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "legacy-probe", "version": "1"},
            }
            stdin.write(line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
            opened = await read_answer(stdout, 1)
            assert opened["result"]["protocolVersion"] == "2025-06-18"
            stdin.write(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            await stdin.drain()
            yield bridge, stdin, stdout
            stdin.close()
            assert await bridge.wait() == 0
    finally:
        if bridge.returncode is None:
            bridge.kill()
            await bridge.wait()


async def test_an_oversized_line_is_refused_in_linear_time_and_the_session_goes_on(
    peers: Peers,
) -> None:
    legacy = peers.legacy()
    async with legacy_session(legacy.url) as (bridge, stdin, stdout):
        cpu_before, rss_before = cpu_seconds(bridge.pid), peak_rss_kib(bridge.pid)
        head = b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"x","pad":"'
        stdin.write(head + b"a" * BIG + b'"}}\n')
        stdin.write(line({"jsonrpc": "2.0", "id": 10, "method": "tools/list"}))
        await stdin.drain()
        refused = await read_answer(stdout, 9)
        listed = await read_answer(stdout, 10)
        cpu = cpu_seconds(bridge.pid) - cpu_before
        rss_growth_mib = (peak_rss_kib(bridge.pid) - rss_before) / 1024
    assert refused == {
        "jsonrpc": "2.0",
        "id": 9,
        "error": {
            "code": INVALID_REQUEST,
            "message": f"Invalid request: message larger than the limit of {LIMIT} bytes",
        },
    }
    assert len(listed["result"]["tools"]) == FIXTURE_TOOLS
    # linear: reading 24 MB in 64 KiB chunks costs well under a second; quadratic took minutes
    assert cpu < 5.0, cpu
    assert rss_growth_mib < 16, rss_growth_mib  # never the whole line in memory
    # the legacy server never saw the line: it answered the next request normally (above), and
    # a tools/call named "x" would have been answered as an unknown tool, not refused here


async def test_an_oversized_json_answer_is_refused_and_the_session_goes_on(peers: Peers) -> None:
    """The real legacy server answering in JSON (`--json-response`); its tools/list answer is past
    a 1 KiB `upstream.max_line_bytes`, a ping's answer is not."""
    legacy = peers.legacy("legacy_fixture_server.py", "--json-response")
    async with legacy_session(legacy.url, upstream={"max_line_bytes": 1024}) as (_, stdin, stdout):
        stdin.write(line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        refused = await read_answer(stdout, 2)
        stdin.write(line({"jsonrpc": "2.0", "id": 3, "method": "ping"}))
        pong = await read_answer(stdout, 3)
    correlation_id = refused["error"]["data"].pop("correlationId")  # into the bridge's log
    assert len(correlation_id) == 16
    assert refused == {
        "jsonrpc": "2.0",
        "id": 2,
        "error": {
            "code": INTERNAL_ERROR,
            "message": "The upstream server's answer is larger than the limit of 1024 bytes",
            "data": {"source": BRIDGE_MARKER, "limit": "upstream.max_line_bytes"},
        },
    }
    assert pong == {"jsonrpc": "2.0", "id": 3, "result": {}}
