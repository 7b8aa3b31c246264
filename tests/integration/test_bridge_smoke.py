"""End to end through the bridge: mcp 2.x client -> `mrtr-bridge serve` -> mcp 1.x legacy servers.

First smoke checks of the whole path (they fail, never skip, when the engine or the CLI is
broken). The fixture-server tests share one bridged server (module scope).
"""

from __future__ import annotations

import asyncio

import aiohttp
import mcp_types as types
import pytest
from schema_check import assert_valid

from translators.protocol.eras import (
    META_SERVER_INFO,
    MODERN_VERSION,
    RESULT_COMPLETE,
    RESULT_INPUT_REQUIRED,
    TOOLS_CALL,
)

from .harness import DEMO_SERVER, Bridged, InputAnswers, ModernPoster, Peers, modern_client


async def test_discover_through_the_bridge(module_bridged: Bridged) -> None:
    """`server/discover` sent by the modern client is answered by the bridge with the upstream's
    capabilities."""
    async with asyncio.timeout(30), modern_client(module_bridged.url) as client:
        raw = await client.session.send_discover(MODERN_VERSION)
    assert_valid(raw, "DiscoverResult", "modern")
    assert MODERN_VERSION in raw["supportedVersions"]
    assert raw["resultType"] == RESULT_COMPLETE
    assert {"tools", "prompts", "resources"} <= raw["capabilities"].keys()
    assert raw["_meta"][META_SERVER_INFO]["name"] == "mcp-legacy-conformance-fixture"


async def test_raw_tools_call_through_the_bridge(module_bridged: Bridged) -> None:
    """A hand-made modern tools/call of a plain legacy tool comes back complete and schema-valid."""
    async with asyncio.timeout(30), aiohttp.ClientSession() as http:
        reply = await ModernPoster(http, module_bridged.url).post(
            TOOLS_CALL, {"name": "test_simple_text"}
        )
    assert reply.status == 200
    response = reply.response
    assert_valid(response, "JSONRPCResultResponse", "modern")
    assert_valid(response["result"], "CallToolResult", "modern")
    assert response["result"]["resultType"] == RESULT_COMPLETE
    assert response["result"]["content"] == [
        {"type": "text", "text": "This is a simple text response for testing."}
    ]


async def test_elicitation_round_trip_through_the_bridge(module_bridged: Bridged) -> None:
    """A legacy elicitation push becomes an InputRequiredResult, and the client's retry completes
    the call."""
    answers = InputAnswers(elicit_content={"name": "Alice"})
    async with (
        asyncio.timeout(30),
        modern_client(module_bridged.url, **answers.client_kwargs()) as client,
    ):
        first = await client.session.call_tool(
            "test_input_required_result_elicitation", {}, allow_input_required=True
        )
        assert isinstance(first, types.InputRequiredResult)
        assert first.result_type == RESULT_INPUT_REQUIRED
        assert first.input_requests is not None and list(first.input_requests) == ["user_name"]
        assert first.request_state
        final = await client.call_tool("test_input_required_result_elicitation", {})
    assert final.content == [types.TextContent(type="text", text="Hello, Alice!")]
    assert [method for method, _ in answers.asked] == ["elicitation/create"]


async def test_demo_server_through_the_bridge(peers: Peers) -> None:
    """The `make run` demo server's elicitation, sampling and roots tools all complete through the
    bridge."""
    bridged = peers.bridged(DEMO_SERVER)
    answers = InputAnswers(
        elicit_content={"party_size": 2, "name": "Ada"}, sample_text="short", roots=["file:///ws"]
    )
    async with asyncio.timeout(30), modern_client(bridged.url, **answers.client_kwargs()) as client:
        booked = await client.call_tool("book_table", {"restaurant": "Chez Nous"})
        summary = await client.call_tool("summarize", {"text": "a long text"})
        listed = await client.call_tool("list_workspace", {})
    texts = [
        result.content[0].text
        for result in (booked, summary, listed)
        if isinstance(result.content[0], types.TextContent)
    ]
    assert texts == ["Booked Chez Nous for 2 under Ada.", "Summary: short", "Roots: file:///ws"]
    assert [method for method, _ in answers.asked] == [
        "elicitation/create",
        "sampling/createMessage",
        "roots/list",
    ]


@pytest.mark.parametrize(("action", "said"), [("decline", "declined"), ("cancel", "cancelled")])
async def test_demo_server_says_a_refused_booking_in_plain_words(
    peers: Peers, action: str, said: str
) -> None:
    """The demo's booking, declined or cancelled by the user, says so in English (it said
    "declineed")."""
    bridged = peers.bridged(DEMO_SERVER)
    answers = InputAnswers(elicit_action=action)
    async with asyncio.timeout(30), modern_client(bridged.url, **answers.client_kwargs()) as client:
        booked = await client.call_tool("book_table", {"restaurant": "Chez Nous"})
    assert booked.content == [types.TextContent(type="text", text=f"Booking at Chez Nous {said}.")]
