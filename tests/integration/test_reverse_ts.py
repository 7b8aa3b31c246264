"""The reverse direction with the TypeScript SDK's legacy client (`@modelcontextprotocol/sdk`
1.13.3, 2025-06-18; `tests/peers/ts_sdk_client.cjs`): in front of the modern-only `mcp` 2.x
interactive server through the bridge it gets what the legacy interactive server gives it
directly."""

from __future__ import annotations

import asyncio
import shutil
from typing import Any

from .harness import PEERS_DIR, REPO_ROOT, Peers
from .test_reverse_http import modern_interactive, run_json

T = 90.0
CLIENT = PEERS_DIR / "ts_sdk_client.cjs"
NODE_PATH = REPO_ROOT / ".tools" / "ts-peers" / "sdk-1.13.3" / "node_modules"


async def run_ts_client(url: str) -> Any:
    node = shutil.which("node")
    assert node is not None, "node is needed for the TypeScript SDK client (make ts-peers)"
    return await run_json(
        node, str(CLIENT), url, env={"NODE_PATH": str(NODE_PATH), "PATH": "/usr/bin:/bin"}
    )


async def test_the_typescript_legacy_client_gets_what_the_legacy_server_gives(
    peers: Peers,
) -> None:
    legacy = peers.legacy("interactive_server.py")
    bridge = peers.bridge(modern_interactive(peers, "--modern-only").url)
    async with asyncio.timeout(T):
        direct = await run_ts_client(legacy.url)
        bridged = await run_ts_client(bridge.url)
    assert bridged == direct
    assert bridged["protocolVersion"] == "2025-06-18"
    assert bridged["outcomes"]["ask_twice"] == {
        "text": "Ada likes Ada.",
        "asked": [
            {"method": "elicitation/create", "message": "Step 1: what is your name?"},
            {"method": "elicitation/create", "message": "Step 2: what is your favorite color?"},
        ],
    }
