"""Route `subscriptions/listen`: a long-lived stream of the principal's session-wide notifications.

The stream itself lives in proxy/calls/listen_hub.py (`ListenHub`); this route gives it a session.
"""

from __future__ import annotations

from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.engine.legacy_tasks.routes import LegacyTasks
from proxy.engine.routes.route_context import RouteContext
from translators.protocol.subscriptions import parse_listen_filter
from translators.tasks_ext.messages import missing_extension
from translators.wire.jsonrpc import JsonObject


class Listen:
    def __init__(self, ctx: RouteContext, tasks: LegacyTasks | None) -> None:
        self._ctx = ctx
        self._tasks = tasks  # the Tasks extension, when it is on (docs/tasks.md)

    async def run(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        ctx = self._ctx
        task_ids = parse_listen_filter(request.params).task_ids
        if task_ids:
            if self._tasks is None:  # no tasks here: no task ids to listen to
                raise missing_extension("subscriptions/listen for taskIds")
            task_ids = self._tasks.listenable(request, task_ids)
        return await ctx.listens.listen(
            request,
            sink,
            lambda: ctx.lease(request, exclusive=False),
            ctx.server_info,
            task_ids,
        )


__all__ = ["Listen"]
