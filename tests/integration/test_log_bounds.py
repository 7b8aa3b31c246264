"""Issue 40, defects 8 and 9, in the real bridge's log: `mrtr-bridge serve` at debug level, its
JSON lines read from its log file once it has stopped (so every line is there).

A 900 KB request id and a 900 KB method write lines of a bounded length, the value itself cut to
`MAX_LOGGED_TEXT` characters and saying so (before the fix: one echo call wrote 3.6 MB in 4 lines,
20 relayed requests 18 MB), and a resource URI's userinfo (`alice:<password>@`) is in no line, on
the three paths a request takes: a modern client before a legacy server
(`tests/peers/journal_server.py`, mcp 1.x), a legacy client's requests relayed to that server, and a
legacy client before a modern-only server (`tests/peers/modern_interactive_server.py`, mcp 2.x: the
reverse direction).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from typing import Any

import aiohttp

from proxy.observe.redaction import MAX_LOGGED_TEXT
from translators.wire.jsonrpc import JsonObject

from .harness import LegacyPoster, ModernPoster, Peers, bridge_env
from .test_reverse_http import modern_interactive

T = 60.0
HUGE = 900_000
CUT = f"...[cut, {HUGE} characters]"
ID_CUT, METHOD_CUT = "i" * MAX_LOGGED_TEXT + CUT, "m" * MAX_LOGGED_TEXT + CUT
# A line's characters: about 20 fields, one of them at most `MAX_LOGGED_TEXT` + the mark.
MAX_LINE = 2 * MAX_LOGGED_TEXT + 1000
RELAYED = 20  # requests with a 900 KB method from one legacy client
DEBUG = bridge_env({"log": {"level": "debug"}})


def _access(lines: list[str]) -> list[dict[str, Any]]:
    return [
        entry
        for entry in (json.loads(line) for line in lines if line.startswith("{"))
        if entry.get("event") == "front_request_finished"
    ]


def _check_bounded(lines: list[str], password: str) -> None:
    longest = max(lines, key=len)
    assert len(longest) <= MAX_LINE, longest[:300]
    text = "\n".join(lines)
    assert "i" * (MAX_LOGGED_TEXT + 1) not in text and "m" * (MAX_LOGGED_TEXT + 1) not in text
    assert password not in text and "alice" not in text


async def _legacy_client(http: aiohttp.ClientSession, url: str, password: str) -> JsonObject:
    """A 900 KB id on an echo call, `RELAYED` 900 KB methods, a resource URI with a userinfo; the
    echo call's response."""
    client = LegacyPoster(http, url)
    await client.initialize()
    echo = {"name": "echo", "arguments": {"text": "hi"}}
    call = {"jsonrpc": "2.0", "id": "i" * HUGE, "method": "tools/call", "params": echo}
    echoed = (await client.send(call)).response
    assert echoed["id"] == "i" * HUGE
    for n in range(RELAYED):
        reply = await client.send({"jsonrpc": "2.0", "id": n + 10, "method": "m" * HUGE})
        assert "error" in reply.response
    uri = f"secret://alice:{password}@vault"
    reply = await client.send(
        {"jsonrpc": "2.0", "id": 99, "method": "resources/read", "params": {"uri": uri}}
    )
    assert "error" in reply.response
    return echoed


def _check_legacy_client(access: list[dict[str, Any]]) -> None:
    """The access lines of `_legacy_client`'s requests."""
    legacy = [entry for entry in access if entry["client_era"] == "legacy"]
    cut = [entry["request_id"] for entry in legacy if entry["method"] == METHOD_CUT]
    assert cut == list(range(10, 10 + RELAYED))
    named = [(e["request_id"], e["name"]) for e in legacy if e["request_id"] in (ID_CUT, 99)]
    assert named == [(ID_CUT, "echo"), (99, "secret://vault")]


async def test_lines_stay_bounded_before_a_legacy_server(peers: Peers) -> None:
    """The modern path and the legacy relay."""
    password = "pw-" + secrets.token_hex(8)
    journal = peers.log_dir / "journal.jsonl"
    server = peers.legacy("journal_server.py", "--journal", str(journal))
    bridge = peers.bridge(server.url, env=DEBUG)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        modern = ModernPoster(http, bridge.url)
        echo = {"name": "echo", "arguments": {"text": "hi"}}
        reply = await modern.post("tools/call", echo, request_id="i" * HUGE)
        assert reply.response["result"]["content"][0]["text"] == "hi"
        # no `Mcp-Method` header: a 900 KB header is refused before the bridge reads the body
        refused = await modern.post("m" * HUGE, {}, headers={"Mcp-Method": None})
        assert "error" in refused.response
        uri = {"uri": f"secret://alice:{password}@vault?token=x"}
        assert "error" in (await modern.post("resources/read", uri)).response
        echoed = await _legacy_client(http, bridge.url, password)
    assert echoed["result"]["content"][0]["text"] == "hi"
    lines = bridge.final_log().splitlines()
    _check_bounded(lines, password)
    access = _access(lines)
    modern_lines = [e for e in access if e["client_era"] == "modern"]
    assert [(e["request_id"], e["method"], e["name"]) for e in modern_lines] == [
        (ID_CUT, "tools/call", "echo"),
        (1, METHOD_CUT, None),
        (2, "resources/read", "secret://vault"),
    ]
    _check_legacy_client(access)


async def test_lines_stay_bounded_before_a_modern_server(peers: Peers) -> None:
    """The reverse direction: a legacy client before a modern-only server."""
    password = "pw-" + secrets.token_hex(8)
    server = modern_interactive(peers, "--modern-only")
    bridge = peers.bridge(server.url, env=DEBUG)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        # its reply (the 900 KB id echoed) is lost today: issue 40, defect 3, not this test's
        echoed = await _legacy_client(http, bridge.url, password)
    assert "result" in echoed or echoed["error"]["code"] == -32603
    lines = bridge.final_log().splitlines()
    _check_bounded(lines, password)
    _check_legacy_client(_access(lines))
