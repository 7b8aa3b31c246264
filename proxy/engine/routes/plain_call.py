"""One non-interactive upstream call on a leased session, with its notifications routed.

Used by the relay route and by the parameter-header check (its `tools/list`). A push during such a
call cannot become an `InputRequiredResult`, so it is refused upstream
(proxy/engine/routes/outside_calls.py); what the call receives goes through the one inbound router
(proxy/calls/inbound.py).
"""

from __future__ import annotations

import asyncio
import functools

from proxy.calls.attempt import Attempt
from proxy.calls.inbound import route_inbound
from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.engine.routes.outside_calls import publish as publish_to
from proxy.engine.routes.outside_calls import refuse_push
from proxy.engine.routes.route_context import RouteContext
from proxy.observe import tracing
from proxy.observe.access import current_trace
from proxy.upstream.base import Inbound, UpstreamCall, UpstreamSession
from proxy.upstream.pool import Lease
from translators.wire.errors import UpstreamTimeout
from translators.wire.jsonrpc import JsonObject


class _NonInteractive:
    """A non-interactive call as the inbound router's target (proxy/calls/inbound.py): a push is
    refused upstream, progress and logs go to its one attempt."""

    __slots__ = ("_attempt", "_ctx", "_session", "principal", "upstream_progress_token")

    def __init__(
        self,
        ctx: RouteContext,
        session: UpstreamSession,
        principal: str,
        attempt: Attempt,
        token: str,
    ) -> None:
        self._ctx, self._session, self._attempt = ctx, session, attempt
        self.principal = principal
        self.upstream_progress_token = token

    def on_push(self, inbound: Inbound) -> None:
        refuse_push(self._ctx, self._session, inbound.message)

    def on_push_cancelled(self, params: JsonObject) -> None:
        """Nothing is held: nothing to withdraw."""

    def current_attempt(self) -> Attempt:
        return self._attempt


async def call_through(
    ctx: RouteContext, lease: Lease, request: FrontRequest, sink: NotificationSink
) -> JsonObject:
    upstream = ctx.upstream_request(request, lease.session)
    attempt = ctx.attempt(request, sink)
    target = _NonInteractive(
        ctx, lease.session, request.principal, attempt, upstream.progress_token
    )
    publish = functools.partial(publish_to, ctx)

    def on_inbound(inbound: Inbound) -> None:
        route_inbound(inbound, target, publish)

    await ctx.log_levels.raise_to(lease.session, attempt.log_level)
    timeout_s = ctx.settings.front.request_timeout_s
    with tracing.child(current_trace(), f"upstream {upstream.method}"):
        headers = tracing.upstream_headers(upstream.headers)
        call = lease.session.start(
            upstream.method, upstream.params, headers=headers, on_inbound=on_inbound
        )
        return await _result(call, timeout_s)


async def _result(call: UpstreamCall, timeout_s: float) -> JsonObject:
    try:
        async with asyncio.timeout(timeout_s):
            return await call.result()
    except (asyncio.CancelledError, TimeoutError) as exc:
        await asyncio.shield(
            call.cancel(
                "request cancelled by the client"
                if isinstance(exc, asyncio.CancelledError)
                else "request timed out"
            )
        )
        if isinstance(exc, TimeoutError):
            raise UpstreamTimeout(
                f"The upstream did not answer within {timeout_s:g} s", public=True
            ) from None
        raise


__all__ = ["call_through"]
