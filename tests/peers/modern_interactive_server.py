#!/usr/bin/env python3
"""The interactive test server's tool contract, written the 2026-07-28 way with the `mcp` 2.x SDK
(run it from `.venv`): every input is asked with an `InputRequiredResult` and read from
`inputResponses` on the retry, never pushed.

The tools answer exactly what `interactive_server.py` (the legacy one) answers, so a legacy client
can be run against both and the results compared: `echo`, `ask`, `ask_twice` (two rounds, the
name carried in `requestState`), `ask_url` (a URL elicitation without an `elicitationId`: the
modern era has none), `sample`, `roots`, `everything` (three inputs in one round), `slow`, prompt
`ask_prompt`, resource `interactive://ask/{tag}`; and `chatty` (progress and a log message).
Large answers, as the legacy server's where it has them: `big` (a text of 1 MiB, answered as
`application/json`), `many_inputs` (10,000 inputs asked in one round), `big_state` (one input,
with an 8 MiB `requestState` that must come back unchanged).
`--modern-only` refuses a legacy `initialize` with -32022 inside an HTTP 200, as a server that
dropped the legacy era may; without it the SDK serves legacy sessions too (dual-era).

    python tests/peers/modern_interactive_server.py --port N [--modern-only]
    python tests/peers/modern_interactive_server.py --transport stdio
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequest,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    TextContent,
)

mcp = MCPServer(name="mrtr-modern-interactive-test-server", version="1.0.0")
MAX_BODY_BYTES = 16 * 1024 * 1024  # `big_state`'s retry carries 8 MiB (the SDK's default is 4 MiB)


def _schema(field: str) -> dict[str, Any]:
    return {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}


ANSWER_SCHEMA, NAME_SCHEMA = _schema("answer"), _schema("name")
COLOR_SCHEMA, TOPIC_SCHEMA = _schema("color"), _schema("topic")
PIXEL_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAF"
    "BQIAX8jx0gAAAABJRU5ErkJggg=="
)
# the legacy interactive server's sampling messages: a tool use, its result and an image
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


def _elicit(message: str, schema: dict[str, Any]) -> ElicitRequest:
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def _sample() -> CreateMessageRequest:
    params = {"messages": SAMPLING_MESSAGES, "maxTokens": 64}
    return CreateMessageRequest(params=CreateMessageRequestParams.model_validate(params))


def _answers(ctx: Context) -> dict[str, Any]:
    return dict(ctx.input_responses or {})


def _content(result: Any, field: str) -> Any:
    if isinstance(result, ElicitResult) and result.action == "accept":
        return (result.content or {}).get(field)
    return None


def _dump(result: Any) -> Any:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


@mcp.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool()
async def ask(tag: str, ctx: Context, question: str = "What is your answer?") -> Any:
    """Elicit {answer} with `question`; returns {"action", "content"} as JSON."""
    answer = _answers(ctx).get("answer")
    if isinstance(answer, ElicitResult):
        return json.dumps({"action": answer.action, "content": answer.content})
    return InputRequiredResult(input_requests={"answer": _elicit(question, ANSWER_SCHEMA)})


@mcp.tool()
async def ask_twice(tag: str, ctx: Context) -> Any:
    """Two rounds: a name, then a color (the name travels in requestState)."""
    answers = _answers(ctx)
    if "color" in answers and ctx.request_state:
        name = json.loads(ctx.request_state)["name"]
        return f"{name} likes {_content(answers['color'], 'color')}."
    if "name" in answers:
        return InputRequiredResult(
            input_requests={"color": _elicit("Step 2: what is your favorite color?", COLOR_SCHEMA)},
            request_state=json.dumps({"name": _content(answers["name"], "name")}),
        )
    return InputRequiredResult(
        input_requests={"name": _elicit("Step 1: what is your name?", NAME_SCHEMA)}
    )


@mcp.tool()
async def ask_url(tag: str, ctx: Context) -> Any:
    """A URL-mode elicitation."""
    answer = _answers(ctx).get("signin")
    if isinstance(answer, ElicitResult):
        return f"url elicitation: {answer.action}"
    params = ElicitRequestURLParams(
        mode="url", message="Sign in to continue", url=f"https://auth.example/sign-in/{tag}"
    )
    return InputRequiredResult(input_requests={"signin": ElicitRequest(params=params)})


@mcp.tool()
async def sample(tag: str, ctx: Context, use_tools: bool = False) -> Any:
    """sampling/createMessage; the result as JSON."""
    answer = _answers(ctx).get("sample")
    if answer is not None:
        return json.dumps(_dump(answer))
    return InputRequiredResult(input_requests={"sample": _sample()})


@mcp.tool()
async def roots(tag: str, ctx: Context) -> Any:
    """roots/list; the root URIs as a JSON list."""
    answer = _answers(ctx).get("roots")
    if isinstance(answer, ListRootsResult):
        return json.dumps([str(root.uri) for root in answer.roots])
    return InputRequiredResult(input_requests={"roots": ListRootsRequest()})


@mcp.tool()
async def everything(tag: str, ctx: Context) -> Any:
    """An elicitation, a sampling request and roots/list, all in one round."""
    answers = _answers(ctx)
    if {"name", "sample", "roots"} <= set(answers):
        sampled, listed = answers["sample"], answers["roots"]
        text = (
            sampled.content.text
            if isinstance(sampled, CreateMessageResult) and isinstance(sampled.content, TextContent)
            else "?"
        )
        uris = ",".join(str(r.uri) for r in listed.roots)
        return f"{_content(answers['name'], 'name')} | {text} | {uris}"
    requests: dict[str, InputRequest] = {
        "name": _elicit("What is your name?", NAME_SCHEMA),
        "sample": _sample(),
        "roots": ListRootsRequest(),
    }
    return InputRequiredResult(input_requests=requests)


@mcp.tool()
def big(tag: str, size: int = 1_048_576) -> str:
    """A text of `size` characters: a large answer."""
    return "x" * size


@mcp.tool()
async def many_inputs(tag: str, ctx: Context, count: int = 10_000) -> Any:
    """Asks for `count` inputs in one round."""
    if _answers(ctx):
        return f"{len(_answers(ctx))} answers"
    requests: dict[str, InputRequest] = {
        f"q{index}": _elicit(f"Question {index}?", ANSWER_SCHEMA) for index in range(count)
    }
    return InputRequiredResult(input_requests=requests)


def _state(size: int) -> str:
    """A `requestState` of `size` characters that is not one character repeated."""
    return ("0123456789abcdef" * (size // 16 + 1))[:size]


@mcp.tool()
async def big_state(tag: str, ctx: Context, size: int = 8_388_608) -> Any:
    """One input, with a `requestState` of `size` characters that must come back unchanged."""
    answer = _answers(ctx).get("answer")
    if isinstance(answer, ElicitResult) and ctx.request_state is not None:
        kept = "intact" if ctx.request_state == _state(size) else "CHANGED"
        length = len(ctx.request_state)
        return f"{_content(answer, 'answer')}: requestState of {length} characters {kept}"
    return InputRequiredResult(
        input_requests={"answer": _elicit("What is your answer?", ANSWER_SCHEMA)},
        request_state=_state(size),
    )


@mcp.tool()
async def slow(tag: str, seconds: float) -> str:
    """Sleep `seconds` (said on stderr first: `slow_started <tag>`, for a test to wait on)."""
    print(f"slow_started {tag}", file=sys.stderr, flush=True)
    await asyncio.sleep(seconds)
    return "slept"


@mcp.tool()
async def chatty(tag: str, ctx: Context) -> str:
    """Progress 1 and 2 of 2, and one info log message."""
    await ctx.report_progress(progress=1, total=2, message="half")
    await ctx.info(f"chatty {tag}")
    await ctx.report_progress(progress=2, total=2, message="done")
    return "chatted"


@mcp.tool()
async def touch(tag: str, ctx: Context) -> str:
    """Announces a tools list change and an update of interactive://ask/<tag>."""
    await ctx.notify_tools_changed()
    await ctx.notify_resource_updated(f"interactive://ask/{tag}")
    return "touched"


@mcp.prompt()
async def ask_prompt(tag: str, ctx: Context) -> Any:
    """Elicits {topic} during prompts/get."""
    answer = _answers(ctx).get("topic")
    if answer is None:
        asked = _elicit("Which topic should the prompt use?", TOPIC_SCHEMA)
        return InputRequiredResult(input_requests={"topic": asked})
    text = f"Write about {_content(answer, 'topic')}."
    return [UserMessage(role="user", content=TextContent(type="text", text=text))]


@mcp.resource("interactive://ask/{tag}", mime_type="text/plain")
async def ask_resource(tag: str, ctx: Context) -> Any:
    """Elicits {answer} during resources/read."""
    answer = _answers(ctx).get("answer")
    if answer is None:
        asked = _elicit("Which secret should the resource show?", ANSWER_SCHEMA)
        return InputRequiredResult(input_requests={"answer": asked})
    return f"secret for {tag}: {_content(answer, 'answer')}"


def refuse_initialize(app: Any) -> Any:
    """ASGI wrapper: a POST `initialize` gets HTTP 200 with a -32022 error (modern-only)."""

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
                "code": -32022,
                "message": "Unsupported protocol version",
                "data": {"supported": ["2026-07-28"]},
            }
            payload = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "error": error})
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            return await send({"type": "http.response.body", "body": payload.encode()})
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
    parser.add_argument("--transport", choices=("http", "stdio"), default="http")
    parser.add_argument("--port", type=int, default=8951)
    parser.add_argument("--modern-only", action="store_true")
    args = parser.parse_args()
    if args.transport == "stdio":
        mcp.run("stdio")
    elif args.modern_only:
        app = refuse_initialize(mcp.streamable_http_app(max_request_body_size=MAX_BODY_BYTES))
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
    else:
        mcp.run(
            "streamable-http",
            host="127.0.0.1",
            port=args.port,
            max_request_body_size=MAX_BODY_BYTES,
        )


if __name__ == "__main__":
    main()
