"""No state-only rounds, with the real `mcp` 2.x client: a retry whose answer resumes the call is
held open until the legacy server asks its next question, even when that takes longer than the
batching ceiling (docs/decisions.md § 19). The client backs off and spends a round on an
`InputRequiredResult` without `inputRequests`; the bridge never sends one."""

from __future__ import annotations

import asyncio
import time

import mcp_types as types
import pytest

from .harness import Peers, bridge_env, modern_client
from .mrtr_helpers import (
    Answerer,
    Interactive,
    ManualRounds,
    echo_answer,
    elicited,
    start_interactive,
    text_of,
)

T = 30  # bound on every test body, seconds
CEILING_MS = 20  # held.batch_quiet_ms and batch_max_ms on this bridge
PAUSE_S = 0.3  # the server's thought between its two questions: 15 ceilings
QUESTIONS = ((1, "what is your name?"), (2, "what is your favorite color?"))


@pytest.fixture(scope="module")
def server(module_peers: Peers, tmp_path_factory: pytest.TempPathFactory) -> Interactive:
    env = bridge_env({"held": {"batch_quiet_ms": CEILING_MS, "batch_max_ms": CEILING_MS}})
    return start_interactive(module_peers, tmp_path_factory.mktemp("interactive"), env=env)


async def test_a_slow_next_question_is_the_retry_s_answer_not_an_empty_round(
    server: Interactive,
) -> None:
    arguments = {"tag": "slow", "pause_s": PAUSE_S}
    answers = Answerer()  # declares elicitation; never called in manual rounds
    async with asyncio.timeout(T), modern_client(server.url, **answers.client_kwargs()) as client:
        manual = ManualRounds(client)
        first = await manual.call("ask_twice", arguments)
        assert isinstance(first, types.InputRequiredResult) and first.input_requests
        (name,) = first.input_requests
        started = time.monotonic()
        second = await manual.call(
            "ask_twice",
            arguments,
            state=first.request_state,
            responses={name: elicited(name="Ada")},
        )
        waited = time.monotonic() - started
        assert isinstance(second, types.InputRequiredResult) and second.input_requests
        ((colour, request),) = second.input_requests.items()
        assert isinstance(request.params, types.ElicitRequestFormParams)
        assert request.params.message == "Step 2: what is your favorite color?"
        assert waited >= PAUSE_S  # the retry was held while the server thought
        final = await manual.call(
            "ask_twice",
            arguments,
            state=second.request_state,
            responses={colour: elicited(color="red")},
        )
    assert isinstance(final, types.CallToolResult)
    assert text_of(final) == "Ada likes red."
    assert server.journal.events("slow")[:1] == ["call"]


async def test_the_automatic_loop_answers_each_question_once(server: Interactive) -> None:
    answers = Answerer()
    arguments = {"tag": "slow-auto", "pause_s": PAUSE_S}
    async with asyncio.timeout(T), modern_client(server.url, **answers.client_kwargs()) as client:
        result = await client.call_tool("ask_twice", arguments)
    name, colour = (echo_answer(f"Step {n}: {q}") for n, q in QUESTIONS)
    assert text_of(result) == f"{name} likes {colour}."
    assert len(answers.asked) == 2  # two questions, two rounds: none spent on an empty one
