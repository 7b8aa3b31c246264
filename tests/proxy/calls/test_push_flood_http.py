"""An upstream flooding a call with pushes, over HTTP in front of the real mcp 1.x journal server
(`tests/peers/journal_server.py`, its `flood` tool): the limit error, `/healthz` answering
throughout, and a bystander's calls completing (docs/security.md § Limits). The scripted cases
(linear CPU, both caps, duplicate ids) are in tests/engine/test_engine_push_floods.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from integration.harness import RawReply
from safety_harness import (
    JournalPeer,
    bridge_settings,
    call,
    inprocess_bridge,
    journal_peer,
    text_of,
)
from test_limits import ALICE, TIMEOUT_S, assert_limit, while_bob_works

from translators.wire.errors import INTERNAL_ERROR


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JournalPeer]:
    with journal_peer(tmp_path_factory.mktemp("flood")) as peer:
        yield peer


async def test_pushes_per_round_limit_under_a_flood(upstream: JournalPeer) -> None:
    """A server sending 2,000 elicitations at once: the call ends with the limit error past
    held.max_pushes_per_round (64), while /healthz keeps answering at once and Bob's calls
    complete."""
    settings = bridge_settings(upstream.url)
    probes: list[tuple[int, float]] = []
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        alice = bridge.poster(ALICE)

        async def probe() -> None:
            while True:
                started = time.monotonic()
                status, _ = await bridge.get("/healthz")
                probes.append((status, time.monotonic() - started))
                await asyncio.sleep(0.02)

        async def offend() -> RawReply:
            probing = asyncio.create_task(probe())
            try:
                return await call(alice, "flood", tag="flood", count=2000)
            finally:
                probing.cancel()

        reply = await while_bob_works(bridge, upstream, offend)
        assert_limit(
            reply,
            "held.max_pushes_per_round",
            "The upstream server asked for more than 64 inputs in one round",
        )
        assert text_of(await call(alice, "echo", text="after")) == "after"
        rejections = "mrtr_bridge_limit_rejections_total"
        assert bridge.sample(rejections, limit="held.max_pushes_per_round") == 1
    assert probes and all(status == 200 and seconds < 2.0 for status, seconds in probes), probes
    # the server's push past the cap was refused with the limit (sent first; the 64 held pushes'
    # refusals follow, then the cancel, which may overtake some of them in the server's tasks)
    await upstream.wait_for(
        lambda entries: any(entry.get("event") == "flood_answered" for entry in entries)
    )
    (answered,) = [e for e in upstream.entries() if e.get("event") == "flood_answered"]
    assert answered["outcomes"][str(INTERNAL_ERROR)] == 1
