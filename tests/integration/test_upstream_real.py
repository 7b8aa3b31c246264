"""The upstream client and pool against a real `mcp` 1.x server
(tests/peers/upstream_probe_server.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from structlog.testing import capture_logs

from config.settings import UpstreamSettings
from proxy.app.compose import http_opener
from proxy.upstream.base import Inbound, UpstreamSession
from proxy.upstream.pool import Lease, SessionKey, UpstreamPool
from translators.protocol.eras import ELICIT, LEGACY_VERSION, ROOTS, SAMPLE

from .harness import PeerProcess, Peers

pytestmark = pytest.mark.integration

CAPS: dict[str, Any] = {
    "elicitation": {"form": {}},
    "sampling": {},
    "roots": {"listChanged": False},
}
KEY = SessionKey(principal="p-test", fingerprint="all")


class Inbox:
    """Collects inbound messages; `next()` waits (bounded) for the next one."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Inbound] = asyncio.Queue()
        self.seen: list[Inbound] = []

    def __call__(self, inbound: Inbound) -> None:
        self.seen.append(inbound)
        self.queue.put_nowait(inbound)

    async def next(self) -> Inbound:
        async with asyncio.timeout(10):
            return await self.queue.get()


@pytest.fixture(scope="module")
def probe(module_peers: Peers) -> PeerProcess:
    return module_peers.legacy("upstream_probe_server.py", "--resumable")


@pytest.fixture
async def pool(probe: PeerProcess) -> AsyncIterator[UpstreamPool]:
    unowned: list[Inbound] = []
    async with aiohttp.ClientSession() as client:
        pool = UpstreamPool(
            UpstreamSettings(url=probe.url),
            http_opener(client, UpstreamSettings(url=probe.url)),
            on_unowned=lambda session, inbound: unowned.append(inbound),
        )
        try:
            yield pool
        finally:
            await pool.aclose()
    assert unowned == []  # every push reached its call's owner


async def held(pool: UpstreamPool) -> Lease:
    async with asyncio.timeout(10):
        return await pool.lease(KEY, CAPS, exclusive=True, headers={})


def text_of(result: dict[str, Any]) -> str:
    [content] = result["content"]
    assert content["type"] == "text"
    text: str = content["text"]
    return text


async def finish(
    session: UpstreamSession, name: str, inbox: Inbox | None = None, **arguments: Any
) -> str:
    call = session.start(
        "tools/call", {"name": name, "arguments": arguments}, headers={}, on_inbound=inbox
    )
    async with asyncio.timeout(10):
        return text_of(await call.result())


async def test_plain_call_and_initialize_result(pool: UpstreamPool) -> None:
    """A real server initializes at the legacy version, keeps a GET stream open and answers a plain
    call."""
    lease = await held(pool)
    assert lease.session.init_result["protocolVersion"] == LEGACY_VERSION
    assert lease.session.init_result["serverInfo"]["name"] == "upstream-probe"
    assert lease.session.has_get_stream  # type: ignore[attr-defined]
    assert await finish(lease.session, "echo", text="hello") == "hello"
    await lease.release()
    assert pool.stats().sessions_open == 1


async def test_elicitation_push_respond_result_on_the_post_stream(pool: UpstreamPool) -> None:
    """Elicitation arrives on the call's POST stream; answering it completes the call."""
    lease = await held(pool)
    unrelated, inbox = Inbox(), Inbox()
    lease.set_unrelated_handler(unrelated)
    call = lease.session.start(
        "tools/call", {"name": "ask_name", "arguments": {}}, headers={}, on_inbound=inbox
    )
    push = await inbox.next()
    assert push.message["method"] == ELICIT
    assert push.related_request_id == call.upstream_request_id
    assert push.message["params"]["message"] == "What is your name?"
    await lease.session.respond(
        push.message["id"], result={"action": "accept", "content": {"name": "Ada"}}
    )
    async with asyncio.timeout(10):
        assert text_of(await call.result()) == "Hello Ada"
    assert unrelated.seen == []
    await lease.release()


async def test_sampling_push_arrives_on_the_get_stream(pool: UpstreamPool) -> None:
    """The real SDK sends sampling on the GET stream: it reaches the exclusive lease's unrelated
    handler."""
    lease = await held(pool)
    unrelated, inbox = Inbox(), Inbox()
    lease.set_unrelated_handler(unrelated)
    call = lease.session.start(
        "tools/call",
        {"name": "sample_haiku", "arguments": {"topic": "bridges"}},
        headers={},
        on_inbound=inbox,
    )
    push = await unrelated.next()
    assert (push.message["method"], push.related_request_id) == (SAMPLE, None)
    assert push.message["params"]["messages"][0]["content"]["text"] == "Haiku: bridges"
    sampled = {
        "role": "assistant",
        "content": {"type": "text", "text": "arches over water"},
        "model": "test-model",
    }
    await lease.session.respond(push.message["id"], result=sampled)
    async with asyncio.timeout(10):
        assert text_of(await call.result()) == "arches over water"
    assert inbox.seen == []
    await lease.release()


async def test_roots_push_arrives_on_the_get_stream(pool: UpstreamPool) -> None:
    """roots/list also comes on the GET stream and its answer completes the call."""
    lease = await held(pool)
    unrelated = Inbox()
    lease.set_unrelated_handler(unrelated)
    call = lease.session.start(
        "tools/call", {"name": "list_my_roots", "arguments": {}}, headers={}, on_inbound=None
    )
    push = await unrelated.next()
    assert (push.message["method"], push.related_request_id) == (ROOTS, None)
    roots = {"roots": [{"uri": "file:///work/a", "name": "a"}, {"uri": "file:///work/b"}]}
    await lease.session.respond(push.message["id"], result=roots)
    async with asyncio.timeout(10):
        assert text_of(await call.result()) == "file:///work/a,file:///work/b"
    await lease.release()


async def test_stream_closed_early_is_resumed_with_last_event_id(pool: UpstreamPool) -> None:
    """A tool that closes its own SSE stream early is still answered: the client resumes with
    Last-Event-ID."""
    lease = await held(pool)
    with capture_logs() as logs:
        assert await finish(lease.session, "poll_echo", text="still here") == "still here"
    assert "upstream_stream_resumed" in [entry["event"] for entry in logs]
    await lease.release()


async def test_warm_session_serves_again_and_closes_cleanly(pool: UpstreamPool) -> None:
    """Released sessions are reused for the next lease; several calls can share one session."""
    first = await held(pool)
    await first.release()
    shared = [await pool.lease(KEY, CAPS, exclusive=False, headers={}) for _ in range(2)]
    assert all(item.session is first.session for item in shared)
    texts = await asyncio.gather(
        *(finish(item.session, "echo", text=str(n)) for n, item in enumerate(shared))
    )
    assert texts == ["0", "1"]
    assert pool.stats().created_total == 1 and pool.stats().reused_total == 2


@pytest.fixture(scope="module")
def plain_probe(module_peers: Peers) -> PeerProcess:
    return module_peers.legacy("upstream_probe_server.py")


async def test_full_cycle_on_a_server_without_event_store(plain_probe: PeerProcess) -> None:
    """Against the SDK's default set-up (no priming events, no resumption) a GET-stream push cycle
    works too."""
    async with aiohttp.ClientSession() as client:
        pool = UpstreamPool(
            UpstreamSettings(url=plain_probe.url),
            http_opener(client, UpstreamSettings(url=plain_probe.url)),
            on_unowned=lambda session, inbound: None,
        )
        try:
            lease = await held(pool)
            unrelated = Inbox()
            lease.set_unrelated_handler(unrelated)
            call = lease.session.start(
                "tools/call",
                {"name": "sample_haiku", "arguments": {"topic": "rivers"}},
                headers={},
                on_inbound=None,
            )
            push = await unrelated.next()
            sampled = {
                "role": "assistant",
                "content": {"type": "text", "text": "water"},
                "model": "m",
            }
            await lease.session.respond(push.message["id"], result=sampled)
            async with asyncio.timeout(10):
                assert text_of(await call.result()) == "water"
            assert await finish(lease.session, "echo", text="plain") == "plain"
        finally:
            await pool.aclose()
