#!/usr/bin/env python3
# ruff: noqa
# Origin: copied unmodified (apart from this header) from the project's shared reference material,
# `conformance/legacy_fixture_server.py` (written for mrtr-bridge; mcp==1.30.0, FastMCP). It is the
# conformance upstream for `make conformance` and a peer for the integration tests. Vendored so the
# project never reads outside its own tree; keep it byte-identical below this header when updating,
# except the `--task-tools` and `--one-task-question-id` flags in main() (mrtr-bridge's own: tests/peers/legacy_task_tools.py).
"""Legacy (MCP 2025-11-25 only) fixture server for the 2026-07-28 conformance scenarios.

Written against the `mcp` 1.x SDK (FastMCP), which speaks only the stateful
2025-11-25 protocol: initialize handshake, Mcp-Session-Id, and *server-initiated*
requests (elicitation/create, sampling/createMessage, roots/list) sent on the
SSE stream of the tools/call / prompts/get POST that caused them.

It exposes every tool / prompt / resource that the
`@modelcontextprotocol/conformance` 2026-07-28 server scenarios look for, with the
same names and observable results as the python-sdk 2.x reference
"everything-server". Where a 2026-07-28 scenario expects an MRTR
`InputRequiredResult` (resultType "input_required" + inputRequests + requestState),
this server instead does the legacy thing: it sends a server-initiated request and
awaits the client's answer. A modern-to-legacy MRTR proxy in front of it is what
turns those pushes into `inputRequests` and maps the retry's `inputResponses` back.

Input-key hints
---------------
Two conformance checks hard-code the inputRequests key ("user_name" in
input-required-result-basic-elicitation and -ignore-extra-params). A legacy request
has no such key, so each server-initiated request carries an optional hint in
`params._meta[INPUT_KEY_META]` naming the key the reference server would use. A
proxy MAY use it as its inputRequests key; pass --no-key-hints to omit it (then
those two checks can only pass if the proxy happens to choose "user_name").

Usage
-----
    python legacy_fixture_server.py --port 8931            # Streamable HTTP on 127.0.0.1:8931/mcp
    python legacy_fixture_server.py --transport stdio      # stdio

Tools that need several inputs at once (test_input_required_result_multiple_inputs,
test_input_required_result_capabilities) send their server-initiated requests
*concurrently*, so a proxy can batch them into one InputRequiredResult.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import logging
import sys
from typing import Annotated, Any

import mcp.types as types
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.prompts.base import Message, UserMessage
from mcp.server.lowlevel.server import NotificationOptions
from mcp.shared.exceptions import McpError, UrlElicitationRequiredError
from mcp.shared.message import ServerMessageMetadata
from pydantic import Field

logger = logging.getLogger("legacy_fixture_server")

INPUT_KEY_META = "dev.mrtr-bridge/inputKey"
SEND_KEY_HINTS = True

TEST_IMAGE_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
TEST_AUDIO_BASE64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

# 2026-07-28 code; legacy servers have none of their own
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
RESOURCE_NOT_FOUND = -32002  # 2025-11-25 resources.mdx "Resource not found"

mcp = FastMCP(name="mcp-legacy-conformance-fixture", host="127.0.0.1")


# ---------------------------------------------------------------------------
# helpers: legacy server-initiated requests
# ---------------------------------------------------------------------------


def _meta(key: str) -> dict[str, Any]:
    return {"_meta": {INPUT_KEY_META: key}} if SEND_KEY_HINTS else {}


async def _send(ctx: Context, request: Any, result_type: Any) -> Any:
    """Send a server->client request on the stream of the current client request."""
    return await ctx.request_context.session.send_request(
        types.ServerRequest(request),
        result_type,
        metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
    )


async def elicit(
    ctx: Context, key: str, message: str, schema: dict[str, Any]
) -> types.ElicitResult:
    req = types.ElicitRequest.model_validate(
        {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": message, "requestedSchema": schema, **_meta(key)},
        }
    )
    return await _send(ctx, req, types.ElicitResult)


async def sample(ctx: Context, key: str, text: str, max_tokens: int) -> types.CreateMessageResult:
    req = types.CreateMessageRequest.model_validate(
        {
            "method": "sampling/createMessage",
            "params": {
                "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
                "maxTokens": max_tokens,
                **_meta(key),
            },
        }
    )
    return await _send(ctx, req, types.CreateMessageResult)


async def list_roots(ctx: Context, key: str) -> types.ListRootsResult:
    req = types.ListRootsRequest.model_validate(
        {"method": "roots/list", "params": _meta(key) or None}
    )
    return await _send(ctx, req, types.ListRootsResult)


def _client_caps(ctx: Context) -> types.ClientCapabilities | None:
    params = ctx.request_context.session.client_params
    return params.capabilities if params else None


def _content_field(result: types.ElicitResult, field: str, default: Any = None) -> Any:
    if result.action == "accept" and result.content:
        return result.content.get(field, default)
    return default


class ProtocolError(UrlElicitationRequiredError):
    """A tool-raised JSON-RPC error that FastMCP 1.x lets through unwrapped.

    FastMCP 1.x turns every tool exception into `isError: true` except
    UrlElicitationRequiredError; subclassing it is the only way to make a tool
    answer with a top-level JSON-RPC error of an arbitrary code.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        McpError.__init__(self, types.ErrorData(code=code, message=message, data=data))


NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
CONFIRM_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
COLOR_SCHEMA = {
    "type": "object",
    "properties": {"color": {"type": "string"}},
    "required": ["color"],
}
CONTEXT_SCHEMA = {
    "type": "object",
    "properties": {"context": {"type": "string"}},
    "required": ["context"],
}


# ---------------------------------------------------------------------------
# plain tools (tools-*, server-stateless, json-schema-2020-12, http-*-validation)
# ---------------------------------------------------------------------------


@mcp.tool()
def test_simple_text() -> str:
    """Tests simple text content response"""
    return "This is a simple text response for testing."


@mcp.tool()
def test_image_content() -> list[types.ImageContent]:
    """Tests image content response"""
    return [types.ImageContent(type="image", data=TEST_IMAGE_BASE64, mimeType="image/png")]


@mcp.tool()
def test_audio_content() -> list[types.AudioContent]:
    """Tests audio content response"""
    return [types.AudioContent(type="audio", data=TEST_AUDIO_BASE64, mimeType="audio/wav")]


@mcp.tool()
def test_embedded_resource() -> list[types.EmbeddedResource]:
    """Tests embedded resource content response"""
    return [
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri="test://embedded-resource",
                mimeType="text/plain",
                text="This is an embedded resource content.",
            ),
        )
    ]


@mcp.tool()
def test_multiple_content_types() -> list[
    types.TextContent | types.ImageContent | types.EmbeddedResource
]:
    """Tests response with multiple content types (text, image, resource)"""
    return [
        types.TextContent(type="text", text="Multiple content types test:"),
        types.ImageContent(type="image", data=TEST_IMAGE_BASE64, mimeType="image/png"),
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri="test://mixed-content-resource",
                mimeType="application/json",
                text='{"test": "data", "value": 123}',
            ),
        ),
    ]


@mcp.tool()
def test_error_handling() -> str:
    """Tests error response handling"""
    raise RuntimeError("This tool intentionally returns an error for testing")


@mcp.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Tests tool that reports progress notifications"""
    await ctx.report_progress(progress=0, total=100, message="Completed step 0 of 100")
    await asyncio.sleep(0.05)
    await ctx.report_progress(progress=50, total=100, message="Completed step 50 of 100")
    await asyncio.sleep(0.05)
    await ctx.report_progress(progress=100, total=100, message="Completed step 100 of 100")
    meta = ctx.request_context.meta
    return str(meta.progressToken if meta and meta.progressToken is not None else 0)


@mcp.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Tests tool that emits log messages during execution"""
    await ctx.info("Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@mcp.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Emits notifications/message unconditionally (legacy servers log regardless of any per-request
    logLevel).

    server-stateless/sep-2575-server-no-log-without-loglevel calls it without
    _meta logLevel: a proxy must drop these notifications.
    """
    await ctx.info("log line 1")
    await ctx.warning("log line 2")
    return "logged"


@mcp.tool()
async def test_streaming_elicitation(ctx: Context) -> str:
    """Sends a server-initiated elicitation/create mid-call.

    server-stateless/sep-2575-http-server-no-independent-requests-on-stream calls it:
    a proxy must turn the push into an InputRequiredResult, never forward it as a
    JSON-RPC request on the response stream.
    """
    result = await elicit(
        ctx, "stream_input", "Streaming elicitation: what is your name?", NAME_SCHEMA
    )
    return f"streaming elicitation: action={result.action}, name={_content_field(result, 'name')}"


@mcp.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Requires the client's sampling capability (server-stateless -32021 checks).

    If the (legacy) session's client declared sampling it asks for a sample the
    legacy way; otherwise it fails with a top-level JSON-RPC error -32021 and
    data.requiredCapabilities = {"sampling": {}}.
    """
    caps = _client_caps(ctx)
    if caps is None or caps.sampling is None:
        raise ProtocolError(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            "This tool requires the client 'sampling' capability",
            {"requiredCapabilities": {"sampling": {}}},
        )
    result = await sample(ctx, "sample", "Say hello", 50)
    text = result.content.text if isinstance(result.content, types.TextContent) else "?"
    return f"Client declared sampling capability; model said: {text}"


@mcp.tool()
def test_x_mcp_header(
    region: Annotated[
        str,
        Field(
            description="Mirrored into the Mcp-Param-Region header",
            json_schema_extra={"x-mcp-header": "Region"},
        ),
    ] = "<none>",
) -> str:
    """Tests SEP-2243 Mcp-Param-* validation (arms http-custom-header-server-validation)."""
    return f"region={region}"


JSON_SCHEMA_2020_12_INPUT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@mcp.tool(name="json_schema_2020_12_tool")
def json_schema_2020_12_tool() -> str:
    """Tests JSON Schema 2020-12 keyword preservation in tools/list."""
    return "json_schema_2020_12_tool"


mcp._tool_manager._tools["json_schema_2020_12_tool"].parameters = JSON_SCHEMA_2020_12_INPUT_SCHEMA


def _dynamic() -> str:
    """Registered and removed by the trigger tools."""
    return "dynamic"


@mcp.tool()
async def test_trigger_tool_change(ctx: Context) -> str:
    """Mutates the tool list and sends notifications/tools/list_changed (legacy: on the GET
    stream)."""
    mcp.add_tool(_dynamic, name="test_dynamic_tool")
    mcp.remove_tool("test_dynamic_tool")
    await ctx.request_context.session.send_tool_list_changed()
    return "tool list changed"


@mcp.tool()
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Mutates the prompt list and sends notifications/prompts/list_changed (legacy: on the GET
    stream)."""
    await ctx.request_context.session.send_prompt_list_changed()
    return "prompt list changed"


# ---------------------------------------------------------------------------
# legacy-era elicitation/sampling tools (2025-11-25 scenarios; harmless at 2026-07-28)
# ---------------------------------------------------------------------------


@mcp.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Tests server-initiated sampling (LLM completion request)"""
    try:
        result = await sample(ctx, "sampling", prompt, 100)
        text = (
            result.content.text if isinstance(result.content, types.TextContent) else "No response"
        )
        return f"LLM response: {text}"
    except Exception as e:  # noqa: BLE001
        return f"Sampling not supported or error: {e}"


@mcp.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Tests server-initiated elicitation (user input request)"""
    schema = {
        "type": "object",
        "properties": {"response": {"type": "string", "description": "User's response"}},
        "required": ["response"],
    }
    try:
        result = await elicit(ctx, "elicitation", message, schema)
        content = json.dumps(result.content or {}) if result.action == "accept" else "{}"
        return f"User response: action={result.action}, content={content}"
    except Exception as e:  # noqa: BLE001
        return f"Elicitation not supported or error: {e}"


@mcp.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Tests elicitation with default values for all primitive types (SEP-1034)"""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
    }
    result = await elicit(ctx, "defaults", "Please provide user information", schema)
    content = json.dumps(result.content or {}) if result.action == "accept" else "{}"
    return f"Elicitation result: action={result.action}, content={content}"


@mcp.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Tests elicitation with enum schema variations per SEP-1330"""
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {
                "type": "string",
                "description": "Simple enum without titles",
                "enum": ["active", "inactive", "pending"],
            },
            "titledSingle": {
                "type": "string",
                "description": "Enum with titled options (oneOf)",
                "oneOf": [
                    {"const": "low", "title": "Low Priority"},
                    {"const": "medium", "title": "Medium Priority"},
                    {"const": "high", "title": "High Priority"},
                ],
            },
            "untitledMulti": {
                "type": "array",
                "description": "Multi-select without titles",
                "items": {"type": "string", "enum": ["read", "write", "execute"]},
            },
            "titledMulti": {
                "type": "array",
                "description": "Multi-select with titled options",
                "items": {
                    "anyOf": [
                        {"const": "feature", "title": "New Feature"},
                        {"const": "bug", "title": "Bug Fix"},
                        {"const": "docs", "title": "Documentation"},
                    ]
                },
            },
            "legacyEnum": {
                "type": "string",
                "description": "Legacy enum with enumNames",
                "enum": ["small", "medium", "large"],
                "enumNames": ["Small Size", "Medium Size", "Large Size"],
            },
        },
        "required": [
            "untitledSingle",
            "titledSingle",
            "untitledMulti",
            "titledMulti",
            "legacyEnum",
        ],
    }
    result = await elicit(
        ctx, "enums", "Please select values using different enum schema types", schema
    )
    content = json.dumps(result.content or {}) if result.action == "accept" else "{}"
    return f"Elicitation completed: action={result.action}, content={content}"


# ---------------------------------------------------------------------------
# MRTR fixtures (input-required-result-*), done the legacy way
# ---------------------------------------------------------------------------


@mcp.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Elicits {name} ("What is your name?", hint key user_name); returns "Hello, <name>!"."""
    result = await elicit(ctx, "user_name", "What is your name?", NAME_SCHEMA)
    return f"Hello, {_content_field(result, 'name', 'stranger')}!"


@mcp.tool()
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Samples "What is the capital of France?" (maxTokens 100, hint key capital_question)."""
    result = await sample(ctx, "capital_question", "What is the capital of France?", 100)
    text = result.content.text if isinstance(result.content, types.TextContent) else "?"
    return f"Model said: {text}"


@mcp.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Asks roots/list (hint key client_roots); returns the root count."""
    result = await list_roots(ctx, "client_roots")
    return f"Client exposed {len(result.roots)} root(s)."


@mcp.tool()
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Elicits {ok: boolean} ("Please confirm", hint key confirm); returns text containing
    "state-ok"."""
    result = await elicit(ctx, "confirm", "Please confirm", CONFIRM_SCHEMA)
    return f"state-ok: confirmation received (action={result.action})"


@mcp.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Sends elicitation (user_name), sampling (greeting) and roots/list (client_roots)
    CONCURRENTLY."""
    await asyncio.gather(
        elicit(ctx, "user_name", "What is your name?", NAME_SCHEMA),
        sample(ctx, "greeting", "Generate a greeting", 50),
        list_roots(ctx, "client_roots"),
    )
    return "All inputs received."


@mcp.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Two sequential elicitations (step1 name, step2 color); returns "<name> likes <color>."."""
    step1 = await elicit(ctx, "step1", "Step 1: What is your name?", NAME_SCHEMA)
    step2 = await elicit(ctx, "step2", "Step 2: What is your favorite color?", COLOR_SCHEMA)
    return f"{_content_field(step1, 'name')} likes {_content_field(step2, 'color')}."


@mcp.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Elicits {ok} (hint key confirm). Tamper detection of requestState is the proxy's job."""
    result = await elicit(ctx, "confirm", "Please confirm", CONFIRM_SCHEMA)
    return f"state-ok: action={result.action}"


@mcp.tool()
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Sends only the requests the (legacy) client declared in initialize: sampling (sample)
    and/or elicitation (ask), concurrently. The capability-check scenario declares only sampling."""
    caps = _client_caps(ctx)
    pending = []
    if caps is None or caps.sampling is not None:
        pending.append(sample(ctx, "sample", "Say hello", 50))
    if caps is None or caps.elicitation is not None:
        pending.append(elicit(ctx, "ask", "What is your name?", NAME_SCHEMA))
    await asyncio.gather(*pending)
    return f"capability-gated: {len(pending)} input(s) received"


# ---------------------------------------------------------------------------
# resources
# ---------------------------------------------------------------------------


@mcp.resource("test://static-text", mime_type="text/plain")
def static_text_resource() -> str:
    """A static text resource for testing"""
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary", mime_type="image/png")
def static_binary_resource() -> bytes:
    """A static binary resource (image) for testing"""
    return base64.b64decode(TEST_IMAGE_BASE64)


@mcp.resource("test://template/{id}/data", mime_type="application/json")
def template_resource(id: str) -> str:
    """A resource template with parameter substitution"""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@mcp.resource("test://watched-resource", mime_type="text/plain")
def watched_resource() -> str:
    """A resource that can be subscribed to for updates"""
    return "Watched resource content"


_fastmcp_read_resource = mcp.read_resource


async def _read_resource_legacy_not_found(uri: Any):
    """2025-11-25 says an unknown resource is JSON-RPC error -32002 with data.uri (FastMCP 1.x uses
    code 0)."""
    try:
        return await _fastmcp_read_resource(uri)
    except McpError:
        raise
    except Exception as e:  # noqa: BLE001
        if "Unknown resource" in str(e):
            raise McpError(
                types.ErrorData(
                    code=RESOURCE_NOT_FOUND, message="Resource not found", data={"uri": str(uri)}
                )
            )
        raise


mcp._mcp_server.read_resource()(_read_resource_legacy_not_found)


# ---------------------------------------------------------------------------
# prompts
# ---------------------------------------------------------------------------


@mcp.prompt()
def test_simple_prompt() -> list[Message]:
    """A simple prompt without arguments"""
    return [
        UserMessage(
            content=types.TextContent(type="text", text="This is a simple prompt for testing.")
        )
    ]


@mcp.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[Message]:
    """A prompt with required arguments"""
    return [
        UserMessage(
            content=types.TextContent(
                type="text", text=f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
            )
        )
    ]


@mcp.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:
    """A prompt that includes an embedded resource"""
    return [
        UserMessage(
            content=types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri=resourceUri,
                    mimeType="text/plain",
                    text="Embedded resource content for testing.",
                ),
            )
        ),
        UserMessage(
            content=types.TextContent(
                type="text", text="Please process the embedded resource above."
            )
        ),
    ]


@mcp.prompt()
def test_prompt_with_image() -> list[Message]:
    """A prompt that includes image content"""
    return [
        UserMessage(
            content=types.ImageContent(type="image", data=TEST_IMAGE_BASE64, mimeType="image/png")
        ),
        UserMessage(content=types.TextContent(type="text", text="Please analyze the image above.")),
    ]


@mcp.prompt()
async def test_input_required_result_prompt(ctx: Context) -> list[Message]:
    """Elicits {context} ("What context should the prompt use?", hint key user_context) during
    prompts/get."""
    result = await elicit(
        ctx, "user_context", "What context should the prompt use?", CONTEXT_SCHEMA
    )
    text = _content_field(result, "context", "?")
    return [
        UserMessage(
            content=types.TextContent(type="text", text=f"Use the following context: {text}")
        )
    ]


# ---------------------------------------------------------------------------
# completion, logging/setLevel, subscribe (legacy-only methods a proxy may hit)
# ---------------------------------------------------------------------------


@mcp.completion()
async def _complete(
    ref: Any, argument: types.CompletionArgument, context: Any = None
) -> types.Completion:
    return types.Completion(values=[], total=0, hasMore=False)


@mcp._mcp_server.subscribe_resource()
async def _subscribe(uri: Any) -> None:
    logger.info("subscribed %s", uri)


@mcp._mcp_server.unsubscribe_resource()
async def _unsubscribe(uri: Any) -> None:
    logger.info("unsubscribed %s", uri)


@mcp._mcp_server.set_logging_level()
async def _set_level(level: types.LoggingLevel) -> None:
    logger.info("log level %s", level)


# Declare listChanged for tools and prompts (FastMCP 1.x declares none by default).
_orig_init_options = mcp._mcp_server.create_initialization_options


def _init_options(
    notification_options: NotificationOptions | None = None, experimental_capabilities=None
):
    return _orig_init_options(
        notification_options
        or NotificationOptions(prompts_changed=True, tools_changed=True, resources_changed=True),
        experimental_capabilities or {},
    )


mcp._mcp_server.create_initialization_options = _init_options  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    global SEND_KEY_HINTS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=["http", "stdio"], default="http")
    parser.add_argument("--port", type=int, default=8931, help="HTTP port (binds 127.0.0.1 only)")
    parser.add_argument(
        "--json-response",
        action="store_true",
        help="answer POSTs with JSON, not SSE (no pushes then)",
    )
    parser.add_argument(
        "--no-key-hints", action="store_true", help=f"omit params._meta[{INPUT_KEY_META!r}]"
    )
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument(
        "--task-tools",
        action="store_true",
        help="add greet and the legacy task tools of the tasks-* scenarios (legacy_task_tools.py)",
    )
    parser.add_argument(
        "--one-task-question-id",
        action="store_true",
        help="with --task-tools: every question of a task gets one id (the mcp 1.x defect, forced)",
    )
    args = parser.parse_args(argv)
    if args.task_tools:
        import legacy_task_tools

        legacy_task_tools.install(
            mcp, question_ids="one" if args.one_task_question_id else "unique"
        )
    logging.basicConfig(level=getattr(logging, args.log_level.upper()), stream=sys.stderr)
    SEND_KEY_HINTS = not args.no_key_hints
    if args.transport == "stdio":
        mcp.run("stdio")
        return 0
    mcp.settings.host = "127.0.0.1"
    mcp.settings.port = args.port
    mcp.settings.json_response = args.json_response
    mcp.settings.log_level = args.log_level.upper()
    mcp.run("streamable-http")
    return 0


if __name__ == "__main__":
    sys.exit(main())
