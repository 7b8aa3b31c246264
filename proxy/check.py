"""`mrtr-bridge check`: connect to the upstream the way `serve` would and say what will bridge.

Steps: a `server/discover` era probe (`proxy.upstream.era_probe`; a stdio upstream in a throwaway
process), then a legacy session opened with the same transport detection and revision negotiation
as `serve` (`initialize` declaring roots, so a server that asks for roots at `initialized` shows it
within `upstream.roots_probe_ms`), then `tools/list`. `translators.check_report` turns what was seen
into the report; exit status 0 bridgeable, 1 not bridgeable, 2 unreachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, Final, TextIO

import aiohttp

from config.settings import Settings, UpstreamSettings
from proxy import event_loop
from proxy.upstream.base import Inbound, PooledSession, TransportInfo
from proxy.upstream.era_probe import modern_post, probe_http, probe_stdio
from proxy.upstream.errors import safe_url
from proxy.upstream.http_wire import client_info
from proxy.upstream.negotiation import NegotiatingOpener
from proxy.upstream.stdio import StdioUpstreamSession
from proxy.upstream.stdio_process import check_command
from proxy.upstream.transport import HttpTransport
from translators.canonical import as_object
from translators.check_report import Observed, build_report
from translators.era_detection import DiscoverVerdict, modern_request
from translators.eras import ROOTS, TOOLS_LIST
from translators.errors import BridgeError, UpstreamUnavailable
from translators.jsonrpc import JsonObject
from translators.revisions import UnsupportedUpstreamVersion

EXIT_BRIDGEABLE: Final = 0
EXIT_NOT_BRIDGEABLE: Final = 1
EXIT_UNREACHABLE: Final = 2
MAX_TOOL_PAGES: Final = 20
_CAPABILITIES: Final[JsonObject] = {"roots": {"listChanged": True}}


class _RootsWatch:
    """Records `roots/list` asks that arrive outside any call (answered with no roots)."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.pending: list[int | str] = []

    def __call__(self, inbound: Inbound) -> None:
        message = inbound.message
        if message.get("method") == ROOTS and "id" in message:
            self.pending.append(message["id"])
            self.asked.set()

    async def answer(self, session: PooledSession, window_s: float) -> bool:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(window_s):
                await self.asked.wait()
        for push_id in self.pending:
            with contextlib.suppress(BridgeError):
                await session.respond(push_id, result={"roots": []})
        return self.asked.is_set()


async def _tools(session: PooledSession) -> list[Any]:
    tools: list[Any] = []
    params: JsonObject = {}
    for _ in range(MAX_TOOL_PAGES):
        page = await session.start(TOOLS_LIST, params, headers={}, on_inbound=None).result()
        tools.extend(page.get("tools") or [])
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str):
            break
        params = {"cursor": cursor}
    return tools


async def _look(
    session: PooledSession, seen: Observed, watch: _RootsWatch, window_s: float
) -> None:
    """What a legacy session shows: its InitializeResult, roots asks at initialized, its tools."""
    seen.init_result = session.init_result
    seen.roots_at_initialized = await watch.answer(session, window_s)
    if "tools" in (session.init_result.get("capabilities") or {}):
        try:
            seen.tools = await _tools(session)
        except BridgeError as exc:
            seen.tools_error = exc.message


async def _legacy(
    seen: Observed, settings: UpstreamSettings, opener: Any, transport: TransportInfo | None
) -> None:
    watch = _RootsWatch()
    try:
        session: PooledSession = await opener(dict(_CAPABILITIES), _static_headers(settings), watch)
    except UnsupportedUpstreamVersion as exc:
        seen.unsupported_version = exc.answered
        return
    except BridgeError as exc:
        seen.legacy_error = exc.message
        return
    finally:
        if transport is not None and not transport.name.startswith("auto"):
            seen.transport = transport.name
    try:
        await _look(session, seen, watch, settings.roots_probe_ms / 1000)
    finally:
        await session.aclose()


def _static_headers(settings: UpstreamSettings) -> dict[str, str]:
    static = settings.authorization
    return {"Authorization": static.get_secret_value()} if static is not None else {}


async def _check_http(settings: UpstreamSettings) -> Observed:
    assert settings.url is not None
    seen = Observed(upstream=safe_url(settings.url))
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=settings.connect_timeout_s)
    async with aiohttp.ClientSession(timeout=timeout) as client:
        try:
            seen.discover = await probe_http(
                client, settings.url, settings, _static_headers(settings)
            )
        except UpstreamUnavailable as exc:
            seen.unreachable = exc.message
            return seen
        except (
            BridgeError
        ) as exc:  # not a modern answer: judged legacy, as the spec's fallback says
            seen.discover = DiscoverVerdict(
                False, reason=f"server/discover probe failed: {exc.message}"
            )
        transport = HttpTransport(client, settings)
        await _legacy(seen, settings, NegotiatingOpener(transport), transport)
        if seen.discover is not None and seen.discover.modern:
            seen.transport = "streamable-http"
            if seen.init_result is None and "tools" in seen.discover.capabilities:
                await _modern_tools(client, settings, seen)
    return seen


async def _modern_tools(
    client: aiohttp.ClientSession, settings: UpstreamSettings, seen: Observed
) -> None:
    """A modern-only upstream's tools, with one modern `tools/list` (first page)."""
    assert settings.url is not None
    request = modern_request(TOOLS_LIST, client_info(), request_id="mrtr-bridge-check-tools")
    try:
        _status, reply = await modern_post(
            client, settings.url, request, settings, _static_headers(settings)
        )
    except (TimeoutError, BridgeError) as exc:
        seen.tools_error = getattr(exc, "message", "no answer in time")
        return
    tools = as_object(as_object(reply).get("result")).get("tools")
    if isinstance(tools, list):
        seen.tools = tools
    else:
        seen.tools_error = "tools/list answered without tools"


async def _check_stdio(settings: UpstreamSettings) -> Observed:
    seen = Observed(
        upstream=f"stdio:{(settings.command or '').split(maxsplit=1)[0]}", transport="stdio"
    )
    try:
        check_command(settings)
        seen.discover = await probe_stdio(settings)
    except UpstreamUnavailable as exc:
        seen.unreachable = exc.message
        return seen

    async def open_stdio(
        capabilities: JsonObject, headers: Any, on_unrelated: Any
    ) -> PooledSession:
        return await StdioUpstreamSession.open(settings, capabilities, on_unrelated=on_unrelated)

    await _legacy(seen, settings, NegotiatingOpener(open_stdio), None)
    return seen


async def inspect(settings: Settings) -> dict[str, Any]:
    """The `check` report for the configured upstream."""
    upstream = settings.upstream
    seen = await (_check_http(upstream) if upstream.url else _check_stdio(upstream))
    return build_report(seen)


def exit_status(report: dict[str, Any]) -> int:
    if not report["reachable"]:
        return EXIT_UNREACHABLE
    return EXIT_BRIDGEABLE if report["bridgeable"] else EXIT_NOT_BRIDGEABLE


def render_text(report: dict[str, Any]) -> str:
    """The report for a person."""
    info = report["serverInfo"] or {}
    lines = [
        f"upstream:   {report['upstream']}",
        f"era:        {report['era'] or 'unknown'}"
        + (
            f" (supports {', '.join(report['supportedVersions'])})"
            if report["supportedVersions"]
            else ""
        ),
        f"revision:   {report['protocolVersion'] or 'unknown'}",
        f"transport:  {report['transport'] or 'unknown'}",
        f"server:     {info.get('name', '?')} {info.get('version', '')}".rstrip(),
        f"capabilities: {', '.join(sorted(report['capabilities'] or {})) or 'none'}",
    ]
    for tool in report["tools"] or []:
        hints = ", ".join(f"{k}={v}" for k, v in tool["annotations"].items())
        state = "bridged" if tool["bridged"] else f"NOT bridged: {tool['reason']}"
        if "task" in tool:
            state += f" ({tool['task']})"
        lines.append(f"  tool {tool['name']}{f' [{hints}]' if hints else ''}: {state}")
    roots = report["pushesOutsideCall"]["rootsListAtInitialized"]
    lines.append(
        "asks roots/list at initialized: "
        f"{'unknown' if roots is None else 'yes' if roots else 'no'}"
    )
    lines += [f"will bridge: {item}" for item in report["bridges"]]
    lines += [f"problem:     {item}" for item in report["problems"]]
    lines += [f"note:        {item}" for item in report["notes"]]
    lines.append(f"bridgeable: {'yes' if report['bridgeable'] else 'no'}")
    return "\n".join(lines) + "\n"


def run_check(settings: Settings, as_json: bool, out: TextIO) -> int:
    """Run `check`, print the report, return the exit status."""
    report = event_loop.run(inspect(settings), settings.front.event_loop)
    out.write(json.dumps(report, indent=2) + "\n" if as_json else render_text(report))
    out.flush()
    return exit_status(report)


__all__ = [
    "EXIT_BRIDGEABLE",
    "EXIT_NOT_BRIDGEABLE",
    "EXIT_UNREACHABLE",
    "inspect",
    "render_text",
    "run_check",
]
