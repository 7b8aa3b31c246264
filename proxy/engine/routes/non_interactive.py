"""Route for requests that may not be answered with `InputRequiredResult` (lists, completion, …).

The request runs once on a shared session; a push it triggers upstream is refused there
(proxy/engine/routes/plain_call.py). A full `tools/list` is remembered for the parameter-header
check.
"""

from __future__ import annotations

from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.engine.legacy_tasks.routes import LegacyTasks
from proxy.engine.routes.plain_call import call_through
from proxy.engine.routes.route_context import RouteContext
from translators.protocol.eras import TOOLS_LIST
from translators.protocol.requests import require_upstream_capability
from translators.protocol.results import legacy_result_to_modern
from translators.wire.jsonrpc import JsonObject


class NonInteractive:
    def __init__(self, ctx: RouteContext, tasks: LegacyTasks | None) -> None:
        self._ctx = ctx
        self._tasks = tasks  # the Tasks extension, when it is on (docs/tasks.md)

    async def run(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        ctx = self._ctx
        async with ctx.shared_lease(request) as lease:
            require_upstream_capability(
                request.method,
                lease.session.init_result.get("capabilities") or {},
                lease.session.revision,
            )
            result = await call_through(ctx, lease, request, sink)
            task_tools = False
            if request.method == TOOLS_LIST and "cursor" not in request.params:
                ctx.tool_schemas.remember(lease.key, result)
            tasks = self._tasks
            if tasks is not None:
                tasks.tools.note_session(lease.session)
                if request.method == TOOLS_LIST:
                    tasks.tools.remember(result)
                    task_tools = tasks.offers_task_tools(request)
            return legacy_result_to_modern(
                request.method,
                result,
                server_info=ctx.server_info(lease.session),
                cache=ctx.cache,
                task_tools=task_tools,
            )


__all__ = ["NonInteractive"]
