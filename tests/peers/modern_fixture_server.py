"""A modern (2026-07-28) MCP server for the conformance suite, on the `mcp` 2.x SDK.

It exposes every fixture the 2026-07-28 server scenarios of `@modelcontextprotocol/conformance`
need, the modern way: where a scenario expects input, the handler returns an
`InputRequiredResult` and reads the answers from `ctx.input_responses` / `ctx.request_state` on
the retry (the SDK seals `requestState`, so a tampered echo is refused by the SDK). List and read
results carry caching hints (`ttlMs`, `cacheScope`). `tests/conformance/run.sh` (MODERN=1) runs
the suite against it directly and through the bridge, whose modern relay must pass every result
untouched.

    python tests/peers/modern_fixture_server.py --port N    Streamable HTTP on 127.0.0.1:N/mcp
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
from typing import Annotated, Any

from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.shared.exceptions import MCPError
from mcp.types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    AudioContent,
    Completion,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    EmbeddedResource,
    ImageContent,
    InputRequest,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    SamplingMessage,
    TextContent,
    TextResourceContents,
)
from pydantic import Field

PNG_1PX = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAF"
    "BQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV_EMPTY = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
HINT = CacheHint(ttl_ms=60_000, scope="public")
CACHED = (
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
)

mcp = MCPServer(
    name="mrtr-bridge-modern-fixture",
    version="1.0.0",
    cache_hints={method: HINT for method in CACHED},  # type: ignore[misc]
)


def _elicit(message: str, field: str, kind: str = "string") -> ElicitRequest:
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def _sample(text: str, max_tokens: int) -> CreateMessageRequest:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=text))
    return CreateMessageRequest(
        params=CreateMessageRequestParams(messages=[message], max_tokens=max_tokens)
    )


def _field(answer: object, name: str) -> str | None:
    """The accepted elicitation's `name` field, or None for anything else."""
    if isinstance(answer, ElicitResult) and answer.action == "accept" and answer.content:
        value = answer.content.get(name)
        return value if isinstance(value, str) else None
    return None


# -- plain tools ------------------------------------------------------------------------------


@mcp.tool()
def test_simple_text() -> str:
    """Returns one text block."""
    return "This is a simple text response for testing."


@mcp.tool()
def test_image_content() -> list[ImageContent]:
    """Returns one PNG image."""
    return [ImageContent(type="image", data=PNG_1PX, mime_type="image/png")]


@mcp.tool()
def test_audio_content() -> list[AudioContent]:
    """Returns one WAV clip."""
    return [AudioContent(type="audio", data=WAV_EMPTY, mime_type="audio/wav")]


def _embedded(uri: str, mime: str, text: str) -> EmbeddedResource:
    return EmbeddedResource(
        type="resource", resource=TextResourceContents(uri=uri, mime_type=mime, text=text)
    )


@mcp.tool()
def test_embedded_resource() -> list[EmbeddedResource]:
    """Returns one embedded text resource."""
    return [
        _embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")
    ]


@mcp.tool()
def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
    """Returns text, an image and an embedded resource."""
    return [
        TextContent(type="text", text="Multiple content types test:"),
        ImageContent(type="image", data=PNG_1PX, mime_type="image/png"),
        _embedded(
            "test://mixed-content-resource", "application/json", '{"test": "data", "value": 123}'
        ),
    ]


@mcp.tool()
def test_error_handling() -> str:
    """Always fails: the result has isError true."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@mcp.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50, 100 of 100 for the request's progressToken."""
    for step in (0, 50, 100):
        await ctx.report_progress(progress=step, total=100, message=f"Completed step {step} of 100")
        await asyncio.sleep(0.02)
    return "progress done"


@mcp.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs unconditionally; the SDK only delivers logs a request asked for."""
    await ctx.info("test_logging_tool ran")
    return "logged"


@mcp.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability."""
    caps = ctx.client_capabilities
    if caps is None or caps.sampling is None:
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="This tool requires the client 'sampling' capability",
            data={"requiredCapabilities": {"sampling": {}}},
        )
    return "sampling declared"


@mcp.tool()
async def test_trigger_tool_change(ctx: Context) -> str:
    """Announces a tools list change to subscribers."""
    await ctx.notify_tools_changed()
    return "tools changed"


@mcp.tool()
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Announces a prompts list change to subscribers."""
    await ctx.notify_prompts_changed()
    return "prompts changed"


@mcp.tool()
def test_x_mcp_header(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
) -> str:
    """Echoes the region, which the client mirrors into the Mcp-Param-Region header."""
    return f"region={region}"


@mcp.tool()
def json_schema_2020_12_tool(name: str = "") -> str:
    """A tool whose inputSchema uses JSON Schema 2020-12 keywords (replaced below)."""
    return "ok"


SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "address",
            "type": "object",
            "properties": {"street": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "allOf": [{"anyOf": [{"required": ["name"]}, {"required": ["address"]}]}],
    "if": {"properties": {"name": {"const": "x"}}},
    "then": {"required": ["address"]},
    "else": {"required": []},
    "additionalProperties": False,
}
mcp._tool_manager.get_tool("json_schema_2020_12_tool").parameters = SCHEMA_2020_12  # type: ignore[union-attr]


# -- Multi Round-Trip Requests: InputRequiredResult, inputResponses, requestState -----------------


@mcp.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str | InputRequiredResult:
    """Asks for the user's name (key `user_name`), then greets."""
    name = _field((ctx.input_responses or {}).get("user_name"), "name")
    if name is not None:
        return f"Hello, {name}!"
    return InputRequiredResult(input_requests={"user_name": _elicit("What is your name?", "name")})


@mcp.tool()
async def test_input_required_result_sampling(ctx: Context) -> str | InputRequiredResult:
    """Asks the client's model a question, then echoes the answer."""
    answer = (ctx.input_responses or {}).get("capital")
    if isinstance(answer, CreateMessageResult):
        text = answer.content.text if isinstance(answer.content, TextContent) else "(non-text)"
        return f"The model said: {text}"
    return InputRequiredResult(
        input_requests={"capital": _sample("What is the capital of France?", 100)}
    )


@mcp.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str | InputRequiredResult:
    """Asks for the client's roots, then counts them."""
    answer = (ctx.input_responses or {}).get("roots")
    if isinstance(answer, ListRootsResult):
        return f"The client has {len(answer.roots)} root(s)."
    return InputRequiredResult(input_requests={"roots": ListRootsRequest()})


def _confirm() -> dict[str, InputRequest]:
    return {"confirm": _elicit("Please confirm", "ok", "boolean")}


@mcp.tool()
async def test_input_required_result_request_state(ctx: Context) -> str | InputRequiredResult:
    """Round-trips an opaque requestState."""
    if ctx.request_state == "confirm-pending" and "confirm" in (ctx.input_responses or {}):
        return "state-ok: confirmation received"
    return InputRequiredResult(input_requests=_confirm(), request_state="confirm-pending")


@mcp.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str | InputRequiredResult:
    """Like request_state; a tampered echo is refused by the SDK's sealing before this runs."""
    if ctx.request_state == "confirm-pending":
        return "state-ok: untampered"
    return InputRequiredResult(input_requests=_confirm(), request_state="confirm-pending")


@mcp.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str | InputRequiredResult:
    """Asks for an elicitation, a sampling and the roots in one result."""
    if {"user_name", "greeting", "client_roots"} <= set(ctx.input_responses or {}):
        return "All three inputs received."
    requests: dict[str, InputRequest] = {
        "user_name": _elicit("What is your name?", "name"),
        "greeting": _sample("Generate a greeting", 50),
        "client_roots": ListRootsRequest(),
    }
    return InputRequiredResult(input_requests=requests, request_state="multiple-inputs")


def _step1() -> InputRequiredResult:
    return InputRequiredResult(
        input_requests={"step1": _elicit("Step 1: What is your name?", "name")},
        request_state=json.dumps({"round": 1}),
    )


@mcp.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str | InputRequiredResult:
    """Three rounds (name, then color, then the answer), with a new requestState each round."""
    state = json.loads(ctx.request_state) if ctx.request_state else {"round": 0}
    responses = ctx.input_responses or {}
    if state.get("round") == 1 and "step1" in responses:
        name = _field(responses["step1"], "name")
        return InputRequiredResult(
            input_requests={"step2": _elicit("Step 2: What is your favorite color?", "color")},
            request_state=json.dumps({"round": 2, "name": name}),
        )
    if state.get("round") == 2 and "step2" in responses:
        return f"{state.get('name')} likes {_field(responses['step2'], 'color')}."
    return _step1()


@mcp.tool()
async def test_input_required_result_capabilities(ctx: Context) -> InputRequiredResult:
    """Only asks for what the request's client capabilities declare."""
    caps = ctx.client_capabilities
    requests: dict[str, InputRequest] = {}
    if caps is not None and caps.sampling is not None:
        requests["sample"] = _sample("Say hello", 50)
    if caps is not None and caps.elicitation is not None:
        requests["ask"] = _elicit("What is your name?", "name")
    return InputRequiredResult(input_requests=requests, request_state="capability-gated")


@mcp.tool()
async def test_streaming_elicitation(ctx: Context) -> str | InputRequiredResult:
    """Needs input mid-call: at 2026-07-28 that is an InputRequiredResult, never a pushed
    request."""
    name = _field((ctx.input_responses or {}).get("name"), "name")
    if name is not None:
        return f"streamed {name}"
    return InputRequiredResult(input_requests={"name": _elicit("Your name?", "name")})


@mcp.prompt()
async def test_input_required_result_prompt(
    ctx: Context,
) -> list[UserMessage] | InputRequiredResult:
    """A prompt that needs input (the non-tool request case)."""
    context = _field((ctx.input_responses or {}).get("context"), "context")
    if context is None:
        asked = _elicit("What context should the prompt use?", "context")
        return InputRequiredResult(input_requests={"context": asked})
    return [
        UserMessage(
            role="user", content=TextContent(type="text", text=f"Use this context: {context}")
        )
    ]


# -- resources, prompts, completion ---------------------------------------------------------------


@mcp.resource("test://static-text")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (a PNG)."""
    return base64.b64decode(PNG_1PX)


@mcp.resource("test://template/{id}/data", mime_type="application/json")
def template_data(id: str) -> str:
    """A templated JSON resource."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@mcp.resource("test://watched-resource")
def watched() -> str:
    """A resource clients may watch."""
    return "Watched resource content"


def _user(text: str) -> UserMessage:
    return UserMessage(role="user", content=TextContent(type="text", text=text))


@mcp.prompt()
def test_simple_prompt() -> list[UserMessage]:
    """A prompt without arguments."""
    return [_user("This is a simple prompt for testing.")]


@mcp.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    """A prompt with two required arguments."""
    return [_user(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]


@mcp.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    """A prompt embedding the named resource."""
    embedded = _embedded(resourceUri, "text/plain", "Embedded resource content for testing.")
    return [
        UserMessage(role="user", content=embedded),
        _user("Please process the embedded resource above."),
    ]


@mcp.prompt()
def test_prompt_with_image() -> list[UserMessage]:
    """A prompt carrying an image."""
    image = ImageContent(type="image", data=PNG_1PX, mime_type="image/png")
    return [UserMessage(role="user", content=image), _user("Please analyze the image above.")]


@mcp.completion()  # type: ignore[no-untyped-call, untyped-decorator]
async def complete(ref: object, argument: object, context: object) -> Completion:
    """Answers every completion request with no suggestions."""
    return Completion(values=[], total=0, has_more=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    mcp.run(transport="streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
