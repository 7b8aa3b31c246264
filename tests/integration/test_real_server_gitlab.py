"""`@modelcontextprotocol/server-gitlab` 2025.4.25 (2024-11-05, stdio; installed by `make test`
into `.tools/npm-servers/`): its tools' `inputSchema`s are `{"$schema": "...draft-07..."}` alone,
with no `"type": "object"`. A legacy client lists them as they are; through the bridge the modern
client lists the same tools, each repaired (translators/protocol/tool_repair.py), and `mrtr-bridge
check` names every repair. Listing needs no GitLab: the server only insists on a token variable.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess

from .harness import PEERS_DIR, Peers, PeerStartError, bridge_env, modern_client
from .test_check import run_check
from .test_real_servers import SERVERS, TS_CLIENT, Upstream, direct, node

T = 60
GITLAB = (
    SERVERS
    / "server-gitlab@2025.4.25/node_modules/@modelcontextprotocol/server-gitlab/dist/index.js"
)
TOOLS_ORDER = [  # as the server lists them
    "create_or_update_file",
    "search_repositories",
    "create_repository",
    "get_file_contents",
    "push_files",
    "create_issue",
    "create_merge_request",
    "fork_repository",
    "create_branch",
]
TOOLS = sorted(TOOLS_ORDER)
REPAIR = 'inputSchema without "type": "type": "object" added'


def gitlab_command() -> str:
    if not GITLAB.exists():
        raise PeerStartError(f"{GITLAB} is missing: run `make test`, which installs it")
    # a dummy token: listing tools never reaches GitLab
    return shlex.join(["env", "GITLAB_PERSONAL_ACCESS_TOKEN=dummy", node(), str(GITLAB)])


async def test_the_modern_client_lists_every_tool_a_legacy_client_lists(peers: Peers) -> None:
    command = gitlab_command()
    bridge = peers.bridge(None, env=bridge_env({"upstream": {"command": command}}))
    async with asyncio.timeout(T):
        seen = await direct(Upstream(["--command", command], bridge.url), "none")
        async with modern_client(bridge.url) as client:
            tools = (await client.list_tools()).tools
    assert seen["tools"] == TOOLS
    assert sorted(tool.name for tool in tools) == TOOLS
    for tool in tools:
        assert tool.input_schema == {
            "type": "object",
            "$schema": "http://json-schema.org/draft-07/schema#",
        }


async def test_the_typescript_client_lists_every_tool_too(peers: Peers) -> None:
    """The TypeScript SDK 2.x client validates `tools/list` against 2026-07-28 as strictly as
    the Python one: every repaired tool reaches it."""
    if not (TS_CLIENT / ".mrtr-installed").exists():
        raise PeerStartError(f"{TS_CLIENT} is missing: run `make test`, which installs it")
    bridge = peers.bridge(None, env=bridge_env({"upstream": {"command": gitlab_command()}}))
    argv = [node(), str(PEERS_DIR / "ts_modern_client.mjs"), str(TS_CLIENT), bridge.url]
    async with asyncio.timeout(T):
        done = await asyncio.to_thread(
            subprocess.run, argv, capture_output=True, text=True, timeout=T
        )
    assert done.returncode == 0 and done.stdout, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1])["tools"] == TOOLS


def test_check_lists_what_it_repaired() -> None:
    status, report = run_check("--upstream-command", gitlab_command())
    assert status == 0
    assert (report["era"], report["protocolVersion"]) == ("legacy", "2024-11-05")
    assert [(tool["name"], tool["bridged"], tool["repairs"]) for tool in report["tools"]] == [
        (name, True, [REPAIR]) for name in TOOLS_ORDER
    ]
    assert f"repaired for modern clients ({REPAIR}): {', '.join(TOOLS_ORDER)}" in report["bridges"]
