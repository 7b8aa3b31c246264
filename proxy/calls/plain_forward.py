"""The plain path: an MRTR-capable call forwarded as it is until its upstream asks something
(docs/decisions.md § 25).

Almost no call ever receives a push, so every first attempt starts as a plain forward: the
upstream request, one future that wakes the front request, one deadline handle. Progress and logs
go straight to the request's sink, list changes to the principal's listen streams. The held-call
machinery (`CallDriver`: the machine, its send queue and tasks, its timers, its registry entry,
batching) is built only when the first push for the call arrives, or when the call ends with a URL
elicitation (-32042), which becomes an input round: the driver then *adopts* the running upstream
call, with the attempt attached and what is left of its deadline, the push is fed to it, and the
front request waits for the driver's reply from then on (`Promoted`). From that moment the call is
exactly the held call it always was.

What a plain call does on the way out mirrors the machine's `RUNNING` state: a client that goes
away or a deadline that passes cancels the upstream call and discards an exclusive session (a
late push must never reach its next holder); a result or an error releases the lease.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import structlog

from proxy.calls.attempt import Attempt, Reply, UpstreamRequest
from proxy.calls.driver import CallDriver
from proxy.calls.registry import HeldCallRegistry
from proxy.observe import tracing
from proxy.upstream.base import Inbound, UpstreamCall
from proxy.upstream.pool import Lease
from translators.protocol.eras import CANCELLED
from translators.protocol.notifications import route_notification
from translators.protocol.pushes import is_push
from translators.protocol.subscriptions import SESSION_WIDE
from translators.protocol.url_elicitation import is_url_elicitation_required
from translators.wire.errors import BridgeError, UpstreamReturnedError, UpstreamTimeout
from translators.wire.jsonrpc import JsonObject

log = structlog.get_logger()
Spawn = Callable[[Coroutine[Any, Any, Any]], object]


@dataclass(frozen=True)
class Promoted:
    """The call became a held call: its driver, and the slot its first attempt's reply comes
    in (`CallDriver.attached`)."""

    driver: CallDriver
    slot: asyncio.Future[Reply]


class PlainForward:
    """One MRTR-capable first attempt, forwarded plain until its first push (`run`)."""

    __slots__ = (
        "_attempt",
        "_begun",
        "_call",
        "_counted",
        "_discard_session",
        "_driver",
        "_lease",
        "_make_driver",
        "_principal",
        "_publish",
        "_registry",
        "_slot",
        "_spawn",
        "_timed_out",
        "_timeout_s",
        "_upstream",
        "_wake",
    )

    def __init__(
        self,
        *,
        registry: HeldCallRegistry[CallDriver],
        principal: str,
        lease: Lease,
        upstream: UpstreamRequest,
        attempt: Attempt,
        timeout_s: float,
        publish: Callable[[str, JsonObject], None],
        make_driver: Callable[[float], CallDriver],
        spawn: Spawn,
        discard_session: bool = False,
    ) -> None:
        self._registry = registry
        self._principal = principal
        self._lease = lease
        self._upstream = upstream
        self._attempt = attempt
        self._timeout_s = timeout_s
        self._publish = publish
        # given when the call began (`time.monotonic()`); dropped once used
        self._make_driver: Callable[[float], CallDriver] | None = make_driver
        self._spawn = spawn
        self._discard_session = discard_session  # upstream.session_per_call
        self._call: UpstreamCall | None = None
        self._driver: CallDriver | None = None
        self._slot: asyncio.Future[Reply] | None = None
        self._wake: asyncio.Future[None] | None = None
        self._timed_out = False
        self._counted = False
        self._begun = 0.0

    async def run(self) -> JsonObject | Promoted:
        """The legacy result of the call, or `Promoted` once it is a held call; raises the
        upstream's error, `UpstreamTimeout` past the deadline, or the cancellation."""
        loop = asyncio.get_running_loop()
        self._begun = loop.time()
        wake = self._wake = loop.create_future()
        up = self._upstream
        call = self._call = self._lease.session.start(
            up.method,
            up.params,
            headers=tracing.upstream_headers(up.headers),
            on_inbound=self.on_inbound,
        )
        # the session's GET-stream pushes are this call's (docs/decisions.md § 7)
        if self._lease.exclusive:
            self._lease.set_unrelated_handler(self.on_inbound)
        call.watch(wake)
        self._registry.plain_calls += 1
        self._counted = True
        deadline = loop.call_at(self._begun + self._timeout_s, self._time_out)
        try:
            await wake
        except asyncio.CancelledError:
            self._client_gone(wake)
            raise
        finally:
            deadline.cancel()
            self._uncount()
        return await self._outcome(call)

    async def _outcome(self, call: UpstreamCall) -> JsonObject | Promoted:
        if self._driver is not None:
            return self._promoted()
        if self._timed_out:
            self._abandon("request timed out")
            raise UpstreamTimeout(
                f"The upstream call did not finish within {self._timeout_s:g} s", public=True
            )
        try:
            result = call.outcome()  # it woke the call: the outcome is in
        except UpstreamReturnedError as exc:
            if self._lease.session.revision.elicitation_modes and is_url_elicitation_required(
                exc.error
            ):
                self._promote()  # the machine lifts it into an input round (or refuses it)
                return self._promoted()
            await self._release()
            raise
        except BridgeError:
            await self._release()
            raise
        await self._release()
        return result

    # ---- upstream side -------------------------------------------------------------------------

    def on_inbound(self, inbound: Inbound) -> None:
        """A push or notification from the call's POST stream or its session's GET stream."""
        if inbound.related_request_id is not None and is_push(inbound.message):
            self._lease.pushed_related = True  # evidence the server attributes this tool's pushes
        if self._driver is not None:
            self._driver.on_inbound(inbound)
            return
        message = inbound.message
        if is_push(message):
            if self._wake is not None and not self._wake.done():
                self._promote().on_inbound(inbound)
            elif inbound.related_request_id is None:
                self._lease.disown(inbound)  # the session's, once the call is over
            return  # on the call's own stream after its end: ignored, as by a held call DONE
        method = message.get("method")
        if method in SESSION_WIDE:
            self._publish(self._principal, message)
        elif method != CANCELLED:  # no push is pending, so there is nothing to cancel
            attempt = self._attempt
            routed = route_notification(
                message, self._upstream.progress_token, attempt.progress_token, attempt.log_level
            )
            if routed is not None:
                attempt.sink.send(routed)

    def _uncount(self) -> None:
        """No longer a plain call in progress (it ended, or became a held call)."""
        if self._counted:
            self._counted = False
            self._registry.plain_calls -= 1

    def _time_out(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._timed_out = True
            self._wake.set_result(None)

    # ---- becoming a held call ------------------------------------------------------------------

    def _promote(self) -> CallDriver:
        """Build the held call around the running upstream call and wake the front request."""
        assert self._call is not None and self._wake is not None
        loop = asyncio.get_running_loop()
        now = loop.time()
        assert self._make_driver is not None
        driver = self._make_driver(time.monotonic() - (now - self._begun))
        self._make_driver = None  # it holds the front request: the held call keeps what it needs
        self._registry.add(driver)
        self._uncount()  # counted as a held call from now on
        left_s = self._begun + self._timeout_s - now
        self._slot = driver.adopt(self._call, self._attempt, left_s)
        self._driver = driver
        if not self._wake.done():
            self._wake.set_result(None)
        return driver

    def hold(self) -> Promoted | None:
        """Make the call a held call now if it is still a plain one in flight (a task the bridge
        owns takes it over: docs/tasks.md, "Long plain calls as tasks"); None if it has ended."""
        if self._driver is None and self._wake is not None and not self._wake.done():
            self._promote()
        return self._promoted() if self._driver is not None else None

    def _promoted(self) -> Promoted:
        assert self._driver is not None and self._slot is not None
        return Promoted(self._driver, self._slot)

    # ---- the end of a plain call ---------------------------------------------------------------

    def _client_gone(self, wake: asyncio.Future[None]) -> None:
        """The front request was cancelled (its client went away, or the shutdown cut it)."""
        if self._driver is not None:  # promoted just before: the held call handles it
            self._driver.disconnected(self._attempt)
        elif wake.done() and not wake.cancelled() and not self._timed_out:
            # the upstream call had just ended (a cancelled task cancels the future it awaits)
            discard = self._discard_session and self._lease.exclusive
            self._spawn(self._lease.release(discard=discard))
        else:  # the client went away, or the end of the shutdown grace cut the request off
            self._abandon(self._registry.abort_reason or "client disconnected")

    async def _release(self) -> None:
        """Give the session back; closing it (`upstream.session_per_call`, or a session that died)
        happens after the reply, as a held call's release does, not in the client's wait."""
        discard = self._discard_session and self._lease.exclusive
        if discard or not self._lease.session.is_alive:
            self._spawn(self._lease.release(discard=discard))
        else:
            await self._lease.release()

    def _abandon(self, reason: str) -> None:
        """Cancel the upstream call and discard an exclusive session (retire one shared by
        attribution, decisions.md § 28), in the background: the front request's cancellation or
        timeout error goes on at once."""
        self._spawn(self._cancel_upstream(reason))

    async def _cancel_upstream(self, reason: str) -> None:
        try:
            if self._call is not None:
                log.info("upstream_call_cancelled", reason=reason)
                await self._call.cancel(reason)
        except BridgeError as exc:
            log.warning("upstream_send_failed", action="CancelUpstreamCall", error=exc.message)
        finally:
            await self._lease.release(discard=self._lease.interactive)


__all__ = ["PlainForward", "Promoted"]
