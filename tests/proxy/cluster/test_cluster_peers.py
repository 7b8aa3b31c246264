"""The peer set (proxy/cluster/peers.py): ids learned from the addresses of the set only, a DNS
name re-resolved as replicas come and go, an unknown id refreshed at most once a second, a peer
that stops answering kept (stalled is not gone) and one that refuses connections dropped."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from fake_clock import FakeClock

from config.replicas import ClusterSettings
from proxy.cluster.peers import MIN_REFRESH_GAP_S, REPLICA_PATH, PeerDirectory, replica_handler


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class Replicas:
    """Tiny servers answering `GET /cluster/v1/replica`, counting what they were asked."""

    def __init__(self) -> None:
        self.runners: list[web.AppRunner] = []
        self.asked: dict[str, int] = {}
        self.stalled: set[str] = set()  # these ids take their time: they answer at teardown
        self.resumed = asyncio.Event()

    async def start(self, host: str, port: int, replica_id: str) -> None:
        answer = replica_handler(replica_id)

        async def counted(request: web.Request) -> web.Response:
            self.asked[replica_id] = self.asked.get(replica_id, 0) + 1
            if replica_id in self.stalled:
                await self.resumed.wait()
            return await answer(request)

        app = web.Application()
        app.router.add_get(REPLICA_PATH, counted)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        self.runners.append(runner)


@pytest.fixture
async def replicas() -> AsyncIterator[Replicas]:
    started = Replicas()
    yield started
    started.resumed.set()
    for runner in started.runners:
        await runner.cleanup()


async def test_a_list_of_urls_maps_ids_to_addresses(replicas: Replicas) -> None:
    ports = [_free_port("127.0.0.1") for _ in range(3)]
    for index, port in enumerate(ports):
        await replicas.start("127.0.0.1", port, f"r{index + 1}")
    cluster = ClusterSettings(peers=tuple(f"http://127.0.0.1:{port}" for port in ports))
    async with aiohttp.ClientSession() as client:
        directory = PeerDirectory(cluster, "r1", client)
        assert await directory.owner_url("r2") == f"http://127.0.0.1:{ports[1]}"
        assert await directory.owner_url("r3") == f"http://127.0.0.1:{ports[2]}"
        assert await directory.owner_url("r1") is None  # itself: never a forward target


async def test_a_dns_name_is_resolved_by_the_system_resolver(replicas: Replicas) -> None:
    port = _free_port("127.0.0.1")
    await replicas.start("127.0.0.1", port, "r2")
    async with aiohttp.ClientSession() as client:
        directory = PeerDirectory(ClusterSettings(peers_dns=f"localhost:{port}"), "r1", client)
        assert await directory.owner_url("r2") == f"http://127.0.0.1:{port}"


async def test_the_dns_name_is_re_resolved_as_replicas_come_and_go(replicas: Replicas) -> None:
    """One name, the same port on three loopback addresses: a replica that appears in the answer
    joins the set at the next refresh; one that leaves it drops out."""
    port = _free_port("127.0.0.2")
    for index in range(3):
        await replicas.start(f"127.0.0.{index + 2}", port, f"r{index + 2}")
    answer = ["127.0.0.2"]

    async def resolve(host: str, resolved_port: int) -> list[str]:
        assert (host, resolved_port) == ("bridge-peers", port)
        return list(answer)

    async with aiohttp.ClientSession() as client:
        directory = PeerDirectory(
            ClusterSettings(peers_dns=f"bridge-peers:{port}"), "r1", client, resolve
        )
        await directory.refresh()
        assert [await directory.owner_url(r) for r in ("r2", "r3")] == [
            f"http://127.0.0.2:{port}",
            None,
        ]
        answer[:] = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
        await directory.refresh()
        assert await directory.owner_url("r4") == f"http://127.0.0.4:{port}"
        answer[:] = ["127.0.0.4"]
        await directory.refresh()
        assert (await directory.owner_url("r4"), await directory.owner_url("r2")) == (
            f"http://127.0.0.4:{port}",
            None,
        )


async def test_an_unknown_id_refreshes_at_most_once_a_second(replicas: Replicas) -> None:
    """Asked for an unknown id again and again, the directory refreshes once per
    `MIN_REFRESH_GAP_S` on its clock, however long the asking takes."""
    port = _free_port("127.0.0.1")
    await replicas.start("127.0.0.1", port, "r2")
    clock = FakeClock()
    async with aiohttp.ClientSession() as client:
        directory = PeerDirectory(
            ClusterSettings(peers=(f"http://127.0.0.1:{port}",)), "r1", client, clock=clock
        )
        for _ in range(5):
            assert await directory.owner_url("r9") is None
        assert replicas.asked == {"r2": 1}
        clock.advance(MIN_REFRESH_GAP_S - 0.001)
        assert await directory.owner_url("r9") is None
        assert replicas.asked == {"r2": 1}
        clock.advance(0.001)
        assert await directory.owner_url("r9") is None
    assert replicas.asked == {"r2": 2}


async def test_a_peer_that_stops_answering_is_kept_and_one_that_refuses_is_dropped(
    replicas: Replicas,
) -> None:
    ports = [_free_port("127.0.0.1") for _ in range(2)]
    for index, port in enumerate(ports):
        await replicas.start("127.0.0.1", port, f"r{index + 2}")
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    cluster = ClusterSettings(peers=tuple(urls), connect_timeout_s=0.5)
    async with aiohttp.ClientSession() as client:
        directory = PeerDirectory(cluster, "r1", client)
        # Both answered once. On a loaded machine an answer may miss the timeout (that is the
        # stalled case itself), so the directory is refreshed until it has seen both.
        for _ in range(20):
            await directory.refresh()
            if directory.known() == {"r2": urls[0], "r3": urls[1]}:
                break
        assert directory.known() == {"r2": urls[0], "r3": urls[1]}
        replicas.stalled.add("r2")
        await replicas.runners.pop().cleanup()  # r3 is gone: its port refuses connections
        await directory.refresh()
        assert (await directory.owner_url("r2"), await directory.owner_url("r3")) == (urls[0], None)
