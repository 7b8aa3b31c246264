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

The second session opens beside the first, so it is where the bridge may first learn that the
upstream serves one session at a time (proxy/upstream/session_limit.py): the first is checked, and
if the second took the server over, the first is let go without ending it upstream. On an upstream
known to serve one session, no second session is opened: the first is kept in the other revision's
shape, as a legacy client used directly keeps its session, and every session opened is marked to
close without a `DELETE`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Final

import structlog

from proxy.common.owned_tasks import TaskOwner
from proxy.upstream.base import InboundHandler, PooledSession, SessionOpener
from proxy.upstream.session_limit import SessionLimit
from translators.protocol.capabilities import capabilities_for_revision
from translators.protocol.revisions import NEWEST, Revision
from translators.wire.errors import UpstreamProtocolError
from translators.wire.jsonrpc import JsonObject

_log = structlog.get_logger(__name__)

RETIRE_AFTER_S: Final = 1.0  # how long a mis-shaped session stays open, unused, before it is closed


class NegotiatingOpener:
    """Wraps a transport's `SessionOpener`; itself a `SessionOpener`."""

    def __init__(
        self,
        open_once: SessionOpener,
        *,
        retire_after_s: float = RETIRE_AFTER_S,
        limit: SessionLimit | None = None,
    ) -> None:
        """`limit`: what the bridge knows of the upstream's sessions (the pool's), None where
        nothing is known or learned (tests of the negotiation alone)."""
        self._open_once = open_once
        self._retire_after_s = retire_after_s
        self._limit = limit
        self._retiring = TaskOwner()
        self.expected: Revision = NEWEST  # the revision the upstream negotiated last

    async def __call__(
        self, capabilities: JsonObject, headers: Mapping[str, str], on_unrelated: InboundHandler
    ) -> PooledSession:
        expected = self.expected
        shaped = capabilities_for_revision(expected, capabilities)
        first = await self._open_once(shaped, headers, on_unrelated)
        self._learn(first.revision)
        revision = first.revision
        if capabilities_for_revision(revision, capabilities) == shaped or self._one_session():
            return self._marked(first)
        try:
            session = await self._open_once(
                capabilities_for_revision(revision, capabilities), headers, on_unrelated
            )
        except BaseException:
            self._close_soon(first)
            raise
        await self._let_go(first)
        if session.revision != revision:
            await session.aclose()
            raise UpstreamProtocolError(
                f"Upstream answered initialize with protocol version {session.revision.version!r} "
                "right after"
                f" {revision.version!r}; the bridge cannot tell which revision it speaks"
            )
        return self._marked(session)

    def _one_session(self) -> bool:
        return self._limit is not None and bool(self._limit.one)

    def _marked(self, session: PooledSession) -> PooledSession:
        """On a one-session upstream, a session closes without a `DELETE` (session_limit.py)."""
        if self._one_session():
            session.forget_on_close()
        return session

    async def _let_go(self, first: PooledSession) -> None:
        """The mis-shaped first session, with the second open beside it: let go at once if the
        second took a one-session server over, else closed a moment later."""
        limit = self._limit
        if limit is not None and await limit.displaced(first):
            await limit.let_go(first)
        else:
            self._close_soon(first)

    def _close_soon(self, session: PooledSession) -> None:
        self._retiring.spawn(self._close_later(session), name="mis-shaped-session-close")

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
