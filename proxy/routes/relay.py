"""Route for requests that may not be answered with `InputRequiredResult` (lists, completion, …).

The request runs once on a shared session; a push it triggers upstream is refused there
(proxy/routes/plain_call.py). A full `tools/list` is remembered for the parameter-header check.
"""

from __future__ import annotations

from proxy.context import FrontRequest, NotificationSink
from proxy.routes.context import RouteContext
from proxy.routes.plain_call import call_through
from translators.eras import TOOLS_LIST
from translators.jsonrpc import JsonObject
from translators.requests import require_upstream_capability
from translators.results import legacy_result_to_modern


class Relay:
    def __init__(self, ctx: RouteContext) -> None:
        self._ctx = ctx

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
            if ctx.legacy_tasks is not None:  # docs/tasks.md
                ctx.legacy_tasks.tools.note_session(lease.session)
                if request.method == TOOLS_LIST:
                    ctx.legacy_tasks.tools.remember(result)
                    task_tools = ctx.legacy_tasks.offers_task_tools(ctx, request)
            return legacy_result_to_modern(
                request.method,
                result,
                server_info=ctx.server_info(lease.session),
                cache=ctx.cache,
                task_tools=task_tools,
            )


__all__ = ["Relay"]
