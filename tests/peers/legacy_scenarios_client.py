#!/usr/bin/env python3
"""A legacy (`mcp` 1.x) client running the interactive tool contract's scenarios: run it from
`.venv-legacy`.

Connects to URL over Streamable HTTP (or launches COMMAND over stdio) with elicitation, sampling,
roots and logging callbacks, runs each scenario named on the command line and prints one JSON
object: the negotiated version, and per scenario the outcome (`text`, or `error` with its code
and message), the inputs the server asked for (method, message, mode, whether an elicitationId
came) and the notifications seen (progress, log messages).

`--elicit` sets the elicitation answer: accept (content {"answer", "name", "color", "topic"} =
ANSWER), decline, cancel, or error (a JSON-RPC error). `--no-sampling` / `--no-roots` leave
those capabilities undeclared.

    python tests/peers/legacy_scenarios_client.py --url URL ask everything
    python tests/peers/legacy_scenarios_client.py --command "mrtr-bridge stdio ..." ask
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
from mcp.shared.exceptions import McpError

SAMPLED = types.CreateMessageResult(
    role="assistant",
    content=types.TextContent(type="text", text="It is sunny"),
    model="test-model",
    stopReason="endTurn",
)
ROOTS = types.ListRootsResult(roots=[types.Root(uri="file:///work/a"), types.Root(uri="file:///b")])


class Recorder:
    def __init__(self, elicit: str, answer: str) -> None:
        self.elicit = elicit
        self.answer = answer
        self.asked: list[dict[str, Any]] = []
        self.notes: list[dict[str, Any]] = []

    async def elicitation(self, _ctx: Any, params: Any) -> Any:
        mode = getattr(params, "mode", None) or "form"
        self.asked.append(
            {
                "method": "elicitation/create",
                "message": params.message,
                "mode": mode,
                "elicitationId": bool(getattr(params, "elicitationId", None)),
            }
        )
        if self.elicit == "error":
            return types.ErrorData(code=-32603, message="the user interface failed")
        if self.elicit != "accept":
            return types.ElicitResult(action=self.elicit)  # type: ignore[arg-type]
        if mode == "url":
            return types.ElicitResult(action="accept")
        content = {k: self.answer for k in ("answer", "name", "color", "topic")}
        return types.ElicitResult(action="accept", content=content)

    async def sampling(self, _ctx: Any, params: Any) -> Any:
        self.asked.append({"method": "sampling/createMessage", "messages": len(params.messages)})
        return SAMPLED

    async def roots(self, _ctx: Any) -> Any:
        self.asked.append({"method": "roots/list"})
        return ROOTS

    async def logging(self, params: types.LoggingMessageNotificationParams) -> None:
        self.notes.append({"log": params.level, "data": params.data})

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.notes.append({"progress": progress, "total": total, "message": message})


async def _scenario(session: ClientSession, name: str) -> dict[str, Any]:
    tag = "t1"
    if name == "list":
        tools = await session.list_tools()
        return {"tools": sorted(tool.name for tool in tools.tools)}
    if name == "prompt":
        prompt = await session.get_prompt("ask_prompt", {"tag": tag})
        content = prompt.messages[0].content
        return {"text": content.text if isinstance(content, types.TextContent) else "?"}
    if name == "resource":
        read = await session.read_resource(f"interactive://ask/{tag}")  # type: ignore[arg-type]
        contents = read.contents[0]
        return {"text": contents.text if isinstance(contents, types.TextResourceContents) else "?"}
    if name == "ping":
        await session.send_ping()
        return {"text": "pong"}
    if name == "chatty":
        await session.set_logging_level("info")
    if name == "chatty_warning":
        await session.set_logging_level("warning")
    if name.startswith("chatty"):  # chatty_quiet: no logging/setLevel at all
        name = "chatty"
    arguments: dict[str, Any] = {"tag": tag}
    if name == "echo":
        arguments = {"text": "unchanged"}
    result = await session.call_tool(name, arguments, progress_callback=RECORDER.progress)
    first = result.content[0] if result.content else None
    text = first.text if isinstance(first, types.TextContent) else "?"
    return {"text": text, "isError": bool(result.isError)}


async def _run(session: ClientSession, scenarios: list[str]) -> dict[str, Any]:
    init = await session.initialize()
    outcomes: dict[str, Any] = {}
    for name in scenarios:
        RECORDER.asked, RECORDER.notes = [], []
        try:
            outcome = await _scenario(session, name)
        except McpError as exc:
            outcome = {"error": {"code": exc.error.code, "message": exc.error.message}}
        outcomes[name] = {**outcome, "asked": RECORDER.asked, "notes": RECORDER.notes}
    return {"protocolVersion": init.protocolVersion, "outcomes": outcomes}


RECORDER = Recorder("accept", "Ada")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url")
    parser.add_argument("--command")
    parser.add_argument("--elicit", default="accept")
    parser.add_argument("--answer", default="Ada")
    parser.add_argument("--no-sampling", action="store_true")
    parser.add_argument("--no-roots", action="store_true")
    parser.add_argument("scenarios", nargs="+")
    args = parser.parse_args()
    RECORDER.elicit, RECORDER.answer = args.elicit, args.answer
    callbacks: dict[str, Any] = {
        "elicitation_callback": RECORDER.elicitation,
        "logging_callback": RECORDER.logging,
    }
    if not args.no_sampling:
        callbacks["sampling_callback"] = RECORDER.sampling
    if not args.no_roots:
        callbacks["list_roots_callback"] = RECORDER.roots
    if args.url:
        async with (
            streamablehttp_client(args.url) as (read, write, _),
            ClientSession(read, write, **callbacks) as session,
        ):
            report = await _run(session, args.scenarios)
    else:
        argv = shlex.split(args.command)
        params = StdioServerParameters(command=argv[0], args=argv[1:])
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write, **callbacks) as session,
        ):
            report = await _run(session, args.scenarios)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
