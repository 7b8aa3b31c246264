"""Three bridge replicas on loopback in front of one legacy server, every POST of a call sent to the
next replica: retries are forwarded to the replica owning their held call (docs/architecture.md
§ Replicas)."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import mcp_types as types
import pytest

from .cluster_helpers import Cluster, metric, rotating_client, scrape, start_cluster
from .harness import InputAnswers, Peers

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
