"""Probing an upstream's era with `server/discover` without hurting a legacy server.

- **HTTP**: one modern POST (the 2026-07-28 headers and `_meta`); the answer is judged by
  `translators.protocol.era_detection.verdict_of_http`. A legacy server answers it with a 4xx or a
  JSON-RPC error and is none the worse.
- **stdio**: a legacy server may never answer an unknown method and stop answering anything after
  it (FastMCP on `mcp` 1.8), so the probe runs in a *throwaway process* that is stopped afterwards;
  sessions are always opened in fresh processes.

No answer within `upstream.era_probe_timeout_s` means legacy. A failure to connect or to start the
command raises `UpstreamUnavailable`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any, Final

import aiohttp
import structlog

from config.settings import UpstreamSettings
from proxy.upstream.errors import map_upstream_errors, safe_url
from proxy.upstream.http.wire import client_info
from proxy.upstream.stdio.process import spawn, stop_process
from translators.protocol.era_detection import (
    PROBE_ID,
    SILENT,
    DiscoverVerdict,
    discover_request,
    verdict_of_http,
    verdict_of_reply,
)
from translators.protocol.eras import MODERN_VERSION
from translators.wire.sse import SSEDecoder

_log = structlog.get_logger(__name__)
MAX_PROBE_BYTES: Final = 1_048_576
_HEADERS: Final = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": MODERN_VERSION,
}


def probe_reply(body: bytes, content_type: str, request_id: Any) -> Any:
    """The JSON-RPC reply to `request_id` in a JSON or SSE body, or None."""
    if content_type.startswith("text/event-stream"):
        for event in SSEDecoder(max_event_size=MAX_PROBE_BYTES).feed(body + b"\n\n"):
            try:
                message = json.loads(event.data)
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("id") == request_id:
                return message
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


async def modern_post(
    client: aiohttp.ClientSession,
    url: str,
    message: dict[str, Any],
    settings: UpstreamSettings,
    headers: Mapping[str, str],
) -> tuple[int, Any]:
    """POST one 2026-07-28 request (its headers from `message`); the status and the JSON-RPC
    reply (None if none could be read). Raises `TimeoutError` after `upstream.era_probe_timeout_s`.
    """
    timeout = aiohttp.ClientTimeout(total=settings.era_probe_timeout_s)
    with map_upstream_errors(safe_url(url), f"{message['method']} (modern)"):
        async with client.post(
            url,
            json=message,
            timeout=timeout,
            headers={**_HEADERS, "Mcp-Method": message["method"], **headers},
        ) as response:
            body = await response.content.read(MAX_PROBE_BYTES)
            return response.status, probe_reply(
                body, response.headers.get("Content-Type", ""), message["id"]
            )


async def probe_http(
    client: aiohttp.ClientSession, url: str, settings: UpstreamSettings, headers: Mapping[str, str]
) -> DiscoverVerdict:
    """POST `server/discover` to `url` and judge the answer."""
    try:
        status, reply = await modern_post(
            client, url, discover_request(client_info()), settings, headers
        )
    except TimeoutError:
        return SILENT
    verdict = verdict_of_http(status, reply)
    _log.debug("era_probe_answered", transport="http", modern=verdict.modern, status=status)
    return verdict


async def probe_stdio(settings: UpstreamSettings) -> DiscoverVerdict:
    """Start the command once, send only `server/discover`, judge the first answer, stop the
    process."""
    process, program = await spawn(settings)
    try:
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(json.dumps(discover_request(client_info())).encode() + b"\n")
            await process.stdin.drain()
            async with asyncio.timeout(settings.era_probe_timeout_s):
                return await _readprobe_reply(process.stdout)
        except TimeoutError:
            return SILENT
        # the process died (uvloop raises RuntimeError on a pipe it has closed), or a line beyond
        # the reader's limit
        except (ConnectionError, RuntimeError, ValueError):
            return DiscoverVerdict(False, reason="the process closed stdio after server/discover")
    finally:
        await stop_process(
            process, settings.kill_grace_s, _log.bind(program=program, pid=process.pid)
        )


async def _readprobe_reply(stdout: asyncio.StreamReader) -> DiscoverVerdict:
    while line := await stdout.readline():
        try:
            message = json.loads(line)
        except ValueError:
            continue  # not a protocol line: a legacy server's noise
        if isinstance(message, dict) and message.get("id") == PROBE_ID:
            return verdict_of_reply(message)
    return DiscoverVerdict(
        False, reason="the process exited after server/discover without answering"
    )


__all__ = ["MAX_PROBE_BYTES", "modern_post", "probe_http", "probe_reply", "probe_stdio"]
