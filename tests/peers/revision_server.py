#!/usr/bin/env python3
"""A legacy server for every older revision: the same tools on `mcp` 1.8 (2024-11-05), 1.9
(2025-03-26) and 1.12 (2025-06-18), run from `.venv-<revision>`
(tests/peers/requirements-<revision>.txt).

Written with each release's own FastMCP API, the way a server of that age is written: `ctx.elicit`
(only from `mcp` 1.10 on, so only at 2025-06-18), `ctx.session.create_message` and
`ctx.session.list_roots` (which these SDKs send on the session's GET stream over Streamable HTTP,
not on the call's stream), `ctx.report_progress` (with a message from 1.9 on; 1.8 and 1.9 send
progress on the GET stream too), `ctx.info` / `ctx.warning` (on the call's stream).

Tools:
- `echo(text)`; `revision()` (the revision this SDK negotiates,
  `mcp.types.LATEST_PROTOCOL_VERSION`);
- `ask_name()` (2025-06-18 only): a form elicitation of `{name}`: "Hello, <name>!" (or the action);
- `ask_size()` (2025-06-18 only): a single-select elicitation with legacy `enumNames` titles;
- `sample(prompt)`: `sampling/createMessage`: "model said: <text>";
- `roots()`: `roots/list`: the root URIs, comma-separated;
- `two_rounds()`: sampling, then roots/list after the answer (two input rounds): "<text> @ <uris>";
- `progress_and_log(steps)`: `steps` progress notifications and an info + a warning log line;
- `slow(seconds, tag)`: sleeps; with `--journal FILE` it appends `{"tag", "event"}` lines
  (`slow_started`, `slow_cancelled`, `slow_finished`), so a test sees the cancellation arrive;
- prompt `greeting(name)`, resource `revision://info`, template `revision://item/{item_id}`.

Usage:
    python tests/peers/revision_server.py --port 8931                 # Streamable HTTP,
    127.0.0.1:8931/mcp python tests/peers/revision_server.py --transport sse --port 8931 # HTTP+SSE:
    GET /sse, POST /messages/ python tests/peers/revision_server.py --transport stdio
"""

import argparse
import asyncio
import inspect
import json
import logging
import sys
from pathlib import Path

import mcp.types as types
from mcp.server.fastmcp import Context, FastMCP
from pydantic import BaseModel, Field

# No `from __future__ import annotations` here: FastMCP before 1.10ish finds the context parameter
# only by a real `Context` annotation, never by a string.
Ctx = Context
REVISION = types.LATEST_PROTOCOL_VERSION
HAS_ELICITATION = hasattr(Context, "elicit")
PROGRESS_HAS_MESSAGE = "message" in inspect.signature(Context.report_progress).parameters
STATE: dict[str, Path | None] = {"journal": None}
# These SDKs send progress on the session's GET stream while the result goes on the call's stream,
# so progress reported just before returning can reach the client after the result (and is then
# dropped). A tool that reports progress works between reports; this is that work.
WORK_S = 0.1

mcp = FastMCP(name=f"mrtr-revision-server-{REVISION}")


def record(tag: str, event: str) -> None:
    path = STATE["journal"]
    if path is not None:
        with path.open("a", encoding="utf-8") as journal:
            journal.write(json.dumps({"tag": tag, "event": event}) + "\n")


@mcp.tool()
def echo(text: str) -> str:
    """Echoes the text back."""
    return text


@mcp.tool()
def revision() -> str:
    """The protocol revision this server's SDK negotiates."""
    return REVISION


async def _sample(ctx: Ctx, prompt: str) -> str:
    message = types.SamplingMessage(
        role="user", content=types.TextContent(type="text", text=prompt)
    )
    result = await ctx.session.create_message(messages=[message], max_tokens=50)
    return (
        result.content.text
        if isinstance(result.content, types.TextContent)
        else f"<{result.content.type}>"
    )


async def _roots(ctx: Ctx) -> str:
    result = await ctx.session.list_roots()
    return ",".join(str(root.uri) for root in result.roots)


@mcp.tool()
async def sample(prompt: str, ctx: Ctx) -> str:
    """Asks the client's model (sampling/createMessage)."""
    return f"model said: {await _sample(ctx, prompt)}"


@mcp.tool()
async def roots(ctx: Ctx) -> str:
    """Lists the client's roots (roots/list)."""
    return await _roots(ctx)


@mcp.tool()
async def two_rounds(ctx: Ctx) -> str:
    """Sampling, then roots/list once the sample is answered: two input rounds."""
    text = await _sample(ctx, "first round")
    return f"{text} @ {await _roots(ctx)}"


@mcp.tool()
async def progress_and_log(steps: int, ctx: Ctx) -> str:
    """Reports `steps` progress notifications and logs an info and a warning line."""
    await ctx.info("progress_and_log started")
    for step in range(1, steps + 1):
        if PROGRESS_HAS_MESSAGE:
            await ctx.report_progress(step, steps, message=f"step {step}")
        else:
            await ctx.report_progress(step, steps)
        await asyncio.sleep(WORK_S)  # the work being reported on; see WORK_S
    await ctx.warning("progress_and_log finished")
    return f"{steps} steps"


@mcp.tool()
async def slow(seconds: float, tag: str) -> str:
    """Sleeps `seconds`; the journal says whether it finished or was cancelled."""
    record(tag, "slow_started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        record(tag, "slow_cancelled")
        raise
    record(tag, "slow_finished")
    return "slept"


class Name(BaseModel):
    name: str


class Size(BaseModel):
    size: str = Field(
        json_schema_extra={"enum": ["s", "m", "l"], "enumNames": ["Small", "Medium", "Large"]}
    )


if HAS_ELICITATION:

    @mcp.tool()
    async def ask_name(ctx: Ctx) -> str:
        """Elicits {name} (form elicitation)."""
        result = await ctx.elicit("What is your name?", Name)
        return (
            f"Hello, {result.data.name}!"
            if result.action == "accept"
            else f"no name ({result.action})"
        )

    @mcp.tool()
    async def ask_size(ctx: Ctx) -> str:
        """Elicits a size from an enum with legacy enumNames titles."""
        result = await ctx.elicit("Which size?", Size)
        return (
            f"size {result.data.size}"
            if result.action == "accept"
            else f"no size ({result.action})"
        )


@mcp.prompt()
def greeting(name: str) -> str:
    """Greets someone."""
    return f"Please greet {name}."


@mcp.resource("revision://info", mime_type="text/plain")
def info() -> str:
    """What this server is."""
    return f"revision server speaking {REVISION}"


@mcp.resource("revision://item/{item_id}", mime_type="text/plain")
def item(item_id: str) -> str:
    """One item."""
    return f"item {item_id}"


@mcp._mcp_server.set_logging_level()
async def _set_level(level: types.LoggingLevel) -> None:
    """Declares the `logging` capability, as a server that logs does."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--transport", choices=["http", "streamable-http", "sse", "stdio"], default="http"
    )
    parser.add_argument("--port", type=int, default=8931, help="HTTP port (binds 127.0.0.1 only)")
    parser.add_argument("--journal", type=Path, help="append slow-tool events here (JSON lines)")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper()), stream=sys.stderr)
    STATE["journal"] = args.journal
    if args.transport == "stdio":
        mcp.run("stdio")
        return 0
    mcp.settings.host = "127.0.0.1"
    mcp.settings.port = args.port
    mcp.settings.log_level = args.log_level.upper()
    mcp.run("sse" if args.transport == "sse" else "streamable-http")
    return 0


if __name__ == "__main__":
    sys.exit(main())
