#!/usr/bin/env python3
"""A legacy (MCP 2025-11-25) server that journals what it saw, for the safety tests (issue 6).

Written with FastMCP from `mcp` 1.x (run it from `.venv-legacy`). Every tool appends JSON lines to
the file named by `--journal`, so a test can check afterwards what the upstream really received:
which answers its pushes got, which calls were cancelled, which credentials and sessions each call
arrived with, and that the process stopped.

- `echo(text)`: plain call;
- `slow_echo(text, seconds)`: sleeps, then echoes (an attached request during shutdown);
- `ask(tag, linger)`: a form `elicitation/create` ("Question <tag>", one string field `answer`);
  journals the answer's action, then lingers `linger` seconds when it was not accepted, so a
  following `notifications/cancelled` is observed;
- `sample(tag, linger)`: a `sampling/createMessage` ("Prompt <tag>"); journals the answer's text or
  the error code, then lingers like `ask`;
- `ask_rounds(rounds)`: `rounds` sequential elicitations (one input round each), each answer
  journaled;
- `whoami()`: the Authorization, X-API-Key and Mcp-Session-Id headers this call arrived with, as
  JSON;
- `flood(tag, count)`: `count` form elicitations sent at once (a hostile server); journals
  `flood_answered` with how many were answered (by action or error code) when the call ends;
- resource `secret://{credentials}@vault/{tag}` (a userinfo in its URI): asks like `ask`.

Journal events: `call_started`, `elicit_answered`, `sample_answered`, `sample_failed`,
`cancelled`, `finished`, `stopped` (stdio: after stdin closed). Each line carries the `tag`.

Usage:
    python tests/peers/journal_server.py --port 8933 --journal /tmp/j.jsonl   # Streamable HTTP
    python tests/peers/journal_server.py --transport stdio --journal /tmp/j.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.exceptions import McpError
from mcp.shared.message import ServerMessageMetadata

mcp = FastMCP(name="mrtr-bridge-journal", host="127.0.0.1")
JOURNAL: Path | None = None
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


def journal(event: str, **fields: Any) -> None:
    """Append one JSON line to the journal (flushed at once: the test may read it any time)."""
    if JOURNAL is None:
        return
    with JOURNAL.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"event": event, **fields}) + "\n")


async def _push(ctx: Context, request: Any, result_type: Any) -> Any:  # type: ignore[type-arg]
    """Send a push on the stream of the current call."""
    return await ctx.request_context.session.send_request(
        types.ServerRequest(request),
        result_type,
        metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
    )


async def _linger(tag: str, seconds: float) -> None:
    if seconds > 0:
        await asyncio.sleep(seconds)
    journal("finished", tag=tag)


@mcp.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool()
async def slow_echo(text: str, seconds: float) -> str:
    """Sleep `seconds`, then return the text."""
    journal("call_started", tag=text, tool="slow_echo")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        journal("cancelled", tag=text)
        raise
    journal("finished", tag=text)
    return text


@mcp.tool()
async def ask(tag: str, ctx: Context, linger: float = 0.0) -> str:  # type: ignore[type-arg]
    """Elicit one answer; linger after a refusal so a cancellation can be seen."""
    journal("call_started", tag=tag, tool="ask")
    request = types.ElicitRequest.model_validate(
        {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": f"Question {tag}",
                "requestedSchema": ANSWER_SCHEMA,
            },
        }
    )
    try:
        answer = await _push(ctx, request, types.ElicitResult)
        journal("elicit_answered", tag=tag, action=answer.action)
        if answer.action == "accept" and answer.content:
            return f"{tag}: {answer.content.get('answer')}"
        await _linger(tag, linger)
    except asyncio.CancelledError:
        journal("cancelled", tag=tag)
        raise
    return f"{tag}: {answer.action}"


@mcp.resource("secret://{credentials}@vault/{tag}", mime_type="text/plain")
async def vault(credentials: str, tag: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """A resource whose URI carries a userinfo (`user:password@`): asks like `ask` does."""
    return await ask(tag, ctx)


@mcp.tool()
async def sample(tag: str, ctx: Context, linger: float = 0.0) -> str:  # type: ignore[type-arg]
    """Ask the client's model; linger after a refusal so a cancellation can be seen."""
    journal("call_started", tag=tag, tool="sample")
    request = types.CreateMessageRequest.model_validate(
        {
            "method": "sampling/createMessage",
            "params": {
                "messages": [
                    {"role": "user", "content": {"type": "text", "text": f"Prompt {tag}"}}
                ],
                "maxTokens": 20,
            },
        }
    )
    try:
        try:
            result = await _push(ctx, request, types.CreateMessageResult)
        except McpError as exc:
            journal("sample_failed", tag=tag, code=exc.error.code)
            await _linger(tag, linger)
            return f"{tag}: refused"
        text = result.content.text if isinstance(result.content, types.TextContent) else ""
        journal("sample_answered", tag=tag, length=len(text))
        return f"{tag}: {text}"
    except asyncio.CancelledError:
        journal("cancelled", tag=tag)
        raise


@mcp.tool()
async def ask_rounds(rounds: int, ctx: Context) -> str:  # type: ignore[type-arg]
    """`rounds` sequential elicitations, one per input round."""
    journal("call_started", tag=f"rounds-{rounds}", tool="ask_rounds")
    try:
        for n in range(rounds):
            request = types.ElicitRequest.model_validate(
                {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": f"Round {n}",
                        "requestedSchema": ANSWER_SCHEMA,
                    },
                }
            )
            answer = await _push(ctx, request, types.ElicitResult)
            journal("elicit_answered", tag=f"rounds-{rounds}", action=answer.action, round=n)
    except asyncio.CancelledError:
        journal("cancelled", tag=f"rounds-{rounds}")
        raise
    return f"{rounds} rounds done"


@mcp.tool()
async def flood(tag: str, count: int, ctx: Context) -> str:  # type: ignore[type-arg]
    """Send `count` elicitations at once; journal how they were answered when the call ends."""
    journal("call_started", tag=tag, tool="flood")
    outcomes: dict[str, int] = {}

    async def one(n: int) -> None:
        request = types.ElicitRequest.model_validate(
            {
                "method": "elicitation/create",
                "params": {"mode": "form", "message": f"Q{n}", "requestedSchema": ANSWER_SCHEMA},
            }
        )
        try:
            answer = await _push(ctx, request, types.ElicitResult)
            outcome = answer.action
        except McpError as exc:
            outcome = str(exc.error.code)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1

    try:
        await asyncio.gather(*(one(n) for n in range(count)))
    finally:
        journal("flood_answered", tag=tag, outcomes=outcomes)
    return f"{tag}: {outcomes}"


@mcp.tool()
def whoami(ctx: Context) -> str:  # type: ignore[type-arg]
    """The Authorization, X-API-Key and Mcp-Session-Id headers this call arrived with."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", {})
    seen = {
        "authorization": headers.get("authorization"),
        "api_key": headers.get("x-api-key"),
        "session": headers.get("mcp-session-id"),
    }
    journal("whoami", **seen)
    return json.dumps(seen)


def main(argv: list[str] | None = None) -> int:
    global JOURNAL
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--transport", choices=["http", "sse", "stdio"], default="http")
    parser.add_argument("--port", type=int, default=8933, help="HTTP port (binds 127.0.0.1 only)")
    parser.add_argument("--journal", type=Path, help="append JSON lines here")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper()), stream=sys.stderr)
    JOURNAL = args.journal
    if args.transport == "stdio":
        mcp.run("stdio")
        journal("stopped", transport="stdio")
        return 0
    mcp.settings.port = args.port
    mcp.settings.log_level = args.log_level.upper()
    mcp.run("sse" if args.transport == "sse" else "streamable-http")
    journal("stopped", transport=args.transport)
    return 0


if __name__ == "__main__":
    sys.exit(main())
