"""The compatibility list's CI subset (`make compat` runs the whole list, docs/compatibility.md):
the rows marked `fast` in `servers.toml`, servers of different ages and transports that `make test`
installs anyway (TypeScript SDK 1.0.1 to 1.32, `mcp` 1.1 and 2.3; stdio, Streamable HTTP and
HTTP+SSE). Each runs exactly as in `make compat`: directly with the legacy client, and through the
bridge with the modern one; the test fails when the bridge shows the modern client anything else
than what the legacy client saw directly (after the documented changes, compare.py). Three of them
also run behind one bridge as named upstreams, each compared at its own path."""

from __future__ import annotations

import asyncio
import contextlib
import re
from pathlib import Path

import pytest
from integration.harness import Peers

from compat.catalog import Server, load
from compat.clients import seen_directly, seen_through_bridge
from compat.compare import differences
from compat.install import installed
from compat.runner import SERVER_BOUND_S, bounded, make_scratch, run_server, serving, today

pytestmark = pytest.mark.integration
FAST = [server for server in load() if server.fast]


def test_the_list_pins_at_least_60_published_servers() -> None:
    """Exact versions only, and a PyPI row resolves its dependencies as of a date (else today's
    newest `mcp` would replace the SDK the server shipped with)."""
    servers = load()
    assert len({(server.package, server.version) for server in servers}) >= 60
    assert all(re.fullmatch(r"\d+(\.\d+)*(a\d+)?", server.version) for server in servers)
    assert all(server.resolved_at for server in servers if server.ecosystem == "pypi")


def test_the_subset_covers_every_transport_and_both_ecosystems() -> None:
    assert {server.transport for server in FAST} == {"stdio", "http", "sse"}
    assert {server.ecosystem for server in FAST} == {"npm", "pypi"}


@pytest.mark.parametrize("server", FAST, ids=lambda server: server.name)
async def test_the_server_behaves_through_the_bridge_as_directly(server: Server) -> None:
    assert installed(server), f"{server.install_dir} is missing: `make test` installs it"
    async with asyncio.timeout(3 * SERVER_BOUND_S):
        row = await run_server(server)
    assert row.direct == "works"
    assert row.bridged == "same", row.differences
    assert row.compared.startswith("tools ")


FLEET = ("everything-2025.11.25-sse", "time-0.6.2", "everything-2026.8.31-stdio")


async def test_servers_of_three_ages_behind_one_bridge_behave_as_directly(tmp_path: Path) -> None:
    """Three rows of the subset (TypeScript SDK servers over HTTP+SSE and stdio, an `mcp` 1.x
    server over stdio) behind one bridge as named upstreams: at `/servers/NAME/mcp` the modern
    client sees what the legacy client sees of that server directly. The time server answers with
    today's date: when midnight (UTC) falls within the run, it runs once more (as run_server)."""
    servers = {server.name: server for server in FAST if server.name in FLEET}
    assert sorted(servers) == sorted(FLEET)
    day = today()
    found = await _fleet_differences(servers, tmp_path / "first")
    if found and today() != day:
        found = await _fleet_differences(servers, tmp_path / "again")
    assert found == {}


async def _fleet_differences(servers: dict[str, Server], tmp_path: Path) -> dict[str, list[str]]:
    named = {name: f"s{index}" for index, name in enumerate(FLEET)}
    peers = Peers(log_dir=tmp_path)
    found: dict[str, list[str]] = {}
    try:
        directly = {}
        for name, server in servers.items():
            async with serving(server, make_scratch(tmp_path / named[name]), peers) as target:
                directly[name], _ = await bounded(
                    seen_directly(target.probe, server.capabilities, server.call, server.push)
                )
        async with contextlib.AsyncExitStack() as stack:
            flags: list[str] = []
            for name, server in servers.items():
                scratch = make_scratch(tmp_path / f"{named[name]}-bridged")
                target = await stack.enter_async_context(serving(server, scratch, peers))
                flag, value = (
                    ("--upstream", target.url)
                    if target.url
                    else ("--upstream-command", target.command)
                )
                flags += [flag, f"{named[name]}={value}"]
            bridge = await asyncio.to_thread(peers.bridge, None, args=flags)
            for name, server in servers.items():
                url = f"http://127.0.0.1:{bridge.port}/servers/{named[name]}/mcp"
                seen = await bounded(
                    seen_through_bridge(url, server.capabilities, server.call, server.push)
                )
                if difference := differences(directly[name], seen):
                    found[name] = difference
    finally:
        await asyncio.to_thread(peers.close)
    return found
