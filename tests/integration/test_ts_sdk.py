"""TypeScript SDK servers of old releases behind the bridge, over every transport they offer.

`tests/peers/ts_sdk_server.cjs` run with `@modelcontextprotocol/sdk` pinned at an exact release
(`make ts-peers` installs each into `.tools/ts-peers/sdk-<version>/`): 1.13.3 speaks 2025-06-18 and
1.12.3 speaks 2025-03-26. Each is served over Streamable HTTP, HTTP+SSE and stdio, and the real
mcp 2.x client (2026-07-28) goes through `mrtr-bridge serve` (HTTP transports detected with
`upstream.transport = auto`): discover, the tool list, a plain call, sampling, roots, and form
elicitation where the revision has it (at 2025-03-26 the bridge declares no elicitation upstream).
Everything the bridge sends the server is recorded and must be valid in the SDK's revision, and
everything it answers the client valid at 2026-07-28 (`wire_records.py`).
"""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import MCPError
from schema_check import assert_valid

from translators.protocol.eras import META_SERVER_INFO, MODERN_VERSION

from .harness import REPO_ROOT, PeerProcess, Peers, bridge_env, free_port, modern_client
from .mrtr_helpers import Answerer, echo_answer, json_of, text_of
from .revision_stack import recording_relay, tee_command
from .wire_records import WireLog, front_problems, messages, upstream_problems

T = 60  # bound on every test body, seconds
SERVER = REPO_ROOT / "tests" / "peers" / "ts_sdk_server.cjs"
TOOLS = {"echo", "sdk", "ask", "sample", "roots", "caps"}


@dataclass(frozen=True)
class Sdk:
    version: str
    revision: str

    @property
    def node_path(self) -> str:
        return str(REPO_ROOT / ".tools" / "ts-peers" / f"sdk-{self.version}" / "node_modules")

    @property
    def elicitation(self) -> bool:
        return self.revision != "2025-03-26"


SDKS = [Sdk("1.13.3", "2025-06-18"), Sdk("1.12.3", "2025-03-26")]


def node() -> str:
    found = shutil.which("node")
    assert found is not None, (
        "node is needed for the TypeScript SDK servers (make ts-peers installs the SDKs)"
    )
    return found


def bridge_for(peers: Peers, sdk: Sdk, transport: str, records: Path) -> PeerProcess:
    """The SDK server over `transport` (a child of the bridge over stdio), with the bridge in
    front and a recording hop on each side of it (`records/upstream.jsonl`, `records/front.jsonl`);
    returns the front relay."""
    if transport == "stdio":
        command = tee_command(
            records / "upstream.jsonl", [node(), str(SERVER), "--transport", "stdio"]
        )
        env = bridge_env({"upstream": {"command": command, "env": {"NODE_PATH": sdk.node_path}}})
        bridge = peers.bridge(None, env=env)
    else:
        port = free_port()
        peers.start(
            f"ts-sdk-{sdk.version}-{transport}",
            [node(), str(SERVER), "--transport", transport, "--port", str(port)],
            port,
            {"NODE_PATH": sdk.node_path},
        )
        relay = recording_relay(peers, "relay-upstream", port, records / "upstream.jsonl")
        bridge = peers.bridge(
            f"http://127.0.0.1:{relay.port}{'/sse' if transport == 'sse' else '/mcp'}"
        )
    return recording_relay(peers, "relay-front", bridge.port, records / "front.jsonl")


@pytest.mark.parametrize("transport", ["http", "sse", "stdio"])
@pytest.mark.parametrize("sdk", SDKS, ids=lambda sdk: f"sdk-{sdk.version}")
async def test_old_typescript_sdk_server_through_the_bridge(
    peers: Peers, sdk: Sdk, transport: str, tmp_path: Path
) -> None:
    bridge = bridge_for(peers, sdk, transport, tmp_path)
    answers = Answerer(roots=["file:///ts-root"], sample_text="Lyon")
    async with asyncio.timeout(T), modern_client(bridge.url, **answers.client_kwargs()) as client:
        discover = await client.session.send_discover(MODERN_VERSION)
        tools = {tool.name for tool in (await client.list_tools()).tools}
        spoken = json_of(await client.call_tool("sdk", {}))
        echoed = text_of(await client.call_tool("echo", {"text": f"via {transport}"}))
        sampled = text_of(await client.call_tool("sample", {"prompt": "Which city?"}))
        rooted = json_of(await client.call_tool("roots", {}))
        declared = json_of(await client.call_tool("caps", {}))
        if sdk.elicitation:
            asked = json_of(await client.call_tool("ask", {"question": "Pinned?"}))
        else:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("ask", {"question": "Pinned?"})
    assert_valid(discover, "DiscoverResult", "modern")
    assert discover["_meta"][META_SERVER_INFO] == {
        "name": "mrtr-ts-sdk-peer",
        "version": sdk.version,
    }
    # the server's tools, and the extension the bridge serves itself (long calls as tasks)
    assert discover["capabilities"] == {
        "tools": {},
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }
    assert tools == TOOLS
    assert spoken == {"sdk": sdk.version, "revision": sdk.revision}
    assert (echoed, sampled, rooted) == (f"via {transport}", "Lyon", ["file:///ts-root"])
    assert {"sampling", "roots"} <= set(declared)
    if sdk.elicitation:
        assert declared["elicitation"] == {}  # the 2025-06-18 shape: no form/url modes
        assert asked == {"action": "accept", "content": {"answer": echo_answer("Pinned?")}}
        assert [method for method, _ in answers.asked][-1] == "elicitation/create"
    else:
        assert "elicitation" not in declared  # the revision has none: the bridge never declares it
        assert f"SDK {sdk.version} has no elicitation" in refused.value.error.message
    upstream, front = (
        WireLog(tmp_path / name).records() for name in ("upstream.jsonl", "front.jsonl")
    )
    sent = {
        message.get("method")
        for record in upstream
        if record["dir"] == "sent"
        for message in messages(record)
    }
    assert {"initialize", "tools/call"} <= sent
    assert upstream_problems(upstream, sdk.revision) + front_problems(front) == []
