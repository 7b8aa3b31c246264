"""Legacy tasks behind the Tasks extension, with the real server-everything 2026.8.31 over
Streamable HTTP and over stdio (issue 26; docs/tasks.md).

The ground truth is the server used directly by a legacy client: its `simulate-research-query`
runs only as a task, reports `Gathering sources...` first, asks one elicitation when
`ambiguous`, and its report names the clarification. Through the bridge a client that declared
the extension sees the same tool, the same stages, the same question and the same report.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Iterator

import aiohttp
import pytest
from mcp.shared.exceptions import MCPError

from translators.tasks_ext.messages import EXTENSION
from translators.wire.errors import INVALID_PARAMS, MISSING_CLIENT_CAPABILITY
from translators.wire.jsonrpc import JsonObject

from .harness import LegacyPoster, PeerProcess, Peers, free_port, modern_client
from .streams_helpers import SseStream
from .tasks_helpers import (
    PLAIN_CAPS,
    RESEARCH,
    caller,
    create,
    error_of,
    everything_bridge,
    get,
    node_everything,
    poll_until,
    report_text,
    result_of,
)
from .test_check import run_check

T = 90  # bound on every test body, seconds
MISSING_EXTENSION: JsonObject = {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}


@pytest.fixture(scope="module", params=["http", "stdio"])
def bridge(request: pytest.FixtureRequest, module_peers: Peers) -> Iterator[PeerProcess]:
    yield everything_bridge(module_peers, request.param)


def answer_for(task: JsonObject) -> tuple[str, JsonObject, str]:
    """(key, accepting answer, chosen interpretation) for the task's one elicitation."""
    ((key, asked),) = task["inputRequests"].items()
    assert asked["method"] == "elicitation/create", asked
    schema = asked["params"]["requestedSchema"]
    choice: str = schema["properties"]["interpretation"]["oneOf"][0]["const"]
    return key, {"action": "accept", "content": {"interpretation": choice}}, choice


async def test_discover_and_list_show_the_task_tool_only_to_declaring_clients(
    bridge: PeerProcess,
) -> None:
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        declaring, plain = caller(http, bridge.url), caller(http, bridge.url, caps=PLAIN_CAPS)
        discovered = result_of(await plain.post("server/discover"))
        assert discovered["capabilities"]["extensions"] == {EXTENSION: {}}
        assert "tasks" not in discovered["capabilities"]
        tools = result_of(await declaring.post("tools/list"))["tools"]
        listed = {tool["name"]: tool for tool in tools}
        assert RESEARCH in listed and "execution" not in listed[RESEARCH]
        plain_names = [tool["name"] for tool in result_of(await plain.post("tools/list"))["tools"]]
        assert RESEARCH not in plain_names
        assert sorted(plain_names) == sorted(set(listed) - {RESEARCH})


async def test_task_runs_to_completed_with_the_servers_stages_and_report(
    bridge: PeerProcess,
) -> None:
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, bridge.url)
        created = await create(alice, "tides")
        assert created["resultType"] == "task"
        assert created["status"] == "working"
        assert created["statusMessage"] == "Gathering sources..."
        assert created["taskId"].startswith("t1.")
        assert isinstance(created["ttlMs"], int) and isinstance(created["pollIntervalMs"], int)
        assert not {"result", "error", "inputRequests", "task"} & set(created)
        seen = await poll_until(alice, created["taskId"], "completed", "failed", "cancelled")
        done = seen[-1]
        assert done["status"] == "completed" and done["resultType"] == "complete"
        assert {t["status"] for t in seen[:-1]} <= {"working"}
        assert report_text(done).startswith("# Research Report: tides\n")
        assert "_meta" not in done["result"] or EXTENSION not in str(done["result"]["_meta"])
        assert await get(alice, created["taskId"]) == done  # the result stays readable


async def test_input_required_then_update_then_completed_answered_once(
    bridge: PeerProcess,
) -> None:
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, bridge.url)
        task_id = (await create(alice, "python", ambiguous=True))["taskId"]
        asking = (await poll_until(alice, task_id, "input_required", "completed", "failed"))[-1]
        assert asking["status"] == "input_required", asking
        key, answer, choice = answer_for(asking)
        assert "python" in asking["inputRequests"][key]["params"]["message"]
        assert await get(alice, task_id) == asking  # asked again, same key, until answered
        update = {"taskId": task_id, "inputResponses": {key: answer}}
        assert result_of(await alice.post("tasks/update", update)) == {"resultType": "complete"}
        # the same answer again, and an unknown key: acknowledged, never applied
        wrong = {"action": "accept", "content": {"interpretation": "not-an-option"}}
        again = {"taskId": task_id, "inputResponses": {key: wrong, "never-issued": {}}}
        assert result_of(await alice.post("tasks/update", again)) == {"resultType": "complete"}
        done = (await poll_until(alice, task_id, "completed", "failed", "input_required"))[-1]
        assert done["status"] == "completed", done
        text = report_text(done)
        assert text.startswith(f"# Research Report: python ({choice})\n")
        assert f"- **Clarification**: {choice}" in text


async def test_cancel_ends_the_task_and_a_finished_task_is_acknowledged(
    bridge: PeerProcess,
) -> None:
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = caller(http, bridge.url)
        task_id = (await create(alice, "comets"))["taskId"]
        ack = result_of(await alice.post("tasks/cancel", {"taskId": task_id}))
        assert ack == {"resultType": "complete"}
        cancelled = (await poll_until(alice, task_id, "cancelled", "completed", "failed"))[-1]
        assert cancelled["status"] == "cancelled"
        assert not {"result", "error", "inputRequests"} & set(cancelled)
        again = result_of(await alice.post("tasks/cancel", {"taskId": task_id}))
        assert again == {"resultType": "complete"}
        assert (await get(alice, task_id))["status"] == "cancelled"


async def test_unknown_forged_and_another_principals_ids_get_one_answer(
    bridge: PeerProcess,
) -> None:
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice, mallory = caller(http, bridge.url), caller(http, bridge.url, "mallory")
        task_id = (await create(alice, "owls"))["taskId"]
        forged = task_id[:-6] + ("AAAAAA" if not task_id.endswith("AAAAAA") else "BBBBBB")
        errors = []
        for poster, tid in [
            (mallory, task_id),
            (alice, forged),
            (alice, "t1.unknown"),
            (alice, "786512e2-9e0d-44bd-8f29-789f320fe840"),
        ]:
            for method, extra in [
                ("tasks/get", {}),
                ("tasks/update", {"inputResponses": {}}),
                ("tasks/cancel", {}),
            ]:
                reply = await poster.post(method, {"taskId": tid, **extra})
                assert reply.status == 200, reply.text
                errors.append(error_of(reply))
        assert errors == [{"code": INVALID_PARAMS, "message": "Task not found"}] * len(errors)
        # mallory's cancel did nothing: alice's task still runs to completion
        done = (await poll_until(alice, task_id, "completed", "cancelled", "failed"))[-1]
        assert done["status"] == "completed"


async def test_undeclared_clients_get_32021_naming_the_extension(bridge: PeerProcess) -> None:
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice, plain = caller(http, bridge.url), caller(http, bridge.url, caps=PLAIN_CAPS)
        task_id = (await create(alice, "moss"))["taskId"]
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            reply = await plain.post(method, {"taskId": task_id, "inputResponses": {}})
            assert reply.status == 400
            error = error_of(reply)
            assert error["code"] == MISSING_CLIENT_CAPABILITY and error["data"] == MISSING_EXTENSION
        reply = await plain.post("tools/call", {"name": RESEARCH, "arguments": {"topic": "x"}})
        assert reply.status == 400
        assert error_of(reply)["data"] == MISSING_EXTENSION
        # the real modern client, which does not declare the extension, gets the same error
        async with modern_client(bridge.url, headers={"Authorization": "Bearer alice"}) as client:
            with pytest.raises(MCPError) as raised:
                await client.call_tool(RESEARCH, {"topic": "moss"})
            assert raised.value.error.code == MISSING_CLIENT_CAPABILITY
            echoed = await client.call_tool("echo", {"message": "plain tools still work"})
            assert echoed.content[0].text == "Echo: plain tools still work"  # type: ignore[union-attr]
        done = (await poll_until(alice, task_id, "completed", "failed", "cancelled"))[-1]
        assert done["status"] == "completed"


async def test_ground_truth_the_server_directly_as_a_legacy_client(peers: Peers) -> None:
    """The same steps as a legacy client against the server itself: the stages and report the
    bridge shows are the server's own."""
    port = free_port()
    server = peers.start(
        "server-everything", [*node_everything(), "streamableHttp"], port, {"PORT": str(port)}
    )
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        legacy = LegacyPoster(http, f"http://127.0.0.1:{server.port}/mcp", {"elicitation": {}})
        init = await legacy.initialize()
        caps = init.response["result"]["capabilities"]
        assert caps["tasks"]["requests"]["tools"]["call"] == {}
        params = {"name": RESEARCH, "arguments": {"topic": "tides"}, "task": {"ttl": 60000}}
        task = (await legacy.post("tools/call", params)).response["result"]["task"]
        assert task["status"] == "working" and task["statusMessage"] == "Gathering sources..."
        result = (await legacy.post("tasks/result", {"taskId": task["taskId"]})).response
        (block,) = result["result"]["content"]
        assert block["text"].startswith("# Research Report: tides\n")


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_a_cold_bridge_refuses_the_undeclared_call_with_32021(
    peers: Peers, transport: str
) -> None:
    """The first request a new bridge sees is the real client's call of the task tool: -32021,
    learnt on the call's own session before anything of the call went upstream."""
    bridge = everything_bridge(peers, transport)
    async with asyncio.timeout(T), modern_client(bridge.url) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool(RESEARCH, {"topic": "moss"})
        assert raised.value.error.code == MISSING_CLIENT_CAPABILITY
        assert raised.value.error.data == MISSING_EXTENSION


def test_check_lists_the_task_tool_of_the_real_server() -> None:
    """`mrtr-bridge check --json` on server-everything over stdio names its task tool."""
    status, report = run_check("--upstream-command", shlex.join([*node_everything(), "stdio"]))
    assert status == 0, report
    (tool,) = [tool for tool in report["tools"] if tool["name"] == RESEARCH]
    assert tool["bridged"] is True and tool["taskSupport"] == "required"
    assert tool["task"].startswith("runs only as a task: through the Tasks extension")
    assert not [t for t in report["tools"] if "task" in t and t["name"] != RESEARCH]


async def test_listen_streams_carry_the_tasks_status_for_its_own_tasks(
    bridge: PeerProcess,
) -> None:
    """`subscriptions/listen` with `taskIds`: the acknowledgement lists only the caller's own task
    ids, and `notifications/tasks` carries the full task through input_required to completed;
    without the extension the listen gets -32021."""
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice, mallory = caller(http, bridge.url), caller(http, bridge.url, "mallory")
        task_id = (await create(alice, "python", ambiguous=True))["taskId"]
        others = (await create(mallory, "owls"))["taskId"]
        wanted = {"notifications": {"taskIds": [task_id, others, "t1.unknown"]}}
        stream = await SseStream.open(alice, "subscriptions/listen", wanted, request_id="listen")
        try:
            ack = await stream.message()
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["notifications"] == {"taskIds": [task_id]}
            asking = (await stream.messages_until(lambda m: _status(m) == "input_required"))[-1]
            assert asking["method"] == "notifications/tasks"
            assert asking["params"]["taskId"] == task_id
            key, answer, choice = answer_for(asking["params"])
            update = {"taskId": task_id, "inputResponses": {key: answer}}
            assert result_of(await alice.post("tasks/update", update)) == {"resultType": "complete"}
            done = (await stream.messages_until(lambda m: _status(m) == "completed"))[-1]
            assert report_text(done["params"]).startswith(f"# Research Report: python ({choice})")
            pushed = dict(done["params"])
            assert pushed.pop("_meta") == {"io.modelcontextprotocol/subscriptionId": "listen"}
            polled = await get(alice, task_id)
            assert pushed == {k: v for k, v in polled.items() if k != "resultType"}
        finally:
            await stream.close()
        plain = caller(http, bridge.url, caps=PLAIN_CAPS)
        refused = await plain.post("subscriptions/listen", wanted)
        assert error_of(refused)["code"] == MISSING_CLIENT_CAPABILITY


def _status(messages: list[JsonObject]) -> str | None:
    last = messages[-1] if messages else {}
    return (
        last.get("params", {}).get("status")
        if last.get("method") == "notifications/tasks"
        else None
    )
