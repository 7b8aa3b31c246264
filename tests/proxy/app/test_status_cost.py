"""The status page costs the data path nothing that grows with held calls (issue 45): pollers get a
snapshot built at most once a second, written as JSON and as HTML at most once each, whatever the
number of held calls and of pollers. Counted in work done (snapshots built, renders, reads of the
held calls), never in time, so it cannot flake."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from aiohttp.test_utils import make_mocked_request
from status_fakes import Shown, held_registry

from config.settings import Settings
from proxy.app.status import StatusPage, StatusSources
from proxy.app.status_facts import MAX_LISTED
from proxy.calls.registry import HeldCallRegistry
from proxy.common.per_principal import PrincipalCounts, held_call_caps

POLLS = 50  # per path, per second of the fake clock


class CountingRegistry(HeldCallRegistry[Any]):
    """A registry that counts how often the page reads its held calls (each read is one pass)."""

    reads = 0

    def calls(self, limit: int | None = None) -> list[Any]:
        self.reads += 1
        return super().calls(limit)

    def __iter__(self) -> Iterator[Any]:
        self.reads += 1
        return super().__iter__()

    def held_now(self) -> int:
        self.reads += 1
        return super().held_now()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _loopback_request(path: str) -> Any:
    transport = mock.Mock()
    transport.get_extra_info.side_effect = lambda name, default=None: (
        ("127.0.0.1", 40000) if name == "peername" else default
    )
    return make_mocked_request("GET", path, headers={"Host": "127.0.0.1:8080"}, transport=transport)


async def _poll(page: StatusPage) -> set[bytes]:
    """`POLLS` pollers of each path at once; the distinct bodies they got."""
    replies = await asyncio.gather(
        *(page.json(_loopback_request("/status.json")) for _ in range(POLLS)),
        *(page.page(_loopback_request("/status")) for _ in range(POLLS)),
    )
    assert {reply.status for reply in replies} == {200}
    return {bytes(reply.body) for reply in replies}  # type: ignore[arg-type]


@pytest.mark.parametrize("held", [10, 4000])
async def test_pollers_cost_one_snapshot_a_second_whatever_the_held_calls(held: int) -> None:
    counts = PrincipalCounts(held_call_caps(held + 1, held + 1))
    registry = held_registry(held, tools=700, registry=CountingRegistry(counts))
    clock = Clock()
    page = StatusPage(
        Settings(), lambda _app: StatusSources([Shown("u", registry)], None), clock=clock
    )

    bodies = await _poll(page)
    # one snapshot, one JSON and one HTML, one pass each over the calls (oldest, per tool, count)
    assert (page.builds, page.renders, registry.reads) == (1, 2, 3)
    assert len(bodies) == 2  # every poller of a path got the same bytes
    listed = next(json.loads(body) for body in bodies if body.startswith(b"{"))
    [up] = listed["upstreams"]
    assert up["held"]["count"] == held and len(up["held"]["calls"]) == min(held, MAX_LISTED)

    clock.now += Settings().status.snapshot_max_age_s - 0.001
    assert await _poll(page) == bodies
    assert (page.builds, page.renders, registry.reads) == (1, 2, 3)

    clock.now += 0.001  # a second after the snapshot: the next request takes a new one
    await _poll(page)
    assert (page.builds, page.renders, registry.reads) == (2, 4, 6)


async def test_an_age_of_zero_builds_the_page_for_every_request() -> None:
    """`status.snapshot_max_age_s = 0`: exact to the moment, each request its own snapshot."""
    registry = held_registry(10)
    clock = Clock()
    settings = Settings.model_validate({"status": {"snapshot_max_age_s": 0}})
    page = StatusPage(
        settings, lambda _app: StatusSources([Shown("u", registry)], None), clock=clock
    )
    await _poll(page)
    assert (page.builds, page.renders) == (2 * POLLS, 2 * POLLS)
