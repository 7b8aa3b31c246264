"""The real `@modelcontextprotocol/server-everything` 2026.8.31 (pinned in the Makefile's
`npm-servers` target, installed into `.tools/npm-servers/`) and a small raw
client for the Tasks extension, which the mcp 2.x client does not speak (docs/tasks.md).

The server's `simulate-research-query` runs only as a legacy task (`taskSupport: "required"`):
four 1 s stages; with `ambiguous: true` it asks an elicitation while `input_required`.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
from typing import Any

import aiohttp

from translators.tasks_ext.messages import EXTENSION
from translators.wire.jsonrpc import JsonObject

from .harness import (
    REPO_ROOT,
    ModernPoster,
    PeerProcess,
    Peers,
    PeerStartError,
    bridge_env,
    free_port,
)
from .raw_http import RawReply

EVERYTHING_JS = (
    REPO_ROOT
    / ".tools/npm-servers/server-everything@2026.8.31/node_modules"
    / "@modelcontextprotocol/server-everything"
    / "dist/index.js"
)
RESEARCH = "simulate-research-query"
TASKS_CAPS: JsonObject = {"elicitation": {"form": {}}, "extensions": {EXTENSION: {}}}
PLAIN_CAPS: JsonObject = {"elicitation": {"form": {}}}
POLL_BOUND_S = 40.0  # four 1 s stages on a loaded machine: a generous bound, never a window


def node_everything() -> list[str]:
    node = shutil.which("node")
    if node is None or not EVERYTHING_JS.exists():
        raise PeerStartError(
            f"node or {EVERYTHING_JS} is missing: run `make test`, which installs it"
        )
    return [node, str(EVERYTHING_JS)]


def everything_bridge(peers: Peers, transport: str, **settings: Any) -> PeerProcess:
    """The bridge in front of server-everything over `transport` ("http" or "stdio")."""
    if transport == "stdio":
        env = bridge_env({"upstream": {"command": shlex.join([*node_everything(), "stdio"])}})
        return peers.bridge(None, env={**env, **bridge_env(settings)})
    port = free_port()
    server = peers.start(
        "server-everything", [*node_everything(), "streamableHttp"], port, {"PORT": str(port)}
    )
    return peers.bridge(f"http://127.0.0.1:{server.port}/mcp", env=bridge_env(settings))


def caller(
    http: aiohttp.ClientSession, url: str, who: str = "alice", caps: JsonObject | None = None
) -> ModernPoster:
    """Raw modern requests as principal `who`, declaring the extension unless `caps` says
    otherwise."""
    return ModernPoster(
        http,
        url,
        capabilities=dict(TASKS_CAPS if caps is None else caps),
        headers={"Authorization": f"Bearer {who}"},
    )


def result_of(reply: RawReply) -> JsonObject:
    response = reply.response
    assert "result" in response, response
    result: JsonObject = response["result"]
    return result


def error_of(reply: RawReply) -> JsonObject:
    response = reply.response
    assert "error" in response, response
    error: JsonObject = response["error"]
    return error


async def create(poster: ModernPoster, topic: str, *, ambiguous: bool = False) -> JsonObject:
    reply = await poster.post(
        "tools/call", {"name": RESEARCH, "arguments": {"topic": topic, "ambiguous": ambiguous}}
    )
    return result_of(reply)


async def get(poster: ModernPoster, task_id: str) -> JsonObject:
    return result_of(await poster.post("tasks/get", {"taskId": task_id}))


async def poll_until(poster: ModernPoster, task_id: str, *statuses: str) -> list[JsonObject]:
    """Every `tasks/get` result until one has a status in `statuses` (the last one)."""
    seen: list[JsonObject] = []
    async with asyncio.timeout(POLL_BOUND_S):
        while True:
            task = await get(poster, task_id)
            seen.append(task)
            if task["status"] in statuses:
                return seen
            await asyncio.sleep(0.2)


def report_text(task: JsonObject) -> str:
    (block,) = task["result"]["content"]
    assert block["type"] == "text", block
    text: str = block["text"]
    return text


__all__ = [
    "PLAIN_CAPS",
    "RESEARCH",
    "TASKS_CAPS",
    "caller",
    "create",
    "error_of",
    "everything_bridge",
    "get",
    "poll_until",
    "report_text",
    "result_of",
]
