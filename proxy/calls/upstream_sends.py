"""A held call's sends to its upstream (docs/decisions.md § 32): answers, cancellation, reissue
and release, in the order the machine asked for them, one at a time, by a task that exists only
while there is something to send. A mixin of `CallDriver` (proxy/calls/driver.py)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from proxy.common.owned_tasks import TaskOwner
from proxy.observe.logs import KeyedLog
from proxy.upstream.base import UpstreamCall
from proxy.upstream.pool import Lease
from translators.held.events import (
    Action,
    AnswerPush,
    CancelUpstreamCall,
    Event,
    ReissueUpstreamCall,
    ReleaseUpstream,
    UpstreamErrorArrived,
)
from translators.wire.errors import BridgeError, UpstreamFault


class UpstreamSends:
    """The send queue of one held call; needs the driver's lease, call, tasks and log."""

    _sends: list[Action]  # in order; drained by `_sender` while it runs
    _sender: asyncio.Task[None] | None
    _sent_final: bool  # the final release went upstream: nothing is sent after it
    _lease: Lease
    _call: UpstreamCall | None
    _tasks: TaskOwner
    _log: KeyedLog
    _discard_session: bool

    if TYPE_CHECKING:  # the driver's own (never defined here: they must not shadow it)

        def feed(self, event: Event) -> None: ...

        def _start_upstream(self) -> None: ...

        def _remove(self) -> None: ...

    def _enqueue(self, action: Action) -> None:
        """Queue an upstream send; start the sender unless it runs (it takes this one too)."""
        if self._sent_final:
            return  # the call is over upstream: its lease is back in the pool
        self._sends.append(action)
        if self._sender is None:
            self._sender = self._tasks.spawn(self._send_queued(), name="held-call-sends")

    async def _send_queued(self) -> None:
        """Send the queued actions in order, those queued meanwhile included, then end."""
        try:
            while self._sends and not self._sent_final:
                await self._send_one(self._sends.pop(0))
        finally:
            self._sender = None

    async def _send_one(self, action: Action) -> None:
        try:
            self._sent_final = await self._send(action)
        except BridgeError as exc:
            self._log.warning(
                "upstream_send_failed", action=type(action).__name__, error=exc.message
            )
            if isinstance(action, AnswerPush):  # the call cannot go on: say why it ended
                fault = (
                    exc
                    if isinstance(exc, UpstreamFault)
                    else UpstreamFault(
                        f"Lost the upstream call while answering its request: {exc.message}"
                    )
                )
                self.feed(UpstreamErrorArrived(fault=fault))

    async def _send(self, action: Action) -> bool:
        """Perform one upstream action; True when the call is over."""
        if isinstance(action, AnswerPush):
            await self._lease.session.respond(
                action.push_id, result=action.answer.result, error=action.answer.error
            )
        elif isinstance(action, CancelUpstreamCall) and self._call is not None:
            self._log.info("upstream_call_cancelled", reason=action.reason)
            await self._call.cancel(action.reason)
        elif isinstance(action, ReissueUpstreamCall):
            self._start_upstream()
        elif isinstance(action, ReleaseUpstream):
            await self._release(discard=action.discard)
            if action.final:
                self._remove()
            return action.final
        return False

    async def _release(self, *, discard: bool) -> None:
        """Return the lease; a session is discarded after a cancel only if an interactive call
        held it (a late push from the cancelled call must not reach its next holder)."""
        if self._lease.exclusive:
            self._lease.set_unrelated_handler(None)
        await self._lease.release(
            discard=(discard or self._discard_session) and self._lease.interactive
        )


__all__ = ["UpstreamSends"]
