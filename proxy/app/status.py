"""`GET /status` (one HTML page) and `GET /status.json`: what the bridge holds right now
(docs/operations.md § Status page).

The same facts in both: held calls (count, per tool, each call's principal digest, age, round and
state), the upstream (its name, era, transport, how many sessions it serves at a time, last failed
open) and each of its open sessions (principal digest, revision, who holds it), the replicas this
one sees, and the learned push batch sizes. Read at request time from the registry, the pool and
the peer set, which keep no extra bookkeeping for it.

Off the public front: served only to a loopback peer (`status.loopback`) or to a request bearing
`status.admin_token` (compared in constant time), and, like the MCP endpoint, only for an allowed
`Host` and `Origin` (a DNS-rebinding page must not read it through a local browser). Nothing on it
is a secret: principals are 12-character digests, resource URIs lose their userinfo, query and
fragment and every name is cut to 200 characters (proxy/observe/access.py, `shown_name`), the
upstream is a name and not its URL, and no `requestState`, continuation id, session id or elicited
content is ever read for it.
"""

from __future__ import annotations

import hmac
import ipaddress
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Any, Final

from aiohttp import web

from config.settings import Settings
from proxy.app.status_page import render_page
from proxy.calls.call import Call
from proxy.calls.registry import HeldCallRegistry
from proxy.cluster.peers import PeerDirectory
from proxy.http_front.endpoint import Gate
from proxy.observe.access import host_port, shown_name, upstream_name
from proxy.upstream.pool import UpstreamPool

STATUS_PATH: Final = "/status"
STATUS_JSON_PATH: Final = "/status.json"
MAX_LISTED: Final = 500  # calls, tools and sessions listed on one page; the counts stay exact
MAX_BATCH_ROWS: Final = 100
DIGEST_CHARS: Final = 12
Facts = dict[str, Any]


@dataclass(frozen=True)
class StatusSources:
    """Where the facts come from; each is None when this app has none (a scripted engine, one
    replica)."""

    registry: HeldCallRegistry[Call] | None
    pool: UpstreamPool | None
    peers: PeerDirectory | None
    era: str | None  # the HTTP upstream's era as probed; None: not probed (stdio, scripted)


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


class StatusPage:
    """The two routes and their access rule."""

    def __init__(self, settings: Settings, sources: Callable[[web.Application], StatusSources]):
        self._settings = settings
        self._sources = sources
        self._gate = Gate(settings.front)
        token = settings.status.admin_token
        self._token = token.get_secret_value().encode() if token is not None else None
        self._started = time.time()
        self._upstream = upstream_name(settings.upstream)

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
        response = web.json_response(self.facts(self._sources(request.app)))
        response.headers["Cache-Control"] = "no-store"
        return response

    async def page(self, request: web.Request) -> web.Response:
        if not self.allowed(request):
            return self._refused()
        return web.Response(
            text=render_page(self.facts(self._sources(request.app))),
            content_type="text/html",
            headers={
                "Cache-Control": "no-store",
                "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
                "X-Frame-Options": "DENY",
            },
        )

    # ---- the facts -------------------------------------------------------------------------------

    def facts(self, sources: StatusSources) -> Facts:
        now = time.time()
        return {
            "bridge": {
                "version": version("mrtr-bridge"),
                "replica_id": self._settings.held.replica_id,
                "uptime_s": round(now - self._started, 1),
                "generated_at": datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"),
            },
            "held": self._held(sources.registry),
            "upstreams": [self._upstream_facts(sources)],
            "replicas": self._replicas(sources.peers),
            "batch_sizes": self._batches(sources.registry),
        }

    @staticmethod
    def _held(registry: HeldCallRegistry[Call] | None) -> Facts:
        if registry is None:
            return {"count": 0, "in_progress": 0, "per_tool": {}, "calls": []}
        held = registry.calls()
        now = time.monotonic()
        calls = [
            {
                "method": call.method,
                "name": call.name,
                "principal": call.principal[:DIGEST_CHARS],
                "age_s": round(now - call.started, 1),
                "round": call.machine.round,
                "state": call.machine.state.value,
            }
            for call in held[:MAX_LISTED]
        ]
        per_tool = Counter(f"{call.method} {call.name or ''}".strip() for call in held)
        return {
            "count": registry.held_now(),
            "in_progress": registry.in_progress(),
            "rounds_total": registry.rounds_total,
            "per_tool": dict(per_tool.most_common(MAX_LISTED)),
            "calls": calls,
        }

    def _upstream_facts(self, sources: StatusSources) -> Facts:
        pool = sources.pool
        era = sources.era or ("legacy" if self._settings.upstream.command else "unknown")
        facts: Facts = {
            "name": self._upstream,
            "era": era,
            "transport": pool.transport.name if pool is not None else None,
            "sessions_open": 0,
            # how many sessions it serves at a time (proxy/upstream/session_limit.py)
            "session_limit": pool.limit.describe() if pool is not None else None,
            "lease_waits": 0,
            "last_error": None,
            "sessions": [],
        }
        if pool is None:
            return facts
        sessions = pool.sessions()
        facts["sessions_open"] = len(sessions)
        facts["lease_waits"] = pool.waits_total
        facts["sessions"] = [
            {
                "principal": view.principal[:DIGEST_CHARS],
                "revision": view.revision,
                "state": view.state,
                "held_by": "exclusive" if view.exclusive else f"{view.shared} shared",
                "idle_s": view.idle_s,
            }
            for view in sessions[:MAX_LISTED]
        ]
        if pool.last_error is not None:
            error, at = pool.last_error
            when = datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")
            facts["last_error"] = {"error": error, "at": when}
        return facts

    def _replicas(self, peers: PeerDirectory | None) -> Facts:
        seen = peers.known() if peers is not None else {}
        return {
            "self": self._settings.held.replica_id,
            "clustered": peers is not None,
            "peers": [
                {"replica_id": replica, "address": host_port(url)}
                for replica, url in sorted(seen.items())
            ],
        }

    @staticmethod
    def _batches(registry: HeldCallRegistry[Call] | None) -> Facts:
        if registry is None:
            return {"declared": {}, "learned": []}
        sizes = registry.batch_sizes
        return {
            "declared": dict(sizes.declared_sizes),
            "learned": [
                {
                    "method": method,
                    "name": shown_name(method, name),
                    "rounds": {str(round_): size for round_, size in sorted(rounds.items())},
                }
                for (method, name), rounds in sizes.table(MAX_BATCH_ROWS)
            ],
        }


__all__ = [
    "STATUS_JSON_PATH",
    "STATUS_PATH",
    "StatusPage",
    "StatusSources",
    "is_loopback",
]
