"""A legacy task adopted by a new bridge process behind a load balancer that pins sessions by cookie
(HAProxy from Debian, `make test-lb`; docs/tasks.md § What survives what): the task's id carries its
session's cookies, sealed, so the adopting process reaches the replica that holds the session, as
a legacy client used directly does with its cookie jar.

Two replicas of the real server-everything (TypeScript SDK, Streamable HTTP), HAProxy in front with
`cookie SRV insert`. While the task is created, only replica `a` takes new sessions; before the
bridge restarts, only `b` does (a weight of 0 still serves the requests its cookie pins). A
request for the task's session without its cookie therefore reaches `b`, which does not know the
session: that is what the adopting process sent before ids carried cookies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from proxy.auth.keys import new_key

from ..harness import PeerProcess, Peers, bridge_env, free_port
from ..raw_http import LegacyPoster
from ..tasks_helpers import caller, create, node_everything, poll_until, report_text
from .sticky_haproxy import start_sticky_haproxy

T = 90.0  # bound on each test body, seconds


class Replicas:
    """Two server-everything replicas and HAProxy, which `prefer` restarts sending new sessions to
    one replica only."""

    def __init__(self, directory: Path) -> None:
        self.peers = Peers(log_dir=directory)
        self._directory = directory
        self._haproxy: PeerProcess | None = None
        self.port = free_port()
        try:
            self._servers = {name: self._everything(name) for name in ("a", "b")}
        except BaseException:
            self.peers.close()
            raise

    def _everything(self, name: str) -> PeerProcess:
        port = free_port()
        return self.peers.start(
            f"server-everything-{name}",
            [*node_everything(), "streamableHttp"],
            port,
            {"PORT": str(port)},
        )

    @property
    def url(self) -> str:
        return f"http://localhost:{self.port}/mcp"

    def prefer(self, name: str) -> None:
        """HAProxy (re)started so that new sessions reach replica `name` only."""
        if self._haproxy is not None:
            self._haproxy.stop()
        ports = {server: peer.port for server, peer in self._servers.items()}
        config = self._directory / f"haproxy-{name}.cfg"
        weights = (int(name == "a"), int(name == "b"))
        self._haproxy = start_sticky_haproxy(self.peers, config, self.port, ports, weights=weights)


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Replicas]:
    replicas = Replicas(tmp_path)
    try:
        yield replicas
    finally:
        replicas.peers.close()


async def test_a_legacy_client_keeps_its_replica_by_its_cookie_jar(replicas: Replicas) -> None:
    """The ground truth: a session opened on `a` is still served after the balancer sends new
    sessions to `b`, for a client that keeps its cookie jar; without the cookie the same session
    id reaches `b`, which refuses it (server-everything answers 400 for a session it does not
    know)."""
    replicas.prefer("a")
    connector = aiohttp.TCPConnector(force_close=True)  # no connection outlives a balancer
    async with (
        asyncio.timeout(T),
        aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.CookieJar()) as jar,
    ):
        client = LegacyPoster(jar, replicas.url)
        await client.initialize()
        replicas.prefer("b")
        assert (await client.post("tools/list")).status == 200
        async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as bare:
            without_jar = LegacyPoster(bare, replicas.url, session_id=client.session_id)
            assert (await without_jar.post("tools/list")).status == 400


async def test_a_task_adopted_after_a_restart_reaches_its_replica(replicas: Replicas) -> None:
    """Through the bridge: a task created while new sessions go to `a`; the bridge restarts after
    the balancer sends new sessions to `b`. The new process adopts the task on `a`, with the
    cookie its id carries, and the task completes there."""
    kid, key = new_key()
    env = bridge_env({"held": {"keys": {kid: key}}})
    replicas.prefer("a")
    first = replicas.peers.bridge(replicas.url, env=env)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        created = await create(caller(http, first.url), "tides")
        assert created["status"] == "working", created
        first.stop()
        replicas.prefer("b")
        second = replicas.peers.bridge(replicas.url, env=env)
        seen = await poll_until(caller(http, second.url), created["taskId"], "completed", "failed")
    done = seen[-1]
    assert done["status"] == "completed", done
    assert (done["taskId"], done["createdAt"]) == (created["taskId"], created["createdAt"])
    assert report_text(done).startswith("# Research Report: tides\n")
    logs = first.log_text(limit=10_000_000) + second.log_text(limit=10_000_000)
    assert "legacy_task_adopted" in second.log_text(limit=10_000_000)
    assert "SRV=" not in logs  # the balancer's cookie is never logged
