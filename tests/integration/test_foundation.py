"""The foundation with real peers (issue 2, and issue 4 item 3): the mcp 2.x client pinned to 2026-07-28 ->
the bridge -> the mcp 1.x legacy conformance fixture, for every method that needs no client input, over all
four combinations {HTTP, stdio} front x {HTTP, stdio} upstream. Every result is also taken raw off the
client's wire (`foundation_helpers.Wire`) and checked against the official 2026-07-28 schema.

Then, HTTP only: an upstream restarted between two calls (its session expired: re-initialized
transparently), an upstream that is down (a clear bridge error at once, and recovery), a slow upstream
(the front timeout), and 20 bad requests that never disturb 20 good ones sent at the same time.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from pathlib import Path
from subprocess import DEVNULL, PIPE
from typing import Any

import aiohttp
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from schema_check import assert_valid

from translators.eras import (
    COMPLETION_COMPLETE,
    DISCOVER,
    META_PROTOCOL_VERSION,
    MODERN_VERSION,
    PROMPTS_GET,
    PROMPTS_LIST,
    RESOURCES_LIST,
    RESOURCES_READ,
    RESOURCES_TEMPLATES_LIST,
    RESULT_COMPLETE,
    TOOLS_CALL,
    TOOLS_LIST,
)
from translators.errors import (
    BRIDGE_MARKER,
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    INVALID_REQUEST_STATE_MESSAGE,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNSUPPORTED_VERSION,
)

from .foundation_helpers import (
    CACHE_SCOPE,
    PAGED_INSTRUCTIONS,
    PAGED_SERVER,
    TEST_AUDIO,
    TEST_IMAGE,
    TTL_MS,
    Combo,
    Combos,
    Side,
    Wire,
    log_events,
    restart,
    tool_text,
)
from .harness import (
    BRIDGE_EXE,
    REPO_ROOT,
    ModernPoster,
    Peers,
    RawReply,
    bridge_env,
    modern_client,
    read_reply,
)
from .mrtr_helpers import Journal, tampered

T = 30  # bound on every test body, seconds
SHAPES: list[tuple[Side, Side]] = [("http", "http"), ("http", "stdio"), ("stdio", "http"), ("stdio", "stdio")]
SHAPE_IDS = [f"{front}-front-{upstream}-upstream" for front, upstream in SHAPES]
FIXTURE_CAPABILITIES = {
    "experimental": {},
    "logging": {},
    "prompts": {"listChanged": True},
    "resources": {"subscribe": False, "listChanged": True},
    "tools": {"listChanged": True},
    "completions": {},
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
ERROR_TOOL_TEXT = "Error executing tool test_error_handling: This tool intentionally returns an error for testing"


@pytest.fixture(scope="module")
def combos(module_peers: Peers) -> Combos:
    """The module's legacy servers and HTTP-front bridges, each started on first use."""
    return Combos(module_peers)


def _combo(combos: Combos, shape: tuple[Side, Side], script: str | None = None) -> Combo:
    front, upstream = shape
    return combos.get(front, upstream) if script is None else combos.get(front, upstream, script)


def _cacheable(result: dict[str, Any]) -> None:
    """The configured cache hints are stamped on a cacheable result."""
    assert (result["ttlMs"], result["cacheScope"]) == (TTL_MS, CACHE_SCOPE)


# ---- every method that needs no input, over the four combinations -------------------------------


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
async def test_discover(combos: Combos, shape: tuple[Side, Side]) -> None:
    """`server/discover` is synthesized from the upstream initialize: version, translated capabilities,
    serverInfo in `_meta`, the configured cache hints, no instructions (the fixture has none)."""
    async with asyncio.timeout(T), _combo(combos, shape).connect() as (client, wire):
        raw = await client.session.send_discover(MODERN_VERSION)
    result = wire.result(DISCOVER, "DiscoverResult")
    assert raw == result
    assert result["supportedVersions"] == [MODERN_VERSION]
    assert result["capabilities"] == FIXTURE_CAPABILITIES
    assert "instructions" not in result
    _cacheable(result)


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
async def test_every_list(combos: Combos, shape: tuple[Side, Side]) -> None:
    """tools, prompts, resources and resource templates are listed whole (no nextCursor), cacheable, and a
    client cursor is passed upstream (the fixture ignores it and lists everything again)."""
    async with asyncio.timeout(T), _combo(combos, shape).connect() as (client, wire):
        tools = await client.list_tools()
        raw_tools = wire.result(TOOLS_LIST, "ListToolsResult")
        again = await client.list_tools(cursor="opaque-cursor")
        raw_again = wire.result(TOOLS_LIST, "ListToolsResult")
        prompts = await client.list_prompts()
        resources = await client.list_resources()
        templates = await client.list_resource_templates()
    assert [tool.name for tool in tools.tools] == FIXTURE_TOOLS and tools.next_cursor is None
    assert [tool.name for tool in again.tools] == FIXTURE_TOOLS and raw_again == raw_tools
    assert not any("execution" in tool for tool in raw_tools["tools"])
    assert [prompt.name for prompt in prompts.prompts] == FIXTURE_PROMPTS
    assert [str(resource.uri) for resource in resources.resources] == FIXTURE_RESOURCES
    assert [template.uri_template for template in templates.resource_templates] == ["test://template/{id}/data"]
    for method, definition in (
        (TOOLS_LIST, "ListToolsResult"),
        (PROMPTS_LIST, "ListPromptsResult"),
        (RESOURCES_LIST, "ListResourcesResult"),
        (RESOURCES_TEMPLATES_LIST, "ListResourceTemplatesResult"),
    ):
        result = wire.result(method, definition)
        assert "nextCursor" not in result
        _cacheable(result)


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
async def test_pagination_and_instructions(combos: Combos, shape: tuple[Side, Side]) -> None:
    """Against a paginating upstream with instructions: discover carries them, tools/list and prompts/list
    cursors walk every page, and an unknown cursor is the upstream's -32602."""
    async with asyncio.timeout(T), _combo(combos, shape, PAGED_SERVER).connect() as (client, wire):
        discovered = await client.session.send_discover(MODERN_VERSION)
        tool_pages = await _walk(client.list_tools, wire, TOOLS_LIST, "ListToolsResult")
        prompt_pages = await _walk(client.list_prompts, wire, PROMPTS_LIST, "ListPromptsResult")
        with pytest.raises(MCPError) as bad_cursor:
            await client.list_tools(cursor="page-99")
    assert discovered["instructions"] == PAGED_INSTRUCTIONS
    assert [[tool["name"] for tool in page["tools"]] for page in tool_pages] == [
        ["tool_0", "tool_1"],
        ["tool_2", "tool_3"],
        ["tool_4"],
    ]
    assert [page.get("nextCursor") for page in tool_pages] == ["page-2", "page-4", None]
    assert [[prompt["name"] for prompt in page["prompts"]] for page in prompt_pages] == [
        ["prompt_0", "prompt_1"],
        ["prompt_2", "prompt_3"],
        ["prompt_4"],
    ]
    assert (bad_cursor.value.code, bad_cursor.value.error.message) == (INVALID_PARAMS, "Invalid cursor: page-99")


async def _walk(list_page: Any, wire: Wire, method: str, definition: str) -> list[dict[str, Any]]:
    """Every raw page of a paginated list, following nextCursor (each page schema-checked and cacheable)."""
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    while len(pages) < 10:
        await list_page(cursor=cursor)
        page = wire.result(method, definition)
        _cacheable(page)
        pages.append(page)
        cursor = page.get("nextCursor")
        if cursor is None:
            return pages
    raise AssertionError(f"{method} never ended: {pages}")


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
async def test_non_interactive_tool_calls(combos: Combos, shape: tuple[Side, Side]) -> None:
    """Text, image, audio, embedded resource and mixed content come back exactly; a failing tool is
    `isError: true` inside a complete result."""
    raw: dict[str, dict[str, Any]] = {}
    async with asyncio.timeout(T), _combo(combos, shape).connect() as (client, wire):
        for name in [*TOOL_CONTENT, "test_error_handling"]:
            result = await client.call_tool(name, {})
            assert result.is_error is (name == "test_error_handling")
            raw[name] = wire.result(TOOLS_CALL, "CallToolResult")
    for name, content in TOOL_CONTENT.items():
        assert raw[name]["content"] == content and raw[name].get("isError") in (None, False), raw[name]
    assert raw["test_error_handling"]["isError"] is True
    assert raw["test_error_handling"]["content"] == [{"type": "text", "text": ERROR_TOOL_TEXT}]


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
async def test_prompts_resources_completion(combos: Combos, shape: tuple[Side, Side]) -> None:
    """prompts/get with arguments; resources/read of text, binary and a template (cacheable);
    completion/complete for a prompt and a template argument."""
    async with asyncio.timeout(T), _combo(combos, shape).connect() as (client, wire):
        prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "ä 1", "arg2": "two"})
        raw_prompt = wire.result(PROMPTS_GET, "GetPromptResult")
        await client.get_prompt("test_prompt_with_embedded_resource", {"resourceUri": "test://doc"})
        raw_embedded = wire.result(PROMPTS_GET, "GetPromptResult")
        reads = {}
        for uri in ("test://static-text", "test://static-binary", "test://template/42/data"):
            await client.read_resource(uri)
            reads[uri] = wire.result(RESOURCES_READ, "ReadResourceResult")
        by_prompt = await client.complete(
            types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"), {"name": "arg1", "value": "a"}
        )
        raw_completion = wire.result(COMPLETION_COMPLETE, "CompleteResult")
        by_template = await client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="test://template/{id}/data"),
            {"name": "id", "value": "4"},
        )
    assert prompt.messages[0].content == types.TextContent(
        type="text", text="Prompt with arguments: arg1='ä 1', arg2='two'"
    )
    assert raw_prompt["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Prompt with arguments: arg1='ä 1', arg2='two'"}}
    ]
    assert raw_embedded["messages"][0]["content"]["resource"]["uri"] == "test://doc"
    assert reads["test://static-text"]["contents"] == [
        {
            "uri": "test://static-text",
            "mimeType": "text/plain",
            "text": "This is the content of the static text resource.",
        }
    ]
    assert reads["test://static-binary"]["contents"] == [
        {"uri": "test://static-binary", "mimeType": "image/png", "blob": TEST_IMAGE}
    ]
    assert base64.b64decode(reads["test://static-binary"]["contents"][0]["blob"]).startswith(b"\x89PNG")
    (template,) = reads["test://template/42/data"]["contents"]
    assert json.loads(template["text"]) == {"id": "42", "templateTest": True, "data": "Data for ID: 42"}
    for read in reads.values():
        _cacheable(read)
    assert raw_completion["completion"] == {"values": [], "total": 0, "hasMore": False}
    assert by_prompt.completion.values == [] and by_template.completion.values == []


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
async def test_errors(combos: Combos, shape: tuple[Side, Side]) -> None:
    """Unknown tool (the legacy server's isError result), unknown prompt (its error, passed through), resource
    not found (-32002 becomes -32602 with data.uri), and `ping`, removed in 2026-07-28 (-32601)."""
    async with asyncio.timeout(T), _combo(combos, shape).connect() as (client, wire):
        unknown_tool = await client.call_tool("no_such_tool", {})
        raw_tool = wire.result(TOOLS_CALL, "CallToolResult")
        with pytest.raises(MCPError):
            await client.get_prompt("no_such_prompt", {})
        with pytest.raises(MCPError):
            await client.read_resource("test://no-such-resource")
        with pytest.raises(MCPError):
            await client.session.send_request(types.PingRequest(), types.EmptyResult)
    assert unknown_tool.is_error is True
    assert raw_tool["content"] == [{"type": "text", "text": "Unknown tool: no_such_tool"}]
    assert wire.error(PROMPTS_GET) == {"code": 0, "message": "Unknown prompt: no_such_prompt"}
    not_found = wire.error(RESOURCES_READ)
    assert_valid(not_found, "InvalidParamsError", "modern")
    assert not_found == {
        "code": INVALID_PARAMS,
        "message": "Resource not found",
        "data": {"uri": "test://no-such-resource"},
    }
    ping = wire.error("ping")
    assert_valid(ping, "MethodNotFoundError", "modern")
    assert ping == {"code": METHOD_NOT_FOUND, "message": "Method not found: ping was removed in MCP 2026-07-28"}


@pytest.mark.parametrize("upstream", ["http", "stdio"])
async def test_http_front_error_statuses(combos: Combos, upstream: Side) -> None:
    """Over the HTTP front: a removed method is HTTP 404, a resource not found and an unknown prompt are
    JSON-RPC errors in a 200 reply; every error echoes its request id."""
    bridge = combos.get("http", upstream).bridge
    assert bridge is not None
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = ModernPoster(http, bridge.url)
        ping = await post.post("ping", {}, request_id="p-1")
        missing = await post.post(RESOURCES_READ, {"uri": "test://nothing"}, request_id=7)
        prompt = await post.post(PROMPTS_GET, {"name": "nope"}, request_id="g")
    assert (ping.status, ping.response["id"], ping.response["error"]["code"]) == (404, "p-1", METHOD_NOT_FOUND)
    assert (missing.status, missing.response["id"]) == (200, 7)
    assert missing.response["error"] == {
        "code": INVALID_PARAMS,
        "message": "Resource not found",
        "data": {"uri": "test://nothing"},
    }
    assert (prompt.status, prompt.response["id"], prompt.response["error"]["code"]) == (200, "g", 0)
    for reply in (ping, missing, prompt):
        assert "mcp-session-id" not in reply.headers
        assert_valid(reply.response, "JSONRPCErrorResponse", "modern")


async def test_errors_without_a_request_id_omit_the_id(combos: Combos) -> None:
    """When the request id cannot be read (unparseable body, oversized body), the error response has no `id`
    member: 2026-07-28 allows `id?: string | number` there, never null (basic/index.mdx § Error Responses)."""
    combo = combos.get("http", "http")
    assert combo.bridge is not None
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = ModernPoster(http, combo.bridge.url)
        headers = post.request_headers(post.body(TOOLS_LIST))
        async with http.post(combo.bridge.url, data=b"{not json", headers=headers) as response:
            unparseable = await read_reply(response)
        oversized = await post.post(TOOLS_CALL, {"name": "test_simple_text", "arguments": {"x": "x" * OVERSIZED_BYTES}})
        over_stdio = await _stdio_reply(combo.stdio_front().args, b"{not json\n")
    assert (unparseable.status, unparseable.response["error"]["code"]) == (400, PARSE_ERROR)
    assert (oversized.status, oversized.response["error"]["code"]) == (413, INVALID_REQUEST)
    assert over_stdio["error"]["code"] == PARSE_ERROR
    for response in (unparseable.response, oversized.response, over_stdio):
        assert "id" not in response, response
        assert_valid(response, "JSONRPCErrorResponse", "modern")


async def _stdio_reply(args: list[str], line: bytes) -> dict[str, Any]:
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


# ---- HTTP upstream faults ----------------------------------------------------------------------


async def test_upstream_session_expiry_reinitializes(peers: Peers) -> None:
    """The legacy server restarted between two calls (its session gone: 404): the second call still succeeds,
    transparently, and the bridge log shows the re-initialize."""
    legacy = peers.legacy()
    bridge = peers.bridge(legacy.url)
    async with asyncio.timeout(T), modern_client(bridge.url) as client:
        before = await client.call_tool("test_simple_text", {})
        legacy.stop()
        restart(peers, legacy)
        after = await client.call_tool("test_simple_text", {})
    assert tool_text(before) == tool_text(after) == "This is a simple text response for testing."
    events = log_events(bridge); print("EVENTS", events)
    assert "upstream_session_reinitialized" in events, events


async def test_upstream_down_clear_error_then_recovers(peers: Peers) -> None:
    """With the legacy server stopped a call fails at once with a bridge-marked -32603 (no hang); once the
    server is back, calls work again."""
    legacy = peers.legacy()
    bridge = peers.bridge(legacy.url)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = ModernPoster(http, bridge.url)
        first = await post.post(TOOLS_CALL, {"name": "test_simple_text"})
        legacy.stop()
        started = time.monotonic()
        down = await post.post(TOOLS_CALL, {"name": "test_simple_text"}, request_id="down", timeout=10)
        elapsed = time.monotonic() - started
        restart(peers, legacy)
        back = await post.post(TOOLS_CALL, {"name": "test_simple_text"})
    assert _text(first) == _text(back) == "This is a simple text response for testing."
    print("DOWN", elapsed, down.response, log_events(bridge)); assert elapsed < 3.0, elapsed
    assert (down.status, down.response["id"]) == (200, "down")
    error = down.response["error"]
    assert_valid(error, "InternalError", "modern")
    assert error["code"] == INTERNAL_ERROR and error["data"]["source"] == BRIDGE_MARKER
    assert error["message"].startswith(f"Cannot connect to upstream {legacy.url}"), error


async def test_slow_upstream_gets_the_front_timeout(peers: Peers, tmp_path: Path) -> None:
    """With `front.request_timeout_s` = 1, a tool sleeping 30 s gets a bridge-marked -32603 after about 1 s, the
    upstream call is cancelled, and the next call works."""
    journal = Journal(tmp_path)
    legacy = peers.legacy("interactive_server.py", "--state-dir", str(tmp_path))
    bridge = peers.bridge(legacy.url, env=bridge_env({"front": {"request_timeout_s": 1}}))
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = ModernPoster(http, bridge.url)
        started = time.monotonic()
        slow = await post.post(TOOLS_CALL, {"name": "slow", "arguments": {"tag": "slow", "seconds": 30}}, timeout=10)
        elapsed = time.monotonic() - started
        await journal.wait_for("slow", "cancel_notification")
        echo = await post.post(TOOLS_CALL, {"name": "echo", "arguments": {"text": "after"}})
    assert 1.0 <= elapsed < 3.0, elapsed
    assert slow.response["error"] == {
        "code": INTERNAL_ERROR,
        "message": "The upstream call did not finish within 1 s",
        "data": {"source": BRIDGE_MARKER},
    }
    assert _text(echo) == "after"


# ---- a wrong request never disturbs another caller ---------------------------------------------


async def test_bad_requests_never_disturb_good_ones(combos: Combos) -> None:
    """20 good and 20 bad requests (bad headers, bad _meta, wrong version, tampered requestState, oversized
    body) at once through the HTTP front: every good one completes correctly, every bad one gets its exact
    error, and the held call whose state was tampered with still completes afterwards."""
    bridge = combos.get("http", "http").bridge
    assert bridge is not None
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = ModernPoster(http, bridge.url, capabilities={"elicitation": {"form": {}}})
        held = await post.post(TOOLS_CALL, {"name": "test_input_required_result_elicitation"})
        state, (key,) = held.response["result"]["requestState"], held.response["result"]["inputRequests"]
        good = [_good(post, n) for n in range(20)]
        bad = [_bad(post, n, state, key) for n in range(20)]
        outcomes = await asyncio.gather(*good, *bad)
        final = await _resume(post, state, key, "Alice")
    assert all(outcomes), outcomes
    assert _text(final) == "Hello, Alice!"


GOOD_TOOLS = [*TOOL_CONTENT]
WRONG_VERSION = "2099-01-01"
OVERSIZED_BYTES = 1_100_000
TOO_LARGE_MESSAGE = "Request body too large: the limit is 1048576 bytes (front.max_body_bytes)"


async def _good(post: ModernPoster, n: int) -> bool:
    """Request n of the good ones: a tool call (exact content) or a list (every name)."""
    request_id = f"good-{n}"
    if n % 4 == 3:
        reply = await post.post(PROMPTS_LIST, {}, request_id=request_id)
        names = [prompt["name"] for prompt in reply.response["result"]["prompts"]]
        assert (reply.status, reply.response["id"], names) == (200, request_id, FIXTURE_PROMPTS), reply.text
        return True
    name = GOOD_TOOLS[n % len(GOOD_TOOLS)]
    reply = await post.post(TOOLS_CALL, {"name": name}, request_id=request_id)
    assert (reply.status, reply.response["id"]) == (200, request_id), reply.text
    result = reply.response["result"]
    assert (result["resultType"], result["content"]) == (RESULT_COMPLETE, TOOL_CONTENT[name]), reply.text
    return True


async def _bad(post: ModernPoster, n: int, state: str, key: str) -> bool:
    """Request n of the bad ones, by kind (n % 5); asserts its exact status, id and error."""
    request_id = f"bad-{n}"
    kind = n % 5
    if kind == 0:  # the Mcp-Method header does not match the body
        reply = await post.post(TOOLS_LIST, {}, request_id=request_id, headers={"Mcp-Method": PROMPTS_LIST})
        message = (
            "Header mismatch: Mcp-Method header value 'prompts/list' does not match body value 'tools/list' (method)"
        )
        expected: tuple[int, Any, dict[str, Any]] = (400, request_id, {"code": HEADER_MISMATCH, "message": message})
    elif kind == 1:  # _meta without the protocol version
        reply = await post.post(TOOLS_LIST, {"_meta": {META_PROTOCOL_VERSION: None}}, request_id=request_id)
        message = f"Invalid params: params._meta is missing the required key(s) {META_PROTOCOL_VERSION}"
        expected = (400, request_id, {"code": INVALID_PARAMS, "message": message})
    elif kind == 2:  # a version the bridge does not speak, in the header and in _meta
        wrong = {"_meta": {META_PROTOCOL_VERSION: WRONG_VERSION}}
        reply = await post.post(
            TOOLS_LIST, wrong, request_id=request_id, headers={"MCP-Protocol-Version": WRONG_VERSION}
        )
        message = f"Unsupported protocol version '{WRONG_VERSION}'; this server supports {MODERN_VERSION}"
        data = {"supported": [MODERN_VERSION], "requested": WRONG_VERSION}
        expected = (400, request_id, {"code": UNSUPPORTED_VERSION, "message": message, "data": data})
    elif kind == 3:  # the held call's requestState, tampered with
        reply = await _resume(post, tampered(state), key, "Mallory", request_id=request_id)
        expected = (200, request_id, {"code": INVALID_PARAMS, "message": INVALID_REQUEST_STATE_MESSAGE})
    else:  # a body over front.max_body_bytes (1 MiB by default): no id can be read
        params = {"name": "test_simple_text", "arguments": {"blob": "x" * (OVERSIZED_BYTES)}}
        reply = await post.post(TOOLS_CALL, params, request_id=request_id)
        expected = (413, None, {"code": INVALID_REQUEST, "message": TOO_LARGE_MESSAGE})
    assert (reply.status, reply.response.get("id"), reply.response["error"]) == expected, reply.text
    if kind != 4:  # the id-less 413 reply is checked by test_errors_without_a_request_id_omit_the_id
        assert_valid(reply.response, "JSONRPCErrorResponse", "modern")
    return True


async def _resume(post: ModernPoster, state: str, key: str, name: str, *, request_id: Any = None) -> RawReply:
    """The retry of the held elicitation call, answering `name`."""
    params = {
        "name": "test_input_required_result_elicitation",
        "inputResponses": {key: {"action": "accept", "content": {"name": name}}},
        "requestState": state,
    }
    return await post.post(TOOLS_CALL, params, request_id=request_id)


def _text(reply: RawReply) -> str:
    """The single text block of a complete raw tools/call reply."""
    assert reply.status == 200, reply.text
    result = reply.response["result"]
    assert result["resultType"] == RESULT_COMPLETE and not result.get("isError"), result
    (block,) = result["content"]
    text: str = block["text"]
    return text
