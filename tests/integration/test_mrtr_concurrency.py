"""Attribution under load: 40 concurrent interactive calls through the bridge, answered in shuffled
order, each getting its own answers (the interactive mcp 1.x server's `ask` elicits with the call's
own question, and every answer echoes the question it was given, so a crossed push or answer shows
in the result).
"""

from __future__ import annotations

import asyncio
import json
import random

import aiohttp
import pytest

from .harness import ModernPoster, Peers, RawReply, modern_client
from .mrtr_helpers import (
    Answerer,
    Interactive,
    accept,
    call_tool,
    complete_text,
    echo_answer,
    input_required,
    json_of,
    poster,
    start_interactive,
)

CALLS = 40
T = 60  # bound on every test body, seconds


@pytest.fixture(scope="module")
def server(module_peers: Peers, tmp_path_factory: pytest.TempPathFactory) -> Interactive:
    """The interactive server behind the bridge, shared by this module."""
    return start_interactive(module_peers, tmp_path_factory.mktemp("interactive"))


def _question(n: int) -> str:
    return f"Question number {n}?"


async def _answer(post: ModernPoster, n: int, first: RawReply, delay_s: float) -> RawReply:
    """Retry call `n` after `delay_s`, answering the question its own InputRequiredResult asked."""
    requests, state = input_required(first)
    ((key, request),) = requests.items()
    await asyncio.sleep(delay_s)
    content = {"answer": echo_answer(request["params"]["message"])}
    return await call_tool(
        post,
        "ask",
        {"tag": f"raw-{n}", "question": _question(n)},
        responses={key: {"action": "accept", "content": content}},
        state=state,
    )


async def test_forty_concurrent_calls_answered_in_shuffled_order(server: Interactive) -> None:
    """40 concurrent raw calls each get an InputRequiredResult for their own push and, answered
    in shuffled order, each completes with its own answer (and the server saw each answer on the
    right call)."""
    order = list(range(CALLS))
    random.Random(2026).shuffle(order)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, server.url)
        firsts = await asyncio.gather(
            *(
                call_tool(post, "ask", {"tag": f"raw-{n}", "question": _question(n)})
                for n in range(CALLS)
            )
        )
        for n, first in enumerate(firsts):
            requests, _ = input_required(first)
            assert [r["params"]["message"] for r in requests.values()] == [_question(n)]
        states = [input_required(first)[1] for first in firsts]
        assert len(set(states)) == CALLS
        finals = await asyncio.gather(
            *(
                _answer(post, n, firsts[n], delay_s=0.003 * position)
                for position, n in enumerate(order)
            )
        )
    for position, n in enumerate(order):
        expected = {"action": "accept", "content": {"answer": echo_answer(_question(n))}}
        assert json.loads(complete_text(finals[position])) == expected
        assert server.journal.answers(f"raw-{n}") == [accept(answer=echo_answer(_question(n)))]


async def test_forty_concurrent_calls_through_the_automatic_loop(server: Interactive) -> None:
    """40 concurrent `call_tool`s on one client, its callbacks answering after random delays, never
    cross."""
    jitter = random.Random(7)
    answers = Answerer(jitter=lambda: jitter.uniform(0, 0.05))
    async with asyncio.timeout(T), modern_client(server.url, **answers.client_kwargs()) as client:
        results = await asyncio.gather(
            *(
                client.call_tool("ask", {"tag": f"auto-{n}", "question": _question(n)})
                for n in range(CALLS)
            )
        )
    for n, result in enumerate(results):
        assert json_of(result) == {
            "action": "accept",
            "content": {"answer": echo_answer(_question(n))},
        }
        assert server.journal.answers(f"auto-{n}") == [accept(answer=echo_answer(_question(n)))]
    assert len(answers.asked) == CALLS
