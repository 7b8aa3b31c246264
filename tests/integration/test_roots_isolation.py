"""One client's roots never serve another client's call (issue 10), with real peers.

`tests/peers/roots_keeping_server.py` (mcp 1.x) asks for roots on `initialized` and keeps them per
session, like server-filesystem. Two modern clients (mcp 2.x, same principal: no credentials) with
different roots call it through the bridge, interleaved and concurrently, over an HTTP upstream and
a stdio upstream; each must see only its own roots. `test_server_filesystem.py` does the same with
the real `@modelcontextprotocol/server-filesystem`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import mcp_types as types
import pytest
from mcp import Client

from translators.protocol.roots import ROOTS_INPUT_KEY
from translators.wire.errors import INVALID_PARAMS

from .harness import DEMO_SERVER, InputAnswers, ModernPoster, Peers, bridge_env, modern_client
from .mrtr_helpers import json_of, text_of

T = 60  # bound on every test body, seconds
SERVER = "roots_keeping_server.py"
ROOTS_A = ["file:///work/client-a", "file:///srv/a-docs"]
ROOTS_B = ["file:///work/client-b"]
# A generous bound for the server's ask (probe and fresh sessions end as soon as it comes), so a
# loaded machine cannot make the probe miss it; the default settle wait is kept.
ROOMY = bridge_env({"upstream": {"roots_probe_ms": 5000}})


@pytest.fixture(scope="module", params=["http", "stdio"])
def bridge_url(module_peers: Peers, request: pytest.FixtureRequest) -> str:
    """The bridge in front of the roots-keeping server, over an HTTP or a stdio upstream."""
    if request.param == "http":
        return module_peers.bridge(module_peers.legacy(SERVER).url, env=ROOMY).url
    return module_peers.bridge_stdio(SERVER, env=ROOMY).url


def answers(roots: list[str]) -> InputAnswers:
    return InputAnswers(roots=roots)


def pre_answer(roots: list[str]) -> dict[str, Any]:
    """`inputResponses` that pre-answer the bridge's roots question."""
    return {ROOTS_INPUT_KEY: types.ListRootsResult(roots=[types.Root(uri=uri) for uri in roots])}


async def kept(client: Client, roots: list[str] | None = None) -> dict[str, Any]:
    responses = pre_answer(roots) if roots is not None else None
    result: dict[str, Any] = json_of(
        await client.call_tool("kept_roots", {}, input_responses=responses)
    )
    return result


async def test_interleaved_clients_see_only_their_own_roots(bridge_url: str) -> None:
    """A, B, A, B one after the other, then both at once: every call reports its own
    client's roots."""
    a, b = answers(ROOTS_A), answers(ROOTS_B)
    async with (
        asyncio.timeout(T),
        modern_client(bridge_url, **a.client_kwargs()) as ca,
        modern_client(bridge_url, **b.client_kwargs()) as cb,
    ):
        for _ in range(2):
            assert (await kept(ca))["roots"] == ROOTS_A
            assert (await kept(cb))["roots"] == ROOTS_B
        together = await asyncio.gather(*(kept(c) for c in (ca, cb, ca, cb, ca, cb)))
    assert [r["roots"] for r in together] == [ROOTS_A, ROOTS_B] * 3
    # every call was asked for its roots once (the client did not pre-answer): one round each
    assert a.asked == [("roots/list", None)] * 5
    assert b.asked == [("roots/list", None)] * 5


async def test_pre_answered_roots_cost_no_round_and_reuse_the_session(bridge_url: str) -> None:
    """A client that pre-answers the stable roots key is never asked; its calls reuse one warm
    session."""
    a = answers(ROOTS_A)
    async with asyncio.timeout(T), modern_client(bridge_url, **a.client_kwargs()) as client:
        first = await kept(client, ROOTS_A)
        second = await kept(client, list(reversed(ROOTS_A)))  # the same set of roots, another order
    assert a.asked == []
    assert first["roots"] == ROOTS_A
    assert second["session"] == first["session"]
    assert second["asks"] == first["asks"] == 1  # asked once, on initialized, never per call


async def test_files_outside_the_clients_roots_are_denied(bridge_url: str, tmp_path: Path) -> None:
    """Each client reads under its own root; the other client's file is outside its allowed
    directories."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "a.txt").write_text("alpha")
    (tmp_path / "b" / "b.txt").write_text("bravo")
    a, b = answers([(tmp_path / "a").as_uri()]), answers([(tmp_path / "b").as_uri()])
    async with (
        asyncio.timeout(T),
        modern_client(bridge_url, **a.client_kwargs()) as ca,
        modern_client(bridge_url, **b.client_kwargs()) as cb,
    ):
        assert (
            text_of(await ca.call_tool("read_file", {"path": str(tmp_path / "a" / "a.txt")}))
            == "alpha"
        )
        assert (
            text_of(await cb.call_tool("read_file", {"path": str(tmp_path / "b" / "b.txt")}))
            == "bravo"
        )
        denied_b = await cb.call_tool("read_file", {"path": str(tmp_path / "a" / "a.txt")})
        denied_a = await ca.call_tool("read_file", {"path": str(tmp_path / "b" / "b.txt")})
    for denied in (denied_a, denied_b):
        assert denied.is_error
        assert isinstance(denied.content[0], types.TextContent)
        assert "Access denied - path outside allowed directories" in denied.content[0].text


async def test_an_ask_inside_a_call_is_answered_with_the_calls_roots(bridge_url: str) -> None:
    """A roots/list inside the call on a roots-affine session needs no round beyond the one that
    chose it."""
    a = answers(ROOTS_A)
    async with asyncio.timeout(T), modern_client(bridge_url, **a.client_kwargs()) as client:
        pre = json.loads(
            text_of(
                await client.call_tool("roots_in_call", {}, input_responses=pre_answer(ROOTS_A))
            )
        )
        asked = json.loads(text_of(await client.call_tool("roots_in_call", {})))
    assert pre == asked == ROOTS_A
    assert a.asked == [("roots/list", None)]  # only the second call, which did not pre-answer


async def test_a_later_ask_outside_any_call_gets_the_sessions_client_roots(bridge_url: str) -> None:
    """The server asks again between calls (as after roots/list_changed): it gets the same client's
    roots."""
    b = answers(ROOTS_B)
    async with asyncio.timeout(T), modern_client(bridge_url, **b.client_kwargs()) as client:
        before = await kept(client, ROOTS_B)
        assert (
            text_of(
                await client.call_tool(
                    "ask_again_later", {"delay": 0.05}, input_responses=pre_answer(ROOTS_B)
                )
            )
            == "scheduled"
        )
        after = before
        for _ in range(200):  # the later ask lands within milliseconds; 10 s bound
            after = await kept(client, ROOTS_B)
            if after["asks"] > before["asks"]:
                break
            await asyncio.sleep(0.05)
    assert (after["pid"], after["session"]) == (before["pid"], before["session"])
    assert after["asks"] == before["asks"] + 1
    assert after["roots"] == ROOTS_B
    assert b.asked == []


async def test_a_client_without_roots_is_never_asked_and_gets_none(bridge_url: str) -> None:
    """A client that declared no roots capability: no question, and the server keeps no roots for
    it."""
    async with asyncio.timeout(T), modern_client(bridge_url) as client:
        assert (await kept(client))["roots"] == []


@pytest.mark.parametrize("upstream", ["http", "stdio"])
async def test_session_per_call_gives_each_call_a_fresh_session(
    peers: Peers, upstream: str
) -> None:
    """`upstream.session_per_call`: every interactive call runs on a session of its own (over stdio,
    a process of its own); by default the same client's calls share one warm session."""
    env = bridge_env({"upstream": {"session_per_call": True, "roots_probe_ms": 5000}})
    if upstream == "http":
        fresh = peers.bridge(peers.legacy(SERVER).url, env=env)
        shared = peers.bridge(peers.legacy(SERVER).url, env=ROOMY)
    else:
        fresh, shared = peers.bridge_stdio(SERVER, env=env), peers.bridge_stdio(SERVER, env=ROOMY)
    seen: dict[str, list[tuple[int, int]]] = {}
    for name, bridge in (("fresh", fresh), ("shared", shared)):
        async with (
            asyncio.timeout(T),
            modern_client(bridge.url, **answers(ROOTS_A).client_kwargs()) as client,
        ):
            states = [await kept(client, ROOTS_A) for _ in range(3)]
        assert all(state["roots"] == ROOTS_A for state in states)
        seen[name] = [(state["pid"], state["session"]) for state in states]
    assert len(set(seen["fresh"])) == 3
    assert len(set(seen["shared"])) == 1


@pytest.fixture(scope="module", params=["http", "stdio"])
def ordinary_url(module_peers: Peers, request: pytest.FixtureRequest) -> str:
    """The bridge in front of the demo server, which asks for roots only inside a call."""
    if request.param == "http":
        return module_peers.bridge(module_peers.legacy(DEMO_SERVER).url).url
    return module_peers.bridge_stdio(DEMO_SERVER).url


async def test_an_ordinary_server_costs_no_extra_round(ordinary_url: str) -> None:
    """A server that asks only inside calls: the one round is its own push, held as today (it has a
    requestState); a pre-answer of the same stable key answers that push with no round at all."""
    a, b = answers(ROOTS_A), answers(ROOTS_B)
    async with (
        asyncio.timeout(T),
        modern_client(ordinary_url, **a.client_kwargs()) as ca,
        modern_client(ordinary_url, **b.client_kwargs()) as cb,
    ):
        first = await ca.session.call_tool("list_workspace", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        assert first.request_state is not None  # the server's own push, held: not a bridge question
        assert list(first.input_requests or {}) == [ROOTS_INPUT_KEY]
        done = await ca.session.call_tool(
            "list_workspace",
            {},
            allow_input_required=True,
            input_responses=pre_answer(ROOTS_A),
            request_state=first.request_state,
        )
        assert isinstance(done, types.CallToolResult)
        assert text_of(done) == "Roots: " + ", ".join(ROOTS_A)
        for _ in range(2):
            assert text_of(await cb.call_tool("list_workspace", {})) == "Roots: " + ", ".join(
                ROOTS_B
            )
            assert text_of(await ca.call_tool("list_workspace", {})) == "Roots: " + ", ".join(
                ROOTS_A
            )
        pre = await cb.call_tool("list_workspace", {}, input_responses=pre_answer(ROOTS_B))
    assert text_of(pre) == "Roots: " + ", ".join(ROOTS_B)
    assert a.asked == b.asked == [("roots/list", None)] * 2


async def test_the_roots_question_on_the_wire_and_a_malformed_answer(bridge_url: str) -> None:
    """Raw: the bridge's question has exactly one input request and no requestState; a malformed
    answer is -32602 naming the key and disturbs nobody: a good answer then completes."""
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        poster = ModernPoster(http, bridge_url, capabilities={"roots": {}})
        asked = await poster.post("tools/call", {"name": "kept_roots", "arguments": {}})
        bad = await poster.post(
            "tools/call",
            {
                "name": "kept_roots",
                "arguments": {},
                "inputResponses": {ROOTS_INPUT_KEY: {"roots": [{"uri": ""}]}},
            },
        )
        good = await poster.post(
            "tools/call",
            {
                "name": "kept_roots",
                "arguments": {},
                "inputResponses": {ROOTS_INPUT_KEY: {"roots": [{"uri": ROOTS_B[0]}]}},
            },
        )
    assert asked.response is not None and bad.response is not None and good.response is not None
    assert asked.response["result"] == {
        "resultType": "input_required",
        "inputRequests": {ROOTS_INPUT_KEY: {"method": "roots/list", "params": {}}},
    }
    assert bad.response["error"]["code"] == INVALID_PARAMS
    assert bad.response["error"]["data"] == {"inputKey": ROOTS_INPUT_KEY}
    result = good.response["result"]
    assert result["resultType"] == "complete"
    assert json.loads(result["content"][0]["text"])["roots"] == ROOTS_B[:1]
