"""What the legacy conformance fixture (tests/peers/legacy_fixture_server.py) answers through the
bridge, and the raw good and bad requests of `test_foundation.py`'s concurrency test (each checks
its own exact reply).
"""

from __future__ import annotations

import asyncio
import json
from subprocess import DEVNULL, PIPE
from typing import Any

from schema_check import assert_valid

from translators.protocol.eras import (
    META_PROTOCOL_VERSION,
    MODERN_VERSION,
    PROMPTS_LIST,
    RESULT_COMPLETE,
    TOOLS_CALL,
    TOOLS_LIST,
)
from translators.wire.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    INVALID_REQUEST_STATE_MESSAGE,
    UNSUPPORTED_VERSION,
)

from .harness import BRIDGE_EXE, REPO_ROOT, ModernPoster, RawReply
from .mrtr_helpers import tampered

TEST_IMAGE = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAF"
    "BQIAX8jx0gAAAABJRU5ErkJggg=="
)
TEST_AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

FIXTURE_CAPABILITIES = {
    "experimental": {},
    "logging": {},
    "prompts": {"listChanged": True},
    "resources": {"subscribe": False, "listChanged": True},
    "tools": {"listChanged": True},
    "completions": {},
    # long plain calls may become tasks (tasks.promote_after_ms, on by default; docs/tasks.md)
    "extensions": {"io.modelcontextprotocol/tasks": {}},
}
FIXTURE_TOOLS = [
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_error_handling",
    "test_tool_with_progress",
    "test_tool_with_logging",
    "test_logging_tool",
    "test_streaming_elicitation",
    "test_missing_capability",
    "test_x_mcp_header",
    "json_schema_2020_12_tool",
    "test_trigger_tool_change",
    "test_trigger_prompt_change",
    "test_sampling",
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
    "test_input_required_result_elicitation",
    "test_input_required_result_sampling",
    "test_input_required_result_list_roots",
    "test_input_required_result_request_state",
    "test_input_required_result_multiple_inputs",
    "test_input_required_result_multi_round",
    "test_input_required_result_tampered_state",
    "test_input_required_result_capabilities",
]
FIXTURE_PROMPTS = [
    "test_simple_prompt",
    "test_prompt_with_arguments",
    "test_prompt_with_embedded_resource",
    "test_prompt_with_image",
    "test_input_required_result_prompt",
]
FIXTURE_RESOURCES = ["test://static-text", "test://static-binary", "test://watched-resource"]
IMAGE = {"type": "image", "data": TEST_IMAGE, "mimeType": "image/png"}
TOOL_CONTENT: dict[str, list[dict[str, Any]]] = {
    "test_simple_text": [{"type": "text", "text": "This is a simple text response for testing."}],
    "test_image_content": [IMAGE],
    "test_audio_content": [{"type": "audio", "data": TEST_AUDIO, "mimeType": "audio/wav"}],
    "test_embedded_resource": [
        {
            "type": "resource",
            "resource": {
                "uri": "test://embedded-resource",
                "mimeType": "text/plain",
                "text": "This is an embedded resource content.",
            },
        }
    ],
    "test_multiple_content_types": [
        {"type": "text", "text": "Multiple content types test:"},
        IMAGE,
        {
            "type": "resource",
            "resource": {
                "uri": "test://mixed-content-resource",
                "mimeType": "application/json",
                "text": '{"test": "data", "value": 123}',
            },
        },
    ],
}
ERROR_TOOL_TEXT = (
    "Error executing tool test_error_handling: This tool intentionally returns an error for testing"
)


# ---- raw requests -------------------------------------------------------------------------------


GOOD_TOOLS = [*TOOL_CONTENT]
WRONG_VERSION = "2099-01-01"
OVERSIZED_BYTES = 1_100_000
SCHEMA_DEFINITIONS = {0: "HeaderMismatchError", 2: "UnsupportedProtocolVersionError"}
TOO_LARGE_MESSAGE = "Request body too large: the limit is 1048576 bytes (front.max_body_bytes)"


async def good_request(post: ModernPoster, n: int) -> bool:
    """Request n of the good ones: a tool call (exact content) or a list (every name)."""
    request_id = f"good-{n}"
    if n % 4 == 3:
        reply = await post.post(PROMPTS_LIST, {}, request_id=request_id)
        names = [prompt["name"] for prompt in reply.response["result"]["prompts"]]
        assert (reply.status, reply.response["id"], names) == (200, request_id, FIXTURE_PROMPTS), (
            reply.text
        )
        return True
    name = GOOD_TOOLS[n % len(GOOD_TOOLS)]
    reply = await post.post(TOOLS_CALL, {"name": name}, request_id=request_id)
    assert (reply.status, reply.response["id"]) == (200, request_id), reply.text
    result = reply.response["result"]
    assert (result["resultType"], result["content"]) == (RESULT_COMPLETE, TOOL_CONTENT[name]), (
        reply.text
    )
    return True


async def bad_request(post: ModernPoster, n: int, state: str, key: str) -> bool:
    """Request n of the bad ones, by kind (n % 5); asserts its exact status, id and error."""
    request_id = f"bad-{n}"
    kind = n % 5
    if kind == 0:  # the Mcp-Method header does not match the body
        reply = await post.post(
            TOOLS_LIST, {}, request_id=request_id, headers={"Mcp-Method": PROMPTS_LIST}
        )
        message = (
            "Header mismatch: Mcp-Method header value 'prompts/list' does not match body "
            "value 'tools/list' (method)"
        )
        expected: tuple[int, Any, dict[str, Any]] = (
            400,
            request_id,
            {"code": HEADER_MISMATCH, "message": message},
        )
    elif kind == 1:  # _meta without the protocol version
        reply = await post.post(
            TOOLS_LIST, {"_meta": {META_PROTOCOL_VERSION: None}}, request_id=request_id
        )
        message = (
            f"Invalid params: params._meta is missing the required key(s) {META_PROTOCOL_VERSION}"
        )
        expected = (400, request_id, {"code": INVALID_PARAMS, "message": message})
    elif kind == 2:  # a version the bridge does not speak, in the header and in _meta
        wrong = {"_meta": {META_PROTOCOL_VERSION: WRONG_VERSION}}
        reply = await post.post(
            TOOLS_LIST,
            wrong,
            request_id=request_id,
            headers={"MCP-Protocol-Version": WRONG_VERSION},
        )
        message = (
            f"Unsupported protocol version '{WRONG_VERSION}'; this server supports {MODERN_VERSION}"
        )
        data = {"supported": [MODERN_VERSION], "requested": WRONG_VERSION}
        expected = (
            400,
            request_id,
            {"code": UNSUPPORTED_VERSION, "message": message, "data": data},
        )
    elif kind == 3:  # the held call's requestState, tampered with
        reply = await resume_held(post, tampered(state), key, "Mallory", request_id=request_id)
        expected = (
            200,
            request_id,
            {"code": INVALID_PARAMS, "message": INVALID_REQUEST_STATE_MESSAGE},
        )
    else:  # a body over front.max_body_bytes (1 MiB by default): no id can be read
        params = {"name": "test_simple_text", "arguments": {"blob": "x" * OVERSIZED_BYTES}}
        reply = await post.post(TOOLS_CALL, params, request_id=request_id)
        expected = (413, None, {"code": INVALID_REQUEST, "message": TOO_LARGE_MESSAGE})
    assert (reply.status, reply.response.get("id"), reply.response["error"]) == expected, reply.text
    # the id-less 413 reply is checked by test_errors_without_a_request_id_omit_the_id
    if kind != 4:
        assert_valid(reply.response, SCHEMA_DEFINITIONS.get(kind, "JSONRPCErrorResponse"), "modern")
    return True


async def resume_held(
    post: ModernPoster, state: str, key: str, name: str, *, request_id: Any = None
) -> RawReply:
    """The retry of the held elicitation call, answering `name`."""
    params = {
        "name": "test_input_required_result_elicitation",
        "inputResponses": {key: {"action": "accept", "content": {"name": name}}},
        "requestState": state,
    }
    return await post.post(TOOLS_CALL, params, request_id=request_id)


def raw_text(reply: RawReply) -> str:
    """The single text block of a complete raw tools/call reply."""
    assert reply.status == 200, reply.text
    result = reply.response["result"]
    assert result["resultType"] == RESULT_COMPLETE and not result.get("isError"), result
    (block,) = result["content"]
    text: str = block["text"]
    return text


async def stdio_reply(args: list[str], line: bytes) -> dict[str, Any]:
    """The first message `mrtr-bridge <args>` (a stdio front) writes back after reading `line`."""
    process = await asyncio.create_subprocess_exec(
        str(BRIDGE_EXE), *args, stdin=PIPE, stdout=PIPE, stderr=DEVNULL, cwd=REPO_ROOT
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(line)
        await process.stdin.drain()
        reply: dict[str, Any] = json.loads(await asyncio.wait_for(process.stdout.readline(), 10))
        process.stdin.close()
        await asyncio.wait_for(process.wait(), 10)
        return reply
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


__all__ = [
    "ERROR_TOOL_TEXT",
    "FIXTURE_CAPABILITIES",
    "FIXTURE_PROMPTS",
    "FIXTURE_RESOURCES",
    "FIXTURE_TOOLS",
    "OVERSIZED_BYTES",
    "TEST_AUDIO",
    "TEST_IMAGE",
    "TOOL_CONTENT",
    "bad_request",
    "good_request",
    "raw_text",
    "resume_held",
    "stdio_reply",
]
