"""Route for a retry whose held call is gone: recovery by re-execution (docs/operations.md §
Recovery).

Entered from the retry route when the state opened but named no held call here (`after_refusal`).
The replica forwarding, when a retry's owner replica cannot be reached, hands the retry to the local
engine with `FrontRequest.owner_unreachable` set: its `other_replica` refusal then may start a
recovery too. proxy/calls/recovery.py decides whether the state may start a recovery and whether the
policy allows the call to run again; this route starts it through the first-call route, pre-answered
with the sealed earlier answers and this retry's `inputResponses`. A refusal raises the original
`InvalidRequestState`, so the client gets the same fixed error as before.
"""

from __future__ import annotations

from proxy.calls.recovery import LostCall, Recovery
from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.engine.routes.mrtr_call import FirstCall, list_tools
from proxy.engine.routes.route_context import RouteContext
from proxy.observe import tracing
from proxy.observe.access import current_trace
from proxy.observe.request_families import UpstreamMetrics
from proxy.upstream.pool import Lease
from translators.held.recovery_policy import needs_annotations
from translators.wire.errors import InvalidRequestState
from translators.wire.jsonrpc import JsonObject


class Recover:
    def __init__(self, ctx: RouteContext, first_call: FirstCall, metrics: UpstreamMetrics) -> None:
        self._ctx = ctx
        self._first_call = first_call
        self.recovery = Recovery(ctx.settings.recovery, ctx.continuations, ctx.registry, metrics)

    async def after_refusal(
        self,
        request: FrontRequest,
        sink: NotificationSink,
        refused: InvalidRequestState,
        responses: JsonObject,
    ) -> JsonObject:
        """The retry route could not claim a held call: recover it if allowed, else raise
        `refused`."""
        lost = self.recovery.lost_call(
            request, refused, responses, owner_unreachable=request.owner_unreachable
        )
        return await self._run(request, sink, lost)

    async def _run(
        self, request: FrontRequest, sink: NotificationSink, lost: LostCall
    ) -> JsonObject:
        tracing.adopt(current_trace(), lost.claims.trace)  # the lost call's trace goes on here
        started = False

        async def authorize(lease: Lease) -> None:
            nonlocal started
            if needs_annotations(self.recovery.settings.reexecute, request.method):
                self.recovery.authorize(request, lost, await self._annotations(request, lease))
            started = True
            self.recovery.started(lost)

        try:
            return await self._first_call.start(request, sink, lost.answers, authorize=authorize)
        finally:
            if not started:  # refused, failed or asked for roots before anything ran upstream
                self.recovery.release(lost)

    async def _annotations(self, request: FrontRequest, lease: Lease) -> JsonObject | None:
        """The called tool's annotations as the upstream lists it (None: not on the first page)."""
        ctx = self._ctx
        annotations = ctx.tool_schemas.annotations(lease.key)
        if annotations is None:
            await list_tools(ctx, request, lease)
            annotations = ctx.tool_schemas.annotations(lease.key) or {}
        return annotations.get(str(request.params.get("name")))


__all__ = ["Recover"]
