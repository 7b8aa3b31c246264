"""A real server that works with one upstream session only.

`@modelcontextprotocol/server-everything` 2025.5.12 on TypeScript SDK 1.12.3 (pinned by npm
overrides, `make ts-peers`) connects one shared server object to every Streamable HTTP session, so
only one session at a time works. With `max_sessions = 1` the bridge runs every caller's calls on
one session in turn: concurrent callers all complete, and an interactive call (sampling) holding
the session makes another caller's call wait until the retry ends it. With the default settings,
the bridge learns that the server serves one session (proxy/upstream/session_limit.py) and never
sends the DELETE that would crash it.
"""

from __future__ import annotations

import asyncio
import shutil

import aiohttp

from translators.protocol.eras import SAMPLE

from .harness import (
    REPO_ROOT,
    ModernPoster,
    PeerProcess,
    Peers,
    bridge_env,
    free_port,
    until_lease_waits,
    upstream_status,
)
from .mrtr_helpers import call_tool, complete_text, input_required
from .raw_http import RawReply
from .streams_helpers import wait_logged

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


def start_everything(peers: Peers) -> PeerProcess:
    node = shutil.which("node")
    assert node is not None and EVERYTHING.exists(), "run `make ts-peers` (part of `make test`)"
    port = free_port()
    return peers.start(
        "server-everything", [node, str(EVERYTHING), "streamableHttp"], port, {"PORT": str(port)}
    )


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
