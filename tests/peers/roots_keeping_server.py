#!/usr/bin/env python3
"""A legacy (MCP 2025-11-25) server that keeps its client's roots per session, like
`@modelcontextprotocol/server-filesystem` (issue 10).

Written with FastMCP from `mcp` 1.x (run it from `.venv-legacy`). On `notifications/initialized` and
on `notifications/roots/list_changed` it asks its client for `roots/list` (outside any call: no
related request, so the GET stream over HTTP) when the client declared roots, and keeps the answer
for the session. Its tools use the kept roots and never ask again:

- `kept_roots()`: JSON `{"roots": [uri, ...], "asks": n, "session": k, "pid": p}`: the kept roots,
  how many times this session asked, the session's number in this process (1, 2, ... by first
  ask) and the process id;
- `read_file(path)`: the text of `path` if it lies under a kept `file://` root, else an error
  "Access denied - path outside allowed directories" (server-filesystem's words);
- `roots_in_call()`: asks for roots inside the call (related to it) and returns the URIs, without
  keeping them;
- `ask_again_later(delay)`: returns at once, then asks for roots again `delay` seconds later,
  outside any call, and keeps that answer.

A session whose client declared no roots keeps none (`kept_roots` says `[]`, `read_file` denies).

Usage:
    python tests/peers/roots_keeping_server.py --port 8931    # Streamable HTTP, 127.0.0.1
    python tests/peers/roots_keeping_server.py --transport stdio
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.session import ServerSession
from mcp.shared.message import ServerMessageMetadata

mcp = FastMCP(name="mrtr-roots-keeping", host="127.0.0.1")
_kept: dict[int, dict[str, Any]] = {}  # id(session) -> {"roots": [...], "asks": n, "session": k}
_sessions: list[ServerSession] = []  # keeps sessions alive so their ids stay unique
_tasks: set[asyncio.Task[None]] = set()
ASKS_ON = (types.InitializedNotification, types.RootsListChangedNotification)


def _state(session: ServerSession) -> dict[str, Any]:
    if id(session) not in _kept:
        _sessions.append(session)
        _kept[id(session)] = {"roots": [], "asks": 0, "session": len(_sessions), "pid": os.getpid()}
    return _kept[id(session)]


def _declares_roots(session: ServerSession) -> bool:
    params = session.client_params
    return params is not None and params.capabilities.roots is not None


async def ask_and_keep(session: ServerSession) -> None:
    """Ask the client for its roots outside any call and keep the answer for this session."""
    if not _declares_roots(session):
        return
    result = await session.list_roots()
    state = _state(session)
    state["roots"] = [str(root.uri) for root in result.roots]
    state["asks"] += 1


_handle_message = mcp._mcp_server._handle_message


async def _watching_handle_message(
    message: Any, session: ServerSession, *args: Any, **kwargs: Any
) -> None:
    """Every incoming message passes here, with its session: ask for roots on the two
    notifications."""
    if isinstance(message, types.ClientNotification) and isinstance(message.root, ASKS_ON):
        await ask_and_keep(session)
    await _handle_message(message, session, *args, **kwargs)


mcp._mcp_server._handle_message = _watching_handle_message  # type: ignore[method-assign]


def _session(ctx: Context) -> ServerSession:  # type: ignore[type-arg]
    session: ServerSession = ctx.request_context.session
    return session


@mcp.tool()
def kept_roots(ctx: Context) -> str:  # type: ignore[type-arg]
    """The roots this session keeps, how often it asked, and its number."""
    return json.dumps(_state(_session(ctx)))


def _allowed(path: Path, roots: list[str]) -> bool:
    for uri in roots:
        parsed = urlparse(uri)
        if parsed.scheme != "file":
            continue
        root = Path(unquote(parsed.path)).resolve()
        if path == root or root in path.parents:
            return True
    return False


@mcp.tool()
def read_file(path: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """The file's text, if it lies under a kept root."""
    target = Path(path).resolve()
    if not _allowed(target, _state(_session(ctx))["roots"]):
        raise ValueError(f"Access denied - path outside allowed directories: {path}")
    return target.read_text(encoding="utf-8")


@mcp.tool()
async def roots_in_call(ctx: Context) -> str:  # type: ignore[type-arg]
    """Ask for roots inside this call (not kept); the URIs, as JSON."""
    result = await _session(ctx).send_request(
        types.ServerRequest(types.ListRootsRequest()),
        types.ListRootsResult,
        metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
    )
    return json.dumps([str(root.uri) for root in result.roots])


@mcp.tool()
async def ask_again_later(delay: float, ctx: Context) -> str:  # type: ignore[type-arg]
    """Return now; ask for roots again, outside any call, after `delay` seconds."""
    session = _session(ctx)

    async def later() -> None:
        await asyncio.sleep(delay)
        await ask_and_keep(session)

    task = asyncio.get_running_loop().create_task(later())
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
    return "scheduled"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--transport", choices=["http", "stdio"], default="http")
    parser.add_argument("--port", type=int, default=8931, help="HTTP port (binds 127.0.0.1 only)")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    mcp.settings.log_level = args.log_level
    mcp.settings.port = args.port
    mcp.run("stdio" if args.transport == "stdio" else "streamable-http")
    return 0


if __name__ == "__main__":
    sys.exit(main())
