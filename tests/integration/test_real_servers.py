"""Real npm servers through the bridge show a modern client what they show a legacy client directly
(issue 23; docs/architecture.md, "Routing rules").

`@modelcontextprotocol/server-everything` 2026.8.31 and 2025.11.25 (installed by `make test` into
`.tools/npm-servers/`), over Streamable HTTP and stdio. For each set of declared capabilities, the
same steps run twice: the `mcp` 1.x client directly (`tests/peers/legacy_probe_client.py`), and the
`mcp` 2.x client through the bridge. Compared:

- the tool list (2026.8.31 lists `get-roots-list`, `trigger-elicitation-request` and
  `trigger-sampling-request` only to clients declaring roots, elicitation or sampling; 2025.11.25
  lists `listRoots` and `startElicitation` the same way), asked before and after the bridge has
  learned that the server keeps roots per session. The one documented difference: tools that run
  only as tasks are hidden by the bridge (docs/decisions.md § 13).
- the roots the server holds (its own roots tool), given by the client's answer;
- a resource subscription: the server's `notifications/resources/updated` reaches the client
  (2026.8.31 sends them per session once `toggle-subscriber-updates` is called by that session's
  client; 2025.11.25 sends them every 10 s to its subscribers).

The TypeScript SDK 2.x client (`@modelcontextprotocol/client`, pinned, `tests/peers/
ts_modern_client.mjs`) runs the same steps through the bridge as the Python one.
`@modelcontextprotocol/server-filesystem` (stdio) lists the same tools per capability too.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.subscriptions import ResourceUpdated

from .harness import (
    LEGACY_PYTHON,
    PEERS_DIR,
    REPO_ROOT,
    InputAnswers,
    Peers,
    PeerStartError,
    bridge_env,
    free_port,
    modern_client,
)
from .test_server_filesystem import FS_SERVER

T = 90  # bound on every test body, seconds
SERVERS = REPO_ROOT / ".tools" / "npm-servers"
TS_CLIENT = SERVERS / "client@2.4.0"
NEW, OLD = "2026.8.31", "2025.11.25"


@dataclass(frozen=True)
class Everything:
    version: str
    resource: str  # a resource the server sends updates for
    trigger: str | None  # the tool that starts the updates for the calling session, if any

    @property
    def entry(self) -> Path:
        path = f"server-everything@{self.version}/node_modules/@modelcontextprotocol/"
        return SERVERS / path / "server-everything" / "dist" / "index.js"


EVERYTHING = {
    NEW: Everything(NEW, "demo://resource/dynamic/text/1", "toggle-subscriber-updates"),
    OLD: Everything(OLD, "test://static/resource/1", None),
}
PROFILES = {  # declared capabilities: (legacy client flags, modern client callbacks)
    "none": ((), ()),
    "roots": (("--roots",), ("list_roots_callback",)),
    "all": (
        ("--roots", "--elicitation", "--sampling"),
        ("list_roots_callback", "elicitation_callback", "sampling_callback"),
    ),
}


def node() -> str:
    found = shutil.which("node")
    if found is None:
        raise PeerStartError("node is missing")
    return found


@dataclass
class Upstream:
    """A server-everything as a legacy client reaches it directly, and the bridge in front."""

    direct: list[str]  # legacy_probe_client.py's --url URL or --command CMD
    bridge_url: str


@pytest.fixture(scope="module")
def upstreams(module_peers: Peers) -> dict[tuple[str, str], Upstream]:
    started: dict[tuple[str, str], Upstream] = {}
    for version, server in EVERYTHING.items():
        if not server.entry.exists():
            raise PeerStartError(f"{server.entry} is missing: run `make test`, which installs it")
        port = free_port()
        name = f"everything-{version}"
        argv = [node(), str(server.entry), "streamableHttp"]
        http = module_peers.start(name, argv, port, {"PORT": str(port)})
        bridged = module_peers.bridge(http.url, env=bridge_env({"upstream": {}}))
        started[(version, "http")] = Upstream(["--url", http.url], bridged.url)
        command = shlex.join([node(), str(server.entry), "stdio"])
        stdio = module_peers.bridge(None, env=bridge_env({"upstream": {"command": command}}))
        started[(version, "stdio")] = Upstream(["--command", command], stdio.url)
    return started


async def direct(upstream: Upstream, profile: str, *extra: str) -> dict[str, Any]:
    """legacy_probe_client.py's report, run from `.venv-legacy`."""
    argv = [str(LEGACY_PYTHON), str(PEERS_DIR / "legacy_probe_client.py"), *upstream.direct]
    argv += [*PROFILES[profile][0], *extra]
    done = await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, timeout=T, check=False
    )
    assert done.stdout, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.splitlines()[0])
    return report


def bridged_client(upstream: Upstream, profile: str, principal: str) -> Any:
    answers = InputAnswers(roots=["file:///test/root"]).client_kwargs()
    callbacks = {name: answers[name] for name in PROFILES[profile][1]}
    headers = {"Authorization": f"Bearer {principal}"}
    return modern_client(upstream.bridge_url, headers=headers, **callbacks)


async def tool_names(client: Client) -> list[str]:
    return sorted(tool.name for tool in (await client.list_tools()).tools)


async def first_update(client: Client, server: Everything) -> list[str]:
    """Listen on the server's resource, call its trigger tool (if any), and return the URIs of
    the updates received until the first (within 15 s)."""
    updated: list[str] = []
    async with client.listen(resource_subscriptions=[server.resource]) as listening:
        assert listening.honored.resource_subscriptions == [server.resource]
        if server.trigger is not None:
            await client.call_tool(server.trigger, {})
        try:
            async with asyncio.timeout(15):
                async for event in listening:
                    if isinstance(event, ResourceUpdated):
                        updated.append(event.uri)
                        break
        except TimeoutError:
            pass
    return updated


TASK_ONLY = {NEW: {"simulate-research-query"}, OLD: set()}  # hidden by the bridge (§ 13)
each_upstream = pytest.mark.parametrize(
    ("version", "transport"), [(v, t) for v in (NEW, OLD) for t in ("http", "stdio")]
)
each_profile = pytest.mark.parametrize("profile", list(PROFILES))


@each_upstream
@each_profile
async def test_tool_lists_match_a_direct_client_with_the_same_capabilities(
    upstreams: dict[tuple[str, str], Upstream], version: str, transport: str, profile: str
) -> None:
    upstream = upstreams[(version, transport)]
    principal = f"lists-{version}-{transport}-{profile}"
    async with asyncio.timeout(T):
        seen = await direct(upstream, profile)
        async with bridged_client(upstream, profile, principal) as client:
            before = await tool_names(client)
            await client.call_tool("echo", {"message": "hi"})  # the roots round, if any
            after = await tool_names(client)
    expected = sorted(set(seen["tools"]) - TASK_ONLY[version])
    assert before == expected and after == expected
    roots_tool = "get-roots-list" if version == NEW else "listRoots"
    assert (roots_tool in expected) == (profile != "none")


@each_upstream
async def test_a_subscription_gets_the_servers_updates_as_a_direct_client_does(
    upstreams: dict[tuple[str, str], Upstream], version: str, transport: str
) -> None:
    """With roots declared: the hard case, where calls go to roots-affine sessions."""
    server, upstream = EVERYTHING[version], upstreams[(version, transport)]
    trigger = ["--call", server.trigger] if server.trigger else []
    async with asyncio.timeout(T):
        seen = await direct(upstream, "roots", "--subscribe", server.resource, *trigger)
        principal = f"listen-{version}-{transport}"
        async with bridged_client(upstream, "roots", principal) as client:
            await tool_names(client)
            updated = await first_update(client, server)
    assert seen["updated"][:1] == [server.resource]
    assert updated == [server.resource]


@each_upstream
@each_profile
async def test_the_typescript_client_sees_what_a_direct_client_sees(
    upstreams: dict[tuple[str, str], Upstream], version: str, transport: str, profile: str
) -> None:
    """Tools before and after a subscription (and, with roots, the roots round of its trigger
    call), and the subscription's first update when the client declares roots."""
    if not (TS_CLIENT / ".mrtr-installed").exists():
        raise PeerStartError(f"{TS_CLIENT} is missing: run `make test`, which installs it")
    server, upstream = EVERYTHING[version], upstreams[(version, transport)]
    steps = [*PROFILES[profile][0]]
    if profile == "roots":
        steps += [
            "--subscribe",
            server.resource,
            *(["--call", server.trigger] * bool(server.trigger)),
        ]
    argv = [node(), str(PEERS_DIR / "ts_modern_client.mjs"), str(TS_CLIENT), upstream.bridge_url]
    env = {**os.environ, "MRTR_PRINCIPAL": f"ts-{version}-{transport}-{profile}"}
    async with asyncio.timeout(T):
        seen = await direct(upstream, profile, *steps[len(PROFILES[profile][0]) :])
        done = await asyncio.to_thread(
            subprocess.run, [*argv, *steps], capture_output=True, text=True, env=env, timeout=T
        )
    assert done.returncode == 0 and done.stdout, done.stderr[-3000:]
    bridged = json.loads(done.stdout.splitlines()[-1])
    expected = sorted(set(seen["tools"]) - TASK_ONLY[version])
    assert bridged["tools"] == expected and bridged["after"] == expected
    if profile == "roots":
        assert seen["updated"][:1] == [server.resource]
        assert bridged["updated"][:1] == [server.resource]


@each_profile
async def test_server_filesystem_lists_what_it_lists_a_direct_client(
    module_peers: Peers, tmp_path: Path, profile: str
) -> None:
    """`@modelcontextprotocol/server-filesystem` (stdio, roots-keeping): the same tools per
    declared capability, directly and through the bridge."""
    if not FS_SERVER.exists():
        raise PeerStartError(f"{FS_SERVER} is missing: run `make test`, which installs it")
    command = shlex.join([node(), str(FS_SERVER), str(tmp_path)])
    bridge = module_peers.bridge(None, env=bridge_env({"upstream": {"command": command}}))
    upstream = Upstream(["--command", command], bridge.url)
    async with asyncio.timeout(T):
        seen = await direct(upstream, profile)
        async with bridged_client(upstream, profile, f"fs-{profile}") as client:
            before = await tool_names(client)
            await client.call_tool("list_allowed_directories", {})
            after = await tool_names(client)
    assert "read_text_file" in seen["tools"]
    assert before == seen["tools"] and after == seen["tools"]


@each_upstream
async def test_the_server_sees_the_roots_a_direct_client_would_give(
    upstreams: dict[tuple[str, str], Upstream], version: str, transport: str
) -> None:
    """The server's own roots tool (it reports the roots it holds for the session) says the same
    directly and through the bridge, where the roots came from the modern client's answer."""
    tool = "get-roots-list" if version == NEW else "listRoots"
    upstream = upstreams[(version, transport)]
    async with asyncio.timeout(T):
        # server-everything 2026.8.31 asks 350 ms after `initialized`: a direct client calling
        # sooner would see no roots yet (the bridge waits for a fresh session's ask)
        seen = await direct(upstream, "roots", "--call", tool, "--delay", "1")
        async with bridged_client(upstream, "roots", f"roots-{version}-{transport}") as client:
            result = await client.call_tool(tool, {})
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    assert "file:///test/root" in "".join(texts)
    if (version, transport) == (OLD, "http"):
        # 2025.11.25 asks while handling `initialized`, before an `mcp` 1.x client has opened its
        # GET stream, so directly the ask is lost and it holds no roots; the bridge opens its GET
        # stream first (docs/architecture.md, "Roots") and the server gets the client's roots
        assert seen["text"][0].startswith("The client supports roots but no roots")
    else:
        assert texts == seen["text"]
