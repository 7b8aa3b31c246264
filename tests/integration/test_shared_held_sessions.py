"""Held calls sharing an upstream session where the server attributes their pushes (docs/
decisions.md § 28), against the real interactive `mcp` 1.x server.

Its `ask` elicits on the call's own POST stream (a related request id), so once one `ask` ran on
a session of its own, concurrent `ask` calls of one principal share one legacy session, and each
answer still reaches exactly its own push (the question is the call's own and the answer echoes
it). Another principal's calls never join that session, and `sample`, whose push comes on the
session's GET stream, keeps a session per call. The journal names the session serving each call.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from .harness import ModernPoster, Peers, RawReply, run_legacy_script
from .mrtr_helpers import (
    Interactive,
    call_tool,
    complete_text,
    echo_answer,
    input_required,
    poster,
    start_interactive,
)

T = 60  # bound on every test body, seconds


@pytest.fixture(scope="module")
def server(module_peers: Peers, tmp_path_factory: pytest.TempPathFactory) -> Interactive:
    return start_interactive(module_peers, tmp_path_factory.mktemp("interactive"))


async def _open(post: ModernPoster, tag: str) -> RawReply:
    return await call_tool(post, "ask", {"tag": tag, "question": f"Question for {tag}?"})


async def _finish(post: ModernPoster, tag: str, first: RawReply) -> Any:
    """Answer the one push of `first` with the echo of its own question; the tool's result."""
    requests, state = input_required(first)
    ((key, request),) = requests.items()
    assert request["params"]["message"] == f"Question for {tag}?"
    content = {"answer": echo_answer(request["params"]["message"])}
    reply = await call_tool(
        post,
        "ask",
        {"tag": tag, "question": f"Question for {tag}?"},
        responses={key: {"action": "accept", "content": content}},
        state=state,
    )
    return json.loads(complete_text(reply))


async def _round_trip(post: ModernPoster, tag: str) -> Any:
    return await _finish(post, tag, await _open(post, tag))


def _session(server: Interactive, tag: str) -> int:
    [call] = [entry for entry in server.journal.entries(tag) if entry["event"] == "call"]
    session: int = call["session"]
    return session


async def test_held_calls_of_one_principal_share_a_session_and_keep_their_own_pushes(
    server: Interactive,
) -> None:
    """After one `ask` on a session of its own, three concurrent held `ask` calls run on one
    legacy session; answered in reverse order, each gets exactly its own answer."""
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = poster(http, server.url)
        await _round_trip(alice, "learn-alice")
        tags = [f"share-{n}" for n in range(3)]
        firsts = await asyncio.gather(*(_open(alice, tag) for tag in tags))
        finals = {}
        for tag, first in reversed(list(zip(tags, firsts, strict=True))):
            finals[tag] = await _finish(alice, tag, first)
    for tag in tags:
        answer = {"answer": f"re: Question for {tag}?"}
        assert finals[tag] == {"action": "accept", "content": answer}
        assert server.journal.answers(tag) == [{"action": "accept", "content": answer}]
    assert len({_session(server, tag) for tag in tags}) == 1


async def test_the_server_sees_what_a_legacy_client_on_one_session_shows_it(
    server: Interactive,
) -> None:
    """Ground truth: a legacy client used directly runs three `ask` calls at once on its one
    session. Through the bridge, a modern client's three held calls give the same results, the
    server records the same answers, and it serves them on one session too (not three)."""
    direct_tags = [f"direct-{n}" for n in range(3)]
    direct = await run_legacy_script(
        "legacy_concurrent_asks.py", "--url", server.legacy.url, *direct_tags
    )
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = poster(http, server.url, "Bearer ground-truth")
        await _round_trip(alice, "learn-ground-truth")
        tags = [f"bridged-{n}" for n in range(3)]
        firsts = await asyncio.gather(*(_open(alice, tag) for tag in tags))
        bridged = {
            tag: await _finish(alice, tag, first) for tag, first in zip(tags, firsts, strict=True)
        }
    for n in range(3):
        seen_direct, seen_bridged = f"direct-{n}", f"bridged-{n}"
        assert direct[seen_direct] == {
            "action": "accept",
            "content": {"answer": f"re: Question for {seen_direct}?"},
        }
        assert bridged[seen_bridged] == {
            "action": "accept",
            "content": {"answer": f"re: Question for {seen_bridged}?"},
        }
        assert server.journal.answers(seen_direct) == [direct[seen_direct]]
        assert server.journal.answers(seen_bridged) == [bridged[seen_bridged]]
    assert len({_session(server, tag) for tag in direct_tags}) == 1
    assert len({_session(server, tag) for tag in tags}) == 1


async def test_two_principals_never_share_a_session(server: Interactive) -> None:
    """alice's and bob's held calls, open at the same time, run on sessions of their own."""
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = poster(http, server.url, "Bearer alice")
        bob = poster(http, server.url, "Bearer bob")
        await _round_trip(alice, "learn-principals")
        tags = {"alice-1": alice, "bob-1": bob, "alice-2": alice, "bob-2": bob}
        firsts = await asyncio.gather(*(_open(post, tag) for tag, post in tags.items()))
        for (tag, post), first in zip(tags.items(), firsts, strict=True):
            result = await _finish(post, tag, first)
            assert result["content"] == {"answer": f"re: Question for {tag}?"}
    sessions = {tag: _session(server, tag) for tag in tags}
    assert sessions["alice-1"] == sessions["alice-2"]
    assert sessions["bob-1"] == sessions["bob-2"]
    assert sessions["alice-1"] != sessions["bob-1"]


SAMPLED: dict[str, Any] = {
    "role": "assistant",
    "content": {"type": "text", "text": "sampled"},
    "model": "test-model",
}


async def _sample(post: ModernPoster, tag: str, first: RawReply | None = None) -> Any:
    """A `sample` call whose one push (sampling) is answered; the tool's result."""
    arguments = {"tag": tag, "use_tools": False}
    first = first or await call_tool(post, "sample", arguments)
    requests, state = input_required(first)
    ((key, request),) = requests.items()
    assert request["method"] == "sampling/createMessage"
    reply = await call_tool(post, "sample", arguments, responses={key: SAMPLED}, state=state)
    return json.loads(complete_text(reply))


async def test_a_tool_pushing_on_the_get_stream_keeps_a_session_per_call(
    server: Interactive,
) -> None:
    """`sample` sends its push on the GET stream: after one such call completed, two concurrent
    ones still run on two sessions, and each push reaches its call (none is refused as
    unattributable)."""
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = poster(http, server.url)
        assert (await _sample(alice, "sample-learn"))["model"] == "test-model"
        tags = ["sample-1", "sample-2"]
        arguments = [{"tag": tag, "use_tools": False} for tag in tags]
        firsts = await asyncio.gather(*(call_tool(alice, "sample", a) for a in arguments))
        results = [await _sample(alice, t, f) for t, f in zip(tags, firsts, strict=True)]
    assert [result["content"] for result in results] == [SAMPLED["content"]] * 2
    assert _session(server, "sample-1") != _session(server, "sample-2")
