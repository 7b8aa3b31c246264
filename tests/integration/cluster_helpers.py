"""Bridge replicas on loopback for the cluster tests (`test_cluster*.py`): N bridges sharing their
requestState keys, each listing all of them as peers, in front of one legacy demo server; and a
modern client whose every POST goes to the next replica (the worst a load balancer can do)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families

from proxy.auth.keys import new_key
from translators.protocol.eras import MODERN_VERSION

from .harness import BRIDGE_EXE, DEMO_SERVER, PeerProcess, Peers, bridge_env, free_port

ONE_KEY = new_key()


@dataclass
class Cluster:
    legacy: PeerProcess
    replicas: list[PeerProcess]
    ids: list[str]

    @property
    def ports(self) -> list[int]:
        return [replica.port for replica in self.replicas]


def replica_env(
    replica_id: str, port: int, peer_ports: Sequence[int], extra: Mapping[str, Any] | None = None
) -> dict[str, str]:
    kid, key = ONE_KEY
    settings: dict[str, Any] = {
        "held": {"keys": {kid: key}, "replica_id": replica_id},
        "cluster": {
            "advertise_url": f"http://127.0.0.1:{port}",
            "peers": [f"http://127.0.0.1:{peer}" for peer in peer_ports],
        },
        "log": {"format": "json"},
    }
    for section, values in (extra or {}).items():
        settings.setdefault(section, {}).update(values)
    return bridge_env(settings)


def start_replica(
    peers: Peers,
    upstream: str | Sequence[str],
    replica_id: str,
    port: int,
    peer_ports: Sequence[int],
    extra: Mapping[str, Any] | None = None,
) -> PeerProcess:
    """One replica; `upstream`, a URL or several `NAME=URL` (named upstreams)."""
    upstreams = [upstream] if isinstance(upstream, str) else list(upstream)
    flags = [flag for value in upstreams for flag in ("--upstream", value)]
    argv = [str(BRIDGE_EXE), "serve", *flags, "--listen", f"127.0.0.1:{port}"]
    return peers.start(
        f"bridge-{replica_id}",
        argv,
        port,
        replica_env(replica_id, port, peer_ports, extra),
        inherit_bridge_env=False,
    )


def start_cluster(peers: Peers, count: int = 3, extra: Mapping[str, Any] | None = None) -> Cluster:
    legacy = peers.legacy(DEMO_SERVER)
    ports = [free_port() for _ in range(count)]
    ids = [f"r{index + 1}" for index in range(count)]
    replicas = [
        start_replica(peers, legacy.url, replica_id, port, ports, extra)
        for replica_id, port in zip(ids, ports, strict=True)
    ]
    return Cluster(legacy, replicas, ids)


class Rotating(httpx2.AsyncBaseTransport):
    """Sends each request to the next port in turn (round robin, no stickiness)."""

    def __init__(
        self, ports: Sequence[int], start: int = 0, authorizations: Sequence[str] = ()
    ) -> None:
        self._ports = list(ports)
        self._authorizations = list(authorizations)
        self._next = start
        self._inner = httpx2.AsyncHTTPTransport()
        self.sent_to: list[int] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = self._ports[self._next % len(self._ports)]
        if self._next < len(self._authorizations):
            request.headers["Authorization"] = self._authorizations[self._next]
        self._next += 1
        self.sent_to.append(port)
        request.url = request.url.copy_with(port=port)
        request.headers["Host"] = f"127.0.0.1:{port}"
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@contextlib.asynccontextmanager
async def rotating_client(
    ports: Sequence[int],
    start: int = 0,
    authorizations: Sequence[str] = (),
    path: str = "/mcp",
    **client_kwargs: Any,
) -> AsyncIterator[tuple[Client, Rotating]]:
    """An entered modern `mcp.Client` whose every POST goes to the next replica (the n-th with the
    n-th of `authorizations` as its Authorization header, when given), at `path`."""
    transport = Rotating(ports, start, authorizations)
    client_kwargs.setdefault("mode", MODERN_VERSION)
    client_kwargs.setdefault("cache", None)
    timeout = httpx2.Timeout(30.0, read=120.0)
    async with httpx2.AsyncClient(transport=transport, timeout=timeout) as http:
        async with Client(
            streamable_http_client(f"http://127.0.0.1:{ports[0]}{path}", http_client=http),
            **client_kwargs,
        ) as client:
            yield client, transport


def metric(text: str, name: str, **labels: str) -> float:
    """The samples of `name` in a Prometheus text exposition whose labels include `labels`,
    summed (0 when there is none): over every upstream when `upstream` is not given."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                total += sample.value
    return total


async def scrape(port: int) -> str:
    async with httpx2.AsyncClient(timeout=10.0) as http:
        return (await http.get(f"http://127.0.0.1:{port}/metrics")).text
