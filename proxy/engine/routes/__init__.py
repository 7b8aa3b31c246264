"""One module per route a modern request can take; `proxy/engine/engine.py` chooses among them.

A route is an object with `async run(request, sink) -> JsonObject` that returns the JSON-RPC
`result` member, or raises a bridge error (translators/wire/errors.py): the dispatcher is the one
place exceptions become JSON-RPC error responses. A route gets the shared `RouteContext`
(proxy/engine/routes/route_context.py) when the dispatcher builds it. docs/architecture.md
("Routes") lists the routes and how to add one.
"""

from __future__ import annotations

from typing import Protocol

from proxy.common.front_request import FrontRequest, NotificationSink
from translators.wire.jsonrpc import JsonObject


class Route(Protocol):
    """One path a modern request takes through the bridge."""

    async def run(self, request: FrontRequest, sink: NotificationSink) -> JsonObject:
        """The `result` member of the response to `request`; raises a bridge error otherwise."""
        ...


__all__ = ["Route"]
