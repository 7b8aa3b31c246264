"""The real `@modelcontextprotocol/server-filesystem` (pinned in the Makefile, installed by `make
test` into `.tools/server-filesystem/`) as the bridge's stdio upstream (issue 10).

Started with a base directory holding `a/` and `b/`, it replaces its allowed directories with the
client's roots on `initialized`. Client A's roots hold `a/`, client B's hold `b/`: through the
bridge each reads its own file, and the other's is "outside allowed directories", whatever the
order.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client

from .harness import REPO_ROOT, InputAnswers, Peers, PeerStartError, bridge_env, modern_client

T = 60  # bound on every test body, seconds
FS_SERVER = (
    REPO_ROOT
    / ".tools/server-filesystem/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
)
DENIED = "Access denied - path outside allowed directories"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """base/a/a.txt ("alpha") and base/b/b.txt ("bravo"); the server is started on base."""
    root = tmp_path_factory.mktemp("fs").resolve()
    for name, text in (("a", "alpha"), ("b", "bravo")):
        (root / name).mkdir()
        (root / name / f"{name}.txt").write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def bridge_url(module_peers: Peers, base: Path) -> str:
    node = shutil.which("node")
    if node is None or not FS_SERVER.exists():
        raise PeerStartError(f"node or {FS_SERVER} is missing: run `make test`, which installs it")
    command = shlex.join([node, str(FS_SERVER), str(base)])
    # Generous bounds on a loaded machine: the probe and a fresh session stop waiting as soon as the
    # server asks; the settle wait covers server-filesystem applying the roots (it stats each one).
    settings = {"command": command, "roots_probe_ms": 5000, "roots_settle_ms": 300}
    return module_peers.bridge(None, env=bridge_env({"upstream": settings})).url


async def read(client: Client, path: Path) -> types.CallToolResult:
    return await client.call_tool("read_text_file", {"path": str(path)})


def text(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent), block
    return block.text


async def test_each_client_reads_only_under_its_own_roots(bridge_url: str, base: Path) -> None:
    """Interleaved A and B, then concurrently: own file read, the other's denied, every time."""
    a, b = InputAnswers(roots=[(base / "a").as_uri()]), InputAnswers(roots=[(base / "b").as_uri()])
    async with (
        asyncio.timeout(T),
        modern_client(bridge_url, **a.client_kwargs()) as ca,
        modern_client(bridge_url, **b.client_kwargs()) as cb,
    ):
        assert text(await read(ca, base / "a" / "a.txt")) == "alpha"
        denied_b = await read(cb, base / "a" / "a.txt")
        assert text(await read(cb, base / "b" / "b.txt")) == "bravo"
        denied_a = await read(ca, base / "b" / "b.txt")
        mixed = await asyncio.gather(
            read(ca, base / "a" / "a.txt"),
            read(cb, base / "a" / "a.txt"),
            read(cb, base / "b" / "b.txt"),
            read(ca, base / "b" / "b.txt"),
        )
        allowed_a = text(await ca.call_tool("list_allowed_directories", {}))
        allowed_b = text(await cb.call_tool("list_allowed_directories", {}))
    for denied in (denied_a, denied_b, mixed[1], mixed[3]):
        assert denied.is_error
        assert DENIED in text(denied)
    assert [text(mixed[0]), text(mixed[2])] == ["alpha", "bravo"]
    assert allowed_a.splitlines()[1:] == [str(base / "a")]
    assert allowed_b.splitlines()[1:] == [str(base / "b")]


async def test_a_client_without_roots_gets_the_servers_own_directories(
    bridge_url: str, base: Path
) -> None:
    """The one exception: a client that declared no roots capability is never asked, and the server
    uses its command-line directory, as it would with that client directly."""
    async with asyncio.timeout(T), modern_client(bridge_url) as client:
        assert text(await read(client, base / "a" / "a.txt")) == "alpha"
        assert text(await read(client, base / "b" / "b.txt")) == "bravo"
        allowed = text(await client.call_tool("list_allowed_directories", {}))
    assert allowed.splitlines()[1:] == [str(base)]
