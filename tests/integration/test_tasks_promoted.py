"""Long plain legacy calls turned into tasks the bridge owns (`tasks.promote_after_ms`;
docs/tasks.md "Long plain calls as tasks"), with the real `mcp` 1.x interactive server
(tests/peers/interactive_server.py, no task support at all) over Streamable HTTP and stdio, driven
by raw modern requests that declare the Tasks extension, and its journal as the upstream's word.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from proxy.auth.keys import new_key
from translators.wire.errors import INVALID_PARAMS

from .harness import Peers, bridge_env
from .mrtr_helpers import (
    Interactive,
    Journal,
    accept,
    call_tool,
    complete_text,
    input_required,
    interactive_stdio_command,
    start_interactive,
)
from .tasks_helpers import PLAIN_CAPS, caller, error_of, get, poll_until, result_of

T = 90  # bound on every test body, seconds
PROMOTE_MS = 500  # the calls below work >= 1.5 s before they could answer: always promoted
NOT_FOUND = {"code": INVALID_PARAMS, "message": "Task not found"}
ACK = {"resultType": "complete"}


def promoting(peers: Peers, state_dir: Path, **settings: object) -> Interactive:
    tasks = {"promote_after_ms": PROMOTE_MS, **settings}
    return start_interactive(peers, state_dir, env=bridge_env({"tasks": tasks}))


def task_text(task: dict[str, object]) -> str:
    result = task["result"]
    assert isinstance(result, dict), task
    (block,) = result["content"]
    text: str = block["text"]
    return text


async def test_a_long_call_becomes_a_task_its_question_answered_once(
    peers: Peers, tmp_path: Path
) -> None:
    """Created after the threshold and resolvable at once; a push after promotion is
    `input_required`, `tasks/update` answers it (a bad answer is refused and consumes nothing, a
    repeated update changes nothing upstream), and the call's result is the task's."""
    side = promoting(peers, tmp_path)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, side.bridge.url)
        args = {"tag": "p1", "before_s": 1.5, "after_s": 0.0}
        created = result_of(await call_tool(alice, "slow_ask", args))
        assert created["resultType"] == "task" and created["status"] == "working", created
        assert set(created) == {
            "resultType",
            "taskId",
            "status",
            "createdAt",
            "lastUpdatedAt",
            "ttlMs",
            "pollIntervalMs",
        }
        task_id = created["taskId"]
        first = await get(alice, task_id)  # registered before the answer went out
        assert first["resultType"] == "complete" and first["status"] in (
            "working",
            "input_required",
        )
        asking = (await poll_until(alice, task_id, "input_required", "completed"))[-1]
        assert asking["status"] == "input_required", asking
        (key,) = asking["inputRequests"]
        assert asking["inputRequests"][key]["method"] == "elicitation/create"
        bad = {"taskId": task_id, "inputResponses": {key: {"action": "maybe"}}}
        assert error_of(await alice.post("tasks/update", bad))["code"] == INVALID_PARAMS
        assert (await get(alice, task_id))["inputRequests"] == asking["inputRequests"]
        update = {"taskId": task_id, "inputResponses": {key: accept(answer="forty-two")}}
        assert result_of(await alice.post("tasks/update", update)) == ACK
        assert result_of(await alice.post("tasks/update", update)) == ACK  # already answered
        done = (await poll_until(alice, task_id, "completed", "failed", "cancelled"))[-1]
        assert done["status"] == "completed", done
        assert task_text(done) == "answer: forty-two"
        answers = side.journal.answers("p1")
        assert answers == [{"action": "accept", "content": {"answer": "forty-two"}}]


async def test_the_same_question_again_gets_a_fresh_key(peers: Peers, tmp_path: Path) -> None:
    """Input keys are never reused in a task's life: the server's second, identical question is
    a new key, and an update naming the old one is ignored."""
    side = promoting(peers, tmp_path)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, side.bridge.url)
        args = {"tag": "k1", "before_s": 1.5, "times": 2}
        task_id = result_of(await call_tool(alice, "slow_ask", args))["taskId"]
        keys: list[str] = []
        for answer in ("one", "two"):
            asking = (await poll_until(alice, task_id, "input_required"))[-1]
            (key,) = asking["inputRequests"]
            assert key not in keys, asking
            if keys:  # the first key again: already answered, ignored
                stale = {"taskId": task_id, "inputResponses": {keys[0]: accept(answer="x")}}
                assert result_of(await alice.post("tasks/update", stale)) == ACK
                assert (await get(alice, task_id))["inputRequests"] == asking["inputRequests"]
            keys.append(key)
            update = {"taskId": task_id, "inputResponses": {key: accept(answer=answer)}}
            assert result_of(await alice.post("tasks/update", update)) == ACK
        done = (await poll_until(alice, task_id, "completed", "failed", "cancelled"))[-1]
        assert task_text(done) == "answer: one, two"


async def test_a_fast_call_is_never_promoted(peers: Peers, tmp_path: Path) -> None:
    """With the default threshold (5 s) an ordinary call is answered as it always was."""
    side = start_interactive(peers, tmp_path)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        reply = await call_tool(caller(http, side.bridge.url), "echo", {"text": "hi"})
        assert complete_text(reply) == "hi"
        assert "taskId" not in reply.response["result"]


async def test_a_client_without_the_extension_is_never_promoted(
    peers: Peers, tmp_path: Path
) -> None:
    side = promoting(peers, tmp_path)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        plain = caller(http, side.bridge.url, caps=PLAIN_CAPS)
        reply = await call_tool(plain, "slow", {"tag": "u1", "seconds": 1.5})
        assert complete_text(reply) == "slept"


async def test_cancel_reaches_upstream_and_other_principals_are_refused(
    peers: Peers, tmp_path: Path
) -> None:
    side = promoting(peers, tmp_path)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice, bob = caller(http, side.bridge.url), caller(http, side.bridge.url, "bob")
        created = result_of(await call_tool(alice, "slow", {"tag": "c1", "seconds": 60}))
        task_id = created["taskId"]
        for method, extra in (
            ("tasks/get", {}),
            ("tasks/update", {"inputResponses": {}}),
            ("tasks/cancel", {}),
        ):
            refused = await bob.post(method, {"taskId": task_id, **extra})
            assert error_of(refused) == NOT_FOUND, method
        assert (await get(alice, task_id))["status"] == "working"  # bob's cancel did nothing
        assert result_of(await alice.post("tasks/cancel", {"taskId": task_id})) == ACK
        await side.journal.wait_for("c1", "cancel_notification")
        assert (await get(alice, task_id))["status"] == "cancelled"


async def test_an_mrtr_round_then_a_task(peers: Peers, tmp_path: Path) -> None:
    """A question before the threshold is an ordinary MRTR round; the retry that then works on
    becomes the task, whose result carries the round's answer (tasks-mrtr-composition)."""
    side = promoting(peers, tmp_path)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, side.bridge.url)
        args = {"tag": "m1", "before_s": 0.0, "after_s": 1.5}
        requests, state = input_required(await call_tool(alice, "slow_ask", args))
        (key,) = requests
        retry = await call_tool(
            alice, "slow_ask", args, responses={key: accept(answer="Alice")}, state=state
        )
        created = result_of(retry)
        assert created["resultType"] == "task" and "requestState" not in created, created
        done = (await poll_until(alice, created["taskId"], "completed", "failed"))[-1]
        assert task_text(done) == "answer: Alice"


async def test_a_restart_loses_the_task(peers: Peers, tmp_path: Path) -> None:
    """The task lives in the process that runs the call: a new process with the same keys
    answers its id with -32602, as for any unknown task."""
    kid, key = new_key()
    env = bridge_env({"tasks": {"promote_after_ms": PROMOTE_MS}, "held": {"keys": {kid: key}}})
    legacy = peers.legacy("interactive_server.py", "--state-dir", str(tmp_path))
    first = peers.bridge(legacy.url, env=env)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        created = result_of(
            await call_tool(caller(http, first.url), "slow", {"tag": "r1", "seconds": 60})
        )
        first.stop()
        second = peers.bridge(legacy.url, env=env)
        lost = await caller(http, second.url).post("tasks/get", {"taskId": created["taskId"]})
        assert error_of(lost) == NOT_FOUND


async def test_over_stdio_a_long_call_becomes_a_task(peers: Peers, tmp_path: Path) -> None:
    env = bridge_env(
        {
            "upstream": {"command": interactive_stdio_command(tmp_path)},
            "tasks": {"promote_after_ms": PROMOTE_MS},
        }
    )
    bridge = peers.bridge(None, env=env)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, bridge.url)
        args = {"tag": "s1", "before_s": 1.5, "after_s": 0.0}
        task_id = result_of(await call_tool(alice, "slow_ask", args))["taskId"]
        asking = (await poll_until(alice, task_id, "input_required", "completed"))[-1]
        (key,) = asking["inputRequests"]
        update = {"taskId": task_id, "inputResponses": {key: accept(answer="stdio")}}
        assert result_of(await alice.post("tasks/update", update)) == ACK
        done = (await poll_until(alice, task_id, "completed", "failed", "cancelled"))[-1]
        assert task_text(done) == "answer: stdio"
        assert Journal(tmp_path).answers("s1") == [
            {"action": "accept", "content": {"answer": "stdio"}}
        ]
