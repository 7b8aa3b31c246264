"""The foundation with real peers (issue 2, and issue 4 item 3): the mcp 2.x client pinned to
2026-07-28 -> the bridge -> the mcp 1.x legacy conformance fixture, for every method that needs no
client input, over all four combinations {HTTP, stdio} front x {HTTP, stdio} upstream. Every result
is also taken raw off the client's wire (`foundation_helpers.Wire`) and checked against the official
2026-07-28 schema.

Then, HTTP only: an upstream restarted between two calls (its session expired: re-initialized
transparently), an upstream that is down (a clear bridge error at once, and recovery), a slow
upstream (the front timeout), and 20 bad requests that never disturb 20 good ones sent at the same
time.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from schema_check import assert_valid

from translators.protocol.eras import (
    COMPLETION_COMPLETE,
    DISCOVER,
    MODERN_VERSION,
    PROMPTS_GET,
    PROMPTS_LIST,
    RESOURCES_LIST,
    RESOURCES_READ,
    RESOURCES_TEMPLATES_LIST,
    TOOLS_CALL,
    TOOLS_LIST,
)
from translators.wire.errors import (
    BRIDGE_MARKER,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
)

from .foundation_expected import (
    ERROR_TOOL_TEXT,
    FIXTURE_CAPABILITIES,
    FIXTURE_PROMPTS,
    FIXTURE_RESOURCES,
    FIXTURE_TOOLS,
    OVERSIZED_BYTES,
    TEST_IMAGE,
    TOOL_CONTENT,
    bad_request,
    good_request,
    raw_text,
    resume_held,
    stdio_reply,
)
from .foundation_helpers import (
    CACHE_SCOPE,
    PAGED_INSTRUCTIONS,
    PAGED_SERVER,
    TTL_MS,
    Combos,
    Side,
    Wire,
    log_events,
    restart,
    tool_text,
)
from .harness import (
    ModernPoster,
    Peers,
    bridge_env,
    modern_client,
    read_reply,
)
from .mrtr_helpers import Journal

T = 30  # bound on every test body, seconds
SHAPES: list[tuple[Side, Side]] = [
    ("http", "http"),
    ("http", "stdio"),
    ("stdio", "http"),
    ("stdio", "stdio"),
]
SHAPE_IDS = [f"{front}-front-{upstream}-upstream" for front, upstream in SHAPES]


@pytest.fixture(scope="module")
def combos(module_peers: Peers) -> Combos:
    """The module's legacy servers and HTTP-front bridges, each started on first use."""
    return Combos(module_peers)


def _cacheable(result: dict[str, Any]) -> None:
    """The configured cache hints are stamped on a cacheable result."""
    assert (result["ttlMs"], result["cacheScope"]) == (TTL_MS, CACHE_SCOPE)


# ---- every method that needs no input, over the four combinations -------------------------------


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
async def test_discover(combos: Combos, shape: tuple[Side, Side]) -> None:
    """`server/discover` is synthesized from the upstream initialize: version, translated
    capabilities, serverInfo in `_meta`, the configured cache hints, no instructions (the fixture
    has none)."""
    async with asyncio.timeout(T), combos.get(*shape).connect() as (client, wire):
        raw = await client.session.send_discover(MODERN_VERSION)
    result = wire.result(DISCOVER, "DiscoverResult")
    assert raw == result
    assert result["supportedVersions"] == [MODERN_VERSION]
    assert result["capabilities"] == FIXTURE_CAPABILITIES
    assert "instructions" not in result
    _cacheable(result)


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
async def test_every_list(combos: Combos, shape: tuple[Side, Side]) -> None:
    """tools, prompts, resources and resource templates are listed whole (no nextCursor),
    cacheable, and a client cursor is passed upstream (the fixture ignores it and lists everything
    again)."""
    async with asyncio.timeout(T), combos.get(*shape).connect() as (client, wire):
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
    assert [template.uri_template for template in templates.resource_templates] == [
        "test://template/{id}/data"
    ]
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
    """Against a paginating upstream with instructions: discover carries them, tools/list and
    prompts/list cursors walk every page, and an unknown cursor is the upstream's -32602."""
    async with asyncio.timeout(T), combos.get(*shape, PAGED_SERVER).connect() as (client, wire):
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
    assert (bad_cursor.value.code, bad_cursor.value.error.message) == (
        INVALID_PARAMS,
        "Invalid cursor: page-99",
    )


async def _walk(list_page: Any, wire: Wire, method: str, definition: str) -> list[dict[str, Any]]:
    """Every raw page of a paginated list, following nextCursor (each page schema-checked and
    cacheable)."""
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
    async with asyncio.timeout(T), combos.get(*shape).connect() as (client, wire):
        for name in [*TOOL_CONTENT, "test_error_handling"]:
            result = await client.call_tool(name, {})
            assert result.is_error is (name == "test_error_handling")
            raw[name] = wire.result(TOOLS_CALL, "CallToolResult")
    for name, content in TOOL_CONTENT.items():
        assert raw[name]["content"] == content and raw[name].get("isError") in (None, False), raw[
            name
        ]
    assert raw["test_error_handling"]["isError"] is True
    assert raw["test_error_handling"]["content"] == [{"type": "text", "text": ERROR_TOOL_TEXT}]


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
async def test_prompts_resources_completion(combos: Combos, shape: tuple[Side, Side]) -> None:
    """prompts/get with arguments; resources/read of text, binary and a template (cacheable);
    completion/complete for a prompt and a template argument."""
    async with asyncio.timeout(T), combos.get(*shape).connect() as (client, wire):
        prompt = await client.get_prompt(
            "test_prompt_with_arguments", {"arg1": "ä 1", "arg2": "two"}
        )
        raw_prompt = wire.result(PROMPTS_GET, "GetPromptResult")
        await client.get_prompt("test_prompt_with_embedded_resource", {"resourceUri": "test://doc"})
        raw_embedded = wire.result(PROMPTS_GET, "GetPromptResult")
        reads = {}
        for uri in ("test://static-text", "test://static-binary", "test://template/42/data"):
            await client.read_resource(uri)
            reads[uri] = wire.result(RESOURCES_READ, "ReadResourceResult")
        by_prompt = await client.complete(
            types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"),
            {"name": "arg1", "value": "a"},
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
        {
            "role": "user",
            "content": {"type": "text", "text": "Prompt with arguments: arg1='ä 1', arg2='two'"},
        }
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
    assert base64.b64decode(reads["test://static-binary"]["contents"][0]["blob"]).startswith(
        b"\x89PNG"
    )
    (template,) = reads["test://template/42/data"]["contents"]
    assert json.loads(template["text"]) == {
        "id": "42",
        "templateTest": True,
        "data": "Data for ID: 42",
    }
    for read in reads.values():
        _cacheable(read)
    assert raw_completion["completion"] == {"values": [], "total": 0, "hasMore": False}
    assert by_prompt.completion.values == [] and by_template.completion.values == []


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
async def test_errors(combos: Combos, shape: tuple[Side, Side]) -> None:
    """Unknown tool (the legacy server's isError result), unknown prompt (its error, passed
    through), resource not found (-32002 becomes -32602 with data.uri), and `ping`, removed in
    2026-07-28 (-32601)."""
    async with asyncio.timeout(T), combos.get(*shape).connect() as (client, wire):
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
    assert ping == {
        "code": METHOD_NOT_FOUND,
        "message": "Method not found: ping was removed in MCP 2026-07-28",
    }


@pytest.mark.parametrize("upstream", ["http", "stdio"])
async def test_http_front_error_statuses(combos: Combos, upstream: Side) -> None:
    """Over the HTTP front: a removed method is HTTP 404, a resource not found and an unknown
    prompt are JSON-RPC errors in a 200 reply; every error echoes its request id."""
    bridge = combos.get("http", upstream).bridge
    assert bridge is not None
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = ModernPoster(http, bridge.url)
        ping = await post.post("ping", {}, request_id="p-1")
        missing = await post.post(RESOURCES_READ, {"uri": "test://nothing"}, request_id=7)
        prompt = await post.post(PROMPTS_GET, {"name": "nope"}, request_id="g")
    assert (ping.status, ping.response["id"], ping.response["error"]["code"]) == (
        404,
        "p-1",
        METHOD_NOT_FOUND,
    )
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
    """When the request id cannot be read (unparseable body, oversized body), the error response
    has no `id` member: 2026-07-28 allows `id?: string | number` there, never null (basic/index.mdx
    § Error Responses)."""
    combo = combos.get("http", "http")
    assert combo.bridge is not None
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = ModernPoster(http, combo.bridge.url)
        headers = post.request_headers(post.body(TOOLS_LIST))
        async with http.post(combo.bridge.url, data=b"{not json", headers=headers) as sent:
            unparseable = await read_reply(sent)
        oversized = await post.post(
            TOOLS_CALL, {"name": "test_simple_text", "arguments": {"x": "x" * OVERSIZED_BYTES}}
        )
        over_stdio = await stdio_reply(combo.stdio_front().args, b"{not json\n")
    assert (unparseable.status, unparseable.response["error"]["code"]) == (400, PARSE_ERROR)
    assert (oversized.status, oversized.response["error"]["code"]) == (413, INVALID_REQUEST)
    assert over_stdio["error"]["code"] == PARSE_ERROR
    for reply in (unparseable.response, oversized.response, over_stdio):
        assert "id" not in reply, reply
        assert_valid(reply, "JSONRPCErrorResponse", "modern")


# ---- HTTP upstream faults ----------------------------------------------------------------------


async def test_upstream_session_expiry_reinitializes(peers: Peers) -> None:
    """The legacy server restarted between two calls (its session gone: 404): the second call
    still succeeds, transparently, and the bridge log shows the re-initialize."""
    legacy = peers.legacy()
    bridge = peers.bridge(legacy.url)
    async with asyncio.timeout(T), modern_client(bridge.url) as client:
        before = await client.call_tool("test_simple_text", {})
        legacy.stop()
        restart(peers, legacy)
        after = await client.call_tool("test_simple_text", {})
    assert tool_text(before) == tool_text(after) == "This is a simple text response for testing."
    events = [event for event in log_events(bridge) if event.startswith("upstream_session_")]
    # The GET stream and the next POST may both see the 404 ("expired" once or twice, in either
    # order around the handshake); either way the one session is re-initialized exactly once, after
    # an expiry.
    assert events[0] == "upstream_session_opened"
    assert set(events) == {
        "upstream_session_opened",
        "upstream_session_expired",
        "upstream_session_reinitializing",
        "upstream_session_reinitialized",
    }
    assert (
        events.count("upstream_session_reinitializing"),
        events.count("upstream_session_reinitialized"),
    ) == (1, 1)
    assert events.index("upstream_session_expired") < events.index(
        "upstream_session_reinitializing"
    )


async def test_upstream_down_clear_error_then_recovers(peers: Peers) -> None:
    """With the legacy server stopped a call fails at once with a bridge-marked -32603 (no
    hang); once the server is back, calls work again."""
    legacy = peers.legacy()
    bridge = peers.bridge(legacy.url)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = ModernPoster(http, bridge.url)
        first = await post.post(TOOLS_CALL, {"name": "test_simple_text"})
        legacy.stop()
        started = time.monotonic()
        down = await post.post(
            TOOLS_CALL, {"name": "test_simple_text"}, request_id="down", timeout=10
        )
        elapsed = time.monotonic() - started
        restart(peers, legacy)
        back = await post.post(TOOLS_CALL, {"name": "test_simple_text"})
    assert raw_text(first) == raw_text(back) == "This is a simple text response for testing."
    # no hang: a refused connect, well inside the 10 s the post allows
    assert elapsed < 8.0, elapsed
    assert (down.status, down.response["id"]) == (200, "down")
    error = down.response["error"]
    assert_valid(error, "InternalError", "modern")
    assert error["code"] == INTERNAL_ERROR and error["data"]["source"] == BRIDGE_MARKER
    assert error["message"] == "The upstream server is unavailable" and legacy.url not in str(
        error
    ), error


async def test_slow_upstream_gets_the_front_timeout(peers: Peers, tmp_path: Path) -> None:
    """With `front.request_timeout_s` = 1, a tool sleeping 30 s gets a bridge-marked -32603
    after about 1 s, the upstream call is cancelled, and the next call works."""
    journal = Journal(tmp_path)
    legacy = peers.legacy("interactive_server.py", "--state-dir", str(tmp_path))
    bridge = peers.bridge(legacy.url, env=bridge_env({"front": {"request_timeout_s": 1}}))
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = ModernPoster(http, bridge.url)
        started = time.monotonic()
        slow = await post.post(
            TOOLS_CALL, {"name": "slow", "arguments": {"tag": "slow", "seconds": 30}}, timeout=10
        )
        elapsed = time.monotonic() - started
        await journal.wait_for("slow", "cancel_notification")
        echo = await post.post(TOOLS_CALL, {"name": "echo", "arguments": {"text": "after"}})
    # the front's 1 s timeout answered, not the 30 s tool (its message says so)
    assert elapsed < 20.0, elapsed
    error = slow.response["error"]
    assert error == {
        "code": INTERNAL_ERROR,
        "message": "The upstream call did not finish within 1 s",
        "data": {"source": BRIDGE_MARKER, "correlationId": error["data"]["correlationId"]},
    }
    assert error["data"]["correlationId"] in bridge.log_text(200_000)
    assert raw_text(echo) == "after"


# ---- a wrong request never disturbs another caller ---------------------------------------------


async def test_bad_requests_never_disturb_good_ones(combos: Combos) -> None:
    """20 good and 20 bad requests (bad headers, bad _meta, wrong version, tampered
    requestState, oversized body) at once through the HTTP front: every good one completes
    correctly, every bad one gets its exact error, and the held call whose state was tampered with
    still completes afterwards."""
    bridge = combos.get("http", "http").bridge
    assert bridge is not None
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = ModernPoster(http, bridge.url, capabilities={"elicitation": {"form": {}}})
        held = await post.post(TOOLS_CALL, {"name": "test_input_required_result_elicitation"})
        state, (key,) = (
            held.response["result"]["requestState"],
            held.response["result"]["inputRequests"],
        )
        good = [good_request(post, n) for n in range(20)]
        bad = [bad_request(post, n, state, key) for n in range(20)]
        outcomes = await asyncio.gather(*good, *bad)
        final = await resume_held(post, state, key, "Alice")
    assert all(outcomes), outcomes
    assert raw_text(final) == "Hello, Alice!"
