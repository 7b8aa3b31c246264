#!/usr/bin/env python3
"""A legacy (mcp 1.x) client that records what a server shows one client: run it from
`.venv-legacy` (tests/integration/test_real_servers.py runs the same steps through the bridge).

Connects to URL over Streamable HTTP (or launches COMMAND over stdio) declaring the capabilities
asked for (`--roots`, `--elicitation`, `--sampling`: a callback each), lists the tools, optionally
subscribes to a resource (`--subscribe URI`), calls a tool (`--call NAME`, after `--delay`
seconds) and waits up to
`--wait` seconds for that resource's first `notifications/resources/updated`. Prints one JSON line:
`{"tools": [sorted names], "updated": [URIs of the updates received], "text": [the call's text
blocks]}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
from typing import Any

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

ROOT = "file:///test/root"


async def _exercise(session: ClientSession, args: argparse.Namespace, updated: list[str]) -> Any:
    await session.initialize()
    tools = sorted(tool.name for tool in (await session.list_tools()).tools)
    texts: list[str] = []
    if args.subscribe:
        await session.subscribe_resource(args.subscribe)  # type: ignore[arg-type]
    if args.call:
        await asyncio.sleep(args.delay)  # e.g. for the server to have asked for roots
        result = await session.call_tool(args.call, {})
        texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    if args.subscribe:
        try:
            async with asyncio.timeout(args.wait):
                while not updated:
                    await asyncio.sleep(0.05)
        except TimeoutError:
            pass
    return {"tools": tools, "updated": list(updated), "text": texts}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url")
    parser.add_argument("--command")
    parser.add_argument("--roots", action="store_true")
    parser.add_argument("--elicitation", action="store_true")
    parser.add_argument("--sampling", action="store_true")
    parser.add_argument("--subscribe")
    parser.add_argument("--call")
    parser.add_argument("--wait", type=float, default=15.0)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before the call")
    args = parser.parse_args()
    updated: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ResourceUpdatedNotification
        ):
            updated.append(str(message.root.params.uri))

    async def roots(_ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=ROOT)])  # type: ignore[arg-type]

    async def elicit(_ctx: Any, _params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async def sample(_ctx: Any, _params: Any) -> types.CreateMessageResult:
        text = types.TextContent(type="text", text="ok")
        return types.CreateMessageResult(role="assistant", content=text, model="m")

    callbacks: dict[str, Any] = {"message_handler": on_message}
    if args.roots:
        callbacks["list_roots_callback"] = roots
    if args.elicitation:
        callbacks["elicitation_callback"] = elicit
    if args.sampling:
        callbacks["sampling_callback"] = sample
    # the report is printed before the session closes: a server's late roots/list ask may break
    # the client's teardown, which is not what is being compared
    if args.url:
        async with streamablehttp_client(args.url) as (read, write, _):
            async with ClientSession(read, write, **callbacks) as session:
                print(json.dumps(await _exercise(session, args, updated)), flush=True)
    else:
        argv = shlex.split(args.command)
        params = StdioServerParameters(command=argv[0], args=argv[1:])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, **callbacks) as session:
                print(json.dumps(await _exercise(session, args, updated)), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
