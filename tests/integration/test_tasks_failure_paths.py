"""Failure paths of a legacy task behind the Tasks extension, as a user meets them, with the real
server-everything 2026.8.31 over Streamable HTTP (issue 26 part 3; docs/tasks.md "What survives
what"): a bridge restart while the task waits for input, a task past its `ttlMs`, and the creation
answer lost (the client retries the call).
"""

from __future__ import annotations

import asyncio

import aiohttp

from proxy.auth.keys import new_key
from translators.wire.errors import INVALID_PARAMS

from .harness import Peers, bridge_env, free_port
from .tasks_helpers import (
    caller,
    create,
    error_of,
    node_everything,
    poll_until,
    report_text,
)

T = 90  # bound on every test body, seconds
NOT_FOUND = {"code": INVALID_PARAMS, "message": "Task not found"}


def start_everything(peers: Peers) -> str:
    port = free_port()
    server = peers.start(
        "server-everything", [*node_everything(), "streamableHttp"], port, {"PORT": str(port)}
    )
    return f"http://127.0.0.1:{server.port}/mcp"


async def test_a_restart_while_the_task_waits_for_input_loses_the_task(peers: Peers) -> None:
    """The record and the pinned session live in the bridge process: a new process with the same
    keys answers the old id with -32602 (documented), and a new task runs there as usual."""
    upstream = start_everything(peers)
    kid, key = new_key()
    env = bridge_env({"held": {"keys": {kid: key}}})
    first = peers.bridge(upstream, env=env)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        task_id = (await create(caller(http, first.url), "python", ambiguous=True))["taskId"]
        asking = await poll_until(caller(http, first.url), task_id, "input_required", "completed")
        assert asking[-1]["status"] == "input_required"
        first.stop()
        second = peers.bridge(upstream, env=env)
        alice = caller(http, second.url)
        assert error_of(await alice.post("tasks/get", {"taskId": task_id})) == NOT_FOUND
        fresh = (await create(alice, "tides"))["taskId"]
        done = (await poll_until(alice, fresh, "completed", "failed", "cancelled"))[-1]
        assert report_text(done).startswith("# Research Report: tides\n")


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
