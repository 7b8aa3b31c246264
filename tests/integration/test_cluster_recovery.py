"""Recovery across replicas: three bridges sharing their requestState key in front of one mcp 1.x
server (`tests/peers/recovery_server.py`, with its run counter). A call waits on replica r1 (its
owner) for the second of its three rounds; r1 is killed (SIGKILL); the retry lands on r2, which
cannot reach r1 (connection refused) and serves it itself: the annotated idempotent tool runs again
with the sealed earlier answers and completes, the unannotated one is refused with the fixed error
and ran exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from .cluster_helpers import metric, scrape, start_replica
from .harness import PeerProcess, Peers, free_port
from .test_recovery import SERVER, finish, refused, second_round

pytestmark = pytest.mark.integration
T = 60  # bound on the test body, seconds
FAILURES = "mrtr_bridge_forward_failures_total"


def runs(state_dir: Path, tag: str) -> int:
    path = state_dir / f"runs-{tag}"
    return len(path.read_text().splitlines()) if path.exists() else 0


def replicas_of_one_server(
    peers: Peers, state_dir: Path, count: int, extra: Mapping[str, Any] | None = None
) -> list[PeerProcess]:
    """`count` replicas r1, r2, ... in front of one recovery server counting runs in
    `state_dir`."""
    legacy = peers.legacy(SERVER, "--state-dir", str(state_dir))
    ports = [free_port() for _ in range(count)]
    return [
        start_replica(peers, legacy.url, f"r{index + 1}", port, ports, extra)
        for index, port in enumerate(ports)
    ]


async def test_retry_on_another_replica_recovers_when_the_owner_was_killed(
    peers: Peers, tmp_path: Path
) -> None:
    state_dir = tmp_path / "state"
    owner, other, _third = replicas_of_one_server(peers, state_dir, 3)
    async with asyncio.timeout(T):
        key_a, state_a = await second_round(owner.url, "survey", "idem")
        key_p, state_p = await second_round(owner.url, "survey_plain", "plain")
        owner.popen.kill()
        owner.popen.wait(timeout=10)
        assert await finish(other.url, "survey", "idem", key_a, state_a) == "Ada likes blue"
        await refused(other.url, "survey_plain", "plain", key_p, state_p)
        # the unannotated tool ran once
        assert (runs(state_dir, "idem"), runs(state_dir, "plain")) == (
            2,
            1,
        )
        text = await scrape(other.port)
    assert metric(text, "mrtr_bridge_recovered_calls_total", cause="owner_unreachable") == 1
    assert (
        metric(text, "mrtr_bridge_recovery_refusals_total", reason="not_annotated_idempotent") == 1
    )
    assert (
        metric(text, "mrtr_bridge_request_state_rejections_total", reason="owner_unreachable") == 1
    )
    # the first retry's failed connection makes r2 forget r1, so the second finds it outside the
    # peer set
    failures = [
        metric(text, FAILURES, reason=reason)
        for reason in ("owner_unreachable", "owner_not_in_peer_set")
    ]
    assert failures == [1, 1]
    assert metric(text, "mrtr_bridge_forwarded_retries_total") == 0
