"""Readiness: the requestState keys are loaded and the upstreams answer (docs/decisions.md § 17).

Each upstream has its verdict (`Readiness`, below); the bridge's (`bridge_readiness`) follows
`front.ready_requires`: with `any`, the default, the bridge is ready while at least one upstream
is, so one upstream down never takes the others out of a load balancer; with `all`, only while
every one is (docs/operations.md, "Health, readiness and metrics").

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

`upstream_up` gives `/metrics` its `mrtr_bridge_upstream_up` gauge, read at scrape time: the
newest of this check's verdict and the era tracker's last probe (`proxy/upstream/era.py`: an HTTP
upstream is probed every `upstream.era_probe_interval_s` with a session-less `server/discover`, so
the gauge falls to 0 for a dead upstream while no client calls and nothing asks `/readyz`). Nothing
runs for the gauge itself: no session is opened for it, none is kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

import structlog

from proxy.common.clock import Clock, loop_time
from proxy.common.log_context import log_context
from proxy.passthrough.modern_upstream import ModernUpstream
from proxy.upstream.base import TransportInfo
from proxy.upstream.era import UpstreamEra
from proxy.upstream.errors import UpstreamRefused, plain_reason
from proxy.upstream.pool import SessionKey, UpstreamPool
from translators.auth.oauth import UpstreamAuthChallenge
from translators.protocol.era_detection import MODERN
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
    starting: bool = False  # not checked: its engine is not serving yet

    @property
    def status(self) -> str:
        return "ready" if self.ready else "starting" if self.starting else "unavailable"


class Readiness:
    """Probes the upstream through the pool, at most once per `fresh_s` seconds."""

    def __init__(
        self,
        pool: UpstreamPool,
        *,
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
        checks: dict[str, str] = {}
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

    def last_known(self) -> str | None:
        """The last verdict, without checking (None before the first check ended)."""
        return self._verdict[1] if self._verdict is not None else None

    @property
    def checked(self) -> tuple[float, bool] | None:
        """(loop time, ready) of the last verdict, or None before the first."""
        if self._verdict is None:
            return None
        return self._verdict[0], self._verdict[1].startswith("reachable")

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


MODERN_ONLY: Final = "reachable (modern-only: relayed untranslated)"
ReadyRequires = Literal["any", "all"]


class ReadyEngine(Protocol):
    def is_ready(self) -> bool: ...


class CheckedUpstream(Protocol):
    """What readiness and the status page read of an upstream the bridge serves
    (`proxy.app.http_app.Upstream`)."""

    @property
    def name(self) -> str: ...

    @property
    def scope(self) -> str | None: ...

    @property
    def path(self) -> str: ...

    @property
    def modern(self) -> ModernUpstream | None: ...

    @property
    def engine(self) -> ReadyEngine | None: ...

    @property
    def readiness(self) -> Readiness | None: ...


async def upstream_report(upstream: CheckedUpstream) -> ReadinessReport:
    """One upstream's verdict and what each check found, within `front.ready_timeout_s`."""
    if upstream.readiness is None:  # an engine given from elsewhere, or not started yet
        engine = upstream.engine
        ready = engine is not None and engine.is_ready()
        return ReadinessReport(ready, starting=not ready)
    with log_context(upstream=upstream.name):
        report = await upstream.readiness.report()
    ready, checks = report.ready, dict(report.checks)
    if upstream.modern is not None:
        era = upstream.modern.era.era
        checks["era"] = era or "unknown"
        if era == MODERN:  # no legacy session can open: reachable means the era probe answered
            ready, checks["upstream"] = True, MODERN_ONLY
    return ReadinessReport(ready, checks)


def known_health(upstream: CheckedUpstream) -> tuple[bool | None, str]:
    """(ready, what the last check found), without checking (the status page); ready is None
    before the first check ended."""
    if upstream.modern is not None and upstream.modern.era.era == MODERN:
        return True, MODERN_ONLY
    if upstream.readiness is None:
        engine = upstream.engine
        ready = engine is not None and engine.is_ready()
        return ready, "ready" if ready else "starting"
    verdict = upstream.readiness.last_known()
    if verdict is None:
        return None, "not checked yet"
    return verdict.startswith("reachable"), verdict


def bridge_status(ready: Sequence[bool], requires: ReadyRequires) -> tuple[str, int]:
    """(status, HTTP status) of the bridge from its upstreams' verdicts: `ready` when every one is,
    `degraded` (200) when some are and `requires` is `any`, else `unavailable` (503)."""
    if ready and all(ready):
        return "ready", 200
    if any(ready) and requires == "any":
        return "degraded", 200
    return "unavailable", 503


async def bridge_readiness(
    upstreams: Sequence[CheckedUpstream], *, requires: ReadyRequires, keys: str
) -> tuple[dict[str, Any], int]:
    """The `/readyz` body and status: every upstream checked at once. `checks` holds the
    bridge-wide ones (`keys`) and, with a single upstream, its own as well (the body a bridge of
    one upstream always had). Each upstream is named by its name, the unnamed one by its path: its
    address is not for whoever can reach `/readyz`."""
    reports = await asyncio.gather(*(upstream_report(upstream) for upstream in upstreams))
    status, code = bridge_status([report.ready for report in reports], requires)
    checks = {"keys": keys, **(reports[0].checks if len(reports) == 1 else {})}
    body = {
        "status": status,
        "ready_requires": requires,
        "checks": checks,
        "upstreams": {
            upstream.scope or upstream.path: {"status": report.status, "checks": report.checks}
            for upstream, report in zip(upstreams, reports, strict=True)
        },
    }
    return body, code


def upstream_up(readiness: Readiness, era: UpstreamEra | None) -> Callable[[], bool | None]:
    """Whether the upstream answers, by the newest check of the two (None before either): the
    readiness check's verdict, or the era probe's (an answer, or a connection that failed)."""

    def newest() -> bool | None:
        seen = [readiness.checked]
        if era is not None and era.probed_at is not None:
            seen.append((era.probed_at, era.last_failure is None))
        known = [check for check in seen if check is not None]
        return max(known)[1] if known else None

    return newest


__all__ = [
    "ANSWER_WITHIN_S",
    "FRESH_S",
    "MODERN_ONLY",
    "PROBE_KEY",
    "CheckedUpstream",
    "Readiness",
    "ReadinessReport",
    "ReadyRequires",
    "bridge_readiness",
    "bridge_status",
    "known_health",
    "upstream_report",
    "upstream_up",
]
