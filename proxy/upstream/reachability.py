"""An HTTP upstream that cannot be reached at start-up is said so at once, and again with backoff
until it answers (docs/operations.md § Running).

The era probe (`proxy.upstream.era`) already asks the upstream at start; when it got no answer
(connection refused, closed, a 5xx), `StartupWatch` logs `upstream_unreachable` at warning level,
naming the upstream (its URL without credentials) and the reason, then probes again after 1 s, 2 s,
4 s, ... up to `MAX_DELAY_S`, until the upstream answers, and logs `upstream_reachable` once it
does. The bridge serves meanwhile: `/readyz` says the same in plain words, and a call fails with
"The upstream server is unavailable".

An upstream that answered the probe with 404 or 405 most likely has no MCP endpoint at that path
(the server's address given without `/mcp`): `StartupWatch` logs `upstream_endpoint_missing` once,
naming where it most likely is ("did you mean http://127.0.0.1:8931/mcp?", proxy/upstream/
errors.py), unless the URL ends with `/sse` (an HTTP+SSE server's stream takes no POST). `/readyz`
answers 503 with the same fix once a session fails to open there.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

import structlog

from proxy.upstream.era import UpstreamEra
from proxy.upstream.errors import (
    NO_ENDPOINT_STATUSES,
    endpoint_hint,
    likely_endpoint,
    plain_reason,
)

FIRST_DELAY_S: Final = 1.0
MAX_DELAY_S: Final = 60.0
_log = structlog.get_logger(__name__)


class StartupWatch:
    """Warns while the upstream has not answered since start; stops once it has."""

    def __init__(
        self,
        era: UpstreamEra,
        upstream: str,
        *,
        first_delay_s: float = FIRST_DELAY_S,
        max_delay_s: float = MAX_DELAY_S,
    ) -> None:
        self._era = era
        self._upstream = upstream
        self._first_delay_s = first_delay_s
        self._max_delay_s = max_delay_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Begin watching, after the era probe at start has run."""
        if self._era.last_failure is not None:
            self._task = asyncio.get_running_loop().create_task(
                self._watch(), name="upstream-startup-watch"
            )
        elif self._era.discover_status in NO_ENDPOINT_STATUSES:
            self._no_endpoint(self._era.discover_status)

    def _no_endpoint(self, status: int) -> None:
        if self._upstream.rstrip("/").endswith("/sse"):
            return  # an HTTP+SSE stream answers only GET: the probe's POST proves nothing
        _log.warning(
            "upstream_endpoint_missing",
            url=self._upstream,
            reason=f"server/discover answered HTTP {status}: no MCP endpoint at that path"
            " (unless it serves only the HTTP+SSE transport there)",
            hint=endpoint_hint(likely_endpoint(self._upstream)),
        )

    async def _watch(self) -> None:
        delay = self._first_delay_s
        while (failure := self._era.last_failure) is not None:
            _log.warning(
                "upstream_unreachable",
                url=self._upstream,
                reason=plain_reason(failure),
                retry_in_s=delay,
                hint="the bridge serves meanwhile; calls fail until the upstream answers",
            )
            await asyncio.sleep(delay)
            await self._era.probe()
            delay = min(delay * 2, self._max_delay_s)
        _log.info("upstream_reachable", url=self._upstream, era=self._era.era)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


__all__ = ["FIRST_DELAY_S", "MAX_DELAY_S", "StartupWatch"]
