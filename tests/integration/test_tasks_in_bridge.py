"""`tasks.run_in_bridge`: a client that did not declare the Tasks extension calls a tool that runs
only as a legacy task, and the bridge runs the task itself, answering with ordinary MRTR rounds
and the final result (issue 26 part 2; docs/tasks.md). Driven by the real mcp 2.x client, which
does not speak the extension, against the real server-everything 2026.8.31 over HTTP and stdio.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from translators.wire.errors import INVALID_REQUEST_STATE_MESSAGE

from .harness import InputAnswers, PeerProcess, Peers, modern_client
from .tasks_helpers import PLAIN_CAPS, RESEARCH, caller, error_of, everything_bridge, result_of

T = 90  # bound on every test body, seconds


@pytest.fixture(scope="module", params=["http", "stdio"])
def bridge(request: pytest.FixtureRequest, module_peers: Peers) -> Iterator[PeerProcess]:
    yield everything_bridge(module_peers, request.param, tasks={"run_in_bridge": True})


def elicitations(answers: InputAnswers) -> list[Any]:
    """What the client was asked to elicit (the bridge's own roots question aside)."""
    return [params for method, params in answers.asked if method == "elicitation/create"]


def report(result: object) -> str:
    (block,) = result.content  # type: ignore[attr-defined]
    text: str = block.text
    return text


async def test_the_real_client_gets_the_report_of_a_plain_task(bridge: PeerProcess) -> None:
    answers = InputAnswers()
    async with (
        asyncio.timeout(T),
        modern_client(bridge.url, **answers.client_kwargs()) as client,
    ):
        result = await client.call_tool(RESEARCH, {"topic": "tides"})
        assert report(result).startswith("# Research Report: tides\n")
        assert result.is_error is False
        assert elicitations(answers) == []


async def test_the_tasks_question_is_an_ordinary_round(bridge: PeerProcess) -> None:
    answers = InputAnswers(elicit_content={"interpretation": "snake"})
    async with (
        asyncio.timeout(T),
        modern_client(bridge.url, **answers.client_kwargs()) as client,
    ):
        result = await client.call_tool(RESEARCH, {"topic": "python", "ambiguous": True})
        assert report(result).startswith("# Research Report: python (snake)\n")
        (params,) = elicitations(answers)
        assert "python" in params.message


async def test_the_round_state_is_bound_to_the_caller(bridge: PeerProcess) -> None:
    """The `requestState` of an in-bridge task is refused to another principal, like a task id,
    and its owner's retry still completes the task."""
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, bridge.url, "alice", caps=PLAIN_CAPS)
        mallory = caller(http, bridge.url, "mallory", caps=PLAIN_CAPS)
        call = {"name": RESEARCH, "arguments": {"topic": "owls", "ambiguous": True}}
        asked = result_of(await alice.post("tools/call", call))
        assert asked["resultType"] == "input_required"
        ((key, request),) = asked["inputRequests"].items()
        assert request["method"] == "elicitation/create"
        answer = {"action": "accept", "content": {"interpretation": "historical"}}
        retry = {**call, "requestState": asked["requestState"], "inputResponses": {key: answer}}
        assert error_of(await mallory.post("tools/call", retry)) == {
            "code": -32602,
            "message": "Task not found",
        }
        done = result_of(await alice.post("tools/call", retry))
        assert done["resultType"] == "complete"
        assert done["content"][0]["text"].startswith("# Research Report: owls (historical)\n")


async def test_the_round_state_is_bound_to_its_request(bridge: PeerProcess) -> None:
    """The round's `requestState` (the task id) sent with another tool, other arguments, a
    `prompts/get` or a `resources/read` gets the invalid-requestState error, as any state bound to
    another request does, and answers nothing; the rightful retry then completes the task."""
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, bridge.url, "alice", caps=PLAIN_CAPS)
        call = {"name": RESEARCH, "arguments": {"topic": "owls", "ambiguous": True}}
        asked = result_of(await alice.post("tools/call", call))
        ((key, _),) = asked["inputRequests"].items()
        answer = {"action": "accept", "content": {"interpretation": "historical"}}
        state = {"requestState": asked["requestState"], "inputResponses": {key: answer}}
        for method, params in [
            ("tools/call", {"name": "echo", "arguments": {"message": "hi"}}),
            ("tools/call", {"name": RESEARCH, "arguments": {"topic": "cats", "ambiguous": True}}),
            ("prompts/get", {"name": "simple-prompt"}),
            ("resources/read", {"uri": "demo://resource/dynamic/text/1"}),
        ]:
            assert error_of(await alice.post(method, {**params, **state})) == {
                "code": -32602,
                "message": INVALID_REQUEST_STATE_MESSAGE,
            }, method
        done = result_of(await alice.post("tools/call", {**call, **state}))
        assert done["resultType"] == "complete"
        assert done["content"][0]["text"].startswith("# Research Report: owls (historical)\n")
