#!/usr/bin/env python3
"""A legacy (mcp 1.x FastMCP) server for the recovery integration tests: tools that ask two
questions in turn (three rounds for the client), with and without the idempotent annotation, and a
run counter.

Every tool run appends one line to `<state dir>/runs-<tag>`, so a test counts how often a tool ran
across bridge restarts. The first question's text is `<state dir>/question-<tag>` when that file
exists (a test changes it between two runs), else "Your name?".

Tools (each takes a `tag`):
- `survey(tag)`: annotated `idempotentHint: true`; asks the name, then the color: "<name> likes
  <color>";
- `survey_plain(tag)`: the same, without annotations.
- `survey_readonly(tag)`: the same, annotated `readOnlyHint: true`.

Usage: python tests/peers/recovery_server.py --port 8931 --state-dir DIR   # Streamable HTTP,
127.0.0.1
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp.types as types
from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.message import ServerMessageMetadata

if TYPE_CHECKING:
    Ctx = Context[Any, Any, Any]
else:
    Ctx = Context  # FastMCP finds the context parameter only by the bare class

mcp = FastMCP(name="mrtr-recovery-test-server", host="127.0.0.1")
STATE = {"dir": Path(tempfile.gettempdir())}
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
COLOR_SCHEMA = {
    "type": "object",
    "properties": {"color": {"type": "string"}},
    "required": ["color"],
}


def count_run(tag: str) -> None:
    fd = os.open(STATE["dir"] / f"runs-{tag}", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
    finally:
        os.close(fd)


def first_question(tag: str) -> str:
    path = STATE["dir"] / f"question-{tag}"
    return path.read_text(encoding="utf-8") if path.exists() else "Your name?"


async def _ask(ctx: Ctx, message: str, schema: dict[str, Any], field: str) -> str:
    request = types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=message, requestedSchema=schema)
    )
    result = await ctx.request_context.session.send_request(
        types.ServerRequest(request),
        types.ElicitResult,
        metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
    )
    return str((result.content or {}).get(field, f"<{result.action}>"))


async def _survey(tag: str, ctx: Ctx) -> str:
    count_run(tag)
    name = await _ask(ctx, first_question(tag), NAME_SCHEMA, "name")
    color = await _ask(ctx, "Your color?", COLOR_SCHEMA, "color")
    return f"{name} likes {color}"


@mcp.tool(annotations=types.ToolAnnotations(idempotentHint=True, readOnlyHint=False))
async def survey(tag: str, ctx: Ctx) -> str:
    return await _survey(tag, ctx)


@mcp.tool()
async def survey_plain(tag: str, ctx: Ctx) -> str:
    return await _survey(tag, ctx)


@mcp.tool(annotations=types.ToolAnnotations(readOnlyHint=True))
async def survey_readonly(tag: str, ctx: Ctx) -> str:
    return await _survey(tag, ctx)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=8931, help="HTTP port (binds 127.0.0.1 only)")
    parser.add_argument(
        "--state-dir", type=Path, required=True, help="run counters and question overrides"
    )
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper()), stream=sys.stderr)
    STATE["dir"] = args.state_dir
    STATE["dir"].mkdir(parents=True, exist_ok=True)
    mcp.settings.port = args.port
    mcp.settings.log_level = args.log_level.upper()
    mcp.run("streamable-http")
    return 0


if __name__ == "__main__":
    sys.exit(main())
