"""The replica hop of the HTTP front: a request for a held call another replica owns is forwarded
there (`proxy.cluster.forward.Forwarder`, present when a cluster is configured); a forwarded
request is served here and never forwarded again, and one with a forged replica proof gets 403."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

from aiohttp import web

from proxy.common.http_replies import Exchange, rejection
from proxy.common.log_context import log_context
from translators.auth.forward_proof import ProofRejected
from translators.protocol.request_validation import ModernRoute
from translators.wire.errors import InvalidRequest

Recover = Callable[[web.Request, ModernRoute, Any], Awaitable[web.StreamResponse]]


class ClusterHop(Protocol):
    """Forwarding between replicas (`proxy.cluster.forward.Forwarder`), when a cluster is
    configured."""

    def check_inbound(self, request: web.Request, body: bytes) -> object | None: ...

    def owner_elsewhere(self, route: ModernRoute, scope: str | None = None) -> str | None: ...

    async def forward(
        self,
        request: web.Request,
        body: bytes,
        route: ModernRoute,
        owner: str,
        *,
        on_unreachable: Recover | None = None,
    ) -> web.StreamResponse: ...


HOP_KEY: Final = web.AppKey("cluster_hop", ClusterHop)


def inbound_hop(
    hop: ClusterHop | None, request: web.Request, raw: bytes, exchange: Exchange
) -> tuple[ClusterHop | None, web.Response | None]:
    """The hop that may forward this request (None: no cluster, or the request was forwarded here
    already), or a 403 for a forged proof."""
    try:
        if hop is not None and hop.check_inbound(request, raw) is not None:
            return None, None  # a forwarded request is served here, never forwarded again
    except ProofRejected:
        forged = InvalidRequest(
            "Forbidden: this request claims to come from a replica; its proof is not valid"
        )
        return None, rejection(forged, None, exchange, 403)
    return hop, None


async def forward_to_owner(
    hop: ClusterHop,
    request: web.Request,
    raw: bytes,
    route: ModernRoute,
    owner: str,
    exchange: Exchange,
    recover_here: Recover,
) -> web.StreamResponse:
    """Forward to the replica that owns the held call; `recover_here` serves it here when that
    replica is gone."""
    exchange.mode = "forwarded"
    with log_context(request_id=route.front_request_id, method=route.method, transport="http"):
        return await hop.forward(request, raw, route, owner, on_unreachable=recover_here)


__all__ = ["HOP_KEY", "ClusterHop", "forward_to_owner", "inbound_hop"]
