"""Long plain legacy calls as bridge-owned tasks (`tasks.long_calls_after_s`; issue 26 part 4;
docs/tasks.md § Long calls), with the real interactive legacy server (mcp 1.x, no task support at
all) over Streamable HTTP and its journal as the ground truth of what reached it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import aiohttp
import pytest

from translators.tasks_ext.messages import EXTENSION

from .harness import Peers, bridge_env
from .mrtr_helpers import INTERACTIVE, Interactive, Journal, start_interactive
from .tasks_helpers import PLAIN_CAPS, caller, poll_until, result_of

T = 60
AFTER_S = 0.5  # a call still running after this is answered with a task


@pytest.fixture(scope="module")
def interactive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Interactive]:
    peers = Peers(log_dir=tmp_path_factory.mktemp("long-calls-peers"))
    try:
        env = bridge_env({"tasks": {"long_calls_after_s": AFTER_S}})
        yield start_interactive(peers, tmp_path_factory.mktemp("long-calls-state"), env=env)
    finally:
        peers.close()


def call(tool: str, **arguments: object) -> dict[str, object]:
    return {"name": tool, "arguments": arguments}


def text_of(result: dict[str, object]) -> str:
    (block,) = result["content"]  # type: ignore[misc]
    assert block["type"] == "text", block
    text: str = block["text"]
    return text


async def test_discover_advertises_the_extension_for_a_server_without_tasks(
    interactive: Interactive,
) -> None:
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        discovered = result_of(await caller(http, interactive.url).post("server/discover"))
        assert discovered["capabilities"]["extensions"] == {EXTENSION: {}}


async def test_a_quick_call_is_answered_as_usual(interactive: Interactive) -> None:
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        reply = result_of(
            await caller(http, interactive.url).post("tools/call", call("echo", text="hi"))
        )
        assert reply["resultType"] == "complete" and text_of(reply) == "hi"


async def test_a_long_call_becomes_a_task_that_resolves_at_once_and_completes(
    interactive: Interactive,
) -> None:
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, interactive.url)
        created = result_of(await alice.post("tools/call", call("slow", tag="long1", seconds=2)))
        assert created["resultType"] == "task" and created["status"] == "working", created
        first = result_of(await alice.post("tasks/get", {"taskId": created["taskId"]}))
        assert first["status"] == "working"  # resolves at once: registered before the answer
        done = (await poll_until(alice, created["taskId"], "completed", "failed", "cancelled"))[-1]
        assert done["status"] == "completed", done
        assert text_of(done["result"]) == "slept"
        assert interactive.journal.events("long1") == ["call"]  # ran once, not cancelled


async def test_a_client_without_the_extension_waits_for_the_plain_result(
    interactive: Interactive,
) -> None:
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        plain = caller(http, interactive.url, caps=PLAIN_CAPS)
        reply = result_of(await plain.post("tools/call", call("slow", tag="long2", seconds=1.5)))
        assert reply["resultType"] == "complete" and text_of(reply) == "slept"


async def test_a_question_after_the_call_became_a_task_is_answered_by_tasks_update(
    interactive: Interactive,
) -> None:
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, interactive.url)
        arguments = {"tag": "long3", "question": "Tide or moon?", "delay_s": 1.5}
        created = result_of(await alice.post("tools/call", call("ask", **arguments)))
        assert created["resultType"] == "task", created
        task_id = created["taskId"]
        asking = (await poll_until(alice, task_id, "input_required", "completed", "failed"))[-1]
        assert asking["status"] == "input_required", asking
        ((key, asked),) = asking["inputRequests"].items()
        assert asked["method"] == "elicitation/create"
        assert asked["params"]["message"] == "Tide or moon?"
        assert "requestState" not in json.dumps(asking)  # the held call's state stays inside
        answer = {"action": "accept", "content": {"answer": "moon"}}
        update = {"taskId": task_id, "inputResponses": {key: answer}}
        assert result_of(await alice.post("tasks/update", update)) == {"resultType": "complete"}
        # the same answer again: acknowledged, never applied twice
        assert result_of(await alice.post("tasks/update", update)) == {"resultType": "complete"}
        done = (await poll_until(alice, task_id, "completed", "failed", "cancelled"))[-1]
        assert done["status"] == "completed", done
        assert json.loads(text_of(done["result"])) == answer
        assert interactive.journal.answers("long3") == [answer]


@pytest.mark.parametrize("while_", ["running", "asking"])
async def test_cancel_reaches_the_legacy_server(interactive: Interactive, while_: str) -> None:
    tag = f"long-cancel-{while_}"
    arguments = (
        {"tag": tag, "seconds": 30}
        if while_ == "running"
        else {"tag": tag, "question": "Still there?", "delay_s": 1.0, "linger_s": 30}
    )
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, interactive.url)
        tool = "slow" if while_ == "running" else "ask"
        task_id = result_of(await alice.post("tools/call", call(tool, **arguments)))["taskId"]
        if while_ == "asking":
            asking = (await poll_until(alice, task_id, "input_required", "failed"))[-1]
            assert asking["status"] == "input_required", asking
        ack = result_of(await alice.post("tasks/cancel", {"taskId": task_id}))
        assert ack == {"resultType": "complete"}
        got = result_of(await alice.post("tasks/get", {"taskId": task_id}))
        assert got["status"] == "cancelled"
        await interactive.journal.wait_for(tag, "cancel_notification")


async def test_another_principal_finds_nothing(interactive: Interactive) -> None:
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice, mallory = caller(http, interactive.url), caller(http, interactive.url, "mallory")
        created = result_of(await alice.post("tools/call", call("slow", tag="long4", seconds=1)))
        reply = await mallory.post("tasks/get", {"taskId": created["taskId"]})
        assert reply.response["error"] == {"code": -32602, "message": "Task not found"}


async def test_over_stdio_a_long_call_asks_through_its_task_and_completes(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The same over a stdio upstream: nothing in a bridge-owned task depends on the transport."""
    peers = Peers(log_dir=tmp_path_factory.mktemp("long-calls-stdio"))
    state = tmp_path_factory.mktemp("long-calls-stdio-state")
    try:
        env = bridge_env({"tasks": {"long_calls_after_s": AFTER_S}})
        bridge = peers.bridge_stdio(INTERACTIVE, "--state-dir", str(state), env=env)
        async with asyncio.timeout(T), aiohttp.ClientSession() as http:
            alice = caller(http, bridge.url)
            arguments = {"tag": "stdio1", "question": "Left or right?", "delay_s": 1.5}
            created = result_of(await alice.post("tools/call", call("ask", **arguments)))
            assert created["resultType"] == "task", created
            task_id = created["taskId"]
            asking = (await poll_until(alice, task_id, "input_required", "failed"))[-1]
            assert asking["status"] == "input_required", asking
            ((key, _),) = asking["inputRequests"].items()
            answer = {"action": "accept", "content": {"answer": "left"}}
            update = {"taskId": task_id, "inputResponses": {key: answer}}
            assert result_of(await alice.post("tasks/update", update)) == {"resultType": "complete"}
            done = (await poll_until(alice, task_id, "completed", "failed", "cancelled"))[-1]
            assert done["status"] == "completed", done
            assert json.loads(text_of(done["result"])) == answer
            assert Journal(state).answers("stdio1") == [answer]
    finally:
        peers.close()


async def test_at_the_task_cap_a_long_call_stays_a_plain_call(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """`tasks.max_per_principal = 1`: a second long call while the first task runs is answered
    with its plain result, not refused."""
    peers = Peers(log_dir=tmp_path_factory.mktemp("long-calls-cap"))
    try:
        settings = {"tasks": {"long_calls_after_s": AFTER_S, "max_per_principal": 1}}
        bridged = start_interactive(
            peers, tmp_path_factory.mktemp("long-calls-cap-state"), env=bridge_env(settings)
        )
        async with asyncio.timeout(T), aiohttp.ClientSession() as http:
            alice = caller(http, bridged.url)
            first = result_of(await alice.post("tools/call", call("slow", tag="cap1", seconds=5)))
            assert first["resultType"] == "task", first
            plain = call("slow", tag="cap2", seconds=1.5)
            second = result_of(await alice.post("tools/call", plain))
            assert second["resultType"] == "complete" and text_of(second) == "slept", second
    finally:
        peers.close()
