"""The reverse direction in front of a modern **stdio** server (the `mcp` 2.x interactive server
launched by the bridge): the real legacy `mcp` 1.x client over the stdio front and over HTTP gets
what the legacy interactive server gives it directly, and a modern client over HTTP is relayed to
the same process."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
from typing import Any

import mcp_types as types

from config import env_name

from .harness import BRIDGE_EXE, InputAnswers, Peers, modern_client
from .test_reverse_http import (
    COMMON,
    MODERN_INTERACTIVE,
    comparable,
    modern_interactive,
    readyz_era,
    run_scenarios,
)

T = 120.0
COMMAND = shlex.join([sys.executable, str(MODERN_INTERACTIVE), "--transport", "stdio"])
CLIENT = {"name": "raw-stdio", "version": "1"}
CHATTY_NOTES = [
    {"progress": 1.0, "total": 2.0, "message": "half"},
    {"log": "info", "data": "chatty t1"},
    {"progress": 2.0, "total": 2.0, "message": "done"},
]


async def test_stdio_front_and_stdio_upstream(peers: Peers) -> None:
    legacy = peers.legacy("interactive_server.py")
    bridge = shlex.join([str(BRIDGE_EXE), "stdio", "--upstream-command", COMMAND])
    async with asyncio.timeout(T):
        direct = await run_scenarios(legacy.url, *COMMON)
        bridged = await run_scenarios("", *COMMON, "chatty", options=("--command", bridge))
    chatty = bridged["outcomes"].pop("chatty")
    assert comparable(bridged) == comparable(direct)
    assert chatty["notes"] == CHATTY_NOTES


async def test_http_front_and_stdio_upstream_serve_both_kinds_of_client(peers: Peers) -> None:
    legacy = peers.legacy("interactive_server.py")
    bridge = peers.bridge(None, env={env_name("upstream.command"): COMMAND})
    answers = InputAnswers(elicit_content={"answer": "Bob"})
    async with asyncio.timeout(T):
        before = await readyz_era(bridge)  # no process is started to probe it at start
        direct = await run_scenarios(legacy.url, *COMMON)
        bridged = await run_scenarios(bridge.url, *COMMON, "chatty")  # the legacy client: probed
        era = await readyz_era(bridge)
        async with modern_client(bridge.url, **answers.client_kwargs()) as client:
            asked = await client.call_tool("ask", {"tag": "m"})
    chatty = bridged["outcomes"].pop("chatty")
    assert (before, era) == ("unknown", "modern")
    assert comparable(bridged) == comparable(direct)
    assert chatty["notes"] == CHATTY_NOTES
    content = asked.content[0]
    assert isinstance(content, types.TextContent)
    assert content.text == '{"action": "accept", "content": {"answer": "Bob"}}'
    assert [method for method, _ in answers.asked] == ["elicitation/create"]
    log = bridge.log_text(300_000)
    assert '"mode": "relayed"' in log and '"mode": "reverse' in log


async def test_the_stdio_front_by_hand(peers: Peers) -> None:
    """Over the stdio front: a line that is not JSON, a push left unanswered (cancelled after
    reverse.push_timeout_s), and notifications/cancelled ending a request in flight."""
    server = modern_interactive(peers, "--modern-only")
    env = {**os.environ, env_name("reverse.push_timeout_s"): "1"}
    process = await asyncio.create_subprocess_exec(
        str(BRIDGE_EXE),
        "stdio",
        "--upstream",
        server.url,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    stdout = process.stdout

    def send(message: Any) -> None:
        assert process.stdin is not None
        raw = message if isinstance(message, bytes) else json.dumps(message).encode()
        process.stdin.write(raw + b"\n")

    async def line() -> Any:
        return json.loads(await stdout.readline())

    caps = {"elicitation": {}}
    init = {"protocolVersion": "2025-11-25", "capabilities": caps, "clientInfo": CLIENT}
    async with asyncio.timeout(T):
        send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        initialized = await line()
        send(b"{not json")
        garbage = await line()
        ask = {"name": "ask", "arguments": {"tag": "s"}}
        send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ask})
        push, cancelled, failed = await line(), await line(), await line()
        slow = {"name": "slow", "arguments": {"tag": "s", "seconds": 30}}
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": slow})
        await server.until_logged("slow_started s")  # running upstream
        send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
        send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        after = await line()  # the cancelled request is never answered; the ping is
        process.stdin.close()
        assert process.stderr is not None
        log = (await process.stderr.read()).decode()
        await process.wait()
    assert initialized["result"]["protocolVersion"] == "2025-11-25"
    assert garbage == {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}
    assert push["method"] == "elicitation/create"
    assert cancelled["params"]["requestId"] == push["id"]
    assert failed["id"] == 1 and failed["error"]["code"] == -32603
    assert after == {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert '"event": "reverse_request_cancelled"' in log
    assert await stdout.read() == b""  # nothing more: request 2 was never answered
