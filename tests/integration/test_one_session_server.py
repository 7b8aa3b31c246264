"""A real server that works with one upstream session only.

`@modelcontextprotocol/server-everything` 2025.5.12 on TypeScript SDK 1.12.3 (pinned by npm
overrides, `make ts-peers`) connects one shared server object to every Streamable HTTP session, so
only one session at a time works, and a `DELETE` of any session leaves it unconnected (its next
timed notification then crashes the process); over HTTP+SSE each connection replaces the last, and
closing any of them ends the process. With `max_sessions = 1` the bridge runs every caller's calls
on one session in turn: concurrent callers all complete, and an interactive call (sampling)
holding the session makes another caller's call wait until the retry ends it. With the default
settings, the bridge learns that the server serves one session (proxy/upstream/session_limit.py)
and never sends the DELETE that would crash it. Either way, the `mcp` 2.x client, then the
TypeScript client, then the `mcp` 2.x client again are each served as a legacy client directly
(`tests/peers/legacy_probe_client.py`, on a server process of its own) is, over Streamable HTTP
and over HTTP+SSE with roots declared, and the server is still up after its timers fired.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from typing import Any

import aiohttp
import mcp_types as types
import pytest

from translators.protocol.eras import SAMPLE

from .harness import (
    PEERS_DIR,
    REPO_ROOT,
    InputAnswers,
    ModernPoster,
    PeerProcess,
    Peers,
    bridge_env,
    free_port,
    modern_client,
    until_lease_waits,
    upstream_status,
)
from .mrtr_helpers import call_tool, complete_text, input_required
from .raw_http import RawReply
from .streams_helpers import logged, wait_logged
from .test_check import run_check
from .test_real_servers import TS_CLIENT, Upstream, direct

T = 60  # bound on the test body, seconds
EVERYTHING = (
    REPO_ROOT
    / ".tools"
    / "ts-peers"
    / "everything-2025.5.12"
    / "node_modules"
    / "@modelcontextprotocol"
    / "server-everything"
    / "dist"
    / "index.js"
)


def caller(
    http: aiohttp.ClientSession, url: str, name: str, capabilities: dict[str, object]
) -> ModernPoster:
    return ModernPoster(
        http, url, capabilities=capabilities, headers={"Authorization": f"Bearer {name}"}
    )


def start_everything(peers: Peers, transport: str = "streamableHttp") -> PeerProcess:
    """server-everything 2025.5.12 over `streamableHttp` (at /mcp) or `sse` (at /sse)."""
    node = shutil.which("node")
    assert node is not None and EVERYTHING.exists(), "run `make ts-peers` (part of `make test`)"
    port = free_port()
    server = peers.start(
        f"server-everything-{transport}",
        [node, str(EVERYTHING), transport],
        port,
        {"PORT": str(port)},
    )
    server.path = "/sse" if transport == "sse" else "/mcp"
    return server


async def finish_sampling(post: ModernPoster, key: str, state: str, text: str) -> RawReply:
    """Alice's retry of `sampleLLM` with the sampling answer `text`."""
    answer = {"role": "assistant", "content": {"type": "text", "text": text}, "model": "m"}
    arguments = {"prompt": "hi", "maxTokens": 10}
    return await call_tool(post, "sampleLLM", arguments, responses={key: answer}, state=state)


async def test_server_everything_takes_turns_on_one_session(
    peers: Peers, http: aiohttp.ClientSession
) -> None:
    everything = start_everything(peers)
    bridge = peers.bridge(
        everything.url,
        env=bridge_env(
            {
                "upstream": {"max_sessions": 1, "session_wait_s": 30},
                "status": {"snapshot_max_age_s": 0},
            }
        ),
    )
    async with asyncio.timeout(T):
        sums = await asyncio.gather(
            *(
                call_tool(caller(http, bridge.url, name, {}), "add", {"a": a, "b": 10})
                for name in ("alice", "bob", "carol")
                for a in range(2)
            )
        )
        alice = caller(http, bridge.url, "alice", {"sampling": {}})
        requests, state = input_required(
            await call_tool(alice, "sampleLLM", {"prompt": "hi", "maxTokens": 10})
        )
        ((key, request),) = requests.items()
        since = (await upstream_status(http, bridge))["lease_waits"]
        waiting = asyncio.create_task(
            call_tool(caller(http, bridge.url, "bob", {}), "add", {"a": 2, "b": 3})
        )
        await until_lease_waits(http, bridge, since, waiting)
        assert not waiting.done()  # the one session is alice's until her call ends
        final = await finish_sampling(alice, key, state, "Hello")
        after = await waiting
    assert [complete_text(reply) for reply in sums] == [
        f"The sum of {a} and 10 is {a + 10}." for _ in range(3) for a in range(2)
    ]
    assert request["method"] == SAMPLE
    assert request["params"]["messages"][0]["content"]["text"] == "Resource sampleLLM context: hi"
    assert complete_text(final) == "LLM sampling result: Hello"
    assert complete_text(after) == "The sum of 2 and 3 is 5."


async def test_server_everything_survives_when_the_bridge_learns_it_serves_one_session(
    peers: Peers, http: aiohttp.ClientSession
) -> None:
    """Default `upstream.max_sessions`: the bridge learns the limit the first time it needs a second
    session (alice's lists and her sampling call have different capabilities), never sends a
    DELETE (a DELETE leaves the server unconnected, and its 30 s stderr timer then crashes it),
    never reaps the idle session, gives bob a clear error while alice's call holds the session,
    and serves him once it is free. The server is still up after its timer fired."""
    everything = start_everything(peers)
    settings = {"session_wait_s": 2, "session_idle_s": 1}
    env = bridge_env({"upstream": settings, "log": {"level": "debug"}})
    bridge = peers.bridge(everything.url, env=env)
    alice_lists = caller(http, bridge.url, "alice", {})
    alice = caller(http, bridge.url, "alice", {"sampling": {}})
    bob = caller(http, bridge.url, "bob", {})
    async with asyncio.timeout(T + 40):
        listed = await alice_lists.post("tools/list", {})
        requests, state = input_required(
            await call_tool(alice, "sampleLLM", {"prompt": "hi", "maxTokens": 10})
        )
        refused = await call_tool(bob, "add", {"a": 2, "b": 3})
        ((key, _request),) = requests.items()
        final = await finish_sampling(alice, key, state, "Hi")
        served = await call_tool(bob, "add", {"a": 2, "b": 3})
        # the server's 30 s timer fires (many idle periods later) and its notification reaches
        # the bridge's session: the server was connected when it fired (a DELETE would have left
        # it unconnected, and the notification would have crashed it)
        await wait_logged(
            bridge, "upstream_inbound_received", timeout=40, method="notifications/stderr"
        )
        later = await call_tool(alice_lists, "add", {"a": 1, "b": 1})
    names = {tool["name"] for tool in listed.response["result"]["tools"]}
    assert {"add", "sampleLLM", "echo"} <= names
    assert refused.response["error"]["code"] == -32603
    assert refused.response["error"]["message"].startswith(
        "The upstream server serves one session at a time (learned when the bridge first "
        "connected to it), and another request holds that session"
    )
    assert complete_text(final) == "LLM sampling result: Hi"
    assert complete_text(served) == "The sum of 2 and 3 is 5."
    assert complete_text(later) == "The sum of 1 and 1 is 2."
    assert everything.popen.poll() is None, everything.log_text()
    server_log = everything.log_text(limit=10**6)
    assert "Received session termination request" not in server_log
    assert "Not connected" not in server_log
    bridge_log = bridge.log_text(limit=10**6)
    assert bridge_log.count('"upstream_serves_one_session"') == 1


ADD = {"a": 2, "b": 40}
SAMPLE_ARGS = {"prompt": "Which city?", "maxTokens": 20}
TIMER_S = 20  # server-everything 2025.5.12 sends a log message every 20 s to its connection


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


async def python_client(url: str) -> dict[str, Any]:
    """The `mcp` 2.x client declaring roots, sampling and elicitation (answering as the direct
    legacy client does): the tools, `add`, and `sampleLLM` with its sampling round."""
    answers = InputAnswers(elicit_action="decline", sample_text="ok")
    async with modern_client(url, **answers.client_kwargs()) as client:
        tools = sorted(tool.name for tool in (await client.list_tools()).tools)
        added = texts(await client.call_tool("add", ADD))
        sampled = texts(await client.call_tool("sampleLLM", SAMPLE_ARGS))
    asked = sorted({method for method, _ in answers.asked})
    return {"tools": tools, "add": added, "sampled": sampled, "asked": asked}


async def typescript_client(url: str) -> dict[str, Any]:
    """`tests/peers/ts_modern_client.mjs` declaring roots and sampling: the tools, twice."""
    assert (TS_CLIENT / ".mrtr-installed").exists(), "run `make test`, which installs it"
    node = shutil.which("node")
    assert node is not None
    argv = [node, str(PEERS_DIR / "ts_modern_client.mjs"), str(TS_CLIENT), url]
    done = await asyncio.to_thread(
        subprocess.run,
        [*argv, "--roots", "--sampling"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=T,
    )
    assert done.returncode == 0 and done.stdout, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return report


async def directly(peers: Peers, transport: str) -> dict[str, Any]:
    """What the legacy client sees directly, on a server process of its own (a second client
    would take the bridge's server over)."""
    server = start_everything(peers, transport)
    flag = "--sse" if transport == "sse" else "--url"
    report = await direct(
        Upstream([flag, server.url], ""),
        "all",
        *("--call", "add", "--arguments", json.dumps(ADD)),
        *("--push", "sampleLLM", "--push-arguments", json.dumps(SAMPLE_ARGS)),
    )
    server.stop()
    return report


async def until_timer_fired(bridge: PeerProcess) -> None:
    """Until the server's next timed log message reached the bridge's session after now (the
    server was connected when its timer fired: unconnected, the notification crashes it)."""
    match = {"method": "notifications/message"}
    seen = len(logged(bridge, "upstream_inbound_received", **match))
    async with asyncio.timeout(TIMER_S + 10):
        while len(logged(bridge, "upstream_inbound_received", **match)) <= seen:
            await asyncio.sleep(0.2)


@pytest.mark.parametrize(
    ("transport", "settings", "sessions", "limit"),
    [
        ("streamableHttp", {}, 2, "one at a time (learned)"),
        (
            "streamableHttp",
            {"max_sessions": 1, "max_sessions_per_principal": 1},
            1,
            "one at a time (configured)",
        ),
        ("sse", {}, 2, "one at a time (learned)"),
    ],
)
async def test_clients_one_after_another_are_served_as_directly_and_the_server_lives(
    peers: Peers,
    http: aiohttp.ClientSession,
    transport: str,
    settings: dict[str, Any],
    sessions: int,
    limit: str,
) -> None:
    """The Python client, the TypeScript client, then the Python client again, through one
    bridge: each sees what the legacy client sees directly; the server saw `sessions`
    sessions (a second one only to learn that it serves one: the revision negotiation reopens
    the first session in the shape of the revision it answered), never a DELETE or a closed
    connection, and it is still up after its timer fired; `/status.json` says how many it serves.
    """
    async with asyncio.timeout(T + TIMER_S + 30):
        seen = await directly(peers, transport)
        everything = start_everything(peers, transport)
        env = bridge_env({"upstream": settings, "log": {"level": "debug"}})
        bridge = peers.bridge(everything.url, env=env)
        first = await python_client(bridge.url)
        typescript = await typescript_client(bridge.url)
        again = await python_client(bridge.url)
        await until_timer_fired(bridge)
        status = await upstream_status(http, bridge)
    assert (
        first
        == again
        == {
            "tools": seen["tools"],
            "add": seen["text"],
            "sampled": [block["text"] for block in seen["pushed"]["content"]],
            "asked": seen["asked"],
        }
    )
    assert first["add"] == ["The sum of 2 and 40 is 42."]
    assert first["sampled"] == ["LLM sampling result: ok"]
    assert typescript["tools"] == typescript["after"] == seen["tools"]
    assert everything.popen.poll() is None, everything.log_text()
    server_log = everything.log_text(limit=10**6)
    opened = "Received connection" if transport == "sse" else "Session initialized with ID"
    assert server_log.count(opened) == sessions, server_log
    assert "Received session termination request" not in server_log
    assert "Not connected" not in server_log
    assert status["session_limit"] == limit


def test_check_says_the_server_serves_one_session_and_leaves_it_connected(peers: Peers) -> None:
    """`check` opens a second session beside the first and pings the first: no answer, so it
    reports one session at a time, and lets both go without a DELETE; the third, which lists the
    tools a client declaring nothing sees (the same: no session per capability follows), is let go
    the same way (the server stays up for the `serve` that follows)."""
    everything = start_everything(peers)
    status, report = run_check("--upstream", everything.url)
    assert status == 0 and report["sessionLimit"] == "one at a time (learned)"
    assert any(note.startswith("it serves one session at a time") for note in report["notes"])
    server_log = everything.log_text(limit=10**6)
    assert server_log.count("Session initialized with ID") == 3
    assert report["toolVisibility"]["revealedBy"] == {}
    assert "Received session termination request" not in server_log
    assert everything.popen.poll() is None
