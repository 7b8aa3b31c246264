"""`upstream.headers`: static headers (an API key, say) on every request to the upstream
(docs/operations.md, "Headers for the upstream"). The ground truth is a legacy client used
directly that sends the same header with each request: the real journaling server (`mcp` 1.x)
records, for each `whoami` call, the `X-API-Key` it arrived with. Through the bridge a modern
client's call and a relayed legacy client's session arrive with it too, and the key is never
logged."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp

from translators.protocol.eras import RESULT_COMPLETE, TOOLS_CALL

from .harness import Peers
from .raw_http import LegacyPoster, ModernPoster

T = 30.0  # bound on the test body, seconds
KEY = "k-3f9a1c-upstream-api-key"


def api_keys(journal: Path) -> list[str | None]:
    """The `X-API-Key` of each `whoami` call the server journaled, in order."""
    lines = journal.read_text(encoding="utf-8").splitlines() if journal.exists() else []
    entries = [json.loads(line) for line in lines if line.strip()]
    return [entry.get("api_key") for entry in entries if entry["event"] == "whoami"]


async def _legacy_whoami(http: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> None:
    client = LegacyPoster(http, url, headers=headers)
    await client.initialize()
    reply = await client.post(TOOLS_CALL, {"name": "whoami", "arguments": {}})
    assert reply.response["result"]["isError"] is False, reply.response


async def test_static_headers_reach_the_upstream_as_a_direct_clients_do(
    peers: Peers, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.jsonl"
    server = peers.legacy("journal_server.py", "--journal", str(journal))
    bridge = peers.bridge(server.url, env={"MRTR_BRIDGE_UPSTREAM_HEADERS": f"X-API-Key={KEY}"})
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        await _legacy_whoami(http, server.url, {"X-API-Key": KEY})  # the client used directly
        assert api_keys(journal) == [KEY]
        reply = await ModernPoster(http, bridge.url).post(
            TOOLS_CALL, {"name": "whoami", "arguments": {}}
        )
        assert reply.response["result"]["resultType"] == RESULT_COMPLETE, reply.response
        await _legacy_whoami(http, bridge.url, {})  # a legacy client that knows no key
    assert api_keys(journal) == [KEY, KEY, KEY]
    assert KEY not in bridge.log_text(limit=10_000_000)
