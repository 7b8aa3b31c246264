"""Helpers for the safety tests (issue 6): a real legacy peer that journals what it saw, the bridge
in-process in front of it (so each test picks its own limits), and MRTR round helpers.

The legacy peer is `tests/peers/journal_server.py` run by `.venv-legacy` through the integration
harness (`tests/integration/harness.py`); the bridge is `proxy.app.http_app.make_app(settings)`
served by aiohttp's `TestServer`, and requests are hand-made with the harness's `ModernPoster`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer
from aiohttp.web_runner import BaseRunner
from integration.harness import ModernPoster, PeerProcess, Peers, RawReply, free_port

from config.settings import Settings
from proxy.app.http_app import METRICS_KEY, UPSTREAMS_KEY, make_app
from proxy.app.http_server import BridgeRunner
from proxy.auth.keys import new_key
from proxy.engine.engine import Engine
from proxy.upstream.pool import UpstreamPool
from translators.protocol.eras import RESULT_COMPLETE, RESULT_INPUT_REQUIRED, TOOLS_CALL
from translators.wire.jsonrpc import JsonObject

JOURNAL_SERVER = "journal_server.py"
CAPABILITIES: JsonObject = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
WAIT_S = 20.0


@dataclass
class JournalPeer:
    """The journaling legacy server and its journal file (no process of ours when the bridge runs
    it)."""

    path: Path
    process: PeerProcess | None = None

    @property
    def url(self) -> str:
        assert self.process is not None, "this journal's server is not an HTTP peer"
        return self.process.url

    def entries(self) -> list[JsonObject]:
        if not self.path.exists():
            return []
        return [
            json.loads(line)
            for line in self.path.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]

    def events(self, tag: str) -> list[str]:
        """The journal events of one tag, in order."""
        return [entry["event"] for entry in self.entries() if entry.get("tag") == tag]

    async def wait_for(
        self, predicate: Callable[[list[JsonObject]], bool], timeout: float = WAIT_S
    ) -> None:
        """Poll the journal until `predicate` holds (bounded by `timeout`)."""
        async with asyncio.timeout(timeout):
            while not predicate(self.entries()):
                await asyncio.sleep(0.02)


@contextlib.contextmanager
def journal_peer(directory: Path, *extra: str) -> Iterator[JournalPeer]:
    """Start `journal_server.py` over HTTP with its journal in `directory`; stop it on exit."""
    peers = Peers(log_dir=directory)
    path = directory / "journal.jsonl"
    try:
        yield JournalPeer(path, peers.legacy(JOURNAL_SERVER, "--journal", str(path), *extra))
    finally:
        peers.close()


@dataclass
class InProcessBridge:
    """The whole HTTP bridge (`make_app`) served in this process, and a client session to it."""

    app: web.Application
    server: TestServer
    http: aiohttp.ClientSession

    @property
    def url(self) -> str:
        return str(self.server.make_url("/mcp"))

    @property
    def engine(self) -> Engine:
        (upstream,) = self.app[UPSTREAMS_KEY]
        assert upstream.runtime is not None
        return upstream.runtime

    @property
    def pool(self) -> UpstreamPool:
        (upstream,) = self.app[UPSTREAMS_KEY]
        assert upstream.pool is not None
        return upstream.pool

    def poster(self, authorization: str | None = None, **headers: str) -> ModernPoster:
        """Raw modern requests as one caller (its `Authorization` makes its principal)."""
        extra = dict(headers)
        if authorization is not None:
            extra["Authorization"] = authorization
        return ModernPoster(self.http, self.url, capabilities=CAPABILITIES, headers=extra)

    async def get(self, path: str) -> tuple[int, str]:
        async with self.http.get(self.server.make_url(path)) as response:
            return response.status, await response.text()

    def metrics_text(self) -> str:
        return self.app[METRICS_KEY].render()

    def sample(self, name: str, **labels: str) -> float:
        """One sample of the upstream's series (its `upstream` label added)."""
        (upstream,) = self.app[UPSTREAMS_KEY]
        return upstream.metrics.sample(name, **labels)


def bridge_settings(upstream_url: str, **sections: JsonObject) -> Settings:
    """Settings for an in-process bridge: `bridge_settings(url, held={"max_rounds": 2})`. The fake
    upstreams serve many sessions: the session-limit check is off unless a test turns it on."""
    upstream = {"url": upstream_url, "session_limit": "many", **sections.pop("upstream", {})}
    return Settings.model_validate({"upstream": upstream, **sections})


class BridgeTestServer(TestServer):
    """aiohttp's test server with the runner `mrtr-bridge serve` uses
    (`proxy.app.http_server.BridgeRunner`)."""

    async def _make_runner(self, **kwargs: Any) -> BaseRunner:
        assert isinstance(self.app, web.Application)
        return BridgeRunner(self.app, **kwargs)


@contextlib.asynccontextmanager
async def inprocess_bridge(settings: Settings) -> AsyncIterator[InProcessBridge]:
    """Serve `make_app(settings)` on a free loopback port for the duration of the block."""
    app = make_app(settings)
    server = BridgeTestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as http:
            yield InProcessBridge(app, server, http)
    finally:
        await server.close()


@contextlib.asynccontextmanager
async def inprocess_replicas(upstream_url: str, count: int = 2) -> AsyncIterator[list[str]]:
    """`count` whole bridges (`make_app`), replicas `r1`, `r2`, ... sharing one key and listing
    each other as peers; yields their base URLs (`http://127.0.0.1:PORT`)."""
    kid, key = new_key()
    ports = [free_port() for _ in range(count)]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    servers: list[TestServer] = []
    try:
        for index, port in enumerate(ports):
            settings = bridge_settings(
                upstream_url,
                held={"keys": {kid: key}, "replica_id": f"r{index + 1}"},
                cluster={"peers": urls, "advertise_url": urls[index], "refresh_s": 0.2},
            )
            server = BridgeTestServer(make_app(settings), host="127.0.0.1", port=port)
            await server.start_server()
            servers.append(server)
        yield urls
    finally:
        for server in servers:
            await server.close()


# ---- MRTR rounds ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Held:
    """One InputRequiredResult: what to echo on the retry."""

    tool: str
    arguments: JsonObject
    request_state: str
    keys: tuple[str, ...]


def result_of(reply: RawReply) -> JsonObject:
    response = reply.response
    assert "result" in response, f"expected a result, got {response}"
    result: JsonObject = response["result"]
    return result


def error_of(reply: RawReply) -> JsonObject:
    response = reply.response
    assert "error" in response, f"expected an error, got {response}"
    error: JsonObject = response["error"]
    return error


def text_of(reply: RawReply) -> str:
    result = result_of(reply)
    assert result["resultType"] == RESULT_COMPLETE, result
    text: str = result["content"][0]["text"]
    return text


async def call(poster: ModernPoster, tool: str, **arguments: Any) -> RawReply:
    return await poster.post(TOOLS_CALL, {"name": tool, "arguments": arguments})


async def start_held(poster: ModernPoster, tool: str, **arguments: Any) -> Held:
    """Call an interactive tool and expect an InputRequiredResult."""
    result = result_of(await call(poster, tool, **arguments))
    assert result["resultType"] == RESULT_INPUT_REQUIRED, result
    return Held(tool, arguments, result["requestState"], tuple(result["inputRequests"]))


async def retry(poster: ModernPoster, held: Held, responses: JsonObject) -> RawReply:
    """The retry of `held` with `inputResponses` = `responses`."""
    params = {
        "name": held.tool,
        "arguments": held.arguments,
        "requestState": held.request_state,
        "inputResponses": responses,
    }
    return await poster.post(TOOLS_CALL, params)


def accept(held: Held, answer: str) -> JsonObject:
    """`inputResponses` accepting every elicitation of `held` with `answer`."""
    return {key: {"action": "accept", "content": {"answer": answer}} for key in held.keys}


def sampled(held: Held, text: str) -> JsonObject:
    """`inputResponses` answering every sampling request of `held` with `text`."""
    return {
        key: {"role": "assistant", "content": {"type": "text", "text": text}, "model": "m"}
        for key in held.keys
    }


async def finish(poster: ModernPoster, held: Held, answer: str) -> str:
    """Answer `held` (an `ask`) and return the final text."""
    return text_of(await retry(poster, held, accept(held, answer)))


__all__ = [
    "CAPABILITIES",
    "JOURNAL_SERVER",
    "Held",
    "InProcessBridge",
    "JournalPeer",
    "accept",
    "bridge_settings",
    "call",
    "error_of",
    "finish",
    "inprocess_bridge",
    "inprocess_replicas",
    "journal_peer",
    "result_of",
    "retry",
    "sampled",
    "start_held",
    "text_of",
]
