"""Hostile retries and abandonment, with raw modern posts to the bridge in front of the interactive
mcp 1.x server (`tests/peers/interactive_server.py`).

Every bad `requestState` (tampered, foreign, other principal, other request) gets the one fixed
public error (-32602, `INVALID_REQUEST_STATE_MESSAGE`); an expired one of the caller's own, and a
replayed, doubled or stale-round one, get theirs (`EXPIRED_REQUEST_STATE_MESSAGE`,
`USED_REQUEST_STATE_MESSAGE`); the server's journal shows nothing reached it; the rightful caller
then completes; the bridge's log names the reason (and only the log). Abandoned held calls and
disconnected clients are observed from the server's side: the refusals and
`notifications/cancelled`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
from collections.abc import Callable

import aiohttp
import pytest

from translators.protocol.eras import ELICIT, PROMPTS_GET, ROOTS, SAMPLE
from translators.wire.errors import EXPIRED_REQUEST_STATE_MESSAGE, USED_REQUEST_STATE_MESSAGE

from .harness import ModernPoster, PeerProcess, Peers, bridge_env
from .mrtr_helpers import (
    EVERYTHING_AT_ONCE,
    Interactive,
    accept,
    assert_state_rejected,
    call_tool,
    complete_text,
    input_required,
    poster,
    rejection_reasons,
    start_interactive,
    tampered,
)

T = 30  # bound on every test body, seconds
SHORT_TTL_S = 1.0
EVIL = accept(answer="evil-9b2e")
GOOD = accept(answer="good-4f1c")
GOOD_TEXT = '{"action": "accept", "content": {"answer": "good-4f1c"}}'
KEY_ENV = bridge_env(
    {"held": {"keys": {"main": base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()}}}
)
BATCHES = {"batch_sizes": EVERYTHING_AT_ONCE}


@pytest.fixture(scope="module")
def server(module_peers: Peers, tmp_path_factory: pytest.TempPathFactory) -> Interactive:
    """The interactive server behind a bridge sealing with key id `main`, shared by this module."""
    return start_interactive(module_peers, tmp_path_factory.mktemp("interactive"), env=KEY_ENV)


@pytest.fixture(scope="module")
def short_bridge(module_peers: Peers, server: Interactive) -> PeerProcess:
    """A second bridge on the same server (an ephemeral key) whose held calls and states expire
    after 1 s."""
    held = {"ttl_s": SHORT_TTL_S, **BATCHES}
    return module_peers.bridge(server.legacy.url, env=bridge_env({"held": held}))


@pytest.fixture(scope="module")
def twin_bridge(module_peers: Peers, server: Interactive) -> PeerProcess:
    """A third bridge with the same key as `server`'s: its states authenticate there, its held calls
    do not exist."""
    return module_peers.bridge(server.legacy.url, env=KEY_ENV)


class Reasons:
    """The log-only rejection reasons a bridge logs from now on."""

    def __init__(self, bridge: PeerProcess) -> None:
        self.bridge = bridge
        self.start = len(rejection_reasons(bridge))

    def new(self) -> list[str]:
        return rejection_reasons(self.bridge)[self.start :]


async def _held(
    post: ModernPoster, tag: str, tool: str = "ask", **arguments: object
) -> tuple[str, str]:
    """Start `tool` for `tag` and return (input key, requestState) of its single input request."""
    requests, state = input_required(await call_tool(post, tool, {"tag": tag, **arguments}))
    (key,) = requests
    return key, state


def _flip(state: str) -> str:
    return tampered(state)


def _truncate(state: str) -> str:
    return state[:-6]


def _garbage(state: str) -> str:
    return "v1." + "A" * (len(state) - 3)


def _unversioned(state: str) -> str:
    return state.removeprefix("v1.")


@pytest.mark.parametrize(
    ("mangle", "reason"),
    [
        (_flip, "authentication_failed"),
        (_truncate, "authentication_failed"),
        (_garbage, "unknown_key"),
        (_unversioned, "malformed"),
    ],
    ids=["flip", "truncate", "garbage", "unversioned"],
)
async def test_tampered_state_rejected(
    server: Interactive, mangle: Callable[[str], str], reason: str
) -> None:
    """A tampered requestState is rejected, nothing reaches the server, and the rightful retry
    completes."""
    tag = f"tamper-{mangle.__name__[1:]}"
    reasons = Reasons(server.bridge)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, server.url)
        key, state = await _held(post, tag)
        assert_state_rejected(
            await call_tool(post, "ask", {"tag": tag}, responses={key: EVIL}, state=mangle(state))
        )
        assert server.journal.events(tag) == ["call"]
        rightful = await call_tool(post, "ask", {"tag": tag}, responses={key: GOOD}, state=state)
    assert complete_text(rightful) == GOOD_TEXT
    assert server.journal.answers(tag) == [GOOD]
    assert reasons.new() == [reason]


@pytest.mark.parametrize(
    ("other", "reason"), [("short", "unknown_key"), ("twin", "unknown_held_call")]
)
async def test_state_from_another_bridge_rejected(
    server: Interactive,
    short_bridge: PeerProcess,
    twin_bridge: PeerProcess,
    other: str,
    reason: str,
) -> None:
    """A state sealed by another bridge is rejected here, whether its key is unknown here or the
    same key (then for the very same request, but the held call is unknown); nothing reaches the
    server, the rightful retry completes."""
    tag = f"foreign-{other}"
    reasons = Reasons(server.bridge)
    elsewhere = short_bridge if other == "short" else twin_bridge
    # the short bridge's call expires: keep it apart
    foreign_tag = f"{tag}-elsewhere" if other == "short" else tag
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, server.url)
        foreign_key, foreign_state = await _held(poster(http, elsewhere.url), foreign_tag)
        key, state = await _held(post, tag)
        assert foreign_key == key
        calls = server.journal.events(tag)
        assert calls == ["call"] * (1 if other == "short" else 2)
        assert_state_rejected(
            await call_tool(post, "ask", {"tag": tag}, responses={key: EVIL}, state=foreign_state)
        )
        assert server.journal.events(tag) == calls
        rightful = await call_tool(post, "ask", {"tag": tag}, responses={key: GOOD}, state=state)
    assert complete_text(rightful) == GOOD_TEXT
    assert server.journal.answers(tag) == [GOOD]
    assert reasons.new() == [reason]


async def test_replayed_state_rejected(server: Interactive) -> None:
    """A requestState used once successfully cannot be used again, and the replay reaches nothing
    upstream."""
    reasons = Reasons(server.bridge)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, server.url)
        key, state = await _held(post, "replay")
        assert complete_text(
            await call_tool(post, "ask", {"tag": "replay"}, responses={key: GOOD}, state=state)
        )
        before = server.journal.entries("replay")
        assert_state_rejected(
            await call_tool(post, "ask", {"tag": "replay"}, responses={key: EVIL}, state=state),
            USED_REQUEST_STATE_MESSAGE,
        )
        fresh_key, fresh_state = await _held(post, "replay")
        again = await call_tool(
            post, "ask", {"tag": "replay"}, responses={fresh_key: GOOD}, state=fresh_state
        )
    assert complete_text(again) == GOOD_TEXT
    assert before == server.journal.entries("replay")[: len(before)]
    assert server.journal.events("replay") == ["call", "answer", "call", "answer"]
    assert server.journal.answers("replay") == [GOOD, GOOD]
    assert reasons.new() == ["already_used"]


async def test_concurrently_doubled_retry_exactly_one_wins(server: Interactive) -> None:
    """Two retries with the same requestState at once: exactly one completes, the other is
    rejected."""
    reasons = Reasons(server.bridge)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, server.url)
        key, state = await _held(post, "double")
        contents = [accept(answer="first"), accept(answer="second")]
        replies = await asyncio.gather(
            *(
                call_tool(post, "ask", {"tag": "double"}, responses={key: c}, state=state)
                for c in contents
            )
        )
    won = ["result" in reply.response for reply in replies]
    assert sorted(won) == [False, True]
    winner = contents[won.index(True)]
    assert json.loads(complete_text(replies[won.index(True)])) == winner
    assert_state_rejected(replies[won.index(False)], USED_REQUEST_STATE_MESSAGE)
    assert server.journal.answers("double") == [winner]
    assert reasons.new() in (["not_waiting"], ["already_used"])


@pytest.mark.parametrize("authorization", ["Bearer mallory", None], ids=["other-token", "no-token"])
async def test_other_principal_rejected(server: Interactive, authorization: str | None) -> None:
    """Another caller (another Authorization, or none) cannot use Alice's requestState; Alice then
    completes."""
    tag = f"principal-{authorization is None}"
    reasons = Reasons(server.bridge)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = poster(http, server.url)
        key, state = await _held(alice, tag)
        mallory = poster(http, server.url, authorization=authorization)
        assert_state_rejected(
            await call_tool(mallory, "ask", {"tag": tag}, responses={key: EVIL}, state=state)
        )
        assert server.journal.events(tag) == ["call"]
        rightful = await call_tool(alice, "ask", {"tag": tag}, responses={key: GOOD}, state=state)
    assert complete_text(rightful) == GOOD_TEXT
    assert server.journal.answers(tag) == [GOOD]
    assert reasons.new() == ["other_principal"]


async def test_other_request_rejected(server: Interactive) -> None:
    """The state of one call is rejected on another tool, other arguments and another method;
    nothing is started; the same arguments in another key order are the same request."""
    reasons = Reasons(server.bridge)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, server.url)
        key, state = await _held(post, "other", question="Mine?")
        misuses = [
            call_tool(post, "ask_twice", {"tag": "other"}, responses={key: EVIL}, state=state),
            call_tool(
                post,
                "ask",
                {"tag": "other-b", "question": "Mine?"},
                responses={key: EVIL},
                state=state,
            ),
            call_tool(
                post,
                "ask",
                {"tag": "other", "question": "Else?"},
                responses={key: EVIL},
                state=state,
            ),
            call_tool(post, "ask", {"tag": "other"}, responses={key: EVIL}, state=state),
            post.post(
                PROMPTS_GET,
                {
                    "name": "ask_prompt",
                    "arguments": {"tag": "other"},
                    "requestState": state,
                    "inputResponses": {key: EVIL},
                },
            ),
        ]
        for misuse in misuses:
            assert_state_rejected(await misuse)
        assert (server.journal.events("other"), server.journal.events("other-b")) == (["call"], [])
        reordered = {"question": "Mine?", "tag": "other"}  # the same arguments in another order
        rightful = await call_tool(post, "ask", reordered, responses={key: GOOD}, state=state)
    assert complete_text(rightful) == GOOD_TEXT
    assert server.journal.answers("other") == [GOOD]
    assert reasons.new() == ["other_request"] * len(misuses)


async def test_stale_round_rejected(server: Interactive) -> None:
    """A round's state is rejected once a later round was issued (by an answer, or by a retry
    that answered nothing); the latest round's state then completes the call."""
    reasons = Reasons(server.bridge)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, server.url)
        key1, state1 = await _held(post, "stale", "ask_twice")
        reply = await call_tool(
            post, "ask_twice", {"tag": "stale"}, responses={key1: accept(name="Ann")}, state=state1
        )
        requests2, state2 = input_required(reply)
        (key2,) = requests2
        requests3, state3 = input_required(
            await call_tool(post, "ask_twice", {"tag": "stale"}, state=state2)
        )
        assert requests3 == requests2 and state3 not in (state1, state2)
        for responses, state in (
            ({key2: accept(color="black")}, state2),
            ({key1: accept(name="Eve")}, state1),
        ):
            assert_state_rejected(
                await call_tool(
                    post, "ask_twice", {"tag": "stale"}, responses=responses, state=state
                ),
                USED_REQUEST_STATE_MESSAGE,
            )
        assert server.journal.answers("stale") == [accept(name="Ann")]
        final = await call_tool(
            post,
            "ask_twice",
            {"tag": "stale"},
            responses={key2: accept(color="teal")},
            state=state3,
        )
    assert complete_text(final) == "Ann likes teal."
    assert server.journal.answers("stale") == [accept(name="Ann"), accept(color="teal")]
    assert reasons.new() == ["stale_round", "stale_round"]


async def test_expired_held_call_is_refused_and_cancelled_upstream(
    server: Interactive, short_bridge: PeerProcess
) -> None:
    """Past the TTL the server sees the elicitation refused (`cancel`) and the call cancelled;
    the expired state is then rejected with nothing sent upstream, and a fresh call completes."""
    reasons = Reasons(short_bridge)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, short_bridge.url)
        key, state = await _held(post, "expire", linger_s=20)
        entries = await server.journal.wait_for(
            "expire", "cancel_notification", "cancelled_in_tool"
        )
        assert [e["event"] for e in entries][:2] == ["call", "answer"]
        assert server.journal.answers("expire") == [{"action": "cancel"}]
        assert_state_rejected(
            await call_tool(
                post, "ask", {"tag": "expire", "linger_s": 20}, responses={key: GOOD}, state=state
            ),
            EXPIRED_REQUEST_STATE_MESSAGE,
        )
        after = server.journal.events("expire")
        fresh_key, fresh_state = await _held(post, "expire-fresh")
        fresh = await call_tool(
            post, "ask", {"tag": "expire-fresh"}, responses={fresh_key: GOOD}, state=fresh_state
        )
    assert complete_text(fresh) == GOOD_TEXT
    assert sorted(after) == sorted(["call", "answer", "cancel_notification", "cancelled_in_tool"])
    assert server.journal.events("expire") == after
    assert reasons.new() == ["expired"]


async def test_expired_batch_refuses_every_push_kind(
    server: Interactive, short_bridge: PeerProcess
) -> None:
    """An abandoned round of elicitation + sampling + roots: each push refused in its own way, then
    the cancel."""
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        requests, _ = input_required(
            await call_tool(
                poster(http, short_bridge.url), "everything", {"tag": "expire-all", "linger_s": 20}
            )
        )
        assert sorted(r["method"] for r in requests.values()) == sorted([ELICIT, SAMPLE, ROOTS])
        entries = await server.journal.wait_for("expire-all", "cancel_notification")
    assert server.journal.answers("expire-all") == [{"action": "cancel"}]
    errors = {e["kind"]: e["code"] for e in entries if e["event"] == "push_error"}
    assert errors == {"sample": -1, "roots": -32603}


async def test_disconnect_while_attached_cancels_upstream(server: Interactive) -> None:
    """A client that drops its connection mid-call (first attempt, or a retry) cancels the upstream
    call."""
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, server.url)
        with pytest.raises(TimeoutError):
            await call_tool(post, "slow", {"tag": "drop", "seconds": 20}, timeout=0.5)
        await server.journal.wait_for("drop", "cancel_notification", "cancelled_in_tool")
        key, state = await _held(post, "drop-retry", linger_s=20)
        with pytest.raises(TimeoutError):
            await call_tool(
                post,
                "ask",
                {"tag": "drop-retry", "linger_s": 20},
                responses={key: GOOD},
                state=state,
                timeout=0.5,
            )
        await server.journal.wait_for("drop-retry", "cancel_notification", "cancelled_in_tool")
        assert (
            complete_text(await call_tool(post, "slow", {"tag": "drop-after", "seconds": 0}))
            == "slept"
        )
    assert server.journal.answers("drop-retry") == [GOOD]


async def test_bridge_log_holds_no_secrets(server: Interactive) -> None:
    """The bridge's log (info level, every test of this module so far) holds no requestState,
    Authorization value or elicited answer, even for rejected retries."""
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, server.url, authorization="Bearer s3cret-t0ken")
        key, state = await _held(post, "secrets")
        assert_state_rejected(
            await call_tool(
                post, "ask", {"tag": "secrets"}, responses={key: EVIL}, state=tampered(state)
            )
        )
        assert complete_text(
            await call_tool(post, "ask", {"tag": "secrets"}, responses={key: GOOD}, state=state)
        )
    log = server.bridge.log_path.read_text(encoding="utf-8", errors="replace")
    assert "request_state_rejected" in log
    for secret in (
        "s3cret-t0ken",
        "Bearer alice",
        "Bearer mallory",
        "good-4f1c",
        "evil-9b2e",
        state,
        state[3:40],
    ):
        assert secret not in log, secret
    assert re.search(r"v1\.[A-Za-z0-9_-]{40,}", log) is None
