"""The peer set: which replica id answers at which base URL (docs/operations.md § Replicas).

The addresses come from `cluster.peers` (a fixed list) and `cluster.peers_dns` (one name resolving
to every replica, re-resolved every `cluster.refresh_s`). Each address is asked for its replica id
(`GET /cluster/v1/replica`); the answers make the map a forwarded retry is routed by. Only an
address in the set is ever contacted: a `requestState` names an owner *id*, never an address, so a
client cannot make a replica connect anywhere else. An id missing from the map triggers at most one
refresh per `MIN_REFRESH_GAP_S` (a replica that just started), then counts as outside the set.

An address that does not answer in time is *stalled*, not gone (a paused or overloaded replica, a
network dropping packets): the id it answered with before stays in the map, so a retry for it is
not recovered elsewhere while the owner may still complete it. An id leaves the map only when its
address refuses the connection, answers with another id, or leaves the set.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Final

import aiohttp
import structlog
from aiohttp import web

from config.replicas import ClusterSettings
from proxy.common.clock import Clock

REPLICA_PATH: Final = "/cluster/v1/replica"
MIN_REFRESH_GAP_S: Final = 1.0
_log = structlog.get_logger("proxy.cluster.peers")


def replica_handler(replica_id: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    """`GET /cluster/v1/replica`: this replica's id, for the peer set of the others."""

    async def whoami(_request: web.Request) -> web.Response:
        return web.json_response({"replicaId": replica_id})

    return whoami


Resolver = Callable[[str, int], Awaitable[list[str]]]


async def _getaddrinfo(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to now (the system resolver: /etc/hosts, DNS)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class PeerDirectory:
    """Replica id -> base URL, for the addresses of the peer set only."""

    def __init__(
        self,
        cluster: ClusterSettings,
        me: str,
        client: aiohttp.ClientSession,
        resolve: Resolver | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        """`clock` spaces the refreshes an unknown id causes (proxy/common/clock.py)."""
        self._cluster = cluster
        self._clock = clock
        self._resolve = resolve or _getaddrinfo
        self._me = me
        self._client = client
        self._owners: dict[str, str] = {}
        self._refreshed_at = -MIN_REFRESH_GAP_S
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    async def addresses(self) -> list[str]:
        """The base URLs of the set now: the fixed list plus what the DNS name resolves to."""
        urls = list(self._cluster.peers)
        if self._cluster.peers_dns is not None:
            host, _, port = self._cluster.peers_dns.rpartition(":")
            try:
                hosts = await self._resolve(host.strip("[]"), int(port))
            except OSError as exc:
                _log.warning("cluster_dns_failed", name=host, error=str(exc))
                hosts = []
            urls += sorted({_url(address, int(port)) for address in hosts})
        own = self._cluster.advertise_url
        return [url for url in dict.fromkeys(urls) if url != own]

    async def _ask(self, url: str) -> tuple[str, str] | bool | None:
        """(replica id, url); None: not a replica (refused, gone, no id); False: no answer in
        time (stalled)."""
        timeout = aiohttp.ClientTimeout(
            total=self._cluster.connect_timeout_s * 2, sock_connect=self._cluster.connect_timeout_s
        )
        try:
            async with self._client.get(
                url + REPLICA_PATH, timeout=timeout, allow_redirects=False
            ) as response:
                body = await response.json() if response.status == 200 else None
        except TimeoutError:  # aiohttp's timeouts included
            return False
        except (aiohttp.ClientError, ValueError):
            return None
        replica = body.get("replicaId") if isinstance(body, dict) else None
        return (replica, url) if isinstance(replica, str) and 0 < len(replica) <= 16 else None

    async def refresh(self) -> None:
        async with self._lock:
            urls = await self.addresses()
            answers = await asyncio.gather(*(self._ask(url) for url in urls))
            owners = {
                answer[0]: answer[1]
                for answer in answers
                if isinstance(answer, tuple) and answer[0] != self._me
            }
            stalled = {url for url, answer in zip(urls, answers, strict=True) if answer is False}
            for replica, url in self._owners.items():  # stalled is not gone: keep what it was
                if url in stalled and replica not in owners:
                    owners[replica] = url
                    _log.warning("cluster_peer_stalled", replica=replica)
            self._owners = owners
            self._refreshed_at = self._clock()

    async def owner_url(self, owner: str) -> str | None:
        """The base URL of replica `owner`, or None when it is not in the peer set."""
        if owner not in self._owners and self._clock() - self._refreshed_at >= MIN_REFRESH_GAP_S:
            await self.refresh()
        return self._owners.get(owner)

    def known(self) -> dict[str, str]:
        """Replica id -> base URL of every other replica that answered the last refresh."""
        return dict(self._owners)

    def forget(self, owner: str) -> None:
        """Drop an owner that did not answer: the next retry for it looks it up afresh."""
        self._owners.pop(owner, None)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="cluster-peers")

    async def _run(self) -> None:
        while True:
            try:
                await self.refresh()
            except Exception:  # a refresh must never end the loop
                _log.exception("cluster_refresh_failed")
            await asyncio.sleep(self._cluster.refresh_s)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


__all__ = ["REPLICA_PATH", "PeerDirectory", "Resolver", "replica_handler"]
