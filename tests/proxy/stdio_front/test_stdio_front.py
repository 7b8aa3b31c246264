"""The modern stdio front (proxy/stdio_front/front.py) with a stub engine over in-memory pipes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.stdio_front.front import run_stdio_front
from translators.protocol.eras import (
    DISCOVER,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    MODERN_VERSION,
    TOOLS_CALL,
)
from translators.wire.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
)
from translators.wire.stdio_framing import LineDecoder, frame

ROOT = Path(__file__).resolve().parents[3]
WAIT_S = 5.0
META = {META_PROTOCOL_VERSION: MODERN_VERSION, META_CLIENT_CAPABILITIES: {}}
PROGRESS = {
    "jsonrpc": "2.0",
    "method": "notifications/progress",
    "params": {"progressToken": "t", "progress": 1},
}


class StubEngine:
    """Answers by tool name: `wait` blocks until released, `notify` sends a notification first,
    `crash` raises."""

    def __init__(self) -> None:
        self.requests: list[FrontRequest] = []
        self.gates: defaultdict[Any, asyncio.Event] = defaultdict(asyncio.Event)
        self.started: asyncio.Queue[Any] = asyncio.Queue()
        self.cancelled: asyncio.Queue[Any] = asyncio.Queue()

    async def handle(self, request: FrontRequest, sink: NotificationSink) -> dict[str, Any]:
        request_id = request.front_request_id
        self.requests.append(request)
        self.started.put_nowait(request_id)
        name = request.params.get("name")
        try:
            if name == "notify":
                sink.send(PROGRESS)
            elif name == "wait":
                await self.gates[request_id].wait()
            elif name == "crash":
                raise RuntimeError("engine bug")
        except asyncio.CancelledError:
            sink.send(PROGRESS)  # must not reach stdout: the request was cancelled
            self.cancelled.put_nowait(request_id)
            raise
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {"answered": request.method, "name": name},
        }


class Screen:
    """An in-memory stdout: records raw bytes and decodes each line."""

    def __init__(self) -> None:
        self.raw = bytearray()
        self._decoder = LineDecoder(10_000_000)
        self.lines: asyncio.Queue[Any] = asyncio.Queue()

    def write(self, data: bytes) -> None:
        self.raw += data
        for item in self._decoder.feed(data):
            self.lines.put_nowait(item)

    async def drain(self) -> None:
        return None

    async def next(self) -> dict[str, Any]:
        async with asyncio.timeout(WAIT_S):
            line: dict[str, Any] = await self.lines.get()
            return line


class Client:
    def __init__(self, reader: asyncio.StreamReader, screen: Screen, engine: StubEngine) -> None:
        self.reader, self.screen, self.engine = reader, screen, engine

    def send_raw(self, data: bytes) -> None:
        self.reader.feed_data(data)

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(frame(message))

    def call(self, request_id: Any, name: str = "echo", method: str = TOOLS_CALL) -> None:
        params: dict[str, Any] = (
            {"_meta": META} if method == DISCOVER else {"name": name, "_meta": META}
        )
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})

    def cancel(self, request_id: Any) -> None:
        self.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id},
            }
        )

    async def started(self) -> Any:
        async with asyncio.timeout(WAIT_S):
            return await self.engine.started.get()


@asynccontextmanager
async def front(
    *, max_line_bytes: int = 1_048_576, eof_grace_s: float = 0.0
) -> AsyncIterator[Client]:
    reader, screen, engine = asyncio.StreamReader(), Screen(), StubEngine()
    task = asyncio.create_task(
        run_stdio_front(
            engine,
            reader=reader,
            writer=screen,
            principal="p-digest",
            max_line_bytes=max_line_bytes,
            eof_grace_s=eof_grace_s,
        )
    )
    client = Client(reader, screen, engine)
    try:
        yield client
    finally:
        if not reader.at_eof():
            reader.feed_eof()
        async with asyncio.timeout(WAIT_S):
            await task
    assert client.screen.lines.empty(), "unexpected extra output"


async def test_discover_round_trip() -> None:
    """A server/discover line reaches the engine as a stdio FrontRequest and its response comes back
    as one line."""
    async with front() as client:
        client.call(1, method=DISCOVER)
        assert await client.screen.next() == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"answered": DISCOVER, "name": None},
        }
        [request] = client.engine.requests
        assert (request.transport, request.principal, request.front_request_id) == (
            "stdio",
            "p-digest",
            1,
        )
        assert request.params == {"_meta": META}
        assert request.trace_headers == {}


async def test_trace_context_in_meta_becomes_trace_headers() -> None:
    """traceparent in _meta is handed to the engine as a trace header (stdio has no header
    layer)."""
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with front() as client:
        client.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": TOOLS_CALL,
                "params": {"name": "echo", "_meta": {**META, "traceparent": traceparent}},
            }
        )
        await client.screen.next()
        assert client.engine.requests[0].trace_headers == {"traceparent": traceparent}


async def test_notification_precedes_its_response() -> None:
    """A notification sent by the engine is written before the request's response."""
    async with front() as client:
        client.call("a", "notify")
        assert await client.screen.next() == PROGRESS
        assert (await client.screen.next())["id"] == "a"


async def test_concurrent_requests_are_answered_out_of_order() -> None:
    """Requests run concurrently: the second finishes and is answered while the first still
    waits."""
    async with front() as client:
        client.call(1, "wait")
        client.call(2, "wait")
        assert {await client.started(), await client.started()} == {1, 2}
        client.engine.gates[2].set()
        assert (await client.screen.next())["id"] == 2
        client.engine.gates[1].set()
        assert (await client.screen.next())["id"] == 1


async def test_cancellation_stops_the_request_and_writes_nothing_for_it() -> None:
    """notifications/cancelled cancels that request's task; nothing more is written for it; others
    go on."""
    async with front() as client:
        client.call(7, "wait")
        await client.started()
        client.cancel(7)
        client.cancel(7)  # already cancelled: ignored
        client.cancel("unknown")  # never existed: ignored
        async with asyncio.timeout(WAIT_S):
            assert await client.engine.cancelled.get() == 7
        client.call(8)
        assert (await client.screen.next())["id"] == 8
        client.call(7)  # the id is free again once its request is gone
        assert (await client.screen.next())["id"] == 7


async def test_eof_cancels_in_flight_requests_and_returns() -> None:
    """With no grace, stdin EOF cancels what is in flight at once and nothing is answered for it."""
    async with front(eof_grace_s=0) as client:
        client.call(1, "wait")
        await client.started()
        client.reader.feed_eof()
        async with asyncio.timeout(0.5):
            assert await client.engine.cancelled.get() == 1


async def test_eof_grace_lets_quick_requests_finish_then_cancels_the_rest() -> None:
    """Within the EOF grace a request that finishes is answered; one still waiting after it is
    cancelled."""
    async with front(eof_grace_s=0.3) as client:
        client.call(1, "wait")
        client.call(2, "wait")
        assert {await client.started(), await client.started()} == {1, 2}
        client.reader.feed_eof()
        client.engine.gates[2].set()
        assert (await client.screen.next())["id"] == 2
        async with asyncio.timeout(1.0):
            assert await client.engine.cancelled.get() == 1


async def test_garbage_line_gets_a_parse_error_and_the_stream_goes_on() -> None:
    """A line that is not JSON is answered with -32700 and id null; the next request is served."""
    async with front() as client:
        client.send_raw(b"this is not json\n\n")
        error = await client.screen.next()
        assert ("id" in error, error["error"]["code"]) == (False, PARSE_ERROR)
        client.call(2)
        assert (await client.screen.next())["id"] == 2


async def test_validation_errors_echo_the_request_id() -> None:
    """Ladder failures are answered with the request's id: missing _meta, unknown method, bad
    envelope."""
    async with front() as client:
        client.send({"jsonrpc": "2.0", "id": 1, "method": TOOLS_CALL, "params": {"name": "x"}})
        client.send({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"_meta": META}})
        client.send({"jsonrpc": "1.0", "id": 3, "method": TOOLS_CALL})
        client.send_raw(b"[1, 2]\n")
        codes = [
            ((line := await client.screen.next()).get("id"), line["error"]["code"])
            for _ in range(4)
        ]
        assert codes == [
            (1, INVALID_PARAMS),
            (2, METHOD_NOT_FOUND),
            (3, INVALID_REQUEST),
            (None, INVALID_REQUEST),
        ]
        assert client.engine.requests == []


async def test_oversized_line_is_rejected_with_its_id() -> None:
    """A request longer than the line limit is answered with -32600 and its id, and never buffered
    whole."""
    async with front(max_line_bytes=2048) as client:
        client.send(
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": TOOLS_CALL,
                "params": {"name": "x" * 5000, "_meta": META},
            }
        )
        error = await client.screen.next()
        assert (error["id"], error["error"]["code"]) == (9, INVALID_REQUEST)
        assert "larger than the limit of 2048 bytes" in error["error"]["message"]
        client.call(10)
        assert (await client.screen.next())["id"] == 10


async def test_duplicate_in_flight_id_is_refused() -> None:
    """A second request reusing the id of one still in flight is refused; the first is
    unaffected."""
    async with front() as client:
        client.call(1, "wait")
        await client.started()
        client.call(1)
        error = await client.screen.next()
        assert (error["id"], error["error"]["code"]) == (1, INVALID_REQUEST)
        client.engine.gates[1].set()
        assert (await client.screen.next())["result"]["name"] == "wait"


async def test_client_responses_and_other_notifications_are_ignored() -> None:
    """A JSON-RPC response or an unknown notification from the client produces no output."""
    async with front() as client:
        client.send({"jsonrpc": "2.0", "id": 5, "result": {}})
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        client.call(6)
        assert (await client.screen.next())["id"] == 6


async def test_engine_crash_still_answers() -> None:
    """If the engine raises, the client still gets a -32603 answer for that id."""
    async with front() as client:
        client.call(4, "crash")
        error = await client.screen.next()
        assert (error["id"], error["error"]["code"], error["error"]["message"]) == (
            4,
            INTERNAL_ERROR,
            "Internal error",
        )


SERVE_SCRIPT = """
import asyncio
from config.settings import Settings
from proxy.stdio_front.front import serve_stdio

class Engine:
    async def handle(self, request, sink):
        print("stray print from a library")
        params = {"level": "info", "data": "hi"}
        sink.send({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
        return {"jsonrpc": "2.0", "id": request.front_request_id,
                "result": {"principal": request.principal, "transport": request.transport}}

asyncio.run(serve_stdio(Settings(), Engine()))
"""


def _discover_line(request_id: int) -> bytes:
    return frame(
        {"jsonrpc": "2.0", "id": request_id, "method": DISCOVER, "params": {"_meta": META}}
    )


def _check_serve_output(stdout: bytes, stderr: bytes, count: int) -> None:
    lines = stdout.splitlines()
    assert len(lines) == 2 * count
    messages = [json.loads(line) for line in lines]
    responses = [message for message in messages if "id" in message]
    assert sorted(response["id"] for response in responses) == list(range(count))
    assert all(
        response["result"] == {"principal": "stdio", "transport": "stdio"} for response in responses
    )
    assert b"stray print from a library" in stderr


async def test_serve_stdio_over_real_pipes_keeps_stdout_clean() -> None:
    """serve_stdio on a real process: protocol lines on stdout, a stray print on stderr, exit at
    stdin EOF."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SERVE_SCRIPT,
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(20):
        stdout, stderr = await process.communicate(b"".join(_discover_line(n) for n in range(3)))
    assert process.returncode == 0, stderr.decode()
    _check_serve_output(stdout, stderr, 3)


def test_serve_stdio_with_files_instead_of_pipes(tmp_path: Path) -> None:
    """stdin and stdout may be regular files (no polling possible): the fallback reader and writer
    serve them."""
    (tmp_path / "in.jsonl").write_bytes(_discover_line(0) + _discover_line(1))
    with (tmp_path / "in.jsonl").open("rb") as stdin, (tmp_path / "out.jsonl").open("wb") as stdout:
        completed = subprocess.run(
            [sys.executable, "-c", SERVE_SCRIPT],
            cwd=ROOT,
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=20,
            check=False,
        )
    assert completed.returncode == 0, completed.stderr.decode()
    _check_serve_output((tmp_path / "out.jsonl").read_bytes(), completed.stderr, 2)
