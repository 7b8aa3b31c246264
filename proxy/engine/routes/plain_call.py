"""One non-interactive upstream call on a leased session, with its notifications routed.

Used by the relay route and by the parameter-header check (its `tools/list`). A push during such a
call cannot become an `InputRequiredResult`, so it is refused upstream
(proxy/engine/routes/outside_calls.py).
"""

from __future__ import annotations

import asyncio

from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.engine.routes.outside_calls import publish, refuse_push
from proxy.engine.routes.route_context import RouteContext
from proxy.observe import tracing
from proxy.observe.access import current_trace
from proxy.upstream.base import Inbound, UpstreamCall
from proxy.upstream.pool import Lease
from translators.protocol.notifications import route_notification
from translators.protocol.pushes import is_push
from translators.protocol.subscriptions import SESSION_WIDE
from translators.wire.errors import UpstreamTimeout
from translators.wire.jsonrpc import JsonObject


async def call_through(
    ctx: RouteContext, lease: Lease, request: FrontRequest, sink: NotificationSink
) -> JsonObject:
    upstream = ctx.upstream_request(request, lease.session)
    attempt = ctx.attempt(request, sink)

    def on_inbound(inbound: Inbound) -> None:
        if is_push(inbound.message):  # no InputRequiredResult here: refuse upstream
            refuse_push(ctx, lease.session, inbound.message)
            return
        if inbound.message.get("method") in SESSION_WIDE:
            publish(ctx, request.principal, inbound.message)
            return
        routed = route_notification(
            inbound.message, upstream.progress_token, attempt.progress_token, attempt.log_level
        )
        if routed is not None:
            sink.send(routed)

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
