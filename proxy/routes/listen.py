"""Route `subscriptions/listen`: a long-lived stream of the principal's session-wide notifications.

The stream itself lives in proxy/subscriptions.py (`ListenHub`); this route gives it a session.
"""

from __future__ import annotations

from proxy.context import FrontRequest, NotificationSink
from proxy.routes.context import RouteContext
from translators.jsonrpc import JsonObject


class Listen:
    def __init__(self, ctx: RouteContext) -> None:
        self._ctx = ctx

    async def run(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        ctx = self._ctx
        return await ctx.listens.listen(
            request, sink, lambda: ctx.lease(request, exclusive=False), ctx.server_info
        )


__all__ = ["Listen"]
