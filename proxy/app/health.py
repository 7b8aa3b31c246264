"""Readiness: the requestState keys are loaded and the upstream answers (docs/decisions.md § 17).

`/readyz` must not lie in either direction: a bridge whose upstream is down is not ready, and a
bridge that has served no traffic yet is ready as soon as its upstream answers. So readiness is
probed, not inferred from traffic: a shared lease of one warm session under a reserved probe
principal (no client digest can equal it), then a legacy `ping` on it. The verdict is cached for
`fresh_s`, and concurrent checks share one probe, so a tight readiness loop costs at most one ping
per `fresh_s` and one session slot (idle, so evictable when real callers need room). `/readyz`
waits at most `front.ready_timeout_s` for a check: an upstream that hangs (stopped, overloaded) gets
the last known verdict reported, marked as such, while the check runs on in the background until
`upstream.init_timeout_s` and records its own verdict.

An upstream that answers the probe's `initialize` with an HTTP or JSON-RPC error still *answers*:
it counts as reachable (it may want per-user credentials the probe does not have); only a
connection failure, a timeout, a lost session, a protocol version the bridge does not speak, or a
URL whose path serves no MCP (404 or 405 to `initialize`: every call would fail; the verdict says
where the endpoint likely is, "did you mean .../mcp?", proxy/upstream/errors.py) make the bridge
unready.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import structlog

from proxy.common.clock import Clock, loop_time
from proxy.upstream.base import TransportInfo
from proxy.upstream.errors import UpstreamRefused, plain_reason
from proxy.upstream.pool import SessionKey, UpstreamPool
from translators.auth.oauth import UpstreamAuthChallenge
from translators.protocol.eras import LEGACY_PING
from translators.protocol.revisions import UnsupportedUpstreamVersion
from translators.wire.errors import (
    BridgeError,
    LimitExceeded,
    UpstreamSessionLost,
    UpstreamTimeout,
    UpstreamUnavailable,
)

PROBE_KEY: Final = SessionKey("~readiness-probe", "probe")
FRESH_S: Final = 5.0
ANSWER_WITHIN_S: Final = 2.0
_TIMED_OUT: Final = "unreachable: it did not answer in time"
_log = structlog.get_logger("proxy.app.health")


@dataclass(frozen=True)
class ReadinessReport:
    """The `/readyz` verdict and what each check found (no secrets, no URLs)."""

    ready: bool
    checks: dict[str, str] = field(default_factory=dict)


class Readiness:
    """Probes the upstream through the pool, at most once per `fresh_s` seconds."""

    def __init__(
        self,
        pool: UpstreamPool,
        *,
        keys: str,
        headers: Mapping[str, str],
        timeout_s: float,
        answer_within_s: float = ANSWER_WITHIN_S,
        fresh_s: float = FRESH_S,
        transport: TransportInfo | None = None,
        clock: Clock = loop_time,
    ) -> None:
        """`clock` tells a verdict's age (fresh for `fresh_s`; proxy/common/clock.py); the waits
        for a check stay loop timers."""
        self._clock = clock
        self._pool = pool
        self._transport = transport
        self._keys = keys
        self._headers = dict(headers)
        self._timeout_s = timeout_s
        self._answer_within_s = answer_within_s
        self._fresh_s = fresh_s
        self._verdict: tuple[float, str] | None = None
        self._probe: asyncio.Task[str] | None = None
        self._winding_down: set[asyncio.Task[str]] = set()

    async def report(self) -> ReadinessReport:
        """The verdict within `answer_within_s`: a fresh check's, or else the last known one
        while the check goes on in the background (a hung upstream must not make `/readyz` hang)."""
        checks = {"keys": self._keys}
        upstream = await self._upstream()
        if upstream is None:
            upstream = (
                self._verdict[1]
                if self._verdict is not None
                else "unknown: first check still running"
            )
            checks["upstream_checked"] = self._age() + ", a check is running"
        checks["upstream"] = upstream
        if self._transport is not None:
            checks["transport"] = self._transport.name
        return ReadinessReport(upstream.startswith("reachable"), checks)

    def _age(self) -> str:
        if self._verdict is None:
            return "never"
        return f"{self._clock() - self._verdict[0]:.1f} s ago"

    async def _upstream(self) -> str | None:
        """A fresh verdict, or None when the check did not finish within `answer_within_s`."""
        now = self._clock()
        if self._verdict is not None and now - self._verdict[0] < self._fresh_s:
            return self._verdict[1]
        if self._probe is None:
            self._probe = asyncio.get_running_loop().create_task(
                self._run_probe(), name="readiness-probe"
            )
            self._probe.add_done_callback(self._probe_done)
        try:
            return await asyncio.wait_for(asyncio.shield(self._probe), self._answer_within_s)
        except TimeoutError:
            return None

    def _probe_done(self, probe: asyncio.Task[str]) -> None:
        if self._probe is probe:
            self._probe = None

    async def _run_probe(self) -> str:
        ping = asyncio.get_running_loop().create_task(self._ping(), name="readiness-ping")
        try:
            verdict = await asyncio.wait_for(asyncio.shield(ping), self._timeout_s)
        except TimeoutError:
            # The verdict is recorded now; the ping winds down on its own (closing its session may
            # wait on the same hung upstream).
            verdict = _TIMED_OUT
            ping.cancel()
            self._winding_down.add(ping)
            ping.add_done_callback(self._winding_down.discard)
        self._verdict = (self._clock(), verdict)
        return verdict

    async def _ping(self) -> str:
        try:
            lease = await self._pool.lease(
                PROBE_KEY, {}, exclusive=False, headers=self._headers, wait=False
            )
        except (UpstreamUnavailable, UpstreamTimeout, UpstreamSessionLost) as exc:
            _log.warning("readiness_probe_failed", error=exc.message)
            return f"unreachable: {plain_reason(exc)}"
        except LimitExceeded:
            return "reachable (every upstream session is in use)"
        except UnsupportedUpstreamVersion as exc:
            _log.warning("readiness_probe_failed", error=exc.message)
            return exc.verdict
        except UpstreamAuthChallenge as exc:
            _log.info("readiness_probe_refused", error=exc.message)
            return (
                "reachable (it asks for credentials the probe does not have; set "
                "upstream.authorization to probe with one)"
            )
        except BridgeError as exc:
            if isinstance(exc, UpstreamRefused) and exc.likely is not None:  # no MCP at the path
                _log.warning("readiness_probe_failed", error=exc.message)
                return f"unreachable: {plain_reason(exc)}"
            _log.info("readiness_probe_refused", error=exc.message)
            return f"reachable (it refused the probe session: {plain_reason(exc)})"
        verdict = _TIMED_OUT  # unless the ping ends before the probe's deadline
        try:
            await lease.session.start(
                LEGACY_PING, {}, headers=self._headers, on_inbound=None
            ).result()
            verdict = "reachable"
        except (UpstreamUnavailable, UpstreamTimeout, UpstreamSessionLost) as exc:
            _log.warning("readiness_probe_failed", error=exc.message)
            verdict = f"unreachable: {plain_reason(exc)}"
        except BridgeError:
            verdict = "reachable (ping answered with an error)"
        finally:
            await lease.release(discard=not verdict.startswith("reachable"))
        return verdict


__all__ = ["ANSWER_WITHIN_S", "FRESH_S", "PROBE_KEY", "Readiness", "ReadinessReport"]
