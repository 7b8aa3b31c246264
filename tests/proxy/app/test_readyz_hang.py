"""`/readyz` answers within `front.ready_timeout_s` even when the upstream hangs (issue 16, defect
6).

The probe stopped the legacy server with SIGSTOP: its socket still accepts connections, nothing
answers, and `/readyz` took `upstream.init_timeout_s` (10 s) to say 503. Here a real legacy server
(`tests/peers/journal_server.py`, mcp 1.x) is stopped the same way in front of an in-process bridge.

No timing window: each `/readyz` must answer well before the init timeout it would have waited for
(`BOUND_S`, half of it), however loaded the machine; the waits for a verdict to go stale or for the
background check to give up are bounded from below only. Under load this test saw a 200 from a
"stopped" upstream: another test session's server had taken the legacy server's port between its
pick and its bind (two xdist workers of one name walked the same port block in the same order),
the harness took that server's listening for this one's, and the SIGSTOP went to a process that
never served; `tests/integration/ports.py` now claims ports across sessions and checks whose
listener answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from integration.harness import PeerProcess, Peers
from safety_harness import JOURNAL_SERVER, InProcessBridge, bridge_settings, inprocess_bridge

from proxy.app.health import FRESH_S

READY_TIMEOUT_S = 1.0
INIT_TIMEOUT_S = 8.0
BOUND_S = INIT_TIMEOUT_S / 2  # what a /readyz that waited for the init timeout could not meet
TIMEOUT_S = 60.0


@pytest.fixture
def legacy(tmp_path: Path) -> Iterator[PeerProcess]:
    """A legacy server of this test's own (it gets stopped); continued before it is closed."""
    peers = Peers(log_dir=tmp_path)
    try:
        process = peers.legacy(JOURNAL_SERVER, "--journal", str(tmp_path / "journal.jsonl"))
        try:
            yield process
        finally:
            if process.popen.poll() is None:
                os.kill(process.popen.pid, signal.SIGCONT)
    finally:
        peers.close()


async def timed_readyz(bridge: InProcessBridge) -> tuple[float, int, dict[str, Any]]:
    started = time.monotonic()
    status, body = await bridge.get("/readyz")
    return time.monotonic() - started, status, json.loads(body)


async def test_readyz_is_bounded_when_the_upstream_hangs(legacy: PeerProcess) -> None:
    """Stopped before any check: 503 'unknown' within the limit; after SIGCONT ready; stopped again:
    the last known state within the limit, then unreachable once the background check times out."""
    settings = bridge_settings(
        legacy.url,
        front={"ready_timeout_s": READY_TIMEOUT_S},
        upstream={"init_timeout_s": INIT_TIMEOUT_S},
    )
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        os.kill(legacy.popen.pid, signal.SIGSTOP)
        took, status, body = await timed_readyz(bridge)
        assert took < BOUND_S, f"/readyz took {took:.2f} s with the upstream stopped"
        # the era probe got an answer before the upstream was stopped
        checks = {
            "upstream": "unknown: first check still running",
            "upstream_checked": "never, a check is running",
            "transport": "auto (not detected yet)",
            "era": "legacy",
        }
        assert (status, body) == (
            503,
            {
                "status": "unavailable",
                "ready_requires": "any",
                "checks": {"keys": "ephemeral", **checks},
                "upstreams": {"/mcp": {"status": "unavailable", "checks": checks}},
            },
        )

        os.kill(legacy.popen.pid, signal.SIGCONT)
        while (await timed_readyz(bridge))[1] != 200:  # the background check (or the next) succeeds
            await asyncio.sleep(0.1)
        checked = time.monotonic()

        os.kill(legacy.popen.pid, signal.SIGSTOP)
        # the verdict is stale
        await asyncio.sleep(max(0.0, FRESH_S - (time.monotonic() - checked)) + 0.2)
        took, status, body = await timed_readyz(bridge)
        assert took < BOUND_S, f"/readyz took {took:.2f} s with the upstream stopped"
        assert status == 200 and body["checks"]["upstream"] == "reachable"
        assert body["checks"]["upstream_checked"].endswith(" s ago, a check is running")

        # the background check gives up, says so
        async with asyncio.timeout(2 * INIT_TIMEOUT_S + FRESH_S):
            while status == 200:
                took, status, body = await timed_readyz(bridge)
                assert took < BOUND_S, f"/readyz took {took:.2f} s with the upstream stopped"
        assert (status, body["checks"]["upstream"]) == (
            503,
            "unreachable: it did not answer in time",
        )
        os.kill(legacy.popen.pid, signal.SIGCONT)
