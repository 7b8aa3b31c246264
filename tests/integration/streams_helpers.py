"""Helpers for the streams tests (issue 5): SSE replies read as they arrive, the streams server's
journal, the bridge's JSON log, expected messages, and the whole bridge in the test's event loop.

Used by `test_streams_http.py` and `test_streams_stdio.py`; the legacy peer is
`tests/peers/streams_server.py`.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from config.settings import Settings
from proxy.app.compose import bridge_runtime
from proxy.app.http_app import make_front_app
from proxy.engine.engine import Engine
from translators.protocol.eras import (
    LOG_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROGRESS_TOKEN,
    META_PROTOCOL_VERSION,
    META_SUBSCRIPTION_ID,
    MODERN_VERSION,
    RESULT_COMPLETE,
    TOOLS_CALL,
)
from translators.wire.jsonrpc import JsonObject

from .harness import BRIDGE_EXE, CLIENT_INFO, ModernPoster, PeerProcess, RawReply

SERVER = "streams_server.py"
WAIT_S = 10.0  # bound of every wait for something that must happen
ABSENCE_S = 3.0  # how long a test waits for something that should have arrived by now
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
FORM_CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}}


# ---- reading streams as they arrive --------------------------------------------------------------


@dataclass(frozen=True)
class Comment:
    """An SSE comment line (keep-alive), without its leading colon."""

    text: str


Item = JsonObject | Comment | None  # None: the stream ended


def _parse_block(block: str) -> list[Item]:
    items: list[Item] = [
        Comment(line[1:].strip()) for line in block.split("\n") if line.startswith(":")
    ]
    data = [line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")]
    if data and "".join(data).strip():
        items.append(json.loads("\n".join(data)))
    return items


class SseStream:
    """One modern POST whose SSE reply is read as it arrives: messages and comments, in order."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.items: list[Item] = []
        self._queue: asyncio.Queue[Item] = asyncio.Queue()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(
        cls, poster: ModernPoster, method: str, params: JsonObject, *, request_id: Any
    ) -> SseStream:
        body = poster.body(method, params, request_id=request_id)
        response = await poster.http.post(
            poster.url, json=body, headers=poster.request_headers(body)
        )
        assert response.status == 200, (
            f"{method} got HTTP {response.status}: {await response.text()}"
        )
        assert response.headers["Content-Type"].startswith("text/event-stream")
        return cls(response)

    async def _read(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")()
        buffer = ""
        try:
            async for chunk in self.response.content.iter_any():
                buffer = (buffer + decoder.decode(chunk)).replace("\r\n", "\n")
                while "\n\n" in buffer:
                    block, buffer = buffer.split("\n\n", 1)
                    for item in _parse_block(block):
                        self._queue.put_nowait(item)
        except aiohttp.ClientError:
            pass
        finally:
            self._queue.put_nowait(None)

    async def next(self, timeout: float = WAIT_S) -> Item:
        try:
            async with asyncio.timeout(timeout):
                item = await self._queue.get()
        except TimeoutError:
            raise AssertionError(
                f"nothing more on the stream within {timeout} s; so far: {self.items}"
            ) from None
        self.items.append(item)
        return item

    async def message(self, timeout: float = WAIT_S) -> JsonObject:
        """The next JSON-RPC message, skipping comments."""
        while True:
            item = await self.next(timeout)
            if item is None:
                raise AssertionError(f"the stream ended; it carried: {self.items}")
            if isinstance(item, dict):
                return item

    async def messages_until(
        self, done: Callable[[list[JsonObject]], bool], timeout: float = WAIT_S
    ) -> list[JsonObject]:
        """Messages from now on until `done(messages)` holds."""
        messages: list[JsonObject] = []
        while not done(messages):
            messages.append(await self.message(timeout))
        return messages

    async def rest(self, timeout: float = WAIT_S) -> list[Item]:
        """Every item until the stream ends (the end, None, not included)."""
        items: list[Item] = []
        while (item := await self.next(timeout)) is not None:
            items.append(item)
        return items

    async def close(self) -> None:
        """Close the connection: for the bridge, the client went away."""
        self.response.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


# ---- what the peers saw --------------------------------------------------------------------------


class Journal:
    """The streams server's journal file: one JSON entry per line, from every process sharing it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def entries(self, event: str | None = None, **match: Any) -> list[JsonObject]:
        if not self.path.exists():
            return []
        complete = self.path.read_text(encoding="utf-8").split("\n")[:-1]
        found = [json.loads(line) for line in complete if line.strip()]
        return [
            e
            for e in found
            if (event is None or e["event"] == event)
            and all(e.get(key) == value for key, value in match.items())
        ]

    async def wait_for(
        self, event: str, count: int = 1, timeout: float = WAIT_S, **match: Any
    ) -> list[JsonObject]:
        """The matching entries once there are at least `count` of them."""
        deadline = asyncio.get_running_loop().time() + timeout
        while len(found := self.entries(event, **match)) < count:
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(
                    f"journal: {count} x {event} {match} not seen in {timeout} s; "
                    f"journal tail: {self.entries()[-12:]}"
                )
            await asyncio.sleep(0.05)
        return found


def cancel_notices(journal: Journal, entry: JsonObject) -> list[str]:
    """Request ids of the `notifications/cancelled` the session of `entry` received."""
    found = journal.entries("cancel_notification", pid=entry["pid"], session=entry["session"])
    return [str(notice["request_id"]) for notice in found]


async def assert_closing_cancels(
    http: aiohttp.ClientSession, url: str, journal: Journal, tag: str
) -> JsonObject:
    """Close the response stream of a running `slow` call: the legacy server must see exactly its
    `notifications/cancelled` and stop the tool. Returns the journal's `slow_cancelled` entry."""
    poster = poster_for(http, url, tag)
    arguments = {"steps": 100, "interval": 0.05, "tag": tag}
    stream = await SseStream.open(
        poster,
        TOOLS_CALL,
        call("slow", arguments, **{META_PROGRESS_TOKEN: f"{tag}-slow"}),
        request_id=tag,
    )
    assert await stream.message() == progress(f"{tag}-slow", 1, 100, f"{tag} 1")
    await stream.close()
    (cancelled,) = await journal.wait_for("slow_cancelled", tag=tag)
    (started,) = journal.entries("slow_started", tag=tag)
    assert str(cancelled["request_id"]) == str(started["request_id"])
    assert cancel_notices(journal, started) == [str(started["request_id"])]
    assert journal.entries("slow_finished", tag=tag) == []
    return cancelled


def logged(process: PeerProcess, event: str, **match: Any) -> list[JsonObject]:
    """The bridge's JSON log lines with this `event` and these fields."""
    lines = []
    for line in process.log_text(limit=10**8).splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("event") == event:
                lines.append(entry)
    return [e for e in lines if all(e.get(key) == value for key, value in match.items())]


async def wait_logged(
    process: PeerProcess, event: str, timeout: float = WAIT_S, **match: Any
) -> JsonObject:
    deadline = asyncio.get_running_loop().time() + timeout
    while not (found := logged(process, event, **match)):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"the bridge did not log {event} {match} within {timeout} s")
        await asyncio.sleep(0.05)
    return found[0]


# ---- messages ------------------------------------------------------------------------------------


def poster_for(
    http: aiohttp.ClientSession, url: str, principal: str, **kwargs: Any
) -> ModernPoster:
    """Raw modern requests as caller `principal` (its own Authorization, so its own sessions)."""
    return ModernPoster(http, url, headers={"Authorization": f"Bearer {principal}"}, **kwargs)


def call(name: str, arguments: JsonObject | None = None, /, **meta: Any) -> JsonObject:
    """`tools/call` params; `meta` becomes `_meta` (e.g. `progressToken`, the log level)."""
    return {"name": name, "arguments": arguments or {}, "_meta": meta}


def progress(token: str | int, step: int, total: int, message: str) -> JsonObject:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": token, "progress": step, "total": total, "message": message},
    }


def log_line(level: str, tag: str) -> JsonObject:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": level, "logger": "streams", "data": {"level": level, "tag": tag}},
    }


def logs_from(level: str, tag: str) -> list[JsonObject]:
    return [log_line(at, tag) for at in LOG_LEVELS[LOG_LEVELS.index(level) :]]


def tagged(method: str, listen_id: Any, **params: Any) -> JsonObject:
    return {
        "jsonrpc": "2.0",
        "method": method,
        "params": {**params, "_meta": {META_SUBSCRIPTION_ID: listen_id}},
    }


def acknowledgement(listen_id: Any, honoured: JsonObject) -> JsonObject:
    return tagged(ACKNOWLEDGED, listen_id, notifications=honoured)


def text_of(reply: RawReply) -> str:
    result = reply.response["result"]
    assert result["resultType"] == RESULT_COMPLETE, result
    text: str = result["content"][0]["text"]
    return text


async def trigger(poster: ModernPoster, tool: str, arguments: JsonObject | None = None) -> str:
    return text_of(await poster.post(TOOLS_CALL, call(tool, arguments)))


def listen_params(**notifications: Any) -> JsonObject:
    return {"notifications": notifications}


# ---- the bridge in this process ------------------------------------------------------------------


@contextlib.asynccontextmanager
async def in_process_bridge(
    settings: Settings, *, keepalive_s: float
) -> AsyncIterator[tuple[str, Engine]]:
    """The whole bridge in this event loop, its front with a short SSE keep-alive (not a
    setting)."""
    async with bridge_runtime(settings) as (engine, _pool):
        runner = web.AppRunner(
            make_front_app(settings, engine, keepalive_s=keepalive_s),
            handler_cancellation=True,
            access_log=None,
            shutdown_timeout=5,
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            yield f"http://127.0.0.1:{runner.addresses[0][1]}/mcp", engine
        finally:
            await runner.cleanup()


# ---- the stdio front, as its client --------------------------------------------------------------


def request(request_id: Any, method: str, params: JsonObject, **meta: Any) -> JsonObject:
    """A modern request as a stdio client writes it (`_meta` completed with the per-request
    keys)."""
    full_meta = {
        META_PROTOCOL_VERSION: MODERN_VERSION,
        META_CLIENT_INFO: CLIENT_INFO,
        META_CLIENT_CAPABILITIES: {},
        **params.get("_meta", {}),
        **meta,
    }
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": full_meta},
    }


def cancelled(request_id: Any) -> JsonObject:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id, "reason": "the user gave up"},
    }


class StdioBridge:
    """`mrtr-bridge stdio` as a child: lines in on stdin, every line out kept in `lines`."""

    def __init__(self, process: asyncio.subprocess.Process, log_path: Path) -> None:
        self.process = process
        self.log_path = log_path
        self.lines: list[JsonObject] = []

    @classmethod
    @contextlib.asynccontextmanager
    async def running(cls, upstream_url: str, log_path: Path) -> AsyncIterator[StdioBridge]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MRTR_BRIDGE_")}
        with log_path.open("wb") as log:
            process = await asyncio.create_subprocess_exec(
                str(BRIDGE_EXE),
                "stdio",
                "--upstream",
                upstream_url,
                "--log-format",
                "json",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                env=env,
            )
        bridge = cls(process, log_path)
        try:
            yield bridge
        finally:
            await bridge.stop()

    def send(self, *messages: JsonObject) -> None:
        assert self.process.stdin is not None
        for message in messages:
            self.process.stdin.write((json.dumps(message) + "\n").encode())

    async def line(self, timeout: float = WAIT_S) -> JsonObject:
        assert self.process.stdout is not None
        try:
            async with asyncio.timeout(timeout):
                raw = await self.process.stdout.readline()
        except TimeoutError:
            raise AssertionError(
                f"no line from the bridge within {timeout} s; so far {self.lines[-8:]}"
            ) from None
        assert raw, f"the bridge closed stdout; log: {self.log_path.read_text()[-3000:]}"
        message: JsonObject = json.loads(raw)
        self.lines.append(message)
        return message

    async def until_responses(self, *request_ids: Any) -> None:
        """Read lines until every one of `request_ids` is answered."""
        waiting = set(request_ids)
        while waiting:
            message = await self.line()
            if "method" not in message:
                waiting.discard(message.get("id"))

    def response(self, request_id: Any) -> JsonObject:
        (found,) = [m for m in self.lines if "method" not in m and m.get("id") == request_id]
        return found

    async def stop(self) -> None:
        if self.process.returncode is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                async with asyncio.timeout(WAIT_S):
                    await self.process.wait()
            except TimeoutError:
                self.process.send_signal(signal.SIGKILL)
                await self.process.wait()
