"""Readiness (proxy/app/health.py) on a clock moved by hand: a verdict is reused while it is
fresh (`fresh_s`) and checked again once it is not. Against a fake pool whose one session answers
`ping`; tests/proxy/app/test_readyz_hang.py runs a real, stopped upstream."""

from __future__ import annotations

from typing import Any, cast

from fake_clock import FakeClock

from proxy.app.health import FRESH_S, Readiness
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
