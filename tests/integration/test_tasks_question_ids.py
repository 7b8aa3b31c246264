"""Two questions a legacy task asks at once (the conformance fixture's `multi_input`, run as a
task by the `mcp` 1.x SDK, tests/peers/legacy_task_tools.py), with each its own id and with the
SDK's defect forced (both with one id; docs/tasks.md, "Conformance")."""

from __future__ import annotations

import asyncio

import aiohttp

from .harness import Peers
from .mrtr_helpers import accept
from .tasks_helpers import caller, get, poll_until, result_of

T = 90  # bound on every test body, seconds
ACK = {"resultType": "complete"}


async def test_two_questions_at_once_are_both_shown_and_answered(peers: Peers) -> None:
    legacy = peers.legacy("legacy_fixture_server.py", "--task-tools")
    bridge = peers.bridge(legacy.url)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, bridge.url)
        task_id = result_of(
            await alice.post("tools/call", {"name": "multi_input", "arguments": {}})
        )["taskId"]
        async with asyncio.timeout(30):
            while len((task := await get(alice, task_id)).get("inputRequests", {})) < 2:
                assert task["status"] in ("working", "input_required"), task
                await asyncio.sleep(0.1)
        answers = {}
        for key, request in task["inputRequests"].items():
            schema = request["params"]["requestedSchema"]["properties"]
            answers[key] = accept(name="Ada") if "name" in schema else accept(confirm=True)
        update = {"taskId": task_id, "inputResponses": answers}
        assert result_of(await alice.post("tasks/update", update)) == ACK
        done = (await poll_until(alice, task_id, "completed", "failed", "cancelled"))[-1]
        assert done["status"] == "completed", done
        assert done["result"]["content"] == [{"type": "text", "text": "name=Ada confirm=True"}]


async def test_a_question_reusing_a_pending_id_is_refused_and_the_task_ends(peers: Peers) -> None:
    """The second push with the id of the first, still unanswered, is refused upstream (the first
    stays shown); the SDK then fails the task, which the client sees end instead of hanging."""
    legacy = peers.legacy("legacy_fixture_server.py", "--task-tools", "--one-task-question-id")
    bridge = peers.bridge(legacy.url)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, bridge.url)
        task_id = result_of(
            await alice.post("tools/call", {"name": "multi_input", "arguments": {}})
        )["taskId"]
        seen = await poll_until(alice, task_id, "completed", "failed", "cancelled")
        assert all(len(t.get("inputRequests", {})) <= 1 for t in seen), seen
        assert seen[-1]["status"] == "failed", seen[-1]
