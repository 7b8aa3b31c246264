"""Failure paths of a legacy task behind the Tasks extension, as a user meets them, with the real
server-everything 2026.8.31 over Streamable HTTP (issue 26 part 3; docs/tasks.md "What survives
what"): a bridge restart (the task completes through the new process, also when it waited for
input), a task past its `ttlMs`, and the creation answer lost (the client retries the call).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from datetime import datetime

import aiohttp
import pytest

from proxy.auth.keys import new_key
from translators.wire.errors import INVALID_PARAMS

from .cluster_helpers import start_replica
from .harness import PeerProcess, Peers, bridge_env, free_port
from .tasks_helpers import (
    caller,
    create,
    error_of,
    everything_bridge,
    node_everything,
    poll_until,
    report_text,
    result_of,
)

T = 90  # bound on every test body, seconds
NOT_FOUND = {"code": INVALID_PARAMS, "message": "Task not found"}


def start_everything(peers: Peers) -> str:
    port = free_port()
    server = peers.start(
        "server-everything", [*node_everything(), "streamableHttp"], port, {"PORT": str(port)}
    )
    return f"http://127.0.0.1:{server.port}/mcp"


def keyed_env(**settings: object) -> dict[str, str]:
    """A bridge environment with one fixed `held.keys` ring, as two processes of one deployment
    share it."""
    kid, key = new_key()
    return bridge_env({"held": {"keys": {kid: key}}, **settings})


def crash(bridge: PeerProcess) -> None:
    """SIGKILL: no shutdown at all (the upstream session is neither detached nor deleted)."""
    os.killpg(bridge.popen.pid, signal.SIGKILL)
    bridge.popen.wait(timeout=10)


@pytest.mark.parametrize("stop", ["terminate", "kill"])
async def test_a_task_created_before_a_restart_completes_through_the_new_process(
    peers: Peers, stop: str
) -> None:
    upstream = start_everything(peers)
    env = keyed_env()
    first = peers.bridge(upstream, env=env)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        created = await create(caller(http, first.url), "tides")
        first.stop() if stop == "terminate" else crash(first)
        second = peers.bridge(upstream, env=env)
        alice = caller(http, second.url)
        seen = await poll_until(alice, created["taskId"], "completed", "failed", "cancelled")
        done = seen[-1]
        assert done["status"] == "completed", done
        assert done["taskId"] == created["taskId"]
        assert done["createdAt"] == created["createdAt"]  # the same task, not a new one
        assert report_text(done).startswith("# Research Report: tides\n")
        # another principal and an id sealed under other keys still find nothing there
        mallory = caller(http, second.url, "mallory")
        assert error_of(await mallory.post("tasks/get", created)) == NOT_FOUND


async def test_a_restart_while_the_task_waits_for_input_asks_again_on_the_new_process(
    peers: Peers,
) -> None:
    """The question the old process showed is replayed from the legacy `tasks/result` stream;
    answered on the new process, the task completes with that answer."""
    upstream = start_everything(peers)
    env = keyed_env()
    first = peers.bridge(upstream, env=env)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        task_id = (await create(caller(http, first.url), "python", ambiguous=True))["taskId"]
        before = await poll_until(caller(http, first.url), task_id, "input_required", "completed")
        assert before[-1]["status"] == "input_required", before[-1]
        first.stop()
        second = peers.bridge(upstream, env=env)
        alice = caller(http, second.url)
        asking = (await poll_until(alice, task_id, "input_required", "completed", "failed"))[-1]
        assert asking["status"] == "input_required", asking
        ((key, asked),) = asking["inputRequests"].items()
        assert asked == before[-1]["inputRequests"][next(iter(before[-1]["inputRequests"]))]
        choice = asked["params"]["requestedSchema"]["properties"]["interpretation"]["oneOf"][0]
        answer = {"action": "accept", "content": {"interpretation": choice["const"]}}
        update = {"taskId": task_id, "inputResponses": {key: answer}}
        assert result_of(await alice.post("tasks/update", update)) == {"resultType": "complete"}
        done = (await poll_until(alice, task_id, "completed", "failed", "cancelled"))[-1]
        assert done["status"] == "completed", done
        assert report_text(done).startswith(f"# Research Report: python ({choice['const']})\n")


async def test_when_the_owner_replica_is_lost_another_replica_adopts_the_task(
    peers: Peers,
) -> None:
    """Two replicas sharing keys: a task created on r1 is polled through r2 (forwarded to r1);
    r1 is killed; r2 cannot reach it, serves the request itself and adopts the task, which asks
    its question there and completes."""
    upstream = start_everything(peers)
    ports = [free_port(), free_port()]
    owner, other = (
        start_replica(peers, upstream, f"r{n + 1}", port, ports) for n, port in enumerate(ports)
    )
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        task_id = (await create(caller(http, owner.url), "python", ambiguous=True))["taskId"]
        alice = caller(http, other.url)
        asking = (await poll_until(alice, task_id, "input_required", "completed"))[-1]
        assert asking["status"] == "input_required", asking  # served by r1, through r2
        assert "legacy_task_adopted" not in other.log_text(limit=10_000_000)
        crash(owner)
        again = (await poll_until(alice, task_id, "input_required", "completed", "failed"))[-1]
        assert again["status"] == "input_required", again
        ((key, asked),) = again["inputRequests"].items()
        choice = asked["params"]["requestedSchema"]["properties"]["interpretation"]["oneOf"][0]
        answer = {"action": "accept", "content": {"interpretation": choice["const"]}}
        update = {"taskId": task_id, "inputResponses": {key: answer}}
        assert result_of(await alice.post("tasks/update", update)) == {"resultType": "complete"}
        done = (await poll_until(alice, task_id, "completed", "failed", "cancelled"))[-1]
        assert done["status"] == "completed", done
        assert report_text(done).startswith(f"# Research Report: python ({choice['const']})\n")
    assert "legacy_task_adopted" in other.log_text(limit=10_000_000)


async def test_after_the_legacy_server_restarted_the_old_id_is_not_found(peers: Peers) -> None:
    """The new server knows neither the session nor the task: -32602, like any unknown id, and
    the bridge goes on serving new tasks."""
    port = free_port()
    argv, env_vars = [*node_everything(), "streamableHttp"], {"PORT": str(port)}
    server = peers.start("server-everything", argv, port, env_vars)
    upstream = f"http://127.0.0.1:{port}/mcp"
    env = keyed_env()
    first = peers.bridge(upstream, env=env)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        created = await create(caller(http, first.url), "tides")
        first.stop()
        server.stop()
        peers.start("server-everything", argv, port, env_vars)
        second = peers.bridge(upstream, env=env)
        alice = caller(http, second.url)
        assert error_of(await alice.post("tasks/get", {"taskId": created["taskId"]})) == NOT_FOUND
        fresh = (await create(alice, "tides"))["taskId"]
        done = (await poll_until(alice, fresh, "completed", "failed", "cancelled"))[-1]
        assert report_text(done).startswith("# Research Report: tides\n")


async def test_a_stdio_task_does_not_survive_a_restart(peers: Peers) -> None:
    """The legacy process ends with the bridge, and the task with it (docs/tasks.md)."""
    kid, key = new_key()
    keys = {"keys": {kid: key}}
    first = everything_bridge(peers, "stdio", held=keys)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        created = await create(caller(http, first.url), "tides")
        first.stop()
        second = everything_bridge(peers, "stdio", held=keys)
        alice = caller(http, second.url)
        assert error_of(await alice.post("tasks/get", {"taskId": created["taskId"]})) == NOT_FOUND


async def test_past_its_ttl_a_task_is_not_found(peers: Peers) -> None:
    upstream = start_everything(peers)
    bridge = peers.bridge(upstream, env=bridge_env({"tasks": {"ttl_ms": 1000}}))
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, bridge.url)
        created = await create(alice, "tides")
        assert created["ttlMs"] == 1000
        await asyncio.sleep(1.5)  # past createdAt + ttlMs, however slow the machine
        assert error_of(await alice.post("tasks/get", {"taskId": created["taskId"]})) == NOT_FOUND
        cancel = await alice.post("tasks/cancel", {"taskId": created["taskId"]})
        assert error_of(cancel) == NOT_FOUND


async def test_a_result_past_its_ttl_is_not_found(peers: Peers) -> None:
    """A task that completed (result read once) is answered until `createdAt + ttlMs`, then
    -32602, like an unknown id (the legacy fixture's `slow_compute`, an mcp 1.x legacy task)."""
    legacy = peers.legacy("legacy_fixture_server.py", "--task-tools")
    bridge = peers.bridge(legacy.url, env=bridge_env({"tasks": {"ttl_ms": 4000}}))
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, bridge.url)
        call = {"name": "slow_compute", "arguments": {"seconds": 0, "label": "tide"}}
        created = result_of(await alice.post("tools/call", call))
        assert created["resultType"] == "task" and created["ttlMs"] == 4000, created
        done = (await poll_until(alice, created["taskId"], "completed", "failed"))[-1]
        assert done["status"] == "completed", done
        assert done["result"]["content"] == [{"type": "text", "text": "Computed tide after 0s"}]
        created_at = datetime.fromisoformat(created["createdAt"].replace("Z", "+00:00"))
        expiry = created_at.timestamp() + created["ttlMs"] / 1000
        await asyncio.sleep(max(0.0, expiry - time.time()) + 0.5)
        for method in ("tasks/get", "tasks/cancel"):
            reply = await alice.post(method, {"taskId": created["taskId"]})
            assert error_of(reply) == NOT_FOUND


async def test_a_lost_creation_answer_retried_makes_a_second_independent_task(
    peers: Peers,
) -> None:
    """A client that lost the CreateTaskResult and sends the call again gets a new task; both run
    to completion and each id reads its own."""
    upstream = start_everything(peers)
    bridge = peers.bridge(upstream)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, bridge.url)
        lost = await alice.post(
            "tools/call", {"name": "simulate-research-query", "arguments": {"topic": "tides"}}
        )
        assert lost.response["result"]["resultType"] == "task"  # the answer the client lost
        again = (await create(alice, "tides"))["taskId"]
        assert again != lost.response["result"]["taskId"]
        for task_id in (lost.response["result"]["taskId"], again):
            done = (await poll_until(alice, task_id, "completed", "failed", "cancelled"))[-1]
            assert done["taskId"] == task_id
            assert report_text(done).startswith("# Research Report: tides\n")
