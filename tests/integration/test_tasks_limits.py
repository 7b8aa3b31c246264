"""Hostile use of tasks (issue 40, defects 5-7; docs/tasks.md § Caps, § Task ids): creations at
once stop exactly at the caps, a creation given up gives its place back, one principal's finished
tasks never refuse another's, the bridge's own tasks go through the same caps, and a task id is no
`requestState` for any other request. With the legacy conformance fixture's task tools
(tests/peers/legacy_task_tools.py, run as legacy tasks by the `mcp` 1.x SDK) and the `mcp` 1.x
interactive server (promoted calls), over Streamable HTTP.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from translators.wire.errors import (
    BRIDGE_MARKER,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST_STATE_MESSAGE,
)
from translators.wire.jsonrpc import JsonObject

from .harness import PeerProcess, Peers, bridge_env, upstream_status
from .mrtr_helpers import call_tool, complete_text, start_interactive
from .raw_http import RawReply
from .tasks_helpers import PLAIN_CAPS, caller, error_of, get, poll_until, result_of

T = 90  # bound on every test body, seconds
LONG = {"name": "slow_compute", "arguments": {"seconds": 60, "label": "long"}}
QUICK = {"name": "slow_compute", "arguments": {"seconds": 0, "label": "quick"}}
NOT_FOUND = {"code": INVALID_PARAMS, "message": "Task not found"}
ACK = {"resultType": "complete"}
BAD_STATE = {"code": INVALID_PARAMS, "message": INVALID_REQUEST_STATE_MESSAGE}
PER_PRINCIPAL = "Too many running tasks for this caller"
TOTAL = "Too many running tasks on this server; try again later"


def task_bridge(peers: Peers, **tasks: object) -> PeerProcess:
    legacy = peers.legacy("legacy_fixture_server.py", "--task-tools")
    return peers.bridge(legacy.url, env=bridge_env({"tasks": tasks}))


def cap_error(message: str, limit: str) -> JsonObject:
    return {
        "code": INTERNAL_ERROR,
        "message": message,
        "data": {"source": BRIDGE_MARKER, "limit": limit},
    }


async def pinned_sessions(http: aiohttp.ClientSession, bridge: PeerProcess) -> int:
    """The upstream sessions held by an exclusive lease, as `/status.json` shows them."""
    upstream = await upstream_status(http, bridge)
    sessions = upstream["sessions"]
    assert len(sessions) == upstream["sessions_open"]  # all listed
    return sum(session["held_by"] == "exclusive" for session in sessions)


def outcomes(replies: list[RawReply]) -> tuple[list[JsonObject], list[JsonObject]]:
    """(the tasks created, the errors), in request order."""
    created = [r.response["result"] for r in replies if "result" in r.response]
    errors = [r.response["error"] for r in replies if "error" in r.response]
    assert all(task["resultType"] == "task" for task in created), created
    return created, errors


async def test_concurrent_creations_stop_exactly_at_the_per_principal_cap(peers: Peers) -> None:
    """20 creations at once with `max_per_principal` 4: 4 tasks, 16 precise errors, 4 pinned
    sessions (before: 20 tasks)."""
    bridge = task_bridge(peers, max_per_principal=4)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, bridge.url)
        created, errors = outcomes(
            await asyncio.gather(*(alice.post("tools/call", LONG) for _ in range(20)))
        )
        assert len(created) == 4
        assert errors == [cap_error(PER_PRINCIPAL, "tasks.max_per_principal")] * 16
        assert await pinned_sessions(http, bridge) == 4
        for task in created:
            assert (await get(alice, task["taskId"]))["status"] == "working"


async def test_concurrent_creations_of_three_principals_stop_at_the_total_cap(
    peers: Peers,
) -> None:
    """Caps 16/30, three principals creating 20 each at once: exactly 30 tasks, none over 16 for
    one principal, one pinned session each (before: 60 tasks, 61 pinned sessions)."""
    bridge = task_bridge(peers, max_per_principal=16, max_total=30)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        callers = [caller(http, bridge.url, who) for who in ("alice", "bob", "carol")]
        replies = await asyncio.gather(
            *(asyncio.gather(*(c.post("tools/call", LONG) for _ in range(20))) for c in callers)
        )
        per_principal = [outcomes(list(r)) for r in replies]
        assert sum(len(created) for created, _ in per_principal) == 30
        assert all(len(created) <= 16 for created, _ in per_principal)
        allowed = [
            cap_error(PER_PRINCIPAL, "tasks.max_per_principal"),
            cap_error(TOTAL, "tasks.max_total"),
        ]
        assert all(e in allowed for _, errors in per_principal for e in errors)
        assert await pinned_sessions(http, bridge) == 30


async def test_one_principals_finished_tasks_never_refuse_another(peers: Peers) -> None:
    """`max_total` 12, `max_per_principal` 4: Alice's 12 quick tasks, all finished, leave Bob his
    task (before: "Too many tasks on this server"); Alice keeps her 4 newest results, her older
    ones answer as expired ones do."""
    bridge = task_bridge(peers, max_per_principal=4, max_total=12)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice, bob = caller(http, bridge.url, "alice"), caller(http, bridge.url, "bob")
        ids = []
        for _ in range(12):
            task_id = result_of(await alice.post("tools/call", QUICK))["taskId"]
            assert (await poll_until(alice, task_id, "completed"))[-1]["status"] == "completed"
            ids.append(task_id)
        created = result_of(await bob.post("tools/call", QUICK))
        assert created["resultType"] == "task"
        for task_id in ids[:-4]:
            assert error_of(await alice.post("tasks/get", {"taskId": task_id})) == NOT_FOUND
        for task_id in ids[-4:]:
            done = await get(alice, task_id)
            assert done["result"]["content"] == [
                {"type": "text", "text": "Computed quick after 0s"}
            ]


async def test_the_bridges_own_tasks_go_through_the_same_caps(peers: Peers, tmp_path: Path) -> None:
    """Long plain calls the bridge makes tasks (the `mcp` 1.x interactive server, no task
    support): with caps 1/1 Alice's second long call stays plain while her task runs; once it has
    finished, Bob's long call still becomes a task (before: it stayed plain) and Alice's finished
    task gives way."""
    tasks = {"promote_after_ms": 500, "max_per_principal": 1, "max_total": 1}
    side = start_interactive(peers, tmp_path, env=bridge_env({"tasks": tasks}))
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice, bob = caller(http, side.bridge.url, "alice"), caller(http, side.bridge.url, "bob")
        first = result_of(await call_tool(alice, "slow", {"tag": "a1", "seconds": 2.0}))
        assert first["resultType"] == "task", first
        assert complete_text(await call_tool(alice, "slow", {"tag": "a2", "seconds": 1.0})) == (
            "slept"
        )
        assert (await poll_until(alice, first["taskId"], "completed"))[-1]["status"] == "completed"
        created = result_of(await call_tool(bob, "slow", {"tag": "b1", "seconds": 1.0}))
        assert created["resultType"] == "task", created
        assert error_of(await alice.post("tasks/get", {"taskId": first["taskId"]})) == NOT_FOUND
        assert (await poll_until(bob, created["taskId"], "completed"))[-1]["status"] == "completed"


@pytest.mark.parametrize("caps", ["extension", "plain"])
async def test_a_task_id_is_no_request_state_of_another_request(peers: Peers, caps: str) -> None:
    """`run_in_bridge` off: a task id sent as the `requestState` of `tools/call` (another tool,
    or the task's own tool and arguments), `prompts/get` or `resources/read` of its principal gets
    the invalid-requestState error (before: the task tool's `CallToolResult`), and the task and
    the requests themselves are untouched."""
    bridge = task_bridge(peers)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, bridge.url)
        replay = alice if caps == "extension" else caller(http, bridge.url, caps=PLAIN_CAPS)
        task_id = result_of(await alice.post("tools/call", QUICK))["taskId"]
        greet = {"name": "greet", "arguments": {"name": "Ada"}}
        requests = [
            ("tools/call", greet),
            ("tools/call", QUICK),
            ("prompts/get", {"name": "test_simple_prompt"}),
            ("resources/read", {"uri": "test://static-text"}),
        ]
        state = {"requestState": task_id, "inputResponses": {}}
        for method, params in requests:
            assert error_of(await replay.post(method, {**params, **state})) == BAD_STATE, method
        done = (await poll_until(alice, task_id, "completed"))[-1]
        assert done["result"]["content"] == [{"type": "text", "text": "Computed quick after 0s"}]
        greeted = result_of(await replay.post("tools/call", greet))
        assert greeted["content"] == [{"type": "text", "text": "Hello, Ada!"}]


async def test_a_creation_the_client_gives_up_gives_its_place_back(peers: Peers) -> None:
    """`max_per_principal` 2 and two upstream sessions in all, both pinned by Bob's tasks: Alice's
    two creations wait for a session and their clients go away, which gives their places back;
    once Bob's tasks are cancelled, Alice's next creations make two tasks and a third is
    refused."""
    legacy = peers.legacy("legacy_fixture_server.py", "--task-tools")
    settings = {"tasks": {"max_per_principal": 2}, "upstream": {"max_sessions": 2}}
    bridge = peers.bridge(legacy.url, env=bridge_env(settings))
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice, bob = caller(http, bridge.url, "alice"), caller(http, bridge.url, "bob")
        bobs = [result_of(await bob.post("tools/call", LONG))["taskId"] for _ in range(2)]
        assert await pinned_sessions(http, bridge) == 2
        for _ in range(2):
            with pytest.raises(TimeoutError):
                await alice.post("tools/call", LONG, timeout=1.0)
        for task_id in bobs:
            assert result_of(await bob.post("tasks/cancel", {"taskId": task_id})) == ACK
        created, errors = outcomes(
            await asyncio.gather(*(alice.post("tools/call", LONG) for _ in range(3)))
        )
        assert len(created) == 2
        assert errors == [cap_error(PER_PRINCIPAL, "tasks.max_per_principal")]
