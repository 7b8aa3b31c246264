"""The facts of the status page (proxy/app/status.py serves them; proxy/app/status_page.py writes
them as HTML): the bridge once (version, replica, uptime, keys, the replicas it sees, the held calls
in total) and each upstream it serves in a section of its own (its name, era, transport, last
known health, its open sessions, its held calls, per tool, and its learned push batch sizes).

Read from what the bridge keeps anyway (each upstream's registry and pool, the peer set); the lists
are bounded (`MAX_LISTED` per upstream, found without sorting everything) while every count stays
exact. Nothing on it is a secret: principals are 12-character digests, resource URIs lose their
userinfo, query and fragment and every name is cut to 200 characters (`shown_name`), an upstream is
a name and not its URL, and no `requestState`, continuation id, session id or elicited content is
ever read for it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from operator import attrgetter
from typing import Any, Final, Protocol

from config.settings import Settings
from proxy.app.health import CheckedUpstream, known_health
from proxy.calls.call import Call
from proxy.calls.registry import HeldCallRegistry
from proxy.cluster.peers import PeerDirectory
from proxy.common.shown import shown_principal
from proxy.observe.access import host_port, shown_name
from proxy.upstream.pool import UpstreamPool

MAX_LISTED: Final = 500  # calls, tools and sessions listed per upstream; the counts stay exact
MAX_BATCH_ROWS: Final = 100
VERSION: Final = version("mrtr-bridge")  # read once: a metadata lookup costs milliseconds
_TOOL: Final = attrgetter("method", "name")
Facts = dict[str, Any]


class HeldCalls(Protocol):
    @property
    def registry(self) -> HeldCallRegistry[Call]: ...


class ShownUpstream(CheckedUpstream, Protocol):
    """What the status page reads of an upstream served (`proxy.app.http_app.Upstream`)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def runtime(self) -> HeldCalls | None: ...

    @property
    def pool(self) -> UpstreamPool | None: ...


@dataclass(frozen=True)
class StatusSources:
    """Where the facts come from: the upstreams served, and the peer set (None: one replica)."""

    upstreams: Sequence[ShownUpstream]
    peers: PeerDirectory | None


def status_facts(settings: Settings, started: float, sources: StatusSources) -> Facts:
    """Every fact of the page, now; `started`: the bridge's start (`time.time()`)."""
    now = time.time()
    upstreams = [upstream_facts(upstream) for upstream in sources.upstreams]
    return {
        "bridge": {
            "version": VERSION,
            "replica_id": settings.held.replica_id,
            "uptime_s": round(now - started, 1),
            "generated_at": datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"),
            "keys": "configured" if settings.held.keys else "ephemeral",
        },
        "held": {
            key: sum(upstream["held"][key] for upstream in upstreams)
            for key in ("count", "in_progress", "rounds_total")
        },
        "upstreams": upstreams,
        "replicas": _replicas(settings, sources.peers),
    }


def upstream_facts(upstream: ShownUpstream) -> Facts:
    """One upstream's section."""
    era = upstream.modern.era.era if upstream.modern is not None else None
    registry = upstream.runtime.registry if upstream.runtime is not None else None
    ready, health = known_health(upstream)
    return {
        "name": upstream.name,
        "path": upstream.settings.front.path,
        "era": era or ("legacy" if upstream.settings.upstream.command else "unknown"),
        "ready": ready,
        "health": health,
        **_pool_facts(upstream.pool),
        "held": held_facts(registry),
        "batch_sizes": _batches(registry),
    }


def held_facts(registry: HeldCallRegistry[Call] | None) -> Facts:
    if registry is None:
        return {"count": 0, "in_progress": 0, "rounds_total": 0, "per_tool": {}, "calls": []}
    now = time.monotonic()
    calls = [
        {
            "method": call.method,
            "name": call.name,
            "principal": shown_principal(call.principal),
            "age_s": round(now - call.started, 1),
            "round": call.machine.round,
            "state": call.machine.state.value,
        }
        for call in registry.calls(MAX_LISTED)
    ]
    per_tool: dict[str, int] = {}
    for (method, name), count in Counter(map(_TOOL, registry)).most_common(MAX_LISTED):
        tool = f"{method} {name or ''}".strip()
        per_tool[tool] = per_tool.get(tool, 0) + count
    return {
        "count": registry.held_now(),
        "in_progress": registry.in_progress(),
        "rounds_total": registry.rounds_total,
        "per_tool": per_tool,
        "calls": calls,
    }


def _pool_facts(pool: UpstreamPool | None) -> Facts:
    facts: Facts = {
        "transport": None,
        "sessions_open": 0,
        "session_limit": None,  # how many sessions it serves at a time (upstream/session_limit.py)
        "lease_waits": 0,
        "last_error": None,
        "sessions": [],
    }
    if pool is None:
        return facts
    facts["transport"] = pool.transport.name
    facts["session_limit"] = pool.limit.describe()
    facts["sessions_open"] = pool.stats().sessions_open
    facts["lease_waits"] = pool.waits_total  # leases that waited for room (a session limit)
    facts["sessions"] = [
        {
            "principal": shown_principal(view.principal),
            "revision": view.revision,
            "state": view.state,
            "held_by": "exclusive" if view.exclusive else f"{view.shared} shared",
            "idle_s": view.idle_s,
        }
        for view in pool.sessions(MAX_LISTED)
    ]
    if pool.last_error is not None:
        error, at = pool.last_error
        when = datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")
        facts["last_error"] = {"error": error, "at": when}
    return facts


def _replicas(settings: Settings, peers: PeerDirectory | None) -> Facts:
    seen = peers.known() if peers is not None else {}
    return {
        "self": settings.held.replica_id,
        "clustered": peers is not None,
        "peers": [
            {"replica_id": replica, "address": host_port(url)}
            for replica, url in sorted(seen.items())
        ],
    }


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
    "MAX_LISTED",
    "Facts",
    "ShownUpstream",
    "StatusSources",
    "held_facts",
    "status_facts",
    "upstream_facts",
]
