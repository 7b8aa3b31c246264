"""Route for an MRTR retry: a request that carries `requestState`.

Everything that happens to a retry is here: the state is opened and checked, and the held call
it names is claimed (proxy/calls/continuations.py); the session is raised to the retry's log level;
the answers are fed to the held call (`Call.retry`), and its reply becomes the result — the
final result, another `InputRequiredResult` with a fresh `requestState`, or an error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.common.log_context import log_context
from proxy.engine.legacy_tasks.promoted import Promotion, TaskCreated
from proxy.engine.routes.mrtr import input_responses, reply_result
from proxy.engine.routes.route_context import RouteContext, log_level
from proxy.observe import tracing
from proxy.observe.access import current_trace
from translators.wire.errors import InvalidRequestState
from translators.wire.jsonrpc import JsonObject

# A state that opened but named no held call here: the recovery route's entry
# (proxy/engine/routes/recover.py)
OnLost = Callable[
    [FrontRequest, NotificationSink, InvalidRequestState, JsonObject], Awaitable[JsonObject]
]


class Retry:
    def __init__(
        self,
        ctx: RouteContext,
        *,
        on_lost: OnLost | None = None,
        promotion: Promotion | None = None,
    ) -> None:
        self._ctx = ctx
        self._on_lost = on_lost
        self._promotion = promotion  # a long retry may become a task, as a long first call

    async def run(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        ctx = self._ctx
        responses = input_responses(ctx, request)
        try:
            call, claims = ctx.continuations.claim(request)
        except InvalidRequestState as refused:
            if self._on_lost is None:
                raise
            return await self._on_lost(request, sink, refused, responses)
        tracing.adopt(current_trace(), claims.trace)
        await ctx.log_levels.raise_to(call.session, log_level(request))
        with log_context(round=claims.round):
            retried = call.retry(ctx.attempt(request, sink), claims.round, responses)
            reply = await (
                retried
                if self._promotion is None
                else self._promotion.reply(request, call, retried)
            )
        if isinstance(reply, TaskCreated):  # the call runs on as a task
            return reply.result
        return reply_result(ctx, request, call, reply)


__all__ = ["OnLost", "Retry"]
