"""StartupWatch (proxy/upstream/reachability.py): an upstream unreachable at start is said so at
once and again with backoff, until it answers; then once `upstream_reachable`, and never again.
An upstream whose path answered the start probe with 404 is said so once, naming the likely fix.
On the loop's virtual clock (tests/virtual_time.py): the backoff is read exactly, and "never
again" is shown by moving the clock far past the longest backoff."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest
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
        self.discover_status: int | None = None

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


@pytest.mark.parametrize("status", [404, 405])
async def test_a_path_that_serves_no_mcp_is_said_once_with_the_likely_endpoint(status: int) -> None:
    """The server's address without its MCP path: the start probe's POST got 404 (or 405); one
    warning names where the endpoint most likely is, and nothing is watched."""
    era = FakeEra(answers_after=0)
    era.last_failure, era.discover_status = None, status
    watch = StartupWatch(cast(UpstreamEra, era), "http://127.0.0.1:8931")
    with capture_logs() as logged:
        watch.start()
        await watch.aclose()
    assert logged == [
        {
            "event": "upstream_endpoint_missing",
            "log_level": "warning",
            "url": "http://127.0.0.1:8931",
            "reason": f"server/discover answered HTTP {status}: no MCP endpoint at that path"
            " (unless it serves only the HTTP+SSE transport there)",
            "hint": "did you mean http://127.0.0.1:8931/mcp?",
        }
    ]
    assert era.probed_at == []


async def test_an_http_sse_stream_path_answering_404_to_a_post_is_not_suspected() -> None:
    """`/sse` is where an HTTP+SSE server's stream is, and it takes GET only (server-everything
    2025.5.12 answers the probe's POST with 404): no warning."""
    era = FakeEra(answers_after=0)
    era.last_failure, era.discover_status = None, 404
    watch = StartupWatch(cast(UpstreamEra, era), "http://127.0.0.1:8931/sse")
    with capture_logs() as logged:
        watch.start()
        await watch.aclose()
    assert logged == []
