"""The access line says who (issue 44, item 9): the real `mrtr-bridge serve` in front of a real
legacy server, a modern client and a legacy client each sending their first request (JSON-RPC id 1
both): every `front_request_finished` line carries the client's address, its `User-Agent`, its
`clientInfo` name (a modern request's `_meta`; a legacy client's `initialize`), the trace id of its
`traceparent` and a `bridge_request_id` unique per request; a long or credential-bearing user agent
is cut and masked on the way to the log, as every text is."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import aiohttp

from config.settings import IdentitySettings
from proxy.auth.principal import principal_of

from .harness import LegacyPoster, ModernPoster, Peers, bridge_env
from .raw_http import CLIENT_INFO

T = 30
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
LONG_AGENT = "agent/" + "x" * 300
SECRET = "sk-live-" + "9" * 24


def entries(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


async def test_each_access_line_says_who_sent_the_request(peers: Peers) -> None:
    legacy = peers.legacy()
    bridge = peers.bridge(legacy.url, env=bridge_env({"log": {"format": "json"}}))
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        modern = ModernPoster(http, bridge.url)
        first = await modern.post(
            "tools/list", headers={"User-Agent": "claude-code/2.1", "traceparent": TRACEPARENT}
        )
        assert "result" in first.response
        credential = await modern.post(
            "tools/list", headers={"User-Agent": f"tool Bearer {SECRET}", "traceparent": "junk"}
        )
        assert "result" in credential.response
        long_agent = await modern.post("tools/list", headers={"User-Agent": LONG_AGENT})
        assert "result" in long_agent.response
        old = LegacyPoster(http, bridge.url, headers={"User-Agent": "old-client/1.0"})
        assert "result" in (await old.initialize()).response
        assert "result" in (await old.post("tools/list")).response
    text = bridge.final_log()
    lines = [entry for entry in entries(text) if entry.get("event") == "front_request_finished"]
    assert [(line["request_id"], line["client_era"]) for line in lines] == [
        (1, "modern"),
        (2, "modern"),
        (3, "modern"),
        (1, "legacy"),  # the legacy client's first request: its id is 1 too
        (None, "legacy"),  # notifications/initialized
        (2, "legacy"),
    ]
    ids = [line["bridge_request_id"] for line in lines]
    assert len(set(ids)) == len(ids) and all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids)
    assert {line["client_address"] for line in lines} == {"127.0.0.1"}
    assert [line["user_agent"] for line in lines] == [
        "claude-code/2.1",
        "tool Bearer [redacted]",
        "agent/" + "x" * 194 + "...[cut, 306 characters]",
        "old-client/1.0",
        "old-client/1.0",
        "old-client/1.0",
    ]
    # a legacy client names itself in `initialize` only
    assert [line["client_name"] for line in lines] == [CLIENT_INFO["name"]] * 4 + [None, None]
    assert [line["trace_id"] for line in lines] == [TRACE_ID] + [None] * 5
    assert SECRET not in text


async def test_every_line_shows_the_principal_as_the_access_line_does(peers: Peers) -> None:
    """A principal is shown by its first 12 hex digits on every line that names it: the access
    line, the engine's lines and the fronts' own (a relayed legacy session's included), never the
    whole digest on one path and a part of it on another."""
    legacy = peers.legacy()
    bridge = peers.bridge(legacy.url, env=bridge_env({"log": {"format": "json"}}))
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        modern = ModernPoster(http, bridge.url, headers={"Authorization": f"Bearer {SECRET}"})
        assert "result" in (await modern.post("tools/list")).response
        old = LegacyPoster(http, bridge.url, headers={"Authorization": f"Bearer {SECRET}"})
        assert "result" in (await old.initialize()).response
    shown = principal_of({"authorization": f"Bearer {SECRET}"}, IdentitySettings())[:12]
    written = entries(bridge.final_log())
    named = [(entry["event"], entry["principal"]) for entry in written if "principal" in entry]
    assert {principal for _, principal in named} == {shown}
    assert {"front_request_finished", "legacy_session_relayed"} <= {event for event, _ in named}
