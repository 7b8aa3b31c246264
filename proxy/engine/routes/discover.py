"""Route `server/discover`: the upstream's initialize result, presented as a modern discover
result."""

from __future__ import annotations

from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.engine.legacy_tasks.routes import LegacyTasks
from proxy.engine.routes.route_context import RouteContext
from translators.protocol.results import discover_result
from translators.tasks_ext.messages import with_extension
from translators.wire.jsonrpc import JsonObject


class Discover:
    def __init__(self, ctx: RouteContext, tasks: LegacyTasks | None) -> None:
        self._ctx = ctx
        self._tasks = tasks  # the Tasks extension, when it is on (docs/tasks.md)

    async def run(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        ctx = self._ctx
        async with ctx.shared_lease(request) as lease:
            session = lease.session
            result = discover_result(
                session.init_result,
                server_info=ctx.server_info(session),
                cache=ctx.cache,
                listen_supported=session.has_get_stream,
            )
            # legacy task tools, or long plain calls the bridge turns into tasks (docs/tasks.md)
            tasks = self._tasks
            if tasks is not None and (
                tasks.tools.note_session(session) or tasks.promotion is not None
            ):
                result = with_extension(result)
            return result


__all__ = ["Discover"]
