"""The `x-mcp-header` check: a `tools/call` over HTTP must mirror the parameters its tool's schema
marks.

The tool's schema comes from the session's `tools/list` (remembered per session key in
proxy/calls/tool_schemas.py; listed once on demand when not yet known).
"""

from __future__ import annotations

from proxy.common.front_request import FrontRequest, NullSink
from proxy.engine.routes.plain_call import call_through
from proxy.engine.routes.route_context import RouteContext
from proxy.upstream.pool import Lease
from translators.protocol.eras import TOOLS_CALL, TOOLS_LIST
from translators.protocol.request_validation import check_param_headers as check_against_schema
from translators.wire.jsonrpc import JsonObject


async def check_param_headers(ctx: RouteContext, request: FrontRequest, lease: Lease) -> None:
    if request.transport != "http" or request.method != TOOLS_CALL:
        return
    schemas = ctx.tool_schemas.get(lease.key)
    if schemas is None:
        schemas = await list_tools(ctx, request, lease)
    name = str(request.params.get("name"))
    if not ctx.tool_schemas.mentions_headers(lease.key, name):
        return  # nothing in its schema names a header: nothing to check
    arguments = request.params.get("arguments")
    check_against_schema(
        schemas.get(name, {}),
        arguments if isinstance(arguments, dict) else {},
        request.param_headers,
    )


async def list_tools(
    ctx: RouteContext, request: FrontRequest, lease: Lease
) -> dict[str, JsonObject]:
    """List the upstream's tools on `lease` (first page) and remember them; name -> inputSchema."""
    listing = FrontRequest(
        request.front_request_id,
        TOOLS_LIST,
        {},
        request.principal,
        authorization=request.authorization,
        trace_headers=request.trace_headers,
    )
    return ctx.tool_schemas.remember(lease.key, await call_through(ctx, lease, listing, NullSink()))


__all__ = ["check_param_headers", "list_tools"]
