"""The reverse direction in front of a modern **stdio** server (the `mcp` 2.x interactive server
launched by the bridge): the real legacy `mcp` 1.x client over the stdio front and over HTTP gets
what the legacy interactive server gives it directly, and a modern client over HTTP is relayed to
the same process."""

from __future__ import annotations

import asyncio
import shlex
import sys

import mcp_types as types

from config import env_name

from .harness import BRIDGE_EXE, InputAnswers, Peers, modern_client
from .test_reverse_http import COMMON, MODERN_INTERACTIVE, comparable, readyz_era, run_scenarios

T = 120.0
COMMAND = shlex.join([sys.executable, str(MODERN_INTERACTIVE), "--transport", "stdio"])
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
        for _ in range(60):  # the era probe runs in the background while the process starts
            if await readyz_era(bridge) != "unknown":
                break
            await asyncio.sleep(0.5)
        era = await readyz_era(bridge)
        direct = await run_scenarios(legacy.url, *COMMON)
        bridged = await run_scenarios(bridge.url, *COMMON, "chatty")
        async with modern_client(bridge.url, **answers.client_kwargs()) as client:
            asked = await client.call_tool("ask", {"tag": "m"})
    chatty = bridged["outcomes"].pop("chatty")
    assert era == "modern"
    assert comparable(bridged) == comparable(direct)
    assert chatty["notes"] == CHATTY_NOTES
    content = asked.content[0]
    assert isinstance(content, types.TextContent)
    assert content.text == '{"action": "accept", "content": {"answer": "Bob"}}'
    assert [method for method, _ in answers.asked] == ["elicitation/create"]
    log = bridge.log_text(300_000)
    assert '"mode": "relayed"' in log and '"mode": "reverse' in log
