#!/usr/bin/env python3
"""A modern (MCP 2026-07-28) server written with the `mcp` 2.x SDK (run it from `.venv`).

The SDK's server is dual-era: it serves 2026-07-28 requests statelessly and still answers a legacy
`initialize`. `--modern-only` (HTTP) refuses `initialize` with 400 and a JSON-RPC error naming the
supported version, as a server that dropped the legacy era would.

- tool `echo(text)`: plain call;
- tool `ask_name()`: asks for input (an elicitation the modern way, `InputRequiredResult`);
- tool `wipe()`: annotated destructive.

Usage:
    python tests/peers/modern_server.py --port 8941            # Streamable HTTP on
    127.0.0.1:8941/mcp python tests/peers/modern_server.py --transport stdio
"""

from __future__ import annotations

import argparse
import json
from typing import Annotated, Any

import uvicorn
from mcp.server.mcpserver import Elicit, MCPServer, Resolve
from mcp_types import ToolAnnotations
from pydantic import BaseModel

mcp = MCPServer(name="mrtr-bridge-modern-peer")


class Name(BaseModel):
    name: str


@mcp.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def _name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@mcp.tool()
def ask_name(name: Annotated[Name, Resolve(_name)]) -> str:
    """Ask the user for a name (an InputRequiredResult at 2026-07-28, a push to a legacy client)."""
    return f"Hello {name.name}"


@mcp.tool(annotations=ToolAnnotations(destructiveHint=True, idempotentHint=False))
def wipe() -> str:
    """Pretend to wipe everything."""
    return "wiped"


def refuse_initialize(app: Any) -> Any:
    """ASGI wrapper: a POST `initialize` gets 400 and a JSON-RPC error naming the supported
    version."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if isinstance(request, dict) and request.get("method") == "initialize":
            error = {
                "jsonrpc": "2.0",
                "id": request.get("id"),
                "error": {
                    "code": -32601,
                    "message": "initialize is not supported: this server speaks only 2026-07-28",
                },
            }
            payload = json.dumps(error).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            return await send({"type": "http.response.body", "body": payload})
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await app(scope, replay, send)

    return wrapped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--transport", choices=("streamable-http", "stdio"), default="streamable-http"
    )
    parser.add_argument("--port", type=int, default=8941)
    parser.add_argument(
        "--modern-only", action="store_true", help="refuse legacy initialize (HTTP only)"
    )
    args = parser.parse_args()
    if args.transport == "stdio":
        mcp.run("stdio")
    elif args.modern_only:
        uvicorn.run(
            refuse_initialize(mcp.streamable_http_app()),
            host="127.0.0.1",
            port=args.port,
            log_level="info",
        )
    else:
        mcp.run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
