"""Readiness (proxy/app/health.py) on a clock moved by hand: a verdict is reused while it is
fresh (`fresh_s`) and checked again once it is not; a URL whose path serves no MCP is not ready.
Against a fake pool whose one session answers `ping` (or whose sessions are refused);
tests/proxy/app/test_readyz_hang.py runs a real, stopped upstream."""

from __future__ import annotations

from typing import Any, cast

from fake_clock import FakeClock

from proxy.app.health import FRESH_S, Readiness
from proxy.upstream.errors import UpstreamRefused, missing_endpoint
from proxy.upstream.pool import UpstreamPool


class Ping:
    async def result(self) -> dict[str, Any]:
        return {}


class Session:
    def __init__(self) -> None:
        self.pings = 0

    def start(self, method: str, params: Any, **_: Any) -> Ping:
        assert method == "ping"
        self.pings += 1
        return Ping()


class Lease:
    def __init__(self, session: Session) -> None:
        self.session = session

    async def release(self, *, discard: bool = False) -> None:
        assert not discard


class Pool:
    def __init__(self) -> None:
        self.session = Session()

    async def lease(self, *_: Any, **__: Any) -> Lease:
        return Lease(self.session)


def readiness(pool: Pool, clock: FakeClock) -> Readiness:
    return Readiness(cast(UpstreamPool, pool), headers={}, timeout_s=5, clock=clock)


async def test_a_verdict_is_reused_while_fresh_and_checked_again_once_stale() -> None:
    pool, clock = Pool(), FakeClock()
    probe = readiness(pool, clock)
    assert (await probe.report()).checks == {"upstream": "reachable"}
    clock.advance(FRESH_S - 0.1)
    assert (await probe.report()).ready and pool.session.pings == 1
    clock.advance(0.1)
    assert (await probe.report()).ready and pool.session.pings == 2


class RefusingPool:
    """A pool whose sessions fail to open with `refused`."""

    def __init__(self, refused: UpstreamRefused) -> None:
        self.refused = refused

    async def lease(self, *_: Any, **__: Any) -> Lease:
        raise self.refused


async def test_a_path_that_serves_no_mcp_is_not_ready_and_names_the_likely_endpoint() -> None:
    """`--upstream http://127.0.0.1:8931` for a server at `/mcp`: every call would fail, so the
    bridge is not ready, and the verdict says what to fix without the URL."""
    opened = UpstreamRefused(
        "Upstream http://127.0.0.1:8931 answered initialize with HTTP 404", status=404
    )
    missing = missing_endpoint("http://127.0.0.1:8931", opened)
    report = await readiness(cast(Pool, RefusingPool(missing)), FakeClock()).report()
    assert not report.ready
    assert report.checks["upstream"] == (
        "unreachable: no MCP endpoint at that path (it answered HTTP 404); did you mean .../mcp?"
    )


async def test_a_session_refused_otherwise_is_still_an_answer() -> None:
    """A 400 (a server that wants what the probe lacks) answers: reachable, as before."""
    refused = UpstreamRefused("answered initialize with HTTP 400", status=400)
    report = await readiness(cast(Pool, RefusingPool(refused)), FakeClock()).report()
    assert report.ready
    assert (
        report.checks["upstream"]
        == "reachable (it refused the probe session: it answered HTTP 400)"
    )
