"""Route `subscriptions/listen`: a long-lived stream of the principal's session-wide notifications.

The stream itself lives in proxy/subscriptions.py (`ListenHub`); this route gives it a session.
"""

from __future__ import annotations

from proxy.context import FrontRequest, NotificationSink
from proxy.routes.context import RouteContext
from translators.jsonrpc import JsonObject
from translators.subscriptions import parse_listen_filter


class Listen:
    def __init__(self, ctx: RouteContext) -> None:
        self._ctx = ctx

    async def run(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        ctx = self._ctx
        task_ids = parse_listen_filter(request.params).task_ids
        if task_ids and ctx.legacy_tasks is not None:  # the Tasks extension (docs/tasks.md)
            task_ids = ctx.legacy_tasks.listenable(request, task_ids)
        return await ctx.listens.listen(
            request,
            sink,
            lambda: ctx.lease(request, exclusive=False),
            ctx.server_info,
            task_ids,
        )


__all__ = ["Listen"]
