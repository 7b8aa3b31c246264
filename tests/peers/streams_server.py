#!/usr/bin/env python3
"""A legacy (MCP 2025-11-25) server for the streams tests (issue 5): progress, logging,
cancellation, list-changed and resource-update notifications, and a journal of what it saw.

Written with FastMCP from `mcp` 1.x (run it from `.venv-legacy`). Everything the bridge does to the
session-wide state of a legacy session is journaled: `logging/setLevel`, `resources/subscribe` and
`resources/unsubscribe` per URI, `notifications/cancelled`, and the start and end (finished or
cancelled) of the slow tool. `journal()` returns the entries of this process; with `--journal FILE`
every entry is also appended to FILE as one JSON line (several stdio processes can share one file).
Each entry names the session (`session`: 1, 2, ... in order of first appearance in this process)
and the process (`pid`).

Tools:
- `progress(steps)`: reports progress 1..steps (of steps) on the call's stream;
- `progress_elicit()`: progress 1/2 ("before"), a form elicitation, progress 2/2 ("after");
- `log_levels(tag)`: one `notifications/message` per level at or above the session's level (set by
  `logging/setLevel`; "info" until then), data `{"level", "tag"}`; journals the levels sent;
- `slow(steps, interval, tag)`: progress and an info log every `interval` seconds; journals whether
  it finished or was cancelled; `elicit_then_slow(...)` asks a form elicitation first;
- `tools_changed()`, `prompts_changed()`, `resources_changed()`: the list-changed notification on
  the calling session (no related request: the GET stream over HTTP);
- `log_elicit(tag)`: like `log_levels` (data tag `<tag> before`), a form elicitation, then again
  (`<tag> after`): the session's level as it is in each round;
- `touch(uri)`: `notifications/resources/updated` to every session subscribed to `uri`. Like any
  mcp 1.x server it sees URIs as pydantic `AnyUrl`s, normalized (`https://Example.com` is
  `https://example.com/`): subscriptions are kept, and updates sent, under that spelling;
- `resources/subscribe` is refused (-32002) for URIs under `streams://refused/`;
- `journal()`: the entries so far, as JSON text.

Usage:
    python tests/peers/streams_server.py --port 8931 [--journal FILE]   # Streamable HTTP, 127.0.0.1
    python tests/peers/streams_server.py --transport stdio [--journal FILE] [--single-life MARKER]
    python tests/peers/streams_server.py --transport sse --port 8931 [--journal FILE]   # HTTP+SSE
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.lowlevel.server import NotificationOptions
from mcp.shared.exceptions import McpError
from mcp.shared.session import RequestResponder
from pydantic import AnyUrl, BaseModel, Field

LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
DEFAULT_LEVEL = "info"
REFUSED_PREFIX = "streams://refused/"
RESOURCE_NOT_FOUND = -32002

mcp = FastMCP(name="mrtr-streams-peer", host="127.0.0.1")
JOURNAL: list[dict[str, Any]] = []
JOURNAL_FILE: Path | None = None
_sessions: list[Any] = []  # keeps every session alive, so its label (index + 1) stays unique
_levels: dict[int, str] = {}  # session label -> level set by logging/setLevel
_subscribers: dict[str, list[Any]] = {}  # URI -> subscribed sessions


def session_label(session: Any) -> int:
    for index, known in enumerate(_sessions):
        if known is session:
            return index + 1
    _sessions.append(session)
    return len(_sessions)


def record(event: str, session: Any = None, **fields: Any) -> None:
    entry = {"event": event, "pid": os.getpid(), **fields}
    if session is not None:
        entry["session"] = session_label(session)
    JOURNAL.append(entry)
    if JOURNAL_FILE is not None:
        with JOURNAL_FILE.open("a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")


def _current_session() -> Any:
    return mcp._mcp_server.request_context.session


# ---- tools --------------------------------------------------------------------------------------


class Name(BaseModel):
    name: str = Field(description="Your name")


@mcp.tool()
async def progress(steps: int, ctx: Context) -> str:  # type: ignore[type-arg]
    """Report progress 1..steps, then answer."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return f"done {steps}"


@mcp.tool()
async def progress_elicit(ctx: Context) -> str:  # type: ignore[type-arg]
    """Progress before and after a form elicitation (progress across MRTR rounds)."""
    await ctx.report_progress(1, 2, "before")
    answer = await ctx.elicit(message="Who are you?", schema=Name)
    await ctx.report_progress(2, 2, "after")
    name = answer.data.name if answer.action == "accept" else answer.action
    return f"Hello, {name}!"


@mcp.tool()
async def log_levels(tag: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """One log message per level the session's level admits; returns the levels sent."""
    session = ctx.request_context.session
    floor = LEVELS.index(_levels.get(session_label(session), DEFAULT_LEVEL))
    sent = list(LEVELS[floor:])
    record("log_sent", session, tag=tag, levels=sent)
    for level in sent:
        await session.send_log_message(
            level, {"level": level, "tag": tag}, logger="streams", related_request_id=ctx.request_id
        )
    return ",".join(sent)


@mcp.tool()
async def log_elicit(tag: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """`log_levels` before and after a form elicitation (the session's level in each round)."""
    before = await log_levels(f"{tag} before", ctx)
    await ctx.elicit(message="Continue?", schema=Name)
    after = await log_levels(f"{tag} after", ctx)
    return f"{before}|{after}"


async def _slow_steps(ctx: Context, steps: int, interval: float, tag: str) -> str:  # type: ignore[type-arg]
    session = ctx.request_context.session
    record("slow_started", session, tag=tag, request_id=ctx.request_id)
    try:
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"{tag} {step}")
            await session.send_log_message(
                "info",
                {"tag": tag, "step": step},
                logger="streams",
                related_request_id=ctx.request_id,
            )
            await asyncio.sleep(interval)
    except asyncio.CancelledError:
        record("slow_cancelled", session, tag=tag, request_id=ctx.request_id)
        raise
    record("slow_finished", session, tag=tag, request_id=ctx.request_id)
    return f"{tag} finished"


@mcp.tool()
async def slow(steps: int, interval: float, tag: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Progress and an info log every `interval` s for `steps` steps; journals how it ended."""
    return await _slow_steps(ctx, steps, interval, tag)


@mcp.tool()
async def elicit_then_slow(steps: int, interval: float, tag: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """A form elicitation, then `slow` (a retry that a client may abandon while the call
    runs on)."""
    await ctx.elicit(message="Start?", schema=Name)
    return await _slow_steps(ctx, steps, interval, tag)


@mcp.tool()
async def tools_changed(ctx: Context) -> str:  # type: ignore[type-arg]
    """Send notifications/tools/list_changed on this session."""
    await ctx.request_context.session.send_tool_list_changed()
    return "tools changed"


@mcp.tool()
async def prompts_changed(ctx: Context) -> str:  # type: ignore[type-arg]
    """Send notifications/prompts/list_changed on this session."""
    await ctx.request_context.session.send_prompt_list_changed()
    return "prompts changed"


@mcp.tool()
async def resources_changed(ctx: Context) -> str:  # type: ignore[type-arg]
    """Send notifications/resources/list_changed on this session."""
    await ctx.request_context.session.send_resource_list_changed()
    return "resources changed"


@mcp.tool()
async def touch(uri: str) -> str:
    """Send notifications/resources/updated for `uri` to every session subscribed to it."""
    sessions = list(_subscribers.get(str(AnyUrl(uri)), ()))
    for session in sessions:
        await session.send_resource_updated(AnyUrl(uri))
    return f"notified {len(sessions)}"


@mcp.tool()
def journal() -> str:
    """What this process saw so far (JSON list of entries)."""
    return json.dumps(JOURNAL)


@mcp.resource("streams://doc/{name}")
def doc(name: str) -> str:
    """A document that can be subscribed to."""
    return f"document {name}"


# ---- session-wide legacy methods ----------------------------------------------------------------


@mcp._mcp_server.set_logging_level()
async def _set_level(level: types.LoggingLevel) -> None:
    session = _current_session()
    _levels[session_label(session)] = level
    record("set_level", session, level=level)


@mcp._mcp_server.subscribe_resource()
async def _subscribe(uri: AnyUrl) -> None:
    session = _current_session()
    if str(uri).startswith(REFUSED_PREFIX):
        record("subscribe_refused", session, uri=str(uri))
        raise McpError(
            types.ErrorData(code=RESOURCE_NOT_FOUND, message=f"Resource not found: {uri}")
        )
    record("subscribe", session, uri=str(uri))
    _subscribers.setdefault(str(uri), []).append(session)


@mcp._mcp_server.unsubscribe_resource()
async def _unsubscribe(uri: AnyUrl) -> None:
    session = _current_session()
    record("unsubscribe", session, uri=str(uri))
    subscribed = _subscribers.get(str(uri), [])
    if session in subscribed:
        subscribed.remove(session)


_original_cancel = RequestResponder.cancel


async def _journaled_cancel(self: Any) -> None:
    """mcp 1.x calls `RequestResponder.cancel` only for an inbound `notifications/cancelled`."""
    record("cancel_notification", self._session, request_id=self.request_id)
    await _original_cancel(self)


RequestResponder.cancel = _journaled_cancel  # type: ignore[method-assign]


# Declare listChanged everywhere and resources.subscribe (FastMCP 1.x declares none of them).
_original_capabilities = mcp._mcp_server.get_capabilities


def _capabilities(
    options: NotificationOptions, experimental: dict[str, dict[str, Any]]
) -> types.ServerCapabilities:
    every_change = NotificationOptions(
        prompts_changed=True, resources_changed=True, tools_changed=True
    )
    capabilities = _original_capabilities(every_change, experimental)
    if capabilities.resources is not None:
        capabilities.resources.subscribe = True
    return capabilities


mcp._mcp_server.get_capabilities = _capabilities  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    global JOURNAL_FILE
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--transport", choices=["http", "sse", "stdio"], default="http")
    parser.add_argument("--port", type=int, default=8931, help="HTTP port (binds 127.0.0.1 only)")
    parser.add_argument(
        "--journal", type=Path, help="also append every journal entry to this file (JSON lines)"
    )
    parser.add_argument(
        "--single-life",
        type=Path,
        metavar="MARKER",
        help="start only if MARKER does not exist (and create it): a replacement process fails",
    )
    args = parser.parse_args(argv)
    JOURNAL_FILE = args.journal
    if args.single_life is not None:
        try:
            args.single_life.touch(exist_ok=False)
        except FileExistsError:
            print(
                f"streams_server: {args.single_life} exists, refusing to start again",
                file=sys.stderr,
            )
            return 1
    record("process_started", transport=args.transport)
    if args.transport == "stdio":
        mcp.run("stdio")
        return 0
    mcp.settings.port = args.port
    mcp.settings.log_level = "WARNING"
    mcp.run("sse" if args.transport == "sse" else "streamable-http")
    return 0


if __name__ == "__main__":
    sys.exit(main())
