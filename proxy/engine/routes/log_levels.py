"""The legacy sessions' log levels: raised to the most verbose level a request asked for.

A modern request carries its log level in `_meta`; a legacy session has one level for all its
callers (`logging/setLevel`). The bridge makes the session at least as verbose as the request
asks, never quieter (other requests on the session may want more), and filters each request's
log notifications to its own level (translators/protocol/notifications.py).
"""

from __future__ import annotations

import asyncio
import weakref

import structlog

from proxy.upstream.base import UpstreamSession
from translators.protocol.eras import LOGGING_SET_LEVEL
from translators.protocol.notifications import log_level_admits
from translators.wire.canonical import as_object
from translators.wire.errors import BridgeError

log = structlog.get_logger()


class LogLevels:
    """The level each live session was last set to (weakly keyed: a closed session drops out)."""

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._levels: weakref.WeakKeyDictionary[UpstreamSession, str] = weakref.WeakKeyDictionary()

    async def raise_to(self, session: UpstreamSession, wanted: str | None) -> None:
        """Make `session` at least as verbose as `wanted`; a failure is logged, never raised."""
        if wanted is None:  # most requests: no need to look the session up at all
            return
        current = self._levels.get(session)
        if current is not None and log_level_admits(current, wanted):
            return
        if not isinstance(as_object(session.init_result.get("capabilities")).get("logging"), dict):
            return
        self._levels[session] = wanted
        try:
            async with asyncio.timeout(self._timeout_s):
                await session.start(
                    LOGGING_SET_LEVEL, {"level": wanted}, headers={}, on_inbound=None
                ).result()
        except (BridgeError, TimeoutError):
            log.warning("upstream_set_level_failed", level=wanted)


__all__ = ["LogLevels"]
