"""Opening sessions whose `initialize` declares capabilities in the revision the server speaks.

The bridge offers the newest legacy revision; the server answers with the one it speaks, which is
known only after the capabilities went out. So the opener remembers the revision the upstream
negotiated last and shapes the next `initialize`'s capabilities for it (the very first for the
newest revision). When the answer shows another revision whose shape differs, that session is
closed before anything else is sent on it and one more is opened with the right shape. A
capability-less session (the readiness probe) has the same shape in every revision, so the first
probe teaches the opener the upstream's revision at no cost.
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from proxy.upstream.base import InboundHandler, PooledSession, SessionOpener
from translators.capabilities import capabilities_for_revision
from translators.errors import UpstreamProtocolError
from translators.jsonrpc import JsonObject
from translators.revisions import NEWEST, Revision

_log = structlog.get_logger(__name__)


class NegotiatingOpener:
    """Wraps a transport's `SessionOpener`; itself a `SessionOpener`."""

    def __init__(self, open_once: SessionOpener) -> None:
        self._open_once = open_once
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
        await session.aclose()
        session = await self._open_once(capabilities_for_revision(revision, capabilities), headers, on_unrelated)
        if session.revision != revision:
            await session.aclose()
            raise UpstreamProtocolError(
                f"Upstream answered initialize with protocol version {session.revision.version!r} right after"
                f" {revision.version!r}; the bridge cannot tell which revision it speaks"
            )
        return session

    def _learn(self, revision: Revision) -> None:
        if revision != self.expected:
            _log.info("upstream_revision_negotiated", revision=revision.version, previous=self.expected.version)
            self.expected = revision


__all__ = ["NegotiatingOpener"]
