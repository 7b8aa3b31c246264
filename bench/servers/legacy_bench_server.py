#!/usr/bin/env python3
"""The legacy (MCP 2025-11-25) server every benchmark talks to, directly and through the bridge.

Written with FastMCP from `mcp` 1.x (run it from `.venv-legacy`); stateful Streamable HTTP
(SSE replies, `Mcp-Session-Id`) or stdio. Tools:

- `echo(text)`: returns the text; no push (the plain-call overhead figures);
- `ask(topic)`: exactly one form `elicitation/create` push, then returns the answer
  (the MRTR round trip and the held-call burst);
- `pid()`: this process's id (the stdio pool's reuse rate: how many processes served calls).

Usage:
    python bench/servers/legacy_bench_server.py --port 8931        # HTTP on 127.0.0.1:8931/mcp
    python bench/servers/legacy_bench_server.py --transport stdio  # stdio
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from mcp.server.fastmcp import Context, FastMCP
from pydantic import BaseModel, Field

mcp = FastMCP(name="mrtr-bench-legacy", host="127.0.0.1", log_level="WARNING")


class Answer(BaseModel):
    choice: str = Field(description="What do you pick?")


@mcp.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool()
async def ask(topic: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Ask the user one question (one form elicitation), then return the answer."""
    answer = await ctx.elicit(message=f"Pick one for {topic}", schema=Answer)
    if answer.action != "accept":
        return f"{topic}: {answer.action}"
    return f"{topic}: {answer.data.choice}"


@mcp.tool()
def pid() -> str:
    """This server process's id."""
    return str(os.getpid())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--transport", choices=["http", "stdio"], default="http")
    parser.add_argument("--port", type=int, default=8931, help="HTTP port on 127.0.0.1")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if args.transport == "stdio":
        mcp.run("stdio")
        return 0
    mcp.settings.port = args.port
    mcp.run("streamable-http")
    return 0


if __name__ == "__main__":
    sys.exit(main())
