"""The bridge over the legacy HTTP+SSE transport, with real peers: the mcp 2.x client (2026-07-28)
through `mrtr-bridge serve` to FastMCP servers of `mcp` 1.x run with `transport="sse"` (`GET /sse`,
then every message POSTed to the `endpoint` it names, every answer on that one stream).

Covered: detection (`upstream.transport = auto` picks HTTP+SSE for an SSE server and Streamable HTTP
for a Streamable HTTP one, `/readyz` names it), discover, lists, a plain call, elicitation,
sampling, roots, two input rounds, progress, logging, cancellation, and a dropped SSE connection
(cut by a TCP relay while both ends live): the calls on it fail at once, and the next call gets a
new session.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from schema_check import assert_valid

from translators.protocol.eras import (
    ELICIT,
    META_LOG_LEVEL,
    META_PROGRESS_TOKEN,
    META_SERVER_INFO,
    MODERN_VERSION,
    ROOTS,
    SAMPLE,
    TOOLS_CALL,
)
from translators.wire.errors import BRIDGE_MARKER

from .harness import Bridged, PeerProcess, Peers, bridge_env, modern_client
from .mrtr_helpers import (
    INTERACTIVE,
    Answerer,
    Journal,
    accept,
    call_tool,
    complete_text,
    echo_answer,
    input_required,
    json_of,
    poster,
    text_of,
)
from .streams_helpers import (
    SERVER,
    assert_closing_cancels,
    call,
    logged,
    logs_from,
    poster_for,
    progress,
    wait_logged,
)
from .streams_helpers import Journal as StreamsJournal
from .streams_helpers import text_of as raw_text_of
from .tcp_relay import tcp_relay

T = 60  # bound on every test body, seconds
PROMPT_FAILURE_S = 3.0  # a dropped SSE connection must fail its calls well within this


def sse_peer(peers: Peers, script: str, *args: str) -> PeerProcess:
    """A `tests/peers/` script served over HTTP+SSE (`/sse`)."""
    peer = peers.legacy(script, "--transport", "sse", *args)
    peer.path = "/sse"
    return peer


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("interactive-sse")


@pytest.fixture(scope="module")
def interactive(module_peers: Peers, state_dir: Path) -> Bridged:
    """The interactive server over HTTP+SSE, behind a bridge that detects the transport (the
    default)."""
    legacy = sse_peer(module_peers, INTERACTIVE, "--state-dir", str(state_dir))
    return Bridged(legacy, module_peers.bridge(legacy.url))


@pytest.fixture(scope="module")
def streams_journal(tmp_path_factory: pytest.TempPathFactory) -> StreamsJournal:
    return StreamsJournal(tmp_path_factory.mktemp("streams-sse") / "journal.jsonl")


@pytest.fixture(scope="module")
def streams(module_peers: Peers, streams_journal: StreamsJournal) -> Bridged:
    """The streams server over HTTP+SSE, behind a bridge told the transport (`upstream.transport =
    sse`)."""
    legacy = sse_peer(module_peers, SERVER, "--journal", str(streams_journal.path))
    return Bridged(
        legacy, module_peers.bridge(legacy.url, env=bridge_env({"upstream": {"transport": "sse"}}))
    )


async def readyz(http: aiohttp.ClientSession, bridge: PeerProcess) -> tuple[int, Any]:
    async with http.get(f"http://127.0.0.1:{bridge.port}/readyz") as response:
        return response.status, await response.json()


# ---- detection, discover, lists, a plain call ----------------------------------------------------


async def test_auto_detects_sse_and_serves_discover_lists_and_a_call(
    interactive: Bridged, http: aiohttp.ClientSession
) -> None:
    """`auto` falls back to HTTP+SSE (the POST got 405), says so in the log and in /readyz, and
    serves."""
    async with asyncio.timeout(T), modern_client(interactive.url) as client:
        discover = await client.session.send_discover(MODERN_VERSION)
        tools = [tool.name for tool in (await client.list_tools()).tools]
        prompts = [prompt.name for prompt in (await client.list_prompts()).prompts]
        templates = (await client.list_resource_templates()).resource_templates
        echoed = await client.call_tool("echo", {"text": "over sse"})
    assert_valid(discover, "DiscoverResult", "modern")
    assert discover["_meta"][META_SERVER_INFO]["name"] == "mrtr-interactive-test-server"
    assert {"tools", "prompts", "resources"} <= set(discover["capabilities"])
    assert {"echo", "ask", "ask_twice", "sample", "roots", "slow"} <= set(tools)
    assert prompts == ["ask_prompt"]
    assert [template.uri_template for template in templates] == ["interactive://ask/{tag}"]
    assert text_of(echoed) == "over sse"
    detected = await wait_logged(interactive.bridge, "upstream_transport_detected")
    assert (detected["transport"], detected["url"]) == ("sse", interactive.legacy.url)
    assert detected["upstream"] == interactive.legacy.url.split("/")[2]  # its name, host:port
    status, body = await readyz(http, interactive.bridge)
    assert (status, body["checks"]["transport"], body["checks"]["upstream"]) == (
        200,
        "sse",
        "reachable",
    )


async def test_auto_detects_streamable_http(
    peers: Peers, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    """In front of a Streamable HTTP server `auto` keeps Streamable HTTP (no GET fallback is
    tried)."""
    legacy = peers.legacy(INTERACTIVE, "--state-dir", str(tmp_path))
    bridge = peers.bridge(legacy.url)
    status, body = await readyz(http, bridge)
    async with asyncio.timeout(T), modern_client(bridge.url) as client:
        echoed = await client.call_tool("echo", {"text": "over streamable http"})
    assert text_of(echoed) == "over streamable http"
    assert (status, body["checks"]["transport"]) == (200, "streamable-http")
    assert [entry["transport"] for entry in logged(bridge, "upstream_transport_detected")] == [
        "streamable-http"
    ]


# ---- pushes --------------------------------------------------------------------------------------


async def test_elicitation_sampling_and_roots_over_sse(
    interactive: Bridged, state_dir: Path
) -> None:
    """Each push arrives on the one SSE stream and reaches the client of its own call, which answers
    it."""
    journal, answers = Journal(state_dir), Answerer(roots=["file:///sse-root"])
    async with (
        asyncio.timeout(T),
        modern_client(interactive.url, **answers.client_kwargs()) as client,
    ):
        asked = await client.call_tool("ask", {"tag": "sse-ask", "question": "Over SSE?"})
        sampled = await client.call_tool("sample", {"tag": "sse-sample", "use_tools": False})
        rooted = await client.call_tool("roots", {"tag": "sse-roots"})
    assert json_of(asked) == {"action": "accept", "content": {"answer": echo_answer("Over SSE?")}}
    assert json_of(sampled)["content"] == {"type": "text", "text": "Paris"}
    assert json_of(rooted) == ["file:///sse-root"]
    assert [method for method, _ in answers.asked] == [ELICIT, SAMPLE, ROOTS]
    assert journal.answers("sse-ask") == [
        {"action": "accept", "content": {"answer": echo_answer("Over SSE?")}}
    ]


async def test_two_input_rounds_over_sse(interactive: Bridged, http: aiohttp.ClientSession) -> None:
    """One call of two rounds: each round's push is held on the SSE session and answered by the
    retry."""
    post = poster(http, interactive.url)
    (key1,), state1 = input_required(await call_tool(post, "ask_twice", {"tag": "sse-rounds"}))
    (key2,), state2 = input_required(
        await call_tool(
            post,
            "ask_twice",
            {"tag": "sse-rounds"},
            responses={key1: accept(name="Ann")},
            state=state1,
        )
    )
    final = await call_tool(
        post,
        "ask_twice",
        {"tag": "sse-rounds"},
        responses={key2: accept(color="teal")},
        state=state2,
    )
    assert complete_text(final) == "Ann likes teal."


# ---- progress, logging, cancellation -------------------------------------------------------------


async def test_progress_and_logs_reach_their_own_request(
    streams: Bridged, http: aiohttp.ClientSession
) -> None:
    """Progress and log notifications from the one SSE stream reach the request that caused them."""
    post = poster_for(http, streams.url, "sse-streams")
    stepped = await post.post(
        TOOLS_CALL, call("progress", {"steps": 3}, **{META_PROGRESS_TOKEN: "sse-p"})
    )
    verbose = await post.post(
        TOOLS_CALL, call("log_levels", {"tag": "sse-logs"}, **{META_LOG_LEVEL: "warning"})
    )
    assert stepped.notifications == [progress("sse-p", n, 3, f"step {n}") for n in (1, 2, 3)]
    assert raw_text_of(stepped) == "done 3"
    assert verbose.notifications == logs_from("warning", "sse-logs")


async def test_closing_the_stream_cancels_the_legacy_call(
    streams: Bridged, streams_journal: StreamsJournal, http: aiohttp.ClientSession
) -> None:
    """A client closing its response stream makes the bridge POST notifications/cancelled to the
    endpoint."""
    await assert_closing_cancels(http, streams.url, streams_journal, "sse-cancel")


# ---- a dropped SSE connection --------------------------------------------------------------------


async def test_a_dropped_sse_connection_fails_its_calls_at_once_and_is_replaced(
    peers: Peers, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    """The connection is cut under a held call and an attached one: both fail at once with a
    clear error, and the next call runs on a new SSE session of the same (still running) server."""
    legacy = sse_peer(peers, INTERACTIVE, "--state-dir", str(tmp_path))
    journal = Journal(tmp_path)
    async with asyncio.timeout(T), tcp_relay(legacy.port) as relay:
        bridge = peers.bridge(
            f"http://127.0.0.1:{relay.port}/sse", env=bridge_env({"upstream": {"transport": "sse"}})
        )
        post = poster(http, bridge.url)
        (key,), state = input_required(await call_tool(post, "ask", {"tag": "drop-held"}))
        attached = asyncio.create_task(
            call_tool(post, "slow", {"tag": "drop-attached", "seconds": 30})
        )
        await journal.wait_for("drop-attached", "call")
        opened = len(logged(bridge, "upstream_session_opened"))
        assert relay.cut() >= 2  # two SSE streams at least: one per interactive call
        started = time.monotonic()
        lost_attached = await attached
        delay = time.monotonic() - started
        lost_held = await call_tool(
            post, "ask", {"tag": "drop-held"}, responses={key: accept(answer="x")}, state=state
        )
        (key2,), state2 = input_required(await call_tool(post, "ask", {"tag": "drop-next"}))
        fresh = await call_tool(
            post, "ask", {"tag": "drop-next"}, responses={key2: accept(answer="ok")}, state=state2
        )
    assert delay < PROMPT_FAILURE_S
    for error in (lost_attached.response["error"], lost_held.response["error"]):
        assert error["data"]["source"] == BRIDGE_MARKER
        assert error["message"].startswith(
            "The upstream session was lost: its SSE stream closed"
        ), error
    assert json.loads(complete_text(fresh)) == {"action": "accept", "content": {"answer": "ok"}}
    assert len(logged(bridge, "upstream_session_opened")) > opened
    assert logged(bridge, "upstream_sse_stream_lost")
