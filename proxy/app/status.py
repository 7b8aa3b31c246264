"""`GET /status` (one HTML page) and `GET /status.json`: what the bridge holds, and where
(docs/operations.md § Status page). The facts are proxy/app/status_facts.py's, the HTML
proxy/app/status_page.py's.

**It costs the data path nothing that grows** (issue 45): the facts are a snapshot, built at most
once every `status.snapshot_max_age_s` (1 s) however many pollers ask, and each snapshot is
written as JSON and as HTML at most once, on the first request that wants it; every other request
within that time gets the same bytes. So pollers cost a constant per request, the rebuild (one pass
over the held calls, the rest bounded by the lists' `MAX_LISTED`) at most once a second, and
renders run one at a time (they never await) and at most twice per snapshot. A page is at most
that old: its `generated_at` says when it was taken. An age of 0 builds it for every request.

Off the public front: served only to a loopback peer (`status.loopback`) or to a request bearing
`status.admin_token` (compared in constant time), and, like the MCP endpoint, only for an allowed
`Host` and `Origin` (a DNS-rebinding page must not read it through a local browser).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import time
from collections.abc import Callable
from typing import Final

from aiohttp import web

from config.settings import Settings
from proxy.app.status_facts import Facts, StatusSources, status_facts
from proxy.app.status_page import render_page
from proxy.http_front.endpoint import Gate

STATUS_PATH: Final = "/status"
STATUS_JSON_PATH: Final = "/status.json"
_PAGE_HEADERS: Final = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "X-Frame-Options": "DENY",
}


def is_loopback(remote: str | None) -> bool:
    if remote is None:
        return False
    try:
        address = ipaddress.ip_address(remote.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def _bearer(header: str | None) -> bytes | None:
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    return token.strip().encode() if scheme.lower() == "bearer" and token.strip() else None


class Snapshot:
    """The facts at one moment, and their JSON and HTML, each written once when first asked."""

    def __init__(self, taken: float, facts: Facts, on_render: Callable[[], None]) -> None:
        self.taken = taken
        self.facts = facts
        self._on_render = on_render
        self._json: bytes | None = None
        self._html: bytes | None = None

    def json(self) -> bytes:
        if self._json is None:
            self._on_render()
            self._json = json.dumps(self.facts).encode()
        return self._json

    def html(self) -> bytes:
        if self._html is None:
            self._on_render()
            self._html = render_page(self.facts).encode()
        return self._html


class StatusPage:
    """The two routes, their access rule, and the snapshot they share."""

    def __init__(
        self,
        settings: Settings,
        sources: Callable[[web.Application], StatusSources],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._sources = sources
        self._gate = Gate(settings.front)
        token = settings.status.admin_token
        self._token = token.get_secret_value().encode() if token is not None else None
        self._started = time.time()
        self._clock = clock
        self._max_age_s = settings.status.snapshot_max_age_s
        self._snapshot: Snapshot | None = None
        self.builds = 0  # snapshots built (the work the page costs: tests count it)
        self.renders = 0  # snapshots written as JSON or HTML

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get(STATUS_PATH, self.page)
        app.router.add_get(STATUS_JSON_PATH, self.json)

    def allowed(self, request: web.Request) -> bool:
        if not self._gate.is_allowed_host(request.headers.get("Host")):
            return False
        if not self._gate.is_allowed_origin(request.headers.get("Origin")):
            return False
        given = _bearer(request.headers.get("Authorization"))
        if self._token is not None and given is not None:
            return hmac.compare_digest(given, self._token)
        return self._settings.status.loopback and is_loopback(request.remote)

    @staticmethod
    def _refused() -> web.Response:
        return web.Response(
            status=403,
            text="Forbidden: the status page is served to loopback peers and to the admin token "
            "(status.admin_token) only\n",
            headers={"Cache-Control": "no-store"},
        )

    async def json(self, request: web.Request) -> web.Response:
        if not self.allowed(request):
            return self._refused()
        return web.Response(
            body=self.snapshot(request.app).json(),
            content_type="application/json",
            headers={"Cache-Control": "no-store"},
        )

    async def page(self, request: web.Request) -> web.Response:
        if not self.allowed(request):
            return self._refused()
        return web.Response(
            body=self.snapshot(request.app).html(),
            content_type="text/html",
            charset="utf-8",
            headers=_PAGE_HEADERS,
        )

    def snapshot(self, app: web.Application) -> Snapshot:
        """The current snapshot: the last one while it is younger than
        `status.snapshot_max_age_s`."""
        now = self._clock()
        snapshot = self._snapshot
        if snapshot is None or now - snapshot.taken >= self._max_age_s:
            facts = self.facts(self._sources(app))
            snapshot = self._snapshot = Snapshot(now, facts, self._rendered)
            self.builds += 1
        return snapshot

    def _rendered(self) -> None:
        self.renders += 1

    def facts(self, sources: StatusSources) -> Facts:
        """The facts now (no snapshot)."""
        return status_facts(self._settings, self._started, sources)


__all__ = [
    "STATUS_JSON_PATH",
    "STATUS_PATH",
    "Snapshot",
    "StatusPage",
    "StatusSources",
    "is_loopback",
]
