"""Three bridge replicas on loopback in front of one legacy server, every POST of a call sent to the
next replica: retries are forwarded to the replica owning their held call (docs/architecture.md
§ Replicas)."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import mcp_types as types
import pytest

from .cluster_helpers import (
    Cluster,
    metric,
    rotating_client,
    scrape,
    start_cluster,
    start_replica,
)
from .harness import DEMO_SERVER, InputAnswers, Peers, free_port

FORWARDED = "mrtr_bridge_forwarded_retries_total"
RECEIVED = "mrtr_bridge_forwarded_retries_received_total"
EXPECTED = "Ada goes to Lisbon: by train; saved in file:///trips"


@pytest.fixture(scope="module")
def cluster(module_peers: Peers) -> Cluster:
    return start_cluster(module_peers)


async def _totals(cluster: Cluster, name: str) -> float:
    return sum([metric(await scrape(port), name) for port in cluster.ports])


async def plan_trip(cluster: Cluster, start: int) -> tuple[str, list[int], list[str]]:
    """One three-round call through the rotating client; (text, ports used, log messages seen)."""
    answers = InputAnswers(
        elicit_content={"name": "Ada"}, sample_text="by train", roots=["file:///trips"]
    )
    logs: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(str(params.data))

    async with rotating_client(
        cluster.ports, start, log_level="info", logging_callback=on_log, **answers.client_kwargs()
    ) as (client, transport):
        result = await client.call_tool("plan_trip", {"city": "Lisbon"})
    content = result.content[0]
    assert [method for method, _ in answers.asked] == [
        "elicitation/create",
        "sampling/createMessage",
        "roots/list",
    ]
    return (
        (content.text if isinstance(content, types.TextContent) else repr(content)),
        transport.sent_to,
        logs,
    )


async def test_every_round_on_another_replica_completes(cluster: Cluster) -> None:
    """Elicitation, sampling and roots over three rounds, each POST on the next replica: two of the
    three retries are forwarded to the owner, and the owner's logs stream back through the hop."""
    before = await _totals(cluster, FORWARDED), await _totals(cluster, RECEIVED)
    async with asyncio.timeout(60):
        text, sent_to, logs = await plan_trip(cluster, 0)
    assert text == EXPECTED
    assert all(a != b for a, b in itertools.pairwise(sent_to))
    assert len(set(sent_to)) == 3
    assert logs == ["planning for Ada", "plan: by train", "roots listed"]
    after = await _totals(cluster, FORWARDED), await _totals(cluster, RECEIVED)
    assert (after[0] - before[0], after[1] - before[1]) == (2, 2)


async def test_twenty_calls_in_parallel(cluster: Cluster) -> None:
    before = await _totals(cluster, FORWARDED)
    async with asyncio.timeout(180):
        outcomes: list[Any] = await asyncio.gather(
            *(plan_trip(cluster, index) for index in range(20))
        )
    assert [text for text, _, _ in outcomes] == [EXPECTED] * 20
    assert await _totals(cluster, FORWARDED) - before == 40


async def test_a_retry_forwarded_to_its_owner_keeps_its_named_upstream(module_peers: Peers) -> None:
    """Two replicas with the same two named upstreams: `alpha` (the demo server, which has
    `plan_trip`) and `beta` (the fixture server, which has not). A call at `/servers/alpha/mcp`
    whose every round lands on the other replica completes: each retry is forwarded to the owner at
    the same path and served by alpha's upstream there (at beta's it would find no such tool, and
    alpha's requestState would be refused)."""
    alpha = module_peers.legacy(DEMO_SERVER)
    beta = module_peers.legacy()
    ports = [free_port() for _ in range(2)]
    upstreams = [f"alpha={alpha.url}", f"beta={beta.url}"]
    for index, port in enumerate(ports):
        start_replica(module_peers, upstreams, f"n{index + 1}", port, ports)
    answers = InputAnswers(
        elicit_content={"name": "Ada"}, sample_text="by train", roots=["file:///trips"]
    )
    async with asyncio.timeout(60):
        before = sum([metric(await scrape(port), FORWARDED) for port in ports])
        async with rotating_client(
            ports, 0, path="/servers/alpha/mcp", **answers.client_kwargs()
        ) as (client, transport):
            result = await client.call_tool("plan_trip", {"city": "Lisbon"})
        after = sum([metric(await scrape(port), FORWARDED) for port in ports])
    content = result.content[0]
    assert isinstance(content, types.TextContent) and content.text == EXPECTED
    assert after - before == 2  # rounds 2 and 4 of the call's four POSTs went to the other one
    assert all(a != b for a, b in itertools.pairwise(transport.sent_to))
