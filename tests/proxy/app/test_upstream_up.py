"""`mrtr_bridge_upstream_up` (issue 44, item 11): whether the upstream answers, read at scrape time
from the newest of the readiness check and the era tracker's periodic probe, so it falls to 0 for
a dead upstream while nobody calls and nothing asks `/readyz`, and costs no upstream session. A
real legacy server (`tests/peers/journal_server.py`, mcp 1.x) in front of an in-process bridge,
then stopped for good."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from integration.harness import PeerProcess, Peers, legacy_stdio_command
from safety_harness import JOURNAL_SERVER, InProcessBridge, bridge_settings, inprocess_bridge

from proxy.observe.access import host_port

TIMEOUT_S = 30.0
GAUGE = "mrtr_bridge_upstream_up"


@pytest.fixture
def legacy(tmp_path: Path) -> Iterator[PeerProcess]:
    peers = Peers(log_dir=tmp_path)
    try:
        yield peers.legacy(JOURNAL_SERVER, "--journal", str(tmp_path / "journal.jsonl"))
    finally:
        peers.close()


async def gauge(bridge: InProcessBridge) -> str | None:
    """The gauge's sample line on a real scrape of /metrics, if there is one."""
    status, body = await bridge.get("/metrics")
    assert status == 200
    return next((line for line in body.splitlines() if line.startswith(GAUGE + "{")), None)


async def test_the_gauge_falls_to_0_for_a_dead_upstream_while_idle(legacy: PeerProcess) -> None:
    name = host_port(legacy.url)
    settings = bridge_settings(legacy.url, upstream={"era_probe_interval_s": 0.2})
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        assert await gauge(bridge) == f'{GAUGE}{{upstream="{name}"}} 1.0'
        legacy.stop()
        while await gauge(bridge) != f'{GAUGE}{{upstream="{name}"}} 0.0':
            await asyncio.sleep(0.05)
        assert bridge.pool.stats().created_total == 0  # no session was opened for it
        status, _ = await bridge.get("/readyz")  # the readiness check agrees, and is newer
        assert status == 503
        assert await gauge(bridge) == f'{GAUGE}{{upstream="{name}"}} 0.0'


async def test_the_readiness_check_feeds_it_over_stdio(tmp_path: Path) -> None:
    """A stdio upstream has no periodic probe: the gauge appears with the first `/readyz` check."""
    settings = bridge_settings("http://unused/mcp")
    stdio = settings.model_copy(
        update={
            "upstream": settings.upstream.model_copy(
                update={"url": None, "command": legacy_stdio_command()}
            )
        }
    )
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(stdio) as bridge:
        assert await gauge(bridge) is None  # nothing checked yet
        status, _ = await bridge.get("/readyz")
        assert status == 200
        line = await gauge(bridge)
        assert line is not None and line.endswith(" 1.0") and 'upstream="stdio:' in line
