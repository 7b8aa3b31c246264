"""StartupWatch (proxy/upstream/reachability.py): an upstream unreachable at start is said so at
once and again with backoff, until it answers; then once `upstream_reachable`, and never again.
On the loop's virtual clock (tests/virtual_time.py): the backoff is read exactly, and "never
again" is shown by moving the clock far past the longest backoff."""

from __future__ import annotations

import asyncio
from typing import cast

from structlog.testing import capture_logs
from virtual_time import advance, on_virtual_time

from proxy.upstream.era import UpstreamEra
from proxy.upstream.reachability import MAX_DELAY_S, StartupWatch
from translators.protocol.era_detection import LEGACY
from translators.wire.errors import BridgeError, UpstreamUnavailable

UPSTREAM = "http://upstream.invalid/mcp"


class FakeEra:
    """Fails its probes until `answers_after` of them have run, then knows the upstream."""

    def __init__(self, answers_after: int) -> None:
        self.last_failure: BridgeError | None = UpstreamUnavailable("down")
        self.era: str | None = None
        self.probed_at: list[float] = []
        self._answers_after = answers_after

    async def probe(self) -> str | None:
        self.probed_at.append(asyncio.get_running_loop().time())
        if len(self.probed_at) >= self._answers_after:
            self.last_failure, self.era = None, LEGACY
        return self.era


@on_virtual_time
async def test_it_warns_with_backoff_until_the_upstream_answers_and_then_never_again() -> None:
    era = FakeEra(answers_after=3)
    watch = StartupWatch(cast(UpstreamEra, era), UPSTREAM)
    with capture_logs() as logged:
        watch.start()
        await advance(1 + 2 + 4)  # three probes, the third answered
        await advance(100 * MAX_DELAY_S)  # far past any backoff: nothing more
        await watch.aclose()
    assert era.probed_at == [1.0, 3.0, 7.0]
    events = [(entry["event"], entry.get("retry_in_s")) for entry in logged]
    assert events == [
        ("upstream_unreachable", 1.0),
        ("upstream_unreachable", 2.0),
        ("upstream_unreachable", 4.0),
        ("upstream_reachable", None),
    ]


async def test_an_upstream_that_answered_the_start_probe_is_not_watched() -> None:
    era = FakeEra(answers_after=0)
    era.last_failure = None
    watch = StartupWatch(cast(UpstreamEra, era), UPSTREAM)
    with capture_logs() as logged:
        watch.start()
        await watch.aclose()
    assert (logged, era.probed_at) == ([], [])
