"""The compatibility list's CI subset (`make compat` runs the whole list, docs/compatibility.md):
the rows marked `fast` in `servers.toml`, servers of different ages and transports that `make test`
installs anyway (TypeScript SDK 1.0.1 to 1.32, `mcp` 1.1 and 2.3; stdio, Streamable HTTP and
HTTP+SSE). Each runs exactly as in `make compat`: directly with the legacy client, and through the
bridge with the modern one; the test fails when the bridge shows the modern client anything else
than what the legacy client saw directly (after the documented changes, compare.py)."""

from __future__ import annotations

import asyncio
import re

import pytest

from compat.catalog import Server, load
from compat.install import installed
from compat.runner import SERVER_BOUND_S, run_server

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
