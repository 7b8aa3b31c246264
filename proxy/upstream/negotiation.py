"""Opening sessions whose `initialize` declares capabilities in the revision the server speaks.

The bridge offers the newest legacy revision; the server answers with the one it speaks, which is
known only after the capabilities went out. So the opener remembers the revision the upstream
negotiated last and shapes the next `initialize`'s capabilities for it (the very first for the
newest revision). When the answer shows another revision whose shape differs, that session is
closed unused and one more is opened with the right shape. A capability-less session (the
readiness probe) has the same shape in every revision, so the first probe teaches the opener the
upstream's revision at no cost.

The mis-shaped session is closed `RETIRE_AFTER_S` later, in the background, not at once: a FastMCP
server of `mcp` 1.9 whose session is deleted while it still handles that session's `initialized`
can crash its whole session manager (every later request answered 500), so the bridge gives the
server time to settle first. Nothing is ever sent on the session meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Final

import structlog

from proxy.common.owned_tasks import TaskOwner
from proxy.upstream.base import InboundHandler, PooledSession, SessionOpener
from translators.protocol.capabilities import capabilities_for_revision
from translators.protocol.revisions import NEWEST, Revision
from translators.wire.errors import UpstreamProtocolError
from translators.wire.jsonrpc import JsonObject

_log = structlog.get_logger(__name__)

RETIRE_AFTER_S: Final = 1.0  # how long a mis-shaped session stays open, unused, before it is closed


class NegotiatingOpener:
    """Wraps a transport's `SessionOpener`; itself a `SessionOpener`."""

    def __init__(self, open_once: SessionOpener, *, retire_after_s: float = RETIRE_AFTER_S) -> None:
        self._open_once = open_once
        self._retire_after_s = retire_after_s
        self._retiring = TaskOwner()
        self.expected: Revision = NEWEST  # the revision the upstream negotiated last

    async def __call__(
        self, capabilities: JsonObject, headers: Mapping[str, str], on_unrelated: InboundHandler
    ) -> PooledSession:
        expected = self.expected
        shaped = capabilities_for_revision(expected, capabilities)
        session = await self._open_once(shaped, headers, on_unrelated)
        self._learn(session.revision)
        if capabilities_for_revision(session.revision, capabilities) == shaped:
            return session
        revision = session.revision
        self._retiring.spawn(self._close_later(session), name="mis-shaped-session-close")
        session = await self._open_once(
            capabilities_for_revision(revision, capabilities), headers, on_unrelated
        )
        if session.revision != revision:
            await session.aclose()
            raise UpstreamProtocolError(
                f"Upstream answered initialize with protocol version {session.revision.version!r} "
                "right after"
                f" {revision.version!r}; the bridge cannot tell which revision it speaks"
            )
        return session

    async def _close_later(self, session: PooledSession) -> None:
        try:
            await asyncio.sleep(self._retire_after_s)
        finally:  # also when the bridge stops first: the session is closed either way
            await session.aclose()

    async def aclose(self) -> None:
        """Close the mis-shaped sessions still waiting (the bridge is stopping)."""
        await self._retiring.aclose()

    def _learn(self, revision: Revision) -> None:
        if revision != self.expected:
            _log.info(
                "upstream_revision_negotiated",
                revision=revision.version,
                previous=self.expected.version,
            )
            self.expected = revision


__all__ = ["NegotiatingOpener"]
