#!/usr/bin/env python3
"""A legacy (MCP 2025-11-25) interactive server for the MRTR integration tests, with an event
journal.

Written with FastMCP from `mcp` 1.x (run it from `.venv-legacy`): every input is asked the
legacy way, with a server-initiated push, and what the server saw is appended to a journal
(`<state dir>/journal.jsonl`, one JSON object a line: `pid`, `tag`, `event` and details), so a
test can check what reached the server and what did not, across processes (stdio pools).

Events: `call` (a tool, prompt or resource started; `ask` and `sample` record the `session`
serving them, distinct among the sessions open at once), `answer` (a push's result: elicitation
action and content, the sampling result, the roots), `push_error` (a push answered with a
JSON-RPC error), `caps` (the client capabilities of the session), `elicit_complete_sent`,
`cancel_notification` (a `notifications/cancelled` for a request in flight, seen by the session),
`cancelled_in_tool` (the tool's task was cancelled, for whatever reason).

Tools (each takes a `tag` that labels its journal events):
- `echo(text)`, `pid()`, `journal(tag)` (the journal entries of one tag, as JSON);
- `big(tag, size)`: a text of `size` characters (1 MiB by default);
- `ask(tag, question, linger_s, push_timeout_s)`: a form elicitation; returns `{"action",
  "content"}` as JSON, after lingering `linger_s` seconds (so a cancellation finds the call in
  flight); with `push_timeout_s` the push times out like legacy SDKs do theirs, and the tool returns
  `{"error"}`;
- `ask_twice(tag)`: two sequential elicitations (name, then color): "<name> likes <color>.";
- `ask_url(tag)`: a URL-mode elicitation (elicitationId `el-<tag>`), then, if accepted,
  `notifications/elicitation/complete` on the call's stream: "url elicitation: <action>";
- `authorize(tag)`: raises the legacy -32042 URL-elicitation-required error (elicitationId
  `auth-<tag>`) until `<state dir>/visited-auth-<tag>` exists (the user "visited" the URL);
- `sample(tag, use_tools)`: `sampling/createMessage` with tool-use, tool-result and image
  messages (and `tools` when asked), sent even if the client did not declare `sampling.tools`;
  returns the result (or the push's error) as JSON;
- `roots(tag)`: `roots/list`, on the session's GET stream as the SDK sends it;
- `everything(tag, linger_s)`: elicitation, sampling and roots at once (concurrently), then lingers;
- `staggered(tag, delay_s)`: an elicitation, and roots/list `delay_s` later (while the first is
  held);
- `slow(tag, seconds)`: sleeps;
- `slow_ask(tag, before_s, after_s, times)`: works `before_s` seconds, asks a form elicitation
  (answer; `times` times in a row, the same question), works `after_s` more, then returns
  "answer: <answers, comma-separated>" (a long plain call that asks mid-way);
- prompt `ask_prompt(tag)` and resource `interactive://ask/{tag}`: an elicitation each.

Usage:
    python tests/peers/interactive_server.py --port 8931 --state-dir DIR   # Streamable HTTP,
    127.0.0.1 python tests/peers/interactive_server.py --transport stdio --state-dir DIR python
    tests/peers/interactive_server.py --transport sse --port 8931 --state-dir DIR   # HTTP+SSE
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp.types as types
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.prompts.base import Message, UserMessage
from mcp.shared.exceptions import McpError, UrlElicitationRequiredError
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.session import RequestResponder

if TYPE_CHECKING:
    Ctx = Context[Any, Any, Any]
else:
    Ctx = Context  # FastMCP finds the context parameter only by the bare class

mcp = FastMCP(name="mrtr-interactive-test-server", host="127.0.0.1")
STATE = {"dir": Path(tempfile.gettempdir())}

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
COLOR_SCHEMA = {
    "type": "object",
    "properties": {"color": {"type": "string"}},
    "required": ["color"],
}
TOPIC_SCHEMA = {
    "type": "object",
    "properties": {"topic": {"type": "string"}},
    "required": ["topic"],
}
PIXEL_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAF"
    "BQIAX8jx0gAAAABJRU5ErkJggg=="
)
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather in a city",
    "inputSchema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
SAMPLING_MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": {"type": "text", "text": "What is the weather in Paris?"}},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "call-1", "name": "get_weather", "input": {"city": "Paris"}}
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "toolUseId": "call-1",
                "content": [{"type": "text", "text": "18C, sunny"}],
            }
        ],
    },
    {"role": "user", "content": {"type": "image", "data": PIXEL_PNG, "mimeType": "image/png"}},
]


# ---- the journal -------------------------------------------------------------------------------


def journal_path() -> Path:
    return STATE["dir"] / "journal.jsonl"


def record(tag: str, event: str, **details: Any) -> None:
    """Append one event (a single `write` on an O_APPEND file, so processes do not interleave)."""
    line = json.dumps({"pid": os.getpid(), "tag": tag, "event": event, **details}) + "\n"
    fd = os.open(journal_path(), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def session_of(ctx: Ctx) -> int:
    """Which legacy session serves the call (distinct among the sessions open at once)."""
    return id(ctx.session)


def _request_tag(request: Any) -> tuple[str, str]:
    """(tag, what) of a client request: a tool, prompt or resource of this server."""
    root = getattr(request, "root", request)
    params = getattr(root, "params", None)
    arguments = getattr(params, "arguments", None) or {}
    uri = str(getattr(params, "uri", "") or "")
    tag = str(arguments.get("tag", "")) or uri.rsplit("/", 1)[-1]
    return tag, str(getattr(params, "name", None) or uri or getattr(root, "method", ""))


_original_cancel = RequestResponder.cancel


async def _recording_cancel(self: RequestResponder[Any, Any]) -> None:
    """Called by the session when `notifications/cancelled` names a request in flight."""
    tag, what = _request_tag(self.request)
    record(tag, "cancel_notification", request=what)
    await _original_cancel(self)


RequestResponder.cancel = _recording_cancel  # type: ignore[method-assign]


async def _push(
    ctx: Ctx,
    tag: str,
    kind: str,
    request: Any,
    result_type: Any,
    *,
    on_call_stream: bool,
    timeout_s: float = 0.0,
) -> Any:
    """Send one push; journal its answer or error. `on_call_stream=False` uses the GET stream
    (SDK default for sampling and roots); `timeout_s` > 0 times the push out the way legacy SDKs do.
    """
    related = ctx.request_id if on_call_stream else None
    try:
        result = await ctx.request_context.session.send_request(
            types.ServerRequest(request),
            result_type,
            metadata=ServerMessageMetadata(related_request_id=related),
            request_read_timeout_seconds=timedelta(seconds=timeout_s) if timeout_s > 0 else None,
        )
    except McpError as exc:
        record(tag, "push_error", kind=kind, code=exc.error.code, message=exc.error.message)
        raise
    record(
        tag,
        "answer",
        kind=kind,
        result=result.model_dump(mode="json", by_alias=True, exclude_none=True),
    )
    return result


async def _elicit(
    ctx: Ctx, tag: str, message: str, schema: dict[str, Any], timeout_s: float = 0.0
) -> types.ElicitResult:
    request = types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=message, requestedSchema=schema)
    )
    result: types.ElicitResult = await _push(
        ctx, tag, "elicit", request, types.ElicitResult, on_call_stream=True, timeout_s=timeout_s
    )
    return result


async def _sample(ctx: Ctx, tag: str, use_tools: bool) -> types.CreateMessageResultWithTools:
    params: dict[str, Any] = {"messages": SAMPLING_MESSAGES, "maxTokens": 64}
    if use_tools:
        params |= {"tools": [WEATHER_TOOL], "toolChoice": {"mode": "auto"}}
    request = types.CreateMessageRequest(
        params=types.CreateMessageRequestParams.model_validate(params)
    )
    result: types.CreateMessageResultWithTools = await _push(
        ctx, tag, "sample", request, types.CreateMessageResultWithTools, on_call_stream=False
    )
    return result


async def _roots(ctx: Ctx, tag: str) -> types.ListRootsResult:
    result: types.ListRootsResult = await _push(
        ctx, tag, "roots", types.ListRootsRequest(), types.ListRootsResult, on_call_stream=False
    )
    return result


def _content(result: types.ElicitResult, field: str) -> Any:
    return (result.content or {}).get(field) if result.action == "accept" else None


async def _linger(tag: str, seconds: float) -> None:
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        record(tag, "cancelled_in_tool")
        raise


# ---- tools -------------------------------------------------------------------------------------


@mcp.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool()
def big(tag: str, size: int = 1_048_576) -> str:
    """A text of `size` characters: a large answer."""
    return "x" * size


@mcp.tool()
def pid() -> str:
    """This server process's id."""
    return str(os.getpid())


@mcp.tool()
def journal(tag: str) -> str:
    """The journal entries of `tag`, as a JSON list."""
    if not journal_path().exists():
        return "[]"
    entries = [json.loads(line) for line in journal_path().read_text().splitlines() if line.strip()]
    return json.dumps([entry for entry in entries if entry.get("tag") == tag])


@mcp.tool()
async def ask(
    tag: str,
    ctx: Ctx,
    question: str = "What is your answer?",
    linger_s: float = 0.0,
    push_timeout_s: float = 0.0,
) -> str:
    """Elicit {answer} with `question`; returns {"action", "content"} as JSON (or {"error"} if
    the push timed out after `push_timeout_s`)."""
    record(tag, "call", tool="ask", session=session_of(ctx))
    try:
        result = await _elicit(ctx, tag, question, ANSWER_SCHEMA, push_timeout_s)
    except McpError as exc:
        return json.dumps({"error": {"code": exc.error.code}})
    await _linger(tag, linger_s)
    return json.dumps({"action": result.action, "content": result.content})


@mcp.tool()
async def ask_twice(tag: str, ctx: Ctx, pause_s: float = 0.0) -> str:
    """Two sequential elicitations: a name, then (after `pause_s` s of thought) a color."""
    record(tag, "call", tool="ask_twice")
    name = await _elicit(ctx, tag, "Step 1: what is your name?", NAME_SCHEMA)
    await anyio.sleep(pause_s)
    color = await _elicit(ctx, tag, "Step 2: what is your favorite color?", COLOR_SCHEMA)
    return f"{_content(name, 'name')} likes {_content(color, 'color')}."


@mcp.tool()
async def ask_url(tag: str, ctx: Ctx) -> str:
    """A URL-mode elicitation; on accept, notifications/elicitation/complete on this call's
    stream."""
    record(tag, "call", tool="ask_url")
    params = types.ElicitRequestURLParams(
        message="Sign in to continue",
        url=f"https://auth.example/sign-in/{tag}",
        elicitationId=f"el-{tag}",
    )
    result = await _elicit_url(ctx, tag, params)
    if result.action == "accept":
        await ctx.session.send_elicit_complete(f"el-{tag}", related_request_id=ctx.request_id)
        record(tag, "elicit_complete_sent", elicitationId=f"el-{tag}")
    return f"url elicitation: {result.action}"


async def _elicit_url(
    ctx: Ctx, tag: str, params: types.ElicitRequestURLParams
) -> types.ElicitResult:
    request = types.ElicitRequest(params=params)
    result: types.ElicitResult = await _push(
        ctx, tag, "elicit", request, types.ElicitResult, on_call_stream=True
    )
    return result


@mcp.tool()
def authorize(tag: str) -> str:
    """Raises -32042 (URL elicitation required) until the authorization URL was visited."""
    record(tag, "call", tool="authorize")
    if not (STATE["dir"] / f"visited-auth-{tag}").exists():
        url = types.ElicitRequestURLParams(
            message="Authorize access to your files",
            url=f"https://auth.example/authorize/{tag}",
            elicitationId=f"auth-{tag}",
        )
        raise UrlElicitationRequiredError([url])
    return f"authorized {tag}"


@mcp.tool()
async def sample(tag: str, ctx: Ctx, use_tools: bool = True) -> str:
    """sampling/createMessage with tool-use, tool-result and image messages (and `tools`); the
    result as JSON."""
    record(tag, "call", tool="sample", session=session_of(ctx))
    caps = ctx.session.client_params.capabilities if ctx.session.client_params else None
    record(
        tag,
        "caps",
        sampling=caps is not None and caps.sampling is not None,
        sampling_tools=caps is not None
        and caps.sampling is not None
        and caps.sampling.tools is not None,
    )
    try:
        result = await _sample(ctx, tag, use_tools)
    except McpError as exc:
        return json.dumps({"error": {"code": exc.error.code, "message": exc.error.message}})
    return json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True))


@mcp.tool()
async def roots(tag: str, ctx: Ctx) -> str:
    """roots/list; the root URIs as a JSON list."""
    record(tag, "call", tool="roots")
    result = await _roots(ctx, tag)
    return json.dumps([str(root.uri) for root in result.roots])


@mcp.tool()
async def everything(tag: str, ctx: Ctx, linger_s: float = 0.0) -> str:
    """An elicitation, a sampling request and roots/list, all at once; lingers `linger_s` s once
    answered."""
    record(tag, "call", tool="everything")
    elicited, sampled, listed = await asyncio.gather(
        _elicit(ctx, tag, "What is your name?", NAME_SCHEMA),
        _sample(ctx, tag, False),
        _roots(ctx, tag),
        return_exceptions=True,
    )
    await _linger(tag, linger_s)
    for outcome in (elicited, sampled, listed):
        if isinstance(outcome, BaseException):
            raise outcome
    assert isinstance(elicited, types.ElicitResult) and isinstance(listed, types.ListRootsResult)
    text = (
        sampled.content.text
        if isinstance(sampled, types.CreateMessageResultWithTools)
        and isinstance(sampled.content, types.TextContent)
        else "?"
    )
    return f"{_content(elicited, 'name')} | {text} | {','.join(str(r.uri) for r in listed.roots)}"


@mcp.tool()
async def staggered(tag: str, ctx: Ctx, delay_s: float = 0.2) -> str:
    """An elicitation now and roots/list `delay_s` later (journal `late_push` just before it),
    concurrently."""
    record(tag, "call", tool="staggered")

    async def late_roots() -> types.ListRootsResult:
        await anyio.sleep(delay_s)
        record(tag, "late_push", kind="roots")
        return await _roots(ctx, tag)

    elicited, listed = await asyncio.gather(
        _elicit(ctx, tag, "What is your name?", NAME_SCHEMA), late_roots()
    )
    return f"{_content(elicited, 'name')} | {','.join(str(r.uri) for r in listed.roots)}"


@mcp.tool()
async def chatty(tag: str, ctx: Ctx) -> str:
    """Progress 1 and 2 of 2, and one info log message (as the modern interactive server's)."""
    await ctx.report_progress(progress=1, total=2, message="half")
    await ctx.info(f"chatty {tag}")
    await ctx.report_progress(progress=2, total=2, message="done")
    return "chatted"


@mcp.tool()
async def slow(tag: str, seconds: float) -> str:
    """Sleep `seconds`."""
    record(tag, "call", tool="slow")
    await _linger(tag, seconds)
    return "slept"


@mcp.tool()
async def slow_ask(
    tag: str, ctx: Ctx, before_s: float = 0.0, after_s: float = 0.0, times: int = 1
) -> str:
    """Work `before_s` s, elicit {answer} (`times` times, the same question), work `after_s` s
    more."""
    record(tag, "call", tool="slow_ask")
    await _linger(tag, before_s)
    answers = [
        _content(await _elicit(ctx, tag, "What is your answer?", ANSWER_SCHEMA), "answer")
        for _ in range(times)
    ]
    await _linger(tag, after_s)
    return "answer: " + ", ".join(map(str, answers))


@mcp.prompt()
async def ask_prompt(tag: str, ctx: Ctx) -> list[Message]:
    """Elicits {topic} during prompts/get."""
    record(tag, "call", prompt="ask_prompt")
    result = await _elicit(ctx, tag, "Which topic should the prompt use?", TOPIC_SCHEMA)
    return [
        UserMessage(
            content=types.TextContent(type="text", text=f"Write about {_content(result, 'topic')}.")
        )
    ]


@mcp.resource("interactive://ask/{tag}", mime_type="text/plain")
async def ask_resource(tag: str, ctx: Ctx) -> str:
    """Elicits {answer} during resources/read."""
    record(tag, "call", resource="interactive://ask")
    result = await _elicit(ctx, tag, "Which secret should the resource show?", ANSWER_SCHEMA)
    return f"secret for {tag}: {_content(result, 'answer')}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--transport", choices=["http", "sse", "stdio"], default="http")
    parser.add_argument("--port", type=int, default=8931, help="HTTP port (binds 127.0.0.1 only)")
    parser.add_argument(
        "--state-dir", type=Path, help="journal and URL-visit markers (default: a new temp dir)"
    )
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper()), stream=sys.stderr)
    STATE["dir"] = args.state_dir or Path(tempfile.mkdtemp(prefix="mrtr-interactive-"))
    STATE["dir"].mkdir(parents=True, exist_ok=True)
    if args.transport == "stdio":
        mcp.run("stdio")
        return 0
    mcp.settings.port = args.port
    mcp.settings.log_level = args.log_level.upper()
    mcp.run("sse" if args.transport == "sse" else "streamable-http")
    return 0


if __name__ == "__main__":
    sys.exit(main())
