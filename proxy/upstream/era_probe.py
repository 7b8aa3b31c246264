"""Probing an upstream's era with `server/discover` without hurting a legacy server.

- **HTTP**: one modern POST (the 2026-07-28 headers and `_meta`); the answer is judged by
  `translators.protocol.era_detection.verdict_of_http`. A legacy server answers it with a 4xx or a
  JSON-RPC error and is none the worse.
- **stdio**: a legacy server may never answer an unknown method and stop answering anything after
  it (FastMCP on `mcp` 1.8). `probe_stdio` therefore runs the probe in a *throwaway process* that is
  stopped afterwards; `probe_process` probes a given process and says whether it *replied*: the
  stdio front probes the process a legacy client's relay will use, and keeps it only when the
  server answered (an error, from a legacy one), as the spec's fallback to `initialize` expects
  (docs/decisions.md § 26). A silent or dead process is never reused.

No answer within `upstream.era_probe_timeout_s` means legacy. A failure to connect or to start the
command raises `UpstreamUnavailable`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import structlog

from config.settings import UpstreamSettings
from proxy.upstream.http.wire import client_info, read_reply
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

if TYPE_CHECKING:
    import aiohttp

_log = structlog.get_logger(__name__)
_HEADERS: Final = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": MODERN_VERSION,
}


async def modern_post(
    client: aiohttp.ClientSession,
    url: str,
    message: dict[str, Any],
    settings: UpstreamSettings,
    headers: Mapping[str, str],
) -> tuple[int, Any]:
    """POST one 2026-07-28 request (its headers from `message`); the status and the JSON-RPC
    reply (None if none could be read), read to its end within `upstream.max_line_bytes` (the one
    body reader, `proxy.upstream.http.wire.read_reply`). Raises `TimeoutError` after
    `upstream.era_probe_timeout_s`, an `UpstreamFault` when the connection fails or the upstream
    redirects off its origin."""
    import aiohttp  # not at the top: the stdio probe needs none of it (docs/decisions.md § 26)

    from proxy.common.shown import shown_uri
    from proxy.upstream.errors import map_upstream_errors

    timeout = aiohttp.ClientTimeout(total=settings.era_probe_timeout_s)
    with map_upstream_errors(shown_uri(url), f"{message['method']} (modern)"):
        async with client.post(
            url,
            json=message,
            timeout=timeout,
            headers={**_HEADERS, "Mcp-Method": message["method"], **headers},
        ) as response:
            reply = await read_reply(response, message["id"], settings.max_line_bytes)
            return response.status, reply


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


def stdio_probe_settings(upstream: UpstreamSettings) -> UpstreamSettings:
    """A stdio probe must also wait for the process to start (a Python server on the `mcp` 2.x SDK
    takes seconds to import, more next to the spare processes starting at the same time): it
    waits up to three times `upstream.init_timeout_s` if that is longer."""
    timeout_s = max(upstream.era_probe_timeout_s, 3 * upstream.init_timeout_s)
    return upstream.model_copy(update={"era_probe_timeout_s": timeout_s})


async def probe_stdio(settings: UpstreamSettings) -> DiscoverVerdict:
    """Start the command once, send only `server/discover`, judge the first answer, stop the
    process."""
    process, program = await spawn(settings)
    try:
        verdict, _ = await probe_process(process, settings)
        return verdict
    finally:
        await stop_process(
            process, settings.kill_grace_s, _log.bind(program=program, pid=process.pid)
        )


async def probe_process(
    process: asyncio.subprocess.Process, settings: UpstreamSettings
) -> tuple[DiscoverVerdict, bool]:
    """Send `server/discover` to a started process and judge its answer; also whether it *replied*
    (a JSON-RPC reply to the probe, and the process still runs): a legacy server that replied with
    an error is still in step, and the spec's fallback, `initialize`, may go to the same process.
    Stopping the process is the caller's."""
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(json.dumps(discover_request(client_info())).encode() + b"\n")
        await process.stdin.drain()
        async with asyncio.timeout(settings.era_probe_timeout_s):
            verdict = await _readprobe_reply(process.stdout)
    except TimeoutError:
        return SILENT, False
    # the process died (uvloop raises RuntimeError on a pipe it has closed), or a line beyond
    # the reader's limit
    except (ConnectionError, RuntimeError, ValueError):
        return DiscoverVerdict(
            False, reason="the process closed stdio after server/discover"
        ), False
    return verdict, verdict is not _EXITED and process.returncode is None


_EXITED: Final = DiscoverVerdict(
    False, reason="the process exited after server/discover without answering"
)


async def _readprobe_reply(stdout: asyncio.StreamReader) -> DiscoverVerdict:
    while line := await stdout.readline():
        try:
            message = json.loads(line)
        except ValueError:
            continue  # not a protocol line: a legacy server's noise
        if isinstance(message, dict) and message.get("id") == PROBE_ID:
            return verdict_of_reply(message)
    return _EXITED


__all__ = [
    "modern_post",
    "probe_http",
    "probe_process",
    "probe_stdio",
    "stdio_probe_settings",
]
