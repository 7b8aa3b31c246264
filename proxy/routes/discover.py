"""Route `server/discover`: the upstream's initialize result, presented as a modern discover
result."""

from __future__ import annotations

from proxy.context import FrontRequest, NotificationSink
from proxy.routes.context import RouteContext
from translators.jsonrpc import JsonObject
from translators.results import discover_result
from translators.tasks_ext.messages import with_extension


class Discover:
    def __init__(self, ctx: RouteContext) -> None:
        self._ctx = ctx

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
            tasks = ctx.legacy_tasks  # docs/tasks.md
            if (
                tasks is not None
                and tasks.tools.note_session(session)
                and ctx.settings.tasks.enabled
            ):
                result = with_extension(result)
            return result


__all__ = ["Discover"]
