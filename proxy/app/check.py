"""`mrtr-bridge check`: connect to the upstream the way `serve` would and say what will bridge.

Steps: a `server/discover` era probe (`proxy.upstream.era_probe`; a stdio upstream in a throwaway
process), then a legacy session opened with the same transport detection and revision negotiation
as `serve` (`initialize` declaring roots, so a server that asks for roots at `initialized` shows it
within `upstream.roots_probe_ms`), then `tools/list`, by client capability too (check_tools.py);
over HTTP, unless the settings declare it, whether the upstream serves a second session beside the
first (proxy/upstream/session_limit.py: one more session, and a ping of the first).
`translators.check_report` turns what was seen into the report; exit status 0 bridgeable, 1 not
bridgeable, 2 unreachable. Named upstreams are checked at once, a report each; the exit status is
the worst one's.
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any, Final, TextIO

import aiohttp

from config.settings import Settings, UpstreamSettings, server_path
from proxy.app import event_loop
from proxy.app.check_tools import (
    RootsWatch,
    all_tools,
    by_capability,
    legacy_tools,
    session_closer,
)
from proxy.common.shown import shown_uri
from proxy.upstream.base import PooledSession, SessionOpener, TransportInfo
from proxy.upstream.era_probe import modern_post, probe_stdio
from proxy.upstream.errors import UpstreamRefused
from proxy.upstream.http.outbound import proxy_named, upstream_client
from proxy.upstream.http.wire import client_info
from proxy.upstream.negotiation import NegotiatingOpener
from proxy.upstream.session_limit import SessionLimit
from proxy.upstream.stdio.process import check_command
from proxy.upstream.stdio.session import StdioUpstreamSession
from proxy.upstream.transport import HttpTransport
from translators.check_report import EVERY_CAPABILITY, Observed, build_report
from translators.protocol.capabilities import modern_client_capabilities_to_legacy
from translators.protocol.era_detection import (
    SILENT,
    DiscoverVerdict,
    discover_request,
    modern_request,
    verdict_of_http,
)
from translators.protocol.eras import TOOLS_LIST
from translators.protocol.revisions import UnsupportedUpstreamVersion
from translators.wire.errors import (
    BridgeError,
    UpstreamProtocolError,
    UpstreamRedirected,
    UpstreamReturnedError,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from translators.wire.fast_json import as_object
from translators.wire.jsonrpc import JsonObject

EXIT_BRIDGEABLE: Final = 0
EXIT_NOT_BRIDGEABLE: Final = 1
EXIT_UNREACHABLE: Final = 2
_CREDENTIAL_STATUSES: Final = frozenset(
    {401, 403}
)  # it wants a credential: an answer, not "not MCP"


async def _look(session: PooledSession, seen: Observed, watch: RootsWatch, window_s: float) -> None:
    """What a legacy session shows: its InitializeResult, roots asks at initialized, its tools."""
    seen.init_result = session.init_result
    seen.roots_at_initialized = await watch.answer(session, window_s)
    if "tools" in (session.init_result.get("capabilities") or {}):
        try:
            seen.tools = await all_tools(session)
        except BridgeError as exc:
            seen.tools_error = exc.message


async def _sessions_served(
    limit: SessionLimit, opener: SessionOpener, settings: UpstreamSettings, first: PooledSession
) -> None:
    """Whether the upstream serves a second session beside `first`, unless known: one more is
    opened, and `first` pinged (`SessionLimit.displaced`); both are let go as `serve` would."""
    if limit.one is not None or not limit.learns:
        return
    try:
        second: PooledSession = await opener({}, _static_headers(settings), lambda _inbound: None)
    except BridgeError:
        return  # it answered the first; the limit stays unknown
    try:
        await limit.displaced(first)
    finally:
        await limit.let_go(second)


async def _legacy(
    seen: Observed,
    settings: UpstreamSettings,
    open_once: SessionOpener,
    transport: TransportInfo | None,
    limit: SessionLimit | None = None,
) -> BridgeError | None:
    """Open a legacy session declaring every capability a modern client may, and look at it (and,
    with a `limit` to learn, whether a second one serves beside it); then the tools by capability.
    The error that kept it from opening, if any."""
    opener = NegotiatingOpener(open_once, limit=limit)
    try:
        return await _legacy_sessions(seen, settings, opener, transport, limit)
    finally:
        await opener.aclose()  # sessions opened in the wrong revision's shape, still closing


async def _legacy_sessions(
    seen: Observed,
    settings: UpstreamSettings,
    opener: SessionOpener,
    transport: TransportInfo | None,
    limit: SessionLimit | None,
) -> BridgeError | None:
    watch = RootsWatch()
    every = modern_client_capabilities_to_legacy(EVERY_CAPABILITY)
    try:
        session: PooledSession = await opener(every, _static_headers(settings), watch)
    except UnsupportedUpstreamVersion as exc:
        seen.unsupported_version = exc.answered
        return None
    except BridgeError as exc:
        seen.legacy_error = exc.message
        return exc
    finally:
        if transport is not None and not transport.name.startswith("auto"):
            seen.transport = transport.name
    try:
        await _look(session, seen, watch, settings.roots_probe_ms / 1000)
        if limit is not None:
            await _sessions_served(limit, opener, settings, session)
    finally:
        await (session.aclose() if limit is None else limit.let_go(session))
    if seen.tools is not None:
        close = session_closer(limit)
        lister = functools.partial(legacy_tools, opener, _static_headers(settings), close=close)
        await by_capability(seen, lister, at_once=transport is None)  # stdio: no transport
    return None


def _answered_nothing(seen: Observed) -> bool:
    return (
        seen.discover is not None
        and not seen.discover.modern
        and seen.init_result is None
        and (seen.unsupported_version is None)
    )


def _static_headers(settings: UpstreamSettings) -> dict[str, str]:
    static = settings.authorization
    return {"Authorization": static.get_secret_value()} if static is not None else {}


async def _discover_http(
    client: aiohttp.ClientSession, settings: UpstreamSettings, seen: Observed
) -> tuple[int | None, bool]:
    """The `server/discover` probe: the HTTP status it got (None: no HTTP answer at all) and
    whether the body was JSON-RPC. Raises `UpstreamUnavailable` when the connection fails."""
    assert settings.url is not None
    request = discover_request(client_info())
    try:
        status, reply = await modern_post(
            client, settings.url, request, settings, _static_headers(settings)
        )
    except TimeoutError:
        seen.discover = SILENT
        return None, False
    except (UpstreamUnavailable, UpstreamRedirected):
        raise
    except BridgeError as exc:  # not HTTP (junk bytes): judged later with initialize
        seen.discover = DiscoverVerdict(False, reason=f"server/discover failed: {exc.message}")
        return None, False
    seen.discover = verdict_of_http(status, reply)
    return status, isinstance(reply, dict) and reply.get("jsonrpc") == "2.0"


def _judge_http(
    seen: Observed, status: int | None, jsonrpc: bool, error: BridgeError | None
) -> None:
    """Neither `server/discover` nor `initialize` answered as MCP: nothing answered at all
    (unreachable), or an HTTP server that is not an MCP server."""
    if not _answered_nothing(seen) or error is None:
        return
    refused = error.status if isinstance(error, UpstreamRefused) else None
    if status is None and refused is None:
        seen.unreachable = f"no HTTP answer: {error.message}"
    elif (
        not jsonrpc
        and not isinstance(error, UpstreamReturnedError)
        and ({status, refused}.isdisjoint(_CREDENTIAL_STATUSES))
    ):
        seen.not_mcp = (
            f"server/discover got HTTP {status} without a JSON-RPC answer, and {error.message}"
        )


async def _check_http(settings: UpstreamSettings) -> Observed:
    assert settings.url is not None
    seen = Observed(upstream=shown_uri(settings.url), proxy=proxy_named(settings))
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=settings.connect_timeout_s)
    async with upstream_client(settings, timeout=timeout) as client:
        try:
            status, jsonrpc = await _discover_http(client, settings, seen)
        except UpstreamUnavailable as exc:
            seen.unreachable = exc.message
            return seen
        except UpstreamRedirected as exc:
            if not exc.off_origin:
                raise
            seen.redirected = exc.target  # nothing was sent there: the report names the fix
            return seen
        transport = HttpTransport(client, settings)
        limit = SessionLimit.of(settings)
        try:
            error = await _legacy(seen, settings, transport, transport, limit)
        finally:
            await limit.aclose()
        if seen.init_result is not None:
            seen.sessions, seen.one_session = limit.describe(), bool(limit.one)
        _judge_http(seen, status, jsonrpc, error)
        if seen.discover is not None and seen.discover.modern:
            seen.transport = "streamable-http"
            if seen.init_result is None and "tools" in seen.discover.capabilities:
                await _modern_tools(client, settings, seen)
    return seen


async def _modern_list(
    client: aiohttp.ClientSession, settings: UpstreamSettings, declared: JsonObject
) -> list[Any]:
    """One modern `tools/list` (first page) declaring `declared`; `BridgeError` if it fails."""
    assert settings.url is not None
    request = modern_request(
        TOOLS_LIST, client_info(), request_id="mrtr-bridge-check-tools", capabilities=declared
    )
    try:
        _status, reply = await modern_post(
            client, settings.url, request, settings, _static_headers(settings)
        )
    except TimeoutError:
        raise UpstreamTimeout("tools/list: no answer in time") from None
    tools = as_object(as_object(reply).get("result")).get("tools")
    if not isinstance(tools, list):
        raise UpstreamProtocolError("tools/list answered without tools")
    return tools


async def _modern_tools(
    client: aiohttp.ClientSession, settings: UpstreamSettings, seen: Observed
) -> None:
    """A modern-only upstream's tools, declaring every capability, then by capability."""
    try:
        seen.tools = await _modern_list(client, settings, EVERY_CAPABILITY)
    except BridgeError as exc:
        seen.tools_error = exc.message
        return
    await by_capability(seen, functools.partial(_modern_list, client, settings), at_once=False)


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
    started: list[StdioUpstreamSession] = []

    async def open_stdio(
        capabilities: JsonObject, headers: Any, on_unrelated: Any
    ) -> PooledSession:
        session = await StdioUpstreamSession.spawned(settings)
        started.append(session)
        await session.initialize(capabilities, on_unrelated=on_unrelated)
        return session

    error = await _legacy(seen, settings, open_stdio, None)
    # It died or hung before answering initialize (a JSON-RPC refusal is an answer).
    if _answered_nothing(seen) and error is not None:
        if not isinstance(error.__cause__, UpstreamReturnedError):
            seen.unreachable = error.message
        if started:
            seen.stderr_tail = list(started[-1].stderr.tail)
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


def _visibility_lines(visibility: dict[str, Any] | None) -> list[str]:
    """Which tools a client sees by the capabilities it declares."""
    if visibility is None:
        return []
    without, revealed = visibility["withoutCapabilities"], visibility["revealedBy"]
    if not revealed:
        return [f"tools: the same {len(without)} whatever a client declares"]
    return [
        f"tools a client declaring no capability sees: {len(without)}",
        *(f"  declaring {name} adds: {', '.join(tools)}" for name, tools in revealed.items()),
    ]


def render_text(report: dict[str, Any]) -> str:
    """The report for a person."""
    info = report["serverInfo"] or {}
    lines = [
        f"upstream:   {report['upstream']}",
        *([f"proxy:      {report['proxy']}"] if report["proxy"] else []),
        f"era:        {report['era'] or 'unknown'}"
        + (
            f" (supports {', '.join(report['supportedVersions'])})"
            if report["supportedVersions"]
            else ""
        ),
        f"revision:   {report['protocolVersion'] or 'unknown'}",
        f"transport:  {report['transport'] or 'unknown'}",
        *([f"sessions:   {report['sessionLimit']}"] if report["sessionLimit"] else []),
        f"server:     {info.get('name', '?')} {info.get('version', '')}".rstrip(),
        f"capabilities: {', '.join(sorted(report['capabilities'] or {})) or 'none'}",
    ]
    for tool in report["tools"] or []:
        hints = ", ".join(f"{k}={v}" for k, v in tool["annotations"].items())
        state = "bridged" if tool["bridged"] else f"NOT bridged: {tool['reason']}"
        if tool["bridged"] and tool.get("repairs"):
            state += f" (repaired: {'; '.join(tool['repairs'])})"
        if "task" in tool:
            state += f" ({tool['task']})"
        if "revealedBy" in tool:
            state += f" (listed to clients declaring {' or '.join(tool['revealedBy'])})"
        lines.append(f"  tool {tool['name']}{f' [{hints}]' if hints else ''}: {state}")
    lines += _visibility_lines(report["toolVisibility"])
    roots = report["pushesOutsideCall"]["rootsListAtInitialized"]
    lines.append(
        "asks roots/list at initialized: "
        f"{'unknown' if roots is None else 'yes' if roots else 'no'}"
    )
    ways = report["directions"]
    lines.append(
        f"directions: modern clients {ways['modernClients'] or '-'}, "
        f"legacy clients {ways['legacyClients'] or '-'}"
    )
    lines += [f"will bridge: {item}" for item in report["bridges"]]
    lines += [f"problem:     {item}" for item in report["problems"]]
    lines += [f"note:        {item}" for item in report["notes"]]
    if report["stderrTail"]:
        lines.append("its stderr ended with:")
        lines += [f"  | {line}" for line in report["stderrTail"]]
    lines.append(f"bridgeable: {'yes' if report['bridgeable'] else 'no'}")
    return "\n".join(lines) + "\n"


def exit_status_of(reports: dict[str | None, dict[str, Any]]) -> int:
    """The worst of the upstreams': unreachable, then not bridgeable, then bridgeable."""
    return max(exit_status(report) for report in reports.values())


def render_several(reports: dict[str | None, dict[str, Any]]) -> str:
    """Each named upstream's report under its name and path, then one line for them all."""
    parts = [
        f"== {name} ({server_path(str(name))}) ==\n{render_text(report)}"
        for name, report in reports.items()
    ]
    verdicts = ", ".join(
        f"{name} {'yes' if report['bridgeable'] else 'no'}" for name, report in reports.items()
    )
    return "\n".join(parts) + f"\nbridgeable: {verdicts}\n"


async def inspect_all(settings: Settings) -> dict[str | None, dict[str, Any]]:
    """The `check` report of every upstream `settings` configure, checked at once, by name (None:
    the one unnamed upstream)."""
    units = settings.units()
    reports = await asyncio.gather(*(inspect(own) for _, own in units))
    return {name: report for (name, _), report in zip(units, reports, strict=True)}


def run_check(settings: Settings, as_json: bool, out: TextIO) -> int:
    """Run `check`, print the report (with named upstreams, one per upstream: JSON `{"upstreams":
    {NAME: report}}`), return the exit status (the worst upstream's)."""
    reports = event_loop.run(inspect_all(settings), settings.front.event_loop)
    if None in reports:
        text = json.dumps(reports[None], indent=2) if as_json else render_text(reports[None])
    else:
        text = json.dumps({"upstreams": reports}, indent=2) if as_json else render_several(reports)
    out.write(text if text.endswith("\n") else text + "\n")
    out.flush()
    return exit_status_of(reports)


__all__ = [
    "EXIT_BRIDGEABLE",
    "EXIT_NOT_BRIDGEABLE",
    "EXIT_UNREACHABLE",
    "inspect",
    "inspect_all",
    "render_text",
    "run_check",
]
