"""A real server that works with one upstream session only, behind `upstream.max_sessions = 1`.

`@modelcontextprotocol/server-everything` 2025.5.12 on TypeScript SDK 1.12.3 (pinned by npm
overrides, `make ts-peers`) connects one shared server object to every Streamable HTTP session, so
only one session at a time works. With `max_sessions = 1` the bridge runs every caller's calls on
one session in turn: concurrent callers all complete, and an interactive call (sampling) holding
the session makes another caller's call wait until the retry ends it.
"""

from __future__ import annotations

import asyncio
import shutil

import aiohttp

from translators.eras import SAMPLE

from .harness import REPO_ROOT, ModernPoster, Peers, bridge_env, free_port
from .mrtr_helpers import call_tool, complete_text, input_required

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


async def test_server_everything_takes_turns_on_one_session(
    peers: Peers, http: aiohttp.ClientSession
) -> None:
    node = shutil.which("node")
    assert node is not None and EVERYTHING.exists(), "run `make ts-peers` (part of `make test`)"
    port = free_port()
    everything = peers.start(
        "server-everything", [node, str(EVERYTHING), "streamableHttp"], port, {"PORT": str(port)}
    )
    bridge = peers.bridge(
        everything.url, env=bridge_env({"upstream": {"max_sessions": 1, "session_wait_s": 30}})
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
        waiting = asyncio.create_task(
            call_tool(caller(http, bridge.url, "bob", {}), "add", {"a": 2, "b": 3})
        )
        await asyncio.sleep(0.5)
        assert not waiting.done()  # the one session is alice's until her call ends
        answer = {"role": "assistant", "content": {"type": "text", "text": "Hello"}, "model": "m"}
        final = await call_tool(
            alice,
            "sampleLLM",
            {"prompt": "hi", "maxTokens": 10},
            responses={key: answer},
            state=state,
        )
        after = await waiting
    assert [complete_text(reply) for reply in sums] == [
        f"The sum of {a} and 10 is {a + 10}." for _ in range(3) for a in range(2)
    ]
    assert request["method"] == SAMPLE
    assert request["params"]["messages"][0]["content"]["text"] == "Resource sampleLLM context: hi"
    assert complete_text(final) == "LLM sampling result: Hello"
    assert complete_text(after) == "The sum of 2 and 3 is 5."
