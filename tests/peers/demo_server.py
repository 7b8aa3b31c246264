#!/usr/bin/env python3
"""A small legacy (MCP 2025-11-25) demo server: what `make run` puts behind the bridge.

Written with FastMCP from `mcp` 1.x (run it from `.venv-legacy`), so it speaks only the
stateful legacy protocol and asks for input the legacy way, with server-initiated pushes:

- tool `echo(text)`: plain call, no input;
- tool `book_table(restaurant)`: pushes a form `elicitation/create` (party size and name);
- tool `summarize(text)`: pushes `sampling/createMessage`;
- tool `list_workspace()`: pushes `roots/list`;
- tool `plan_trip(city)`: three input rounds in one call, one after the other: a form elicitation
  (a name), `sampling/createMessage`, `roots/list`; logs one info message after each answer;
- prompt `greeting(name, style)`, resource `demo://readme`, resource template
  `demo://notes/{topic}`, and completion for the prompt's `style` and the template's `topic`.

Usage:
    python tests/peers/demo_server.py --port 8931          # Streamable HTTP on 127.0.0.1:8931/mcp
    python tests/peers/demo_server.py --host 0.0.0.0       # all interfaces (containers)
    python tests/peers/demo_server.py --transport stdio    # stdio
"""

from __future__ import annotations

import argparse
import logging
import sys

from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel, Field

STYLES = ("formal", "friendly", "pirate")
TOPICS = ("bridges", "mcp", "roots", "sampling")
LOOPBACK = ("127.0.0.1", "localhost", "::1")
DECLINED = {"decline": "declined", "cancel": "cancelled"}  # an elicitation's action, as said

mcp = FastMCP(name="mrtr-bridge-demo", host="127.0.0.1")


class Booking(BaseModel):
    party_size: int = Field(description="How many people?", ge=1, le=20)
    name: str = Field(description="Name for the reservation")


@mcp.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool()
async def book_table(restaurant: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Book a table; asks the user for the party size and a name (form elicitation)."""
    answer = await ctx.elicit(
        message=f"Booking at {restaurant}: for how many, and under what name?", schema=Booking
    )
    if answer.action != "accept":
        return f"Booking at {restaurant} {DECLINED[answer.action]}."
    return f"Booked {restaurant} for {answer.data.party_size} under {answer.data.name}."


@mcp.tool()
async def summarize(text: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Summarize text with the client's model (sampling)."""
    result = await ctx.session.create_message(
        messages=[
            types.SamplingMessage(
                role="user", content=types.TextContent(type="text", text=f"Summarize: {text}")
            )
        ],
        max_tokens=200,
        related_request_id=ctx.request_id,
    )
    content = result.content
    summary = content.text if isinstance(content, types.TextContent) else str(content)
    return f"Summary: {summary}"


@mcp.tool()
async def list_workspace(ctx: Context) -> str:  # type: ignore[type-arg]
    """Name the client's workspace roots (roots/list)."""
    roots = await ctx.session.list_roots()
    names = [str(root.uri) for root in roots.roots]
    return "Roots: " + (", ".join(names) if names else "(none)")


class Traveller(BaseModel):
    name: str = Field(description="Who travels?")


@mcp.tool()
async def plan_trip(city: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Plan a trip: asks for a name, then the client's model, then the workspace roots."""
    who = await ctx.elicit(message=f"Trip to {city}: who travels?", schema=Traveller)
    name = who.data.name if who.action == "accept" else "nobody"
    await ctx.info(f"planning for {name}")
    sampled = await ctx.session.create_message(
        messages=[
            types.SamplingMessage(
                role="user", content=types.TextContent(type="text", text=f"Plan {city}")
            )
        ],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    plan = sampled.content.text if isinstance(sampled.content, types.TextContent) else "?"
    await ctx.info(f"plan: {plan}")
    roots = await ctx.session.list_roots()
    await ctx.info("roots listed")
    return (
        f"{name} goes to {city}: {plan}; saved in "
        f"{', '.join(str(root.uri) for root in roots.roots)}"
    )


@mcp.prompt()
def greeting(name: str, style: str = "friendly") -> str:
    """A greeting for someone, in a style."""
    return f"Write a {style} greeting for {name}."


@mcp.resource("demo://readme", mime_type="text/plain")
def readme() -> str:
    """What this demo server is."""
    return "This is the mrtr-bridge legacy demo server (MCP 2025-11-25, mcp 1.x FastMCP)."


@mcp.resource("demo://notes/{topic}", mime_type="text/plain")
def note(topic: str) -> str:
    """A short note on a topic."""
    return f"Notes on {topic}."


@mcp.completion()  # type: ignore[no-untyped-call, untyped-decorator]  # untyped in mcp 1.x
async def complete(
    ref: types.PromptReference | types.ResourceTemplateReference,
    argument: types.CompletionArgument,
    context: types.CompletionContext | None,
) -> types.Completion | None:
    """Complete the greeting's `style` and the notes template's `topic`."""
    choices = {"style": STYLES, "topic": TOPICS}.get(argument.name, ())
    values = [value for value in choices if value.startswith(argument.value)]
    return types.Completion(values=values, total=len(values), hasMore=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--transport", choices=["http", "stdio"], default="http")
    parser.add_argument(
        "--host", default="127.0.0.1", help="HTTP bind address (0.0.0.0 in a container)"
    )
    parser.add_argument("--port", type=int, default=8931, help="HTTP port")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper()), stream=sys.stderr)
    if args.transport == "stdio":
        mcp.run("stdio")
        return 0
    mcp.settings.host = args.host
    if args.host not in LOOPBACK:
        # FastMCP pins DNS-rebinding protection to loopback Host names when built for 127.0.0.1;
        # behind a container network the bridge calls it by service name (e.g. demo:8931).
        mcp.settings.transport_security = TransportSecuritySettings(
            enable_dns_rebinding_protection=False
        )
    mcp.settings.port = args.port
    mcp.settings.log_level = args.log_level.upper()
    mcp.run("streamable-http")
    return 0


if __name__ == "__main__":
    sys.exit(main())
