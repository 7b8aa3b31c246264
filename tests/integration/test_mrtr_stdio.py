"""MRTR over stdio: the mcp 2.x client pinned to 2026-07-28 launching `mrtr-bridge stdio --upstream-
command "<interactive mcp 1.x server> --transport stdio"`, and the HTTP front (`mrtr-bridge serve`)
with the same stdio upstream. Over stdio nothing links a push to its call: the one-call-per-process
lease decides.

Faults: the upstream process killed while a call is held or attached fails that call promptly and
clearly, and the next call runs on a fresh process (found through the journal's `pid`s).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import aiohttp
import mcp_types as types
import pytest

from translators.protocol.eras import ELICIT, ROOTS, SAMPLE
from translators.wire.errors import (
    BRIDGE_MARKER,
    EXPIRED_REQUEST_STATE_MESSAGE,
    USED_REQUEST_STATE_MESSAGE,
)

from .harness import ModernPoster, PeerProcess, Peers, RawReply, bridge_env, modern_client
from .mrtr_helpers import (
    ELICIT_COMPLETE,
    Answerer,
    Journal,
    ManualRounds,
    accept,
    assert_client_rejected,
    assert_state_rejected,
    call_tool,
    client_rejection,
    complete_text,
    echo_answer,
    elicited,
    input_required,
    json_of,
    poster,
    stdio_bridge_client,
    tampered,
    text_of,
)

T = 60  # bound on every test body, seconds
USED = USED_REQUEST_STATE_MESSAGE
CONCURRENT = 20
PROMPT_FAILURE_S = 3.0  # a killed upstream must fail its calls well within this


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The journal directory shared by every interactive server process of this module."""
    return tmp_path_factory.mktemp("interactive")


@pytest.fixture(scope="module")
def http_bridge(module_peers: Peers, state_dir: Path) -> PeerProcess:
    """`mrtr-bridge serve` with the interactive server as its stdio upstream
    (`--upstream-command`)."""
    return module_peers.bridge_stdio("interactive_server.py", "--state-dir", str(state_dir))


async def test_stdio_front_elicitation_rounds_and_url_mode(state_dir: Path) -> None:
    """Over stdio both ways: form elicitation, two rounds, URL mode (complete notification
    consumed), -32042."""
    journal = Journal(state_dir)
    answers = Answerer(journal=journal)
    seen: list[Any] = []

    async def on_message(message: Any) -> None:
        seen.append(message)

    async with (
        asyncio.timeout(T),
        stdio_bridge_client(
            state_dir, message_handler=on_message, **answers.client_kwargs()
        ) as client,
    ):
        asked = await client.call_tool("ask", {"tag": "s-ask", "question": "Here?"})
        manual, rounds = ManualRounds(client), {"tag": "s-rounds"}
        (key1,), state1 = await manual.held("ask_twice", rounds)
        (key2,), state2 = await manual.held(
            "ask_twice", rounds, state=state1, responses={key1: elicited(name="Ann")}
        )
        assert (key2, state2) != (key1, state1)
        final = await manual.done(
            "ask_twice", rounds, state=state2, responses={key2: elicited(color="teal")}
        )
        url = await client.call_tool("ask_url", {"tag": "s-url"})
        authorized = await client.call_tool("authorize", {"tag": "s-auth"})
    assert json_of(asked) == {"action": "accept", "content": {"answer": echo_answer("Here?")}}
    assert text_of(final) == "Ann likes teal."
    assert (text_of(url), text_of(authorized)) == ("url elicitation: accept", "authorized s-auth")
    url_params = [p for _, p in answers.asked if isinstance(p, types.ElicitRequestURLParams)]
    assert [p.url for p in url_params] == [
        "https://auth.example/sign-in/s-url",
        "https://auth.example/authorize/s-auth",
    ]
    assert all(p.elicitation_id is None for p in url_params)
    assert not [
        m for m in seen if ELICIT_COMPLETE in repr(m) or "ElicitComplete" in type(m).__name__
    ]
    assert journal.events("s-url") == ["call", "answer", "elicit_complete_sent"]
    assert journal.events("s-auth") == ["call", "call"]
    assert journal.answers("s-rounds") == [accept(name="Ann"), accept(color="teal")]


async def test_stdio_front_sampling_roots_batching_prompts_resources(state_dir: Path) -> None:
    """Over stdio both ways: sampling with tools, roots, one round of three pushes, prompts/get and
    resources/read."""
    journal = Journal(state_dir)
    answers = Answerer()
    tools = types.SamplingCapability(tools=types.SamplingToolsCapability())
    async with (
        asyncio.timeout(T),
        stdio_bridge_client(
            state_dir, sampling_capabilities=tools, **answers.client_kwargs()
        ) as client,
    ):
        sampled = await client.call_tool("sample", {"tag": "s-sample"})
        rooted = await client.call_tool("roots", {"tag": "s-roots"})
        batch = await client.session.call_tool(
            "everything", {"tag": "s-batch"}, allow_input_required=True
        )
        assert isinstance(batch, types.InputRequiredResult) and batch.input_requests
        assert sorted(r.method for r in batch.input_requests.values()) == sorted(
            [ELICIT, SAMPLE, ROOTS]
        )
        everything = await client.call_tool("everything", {"tag": "s-batch-auto"})
        prompt = await client.get_prompt("ask_prompt", {"tag": "s-prompt"})
        read = await client.read_resource("interactive://ask/s-res")
    canned = {
        "role": "assistant",
        "content": {"type": "text", "text": "Paris"},
        "model": "canned-model",
    }
    assert json_of(sampled) == canned
    sampling = next(p for method, p in answers.asked if method == SAMPLE)
    assert [tool.name for tool in sampling.tools or []] == ["get_weather"]
    assert [type(m.content).__name__ for m in sampling.messages][::3] == [
        "TextContent",
        "ImageContent",
    ]
    assert json_of(rooted) == ["file:///ws"]
    assert text_of(everything) == f"{echo_answer('What is your name?')} | Paris | file:///ws"
    topic = echo_answer("Which topic should the prompt use?")
    assert prompt.messages[0].content == types.TextContent(
        type="text", text=f"Write about {topic}."
    )
    (contents,) = read.contents
    assert isinstance(contents, types.TextResourceContents)
    assert (
        contents.text
        == f"secret for s-res: {echo_answer('Which secret should the resource show?')}"
    )
    assert [e["sampling_tools"] for e in journal.entries("s-sample") if e["event"] == "caps"] == [
        True
    ]


@pytest.mark.serial  # twenty server processes at once: alone, not beside other workers
async def test_stdio_front_twenty_concurrent_calls_never_cross(state_dir: Path) -> None:
    """20 concurrent interactive calls over stdio (one upstream process each), answered in random
    order. Twenty Python servers importing `mcp` at once on two cores can take longer than the
    default `upstream.init_timeout_s` to initialize; what is tested here is attribution, so the
    bound is generous."""
    journal = Journal(state_dir)
    jitter = random.Random(11)
    answers = Answerer(jitter=lambda: jitter.uniform(0, 0.05))
    slow_start = bridge_env({"upstream": {"init_timeout_s": 4 * T}})
    async with (
        asyncio.timeout(4 * T),
        stdio_bridge_client(state_dir, slow_start, **answers.client_kwargs()) as client,
    ):
        results = await asyncio.gather(
            *(
                client.call_tool("ask", {"tag": f"s-c{n}", "question": f"Stdio question {n}?"})
                for n in range(CONCURRENT)
            )
        )
    for n, result in enumerate(results):
        expected = accept(answer=echo_answer(f"Stdio question {n}?"))
        assert json_of(result) == expected and journal.answers(f"s-c{n}") == [expected]
    assert len(set().union(*(journal.pids(f"s-c{n}") for n in range(CONCURRENT)))) == CONCURRENT


async def test_stdio_front_hostile_retries_rejected(state_dir: Path) -> None:
    """Over stdio: tampered and other-request states are rejected with the fixed error, doubled,
    replayed and stale-round ones as already used; nothing reaches the server, and the rightful
    retry completes."""
    journal = Journal(state_dir)
    good, evil = elicited(answer="good"), elicited(answer="evil")
    mine = {"tag": "s-hostile"}
    async with (
        asyncio.timeout(T),
        stdio_bridge_client(state_dir, **Answerer().client_kwargs()) as client,
    ):
        manual = ManualRounds(client)
        (key,), state = await manual.held("ask", mine)
        await client_rejection(
            manual.call("ask", mine, state=tampered(state), responses={key: evil})
        )
        await client_rejection(manual.call("ask_twice", mine, state=state, responses={key: evil}))
        await client_rejection(
            manual.call("ask", {"tag": "s-hostile-b"}, state=state, responses={key: evil})
        )
        assert (journal.events("s-hostile"), journal.events("s-hostile-b")) == (["call"], [])
        doubled = [manual.call("ask", mine, state=state, responses={key: good}) for _ in range(2)]
        outcomes = await asyncio.gather(*doubled, return_exceptions=True)
        (won,) = [o for o in outcomes if isinstance(o, types.CallToolResult)]
        assert_client_rejected(
            next(o for o in outcomes if not isinstance(o, types.CallToolResult)), USED
        )
        # replayed
        await client_rejection(manual.call("ask", mine, state=state, responses={key: evil}), USED)
        stale = {"tag": "s-stale"}
        (key1,), state1 = await manual.held("ask_twice", stale)
        (key2,), state2 = await manual.held(
            "ask_twice", stale, state=state1, responses={key1: elicited(name="Ann")}
        )
        await client_rejection(
            manual.call("ask_twice", stale, state=state1, responses={key2: elicited(color="x")}),
            USED,
        )
        final = await manual.done(
            "ask_twice", stale, state=state2, responses={key2: elicited(color="teal")}
        )
    assert json_of(won) == accept(answer="good")
    assert journal.answers("s-hostile") == [accept(answer="good")]
    assert text_of(final) == "Ann likes teal."
    assert journal.answers("s-stale") == [accept(name="Ann"), accept(color="teal")]


async def test_stdio_front_abandonment_observed_upstream(state_dir: Path) -> None:
    """Over stdio with a 1 s TTL: the server sees an expired held call refused and cancelled,
    the expired state is rejected; a client that abandons an attached call
    (`notifications/cancelled`) cancels it upstream."""
    journal = Journal(state_dir)
    env = bridge_env({"held": {"ttl_s": 1}})
    async with (
        asyncio.timeout(T),
        stdio_bridge_client(state_dir, env=env, **Answerer().client_kwargs()) as client,
    ):
        expiring = {"tag": "s-expire", "linger_s": 20}
        (key,), state = await ManualRounds(client).held("ask", expiring)
        await journal.wait_for("s-expire", "cancel_notification", "cancelled_in_tool")
        late = ManualRounds(client).call(
            "ask", expiring, state=state, responses={key: elicited(answer="late")}
        )
        await client_rejection(late, EXPIRED_REQUEST_STATE_MESSAGE)
        fresh = await client.call_tool("ask", {"tag": "s-expire-fresh"})
        slow = asyncio.create_task(client.call_tool("slow", {"tag": "s-abandon", "seconds": 20}))
        await journal.wait_for("s-abandon", "call")
        slow.cancel()
        await journal.wait_for("s-abandon", "cancel_notification", "cancelled_in_tool")
        after = await client.call_tool("echo", {"text": "still here"})
    assert journal.answers("s-expire") == [{"action": "cancel"}]
    assert journal.events("s-expire").count("answer") == 1
    assert json_of(fresh) == accept(answer=echo_answer("What is your answer?"))
    assert slow.cancelled() and text_of(after) == "still here"


async def test_http_front_stdio_upstream_interactive_set(
    http_bridge: PeerProcess, state_dir: Path
) -> None:
    """`serve --upstream-command`: elicitation, rounds, batching, prompts, resources, URL mode and
    hostile retries."""
    journal = Journal(state_dir)
    answers = Answerer(journal=journal)
    async with (
        asyncio.timeout(T),
        modern_client(http_bridge.url, **answers.client_kwargs()) as client,
    ):
        asked = await client.call_tool("ask", {"tag": "h-ask", "question": "Via HTTP?"})
        twice = await client.call_tool("ask_twice", {"tag": "h-rounds"})
        everything = await client.call_tool("everything", {"tag": "h-batch"})
        url = await client.call_tool("ask_url", {"tag": "h-url"})
        prompt = await client.get_prompt("ask_prompt", {"tag": "h-prompt"})
        read = await client.read_resource("interactive://ask/h-res")
    assert json_of(asked) == accept(answer=echo_answer("Via HTTP?"))
    step1, step2 = (
        echo_answer("Step 1: what is your name?"),
        echo_answer("Step 2: what is your favorite color?"),
    )
    assert text_of(twice) == f"{step1} likes {step2}."
    assert text_of(everything) == f"{echo_answer('What is your name?')} | Paris | file:///ws"
    assert text_of(url) == "url elicitation: accept"
    assert prompt.messages[0].content == types.TextContent(
        type="text", text=f"Write about {echo_answer('Which topic should the prompt use?')}."
    )
    assert isinstance(read.contents[0], types.TextResourceContents) and read.contents[
        0
    ].text.startswith("secret for")
    assert sorted(answers.methods()) == sorted([ELICIT] * 7 + [SAMPLE, ROOTS])


async def test_http_front_stdio_upstream_hostile_retries(
    http_bridge: PeerProcess, state_dir: Path
) -> None:
    """`serve --upstream-command`: tampered and other-principal states are rejected, the rightful
    retry completes."""
    journal = Journal(state_dir)
    evil, good = accept(answer="evil"), accept(answer="good")
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post, mallory = (
            poster(http, http_bridge.url),
            poster(http, http_bridge.url, authorization="Bearer mallory"),
        )
        requests, state = input_required(await call_tool(post, "ask", {"tag": "h-hostile"}))
        (key,) = requests
        for caller, token in ((post, tampered(state)), (mallory, state)):
            reply = await call_tool(
                caller, "ask", {"tag": "h-hostile"}, responses={key: evil}, state=token
            )
            assert_state_rejected(reply)
        assert journal.events("h-hostile") == ["call"]
        final = await call_tool(
            post, "ask", {"tag": "h-hostile"}, responses={key: good}, state=state
        )
    assert complete_text(final) == '{"action": "accept", "content": {"answer": "good"}}'
    assert journal.answers("h-hostile") == [good]


async def test_upstream_killed_while_held(http_bridge: PeerProcess, state_dir: Path) -> None:
    """Killing the process of a held call fails its retry promptly with a clear bridge error;
    the next call runs on a fresh process."""
    journal = Journal(state_dir)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, http_bridge.url)
        (key,), state = input_required(await call_tool(post, "ask", {"tag": "k-held"}))
        (pid,) = journal.pids("k-held")
        os.kill(pid, signal.SIGKILL)
        started = time.monotonic()
        lost = await call_tool(
            post, "ask", {"tag": "k-held"}, responses={key: accept(answer="x")}, state=state
        )
        delay = time.monotonic() - started
        fresh = await _fresh_call(post, "k-held-next")
    _assert_lost(lost.response["error"], delay)
    assert complete_text(fresh) == '{"action": "accept", "content": {"answer": "ok"}}'
    assert journal.pids("k-held-next").isdisjoint({pid})


async def test_upstream_killed_while_attached(http_bridge: PeerProcess, state_dir: Path) -> None:
    """Killing the process of an attached call fails that request promptly with a clear bridge
    error; the next call runs on a fresh process."""
    journal = Journal(state_dir)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, http_bridge.url)
        attached = asyncio.create_task(
            call_tool(post, "slow", {"tag": "k-attached", "seconds": 30})
        )
        await journal.wait_for("k-attached", "call")
        (pid,) = journal.pids("k-attached")
        os.kill(pid, signal.SIGKILL)
        started = time.monotonic()
        lost = await attached
        delay = time.monotonic() - started
        fresh = await _fresh_call(post, "k-attached-next")
    _assert_lost(lost.response["error"], delay)
    assert complete_text(fresh) == '{"action": "accept", "content": {"answer": "ok"}}'
    assert journal.pids("k-attached-next").isdisjoint({pid})


async def _fresh_call(post: ModernPoster, tag: str) -> RawReply:
    """A complete interactive call (one round) for `tag`."""
    (key,), state = input_required(await call_tool(post, "ask", {"tag": tag}))
    return await call_tool(
        post, "ask", {"tag": tag}, responses={key: accept(answer="ok")}, state=state
    )


def _assert_lost(error: dict[str, Any], delay_s: float) -> None:
    """A lost upstream process: a bridge-marked error naming the exit, well before any timeout."""
    assert delay_s < PROMPT_FAILURE_S
    assert error["data"]["source"] == BRIDGE_MARKER
    assert "exited" in error["message"] and "SIGKILL" in error["message"]
