"""The modern Streamable HTTP front, end to end over real HTTP with a stub engine."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

import pytest
from aiohttp import ClientResponse, web
from aiohttp.test_utils import TestClient
from aiohttp.typedefs import Handler, Middleware

from config.settings import FrontSettings, IdentitySettings, Settings
from proxy.app.http_app import make_front_app
from proxy.auth.principal import ANONYMOUS_PRINCIPAL, LOCAL_PRINCIPAL, principal_of
from proxy.common.front_request import FrontRequest, NotificationSink
from translators.protocol.eras import (
    META_CLIENT_CAPABILITIES,
    META_LOG_LEVEL,
    META_PROGRESS_TOKEN,
    META_PROTOCOL_VERSION,
    MODERN_VERSION,
    MODERN_VERSIONS,
    SUBSCRIPTIONS_LISTEN,
    TOOLS_CALL,
    TOOLS_LIST,
)
from translators.wire.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_VERSION,
    http_status_for,
)

ClientFactory = Callable[..., Awaitable[TestClient[Any, Any]]]
Behaviour = Callable[[FrontRequest, NotificationSink], Awaitable[dict[str, Any]]]
WAIT_S = 5.0
SSE_ACCEPT = "application/json, text/event-stream"


def ok(request: FrontRequest) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request.front_request_id, "result": {"resultType": "complete"}}


class StubEngine:
    """Records each FrontRequest and answers with `behaviour` (default: an empty complete
    result)."""

    def __init__(self, behaviour: Behaviour | None = None) -> None:
        self.requests: list[FrontRequest] = []
        self.behaviour = behaviour
        self.ready = True
        self.cancelled = asyncio.Event()

    async def handle(self, request: FrontRequest, sink: NotificationSink) -> dict[str, Any]:
        self.requests.append(request)
        try:
            return await self.behaviour(request, sink) if self.behaviour else ok(request)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise

    def is_ready(self) -> bool:
        return self.ready


def message(
    method: str = TOOLS_LIST,
    params: dict[str, Any] | None = None,
    front_request_id: Any = 1,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    full_meta = {
        META_PROTOCOL_VERSION: MODERN_VERSION,
        META_CLIENT_CAPABILITIES: {},
        **(meta or {}),
    }
    body_params = {**(params or {}), "_meta": full_meta}
    return {"jsonrpc": "2.0", "id": front_request_id, "method": method, "params": body_params}


def headers_for(body: dict[str, Any], **extra: str) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": SSE_ACCEPT,
        "MCP-Protocol-Version": MODERN_VERSION,
        "Mcp-Method": body["method"],
    }
    name = body.get("params", {}).get("name")
    if isinstance(name, str):
        headers["Mcp-Name"] = name
    return {**headers, **extra}


@pytest.fixture
def engine() -> StubEngine:
    return StubEngine()


async def start(
    aiohttp_client: ClientFactory,
    engine: StubEngine,
    keepalive_s: float = 15.0,
    middlewares: tuple[Middleware, ...] = (),
    **front: Any,
) -> TestClient[Any, Any]:
    settings = Settings(front=FrontSettings(**front))
    app = make_front_app(settings, engine, keepalive_s=keepalive_s)
    app.middlewares.extend(middlewares)
    return await aiohttp_client(app, server_kwargs={"handler_cancellation": True})


@pytest.fixture
async def client(aiohttp_client: ClientFactory, engine: StubEngine) -> TestClient[Any, Any]:
    return await start(aiohttp_client, engine)


async def post(
    client: TestClient[Any, Any], body: Any, headers: Any = None
) -> tuple[ClientResponse, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with asyncio.timeout(WAIT_S):
        response = await client.post(
            "/mcp", data=data, headers=headers_for(body) if headers is None else headers
        )
        text = await response.text()
    return response, json.loads(
        text
    ) if text and response.content_type == "application/json" else text


def sse_messages(text: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :]) for line in text.splitlines() if line.startswith("data: ")
    ]


# --- the happy path ----------------------------------------------------------------------------


async def test_a_valid_request_reaches_the_engine_and_returns_json(
    client: TestClient[Any, Any], engine: StubEngine
) -> None:
    """A conforming POST is answered as JSON, and the engine sees who sent it and how."""
    body = message(TOOLS_CALL, {"name": "get_weather", "arguments": {"region": "eu"}})
    headers = headers_for(
        body,
        Authorization="Bearer secret-token",
        traceparent="00-abc-def-01",
        **{"Mcp-Param-Region": "eu", "Mcp-Session-Id": "ignored", "Last-Event-ID": "7"},
    )
    response, reply = await post(client, body, headers)
    assert (response.status, response.content_type) == (200, "application/json")
    assert reply == {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete"}}
    assert "Mcp-Session-Id" not in response.headers
    [request] = engine.requests
    assert (request.front_request_id, request.method, request.transport) == (1, TOOLS_CALL, "http")
    assert request.params == body["params"]
    assert request.authorization == "Bearer secret-token"
    assert request.principal == principal_of(
        {"authorization": "Bearer secret-token"}, IdentitySettings()
    )
    assert "secret-token" not in request.principal
    assert dict(request.trace_headers) == {"traceparent": "00-abc-def-01"}
    assert dict(request.param_headers) == {"region": "eu"}


async def test_the_access_line_is_written_after_the_answer(
    aiohttp_client: ClientFactory, engine: StubEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The access line is off the answer's way: aiohttp prepares and writes the response first,
    then the line is written, once, with what the request was."""
    order: list[str] = []

    def emit(level: str, event: str, fields: dict[str, Any]) -> None:
        order.append(f"{event} {fields['method']} {fields['status']} {fields['user_agent']}")

    async def prepared(_request: web.Request, _response: web.StreamResponse) -> None:
        order.append("response prepared")

    monkeypatch.setattr("proxy.http_front.endpoint.emit", emit)
    settings = Settings()
    app = make_front_app(settings, engine)
    app.on_response_prepare.append(prepared)
    client = await aiohttp_client(app)
    body = message(TOOLS_CALL, {"name": "get_weather", "arguments": {}})
    response, _ = await post(client, body, headers_for(body, **{"User-Agent": "probe/1"}))
    assert response.status == 200
    async with asyncio.timeout(WAIT_S):
        while len(order) < 2:
            await asyncio.sleep(0)
    assert order == ["response prepared", "front_request_finished tools/call 200 probe/1"]


async def test_a_notification_is_accepted_with_202(
    client: TestClient[Any, Any], engine: StubEngine
) -> None:
    """A POSTed notification gets 202 with no body and never reaches the engine."""
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    response, text = await post(client, body, headers_for(body))
    assert (response.status, text, engine.requests) == (202, "", [])


async def test_health_and_readiness(client: TestClient[Any, Any], engine: StubEngine) -> None:
    """/healthz is always ok; /readyz follows the engine."""
    async with asyncio.timeout(WAIT_S):
        health = await client.get("/healthz")
        assert (health.status, await health.json()) == (200, {"status": "ok"})
        assert (await client.get("/readyz")).status == 200
        engine.ready = False
        not_ready = await client.get("/readyz")
        assert (not_ready.status, await not_ready.json()) == (
            503,
            {
                "status": "unavailable",
                "ready_requires": "any",
                "checks": {"keys": "ephemeral"},
                "upstreams": {"/mcp": {"status": "starting", "checks": {}}},
            },
        )


# --- transport-level rejections ----------------------------------------------------------------


@pytest.mark.parametrize("verb", ["GET", "DELETE", "PUT"])
async def test_other_http_methods_are_405(client: TestClient[Any, Any], verb: str) -> None:
    """Only POST exists: no GET stream, no DELETE of a session."""
    async with asyncio.timeout(WAIT_S):
        response = await client.request(verb, "/mcp", headers={"Accept": "text/event-stream"})
        reply = await response.json()
    assert (response.status, response.headers["Allow"]) == (405, "POST")
    assert reply == {
        "jsonrpc": "2.0",
        "error": {
            "code": INVALID_REQUEST,
            "message": f"Method Not Allowed: the MCP endpoint accepts POST only, not {verb}",
        },
    }


@pytest.mark.parametrize(
    ("extra", "allowed"),
    [
        ({"Host": "evil.example.com"}, False),
        ({"Host": "evil.example.com:8080"}, False),
        ({"Host": "localhost:8080"}, True),
        ({"Host": "[::1]:8080"}, True),
        ({"Origin": "http://evil.example.com"}, False),
        ({"Origin": "null"}, False),
        ({"Origin": "ftp://localhost"}, False),
        ({"Origin": "http://localhost:5173"}, True),
        ({"Origin": "https://127.0.0.1"}, True),
        ({"Origin": "http://[::1]:3000"}, True),
    ],
)
async def test_host_and_origin_are_checked(
    client: TestClient[Any, Any], extra: dict[str, str], allowed: bool
) -> None:
    """Non-local Host or Origin values get 403 with a JSON-RPC error (DNS-rebinding protection)."""
    body = message()
    response, reply = await post(client, body, headers_for(body, **extra))
    if allowed:
        assert response.status == 200
        return
    header, value = next(iter(extra.items()))
    setting = "front.allowed_hosts" if header == "Host" else "front.allowed_origins"
    assert response.status == 403
    assert reply == {
        "jsonrpc": "2.0",
        "error": {
            "code": INVALID_REQUEST,
            "message": f"Forbidden: {header} {value!r} is not allowed ({setting})",
        },
    }


async def test_configured_hosts_and_origins_are_accepted(
    aiohttp_client: ClientFactory, engine: StubEngine
) -> None:
    """allowed_hosts '*' admits any Host; allowed_origins admits listed origins."""
    client = await start(
        aiohttp_client, engine, allowed_hosts=("*",), allowed_origins=("https://app.example",)
    )
    body = message()
    for extra in (
        {"Host": "bridge.internal"},
        {"Origin": "https://app.example"},
        {"Origin": "https://x.example"},
    ):
        assert (await post(client, body, headers_for(body, **extra)))[0].status == 200


async def test_a_non_json_media_type_is_415(client: TestClient[Any, Any]) -> None:
    """The body must be declared as application/json."""
    body = message()
    response, reply = await post(client, body, headers_for(body, **{"Content-Type": "text/plain"}))
    assert response.status == 415
    assert (
        reply["error"]["message"]
        == "Unsupported Media Type: the body must be application/json, not 'text/plain'"
    )


async def test_an_oversized_body_is_413(aiohttp_client: ClientFactory, engine: StubEngine) -> None:
    """A body beyond front.max_body_bytes is refused, declared or chunked, naming the limit."""
    client = await start(aiohttp_client, engine, max_body_bytes=1024)
    body = message(TOOLS_LIST, {"cursor": "x" * 2000})
    expected = {
        "jsonrpc": "2.0",
        "error": {
            "code": INVALID_REQUEST,
            "message": "Request body too large: the limit is 1024 bytes (front.max_body_bytes)",
        },
    }
    response, reply = await post(client, body)
    assert (response.status, reply) == (413, expected)

    async def chunks() -> AsyncIterator[bytes]:
        data = json.dumps(body).encode()
        for start_at in range(0, len(data), 100):
            yield data[start_at : start_at + 100]

    async with asyncio.timeout(WAIT_S):
        chunked = await client.post("/mcp", data=chunks(), headers=headers_for(body))
        assert (chunked.status, await chunked.json()) == (413, expected)
    assert engine.requests == []


async def test_a_declared_body_arriving_in_pieces_is_read_whole(
    aiohttp_client: ClientFactory, engine: StubEngine
) -> None:
    """A `Content-Length` body that is not all there when the handler starts (the head first,
    the rest later) is read to its end, as one that came with the head is."""
    began = asyncio.Event()

    @web.middleware
    async def beginning(request: web.Request, handler: Handler) -> web.StreamResponse:
        began.set()
        return await handler(request)

    client = await start(aiohttp_client, engine, middlewares=(beginning,))
    body = message(TOOLS_CALL, {"name": "echo", "arguments": {"text": "x" * 3000}})
    data = json.dumps(body).encode()
    head = "".join(f"{name}: {value}\r\n" for name, value in headers_for(body).items())
    request = (
        f"POST /mcp HTTP/1.1\r\nHost: {client.host}:{client.port}\r\n{head}"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    ).encode()
    async with asyncio.timeout(WAIT_S):
        reader, writer = await asyncio.open_connection(client.host, client.port)
        writer.write(request + data[:100])
        await writer.drain()
        await began.wait()  # the handler starts on the head, and must wait for the rest
        writer.write(data[100:])
        await writer.drain()
        reply = await reader.read()
        writer.close()
    assert reply.startswith(b"HTTP/1.1 200 ")
    [seen] = engine.requests
    assert seen.params["arguments"] == {"text": "x" * 3000}


# --- the ladder over HTTP -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "code", "front_request_id"),
    [
        (b"{not json", PARSE_ERROR, None),
        (b"[" * 100 + b"]" * 100, PARSE_ERROR, None),
        (json.dumps([message()]).encode(), INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":5,"result":{}}', INVALID_REQUEST, 5),
        (b'{"jsonrpc":"1.0","id":"a","method":"tools/list"}', INVALID_REQUEST, "a"),
        (b'{"jsonrpc":"2.0","id":null,"method":"tools/list"}', INVALID_REQUEST, None),
    ],
)
async def test_malformed_bodies_are_400(
    client: TestClient[Any, Any], raw: bytes, code: int, front_request_id: Any
) -> None:
    """Bad JSON, batches, posted responses and bad envelopes are 400 echoing any usable id."""
    headers = {
        "Content-Type": "application/json",
        "Accept": SSE_ACCEPT,
        "MCP-Protocol-Version": MODERN_VERSION,
    }
    response, reply = await post(client, raw, headers)
    assert (response.status, reply["error"]["code"], reply.get("id")) == (
        400,
        code,
        front_request_id,
    )


@pytest.mark.parametrize(
    ("body", "extra", "status", "code"),
    [
        (
            {"jsonrpc": "2.0", "id": "r1", "method": TOOLS_LIST, "params": {}},
            {},
            400,
            INVALID_PARAMS,
        ),
        (
            message(front_request_id="r1", meta={META_PROTOCOL_VERSION: "v9"}),
            {"MCP-Protocol-Version": "v9"},
            400,
            UNSUPPORTED_VERSION,
        ),
        (message(front_request_id="r1"), {"Mcp-Method": "prompts/list"}, 400, HEADER_MISMATCH),
        (message(front_request_id="r1", meta={META_LOG_LEVEL: "loud"}), {}, 400, INVALID_PARAMS),
        (message("ping", front_request_id="r1"), {}, 404, METHOD_NOT_FOUND),
        (message("unknown/method", front_request_id="r1"), {}, 404, METHOD_NOT_FOUND),
        (
            message(TOOLS_CALL, {"name": "a"}, front_request_id="r1"),
            {"Mcp-Name": "b"},
            400,
            HEADER_MISMATCH,
        ),
    ],
)
async def test_ladder_rejections_carry_status_code_and_id(
    client: TestClient[Any, Any],
    engine: StubEngine,
    body: dict[str, Any],
    extra: dict[str, str],
    status: int,
    code: int,
) -> None:
    """Each rung's error has its spec status, its code and the request's id."""
    response, reply = await post(client, body, headers_for(body, **extra))
    assert (response.status, reply["error"]["code"], reply["id"]) == (status, code, "r1")
    assert engine.requests == []


LEGACY_INITIALIZE: Final = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"},
    },
}


async def test_initialize_gets_404_naming_the_supported_versions_when_legacy_clients_are_refused(
    aiohttp_client: ClientFactory, engine: StubEngine
) -> None:
    """With front.legacy_clients = refuse, a legacy client's initialize learns which versions this
    server speaks."""
    client = await start(aiohttp_client, engine, legacy_clients="refuse")
    response, reply = await post(
        client, LEGACY_INITIALIZE, {"Content-Type": "application/json", "Accept": SSE_ACCEPT}
    )
    assert (response.status, reply["id"], reply["error"]["code"]) == (404, 1, METHOD_NOT_FOUND)
    assert reply["error"]["data"] == {"supported": list(MODERN_VERSIONS)}
    assert engine.requests == []


async def test_legacy_initialize_without_an_http_upstream_is_a_clear_error(
    client: TestClient[Any, Any], engine: StubEngine
) -> None:
    """Legacy passthrough (the default) needs an HTTP upstream; the engine never sees the
    request."""
    response, reply = await post(
        client, LEGACY_INITIALIZE, {"Content-Type": "application/json", "Accept": SSE_ACCEPT}
    )
    assert (response.status, reply["error"]["code"]) == (400, -32600)
    assert reply["error"]["message"].startswith(
        "Legacy clients over HTTP are relayed only to an HTTP upstream"
    )
    assert engine.requests == []


async def raw_post(
    client: TestClient[Any, Any], header_lines: list[tuple[str, str]], body: bytes
) -> tuple[int, Any]:
    """POST with exactly these header lines (aiohttp's client would merge repeated names)."""
    async with asyncio.timeout(WAIT_S):
        reader, writer = await asyncio.open_connection(client.host, client.port)
        lines = [
            ("Host", f"{client.host}:{client.port}"),
            *header_lines,
            ("Content-Length", str(len(body))),
            ("Connection", "close"),
        ]
        head = (
            "POST /mcp HTTP/1.1\r\n"
            + "".join(f"{name}: {value}\r\n" for name, value in lines)
            + "\r\n"
        )
        writer.write(head.encode() + body)
        response = await reader.read()
        writer.close()
        await writer.wait_closed()
    status_line, _, rest = response.partition(b"\r\n")
    return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])


async def test_a_repeated_routing_header_is_a_mismatch(client: TestClient[Any, Any]) -> None:
    """Two Mcp-Method lines are rejected, whatever they say."""
    body = message()
    lines = [*headers_for(body).items(), ("mcp-method", TOOLS_LIST)]
    status, reply = await raw_post(client, lines, json.dumps(body).encode())
    assert (status, reply["id"], reply["error"]["code"]) == (400, 1, HEADER_MISMATCH)
    assert (
        reply["error"]["message"] == "Header mismatch: the Mcp-Method header appears more than once"
    )


@pytest.mark.parametrize(
    ("code", "status"),
    [(MISSING_CLIENT_CAPABILITY, 400), (METHOD_NOT_FOUND, 404), (INVALID_PARAMS, 200)],
)
async def test_engine_errors_get_the_status_of_their_code(
    aiohttp_client: ClientFactory, code: int, status: int
) -> None:
    """An error answered by the engine carries the HTTP status of its JSON-RPC code."""

    async def fail(request: FrontRequest, _sink: NotificationSink) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": request.front_request_id,
            "error": {"code": code, "message": "no"},
        }

    client = await start(aiohttp_client, StubEngine(fail))
    response, reply = await post(client, message())
    assert (response.status, reply["error"]["code"]) == (status, code)
    assert status == http_status_for(code)


# --- streamed replies ---------------------------------------------------------------------------


def progress(request: FrontRequest, value: int) -> dict[str, Any]:
    token = request.meta[META_PROGRESS_TOKEN]
    return {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": token, "progress": value},
    }


async def test_notifications_stream_as_sse_before_the_final_response(
    aiohttp_client: ClientFactory,
) -> None:
    """With a progress token and an SSE-capable client, notifications then the result arrive as SSE
    events."""

    async def with_progress(request: FrontRequest, sink: NotificationSink) -> dict[str, Any]:
        sink.send(progress(request, 1))
        await asyncio.sleep(0)
        sink.send(progress(request, 2))
        return ok(request)

    client = await start(aiohttp_client, StubEngine(with_progress))
    body = message(TOOLS_CALL, {"name": "t"}, meta={META_PROGRESS_TOKEN: "p"})
    response, text = await post(client, body)
    assert (response.status, response.content_type) == (200, "text/event-stream")
    assert (response.headers["X-Accel-Buffering"], response.headers["Cache-Control"]) == (
        "no",
        "no-cache",
    )
    assert "Mcp-Session-Id" not in response.headers
    events = sse_messages(text)
    assert [event.get("params", {}).get("progress") for event in events[:2]] == [1, 2]
    assert events[2] == {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete"}}
    assert len(events) == 3


async def test_a_stream_with_nothing_to_say_is_answered_as_json(
    aiohttp_client: ClientFactory,
) -> None:
    """An SSE-eligible request answered before any notification gets JSON with the error's
    status."""

    async def refuse(request: FrontRequest, _sink: NotificationSink) -> dict[str, Any]:
        error = {
            "code": MISSING_CLIENT_CAPABILITY,
            "message": "needs sampling",
            "data": {"requiredCapabilities": {"sampling": {}}},
        }
        return {"jsonrpc": "2.0", "id": request.front_request_id, "error": error}

    client = await start(aiohttp_client, StubEngine(refuse))
    response, reply = await post(client, message(meta={META_LOG_LEVEL: "debug"}))
    assert (response.status, response.content_type, reply["error"]["code"]) == (
        400,
        "application/json",
        MISSING_CLIENT_CAPABILITY,
    )


async def test_clients_without_sse_get_json_and_no_notifications(
    aiohttp_client: ClientFactory,
) -> None:
    """A client that accepts only JSON gets the final response alone."""

    async def with_progress(request: FrontRequest, sink: NotificationSink) -> dict[str, Any]:
        sink.send(progress(request, 1))
        return ok(request)

    client = await start(aiohttp_client, StubEngine(with_progress))
    body = message(meta={META_PROGRESS_TOKEN: 3})
    response, reply = await post(client, body, headers_for(body, Accept="application/json"))
    assert (response.status, response.content_type, reply["id"]) == (200, "application/json", 1)


async def test_listen_without_sse_accept_is_406(
    client: TestClient[Any, Any], engine: StubEngine
) -> None:
    """subscriptions/listen answers with a stream, so a client must accept one."""
    body = message(SUBSCRIPTIONS_LISTEN, {"notifications": {"toolsListChanged": True}})
    response, reply = await post(client, body, headers_for(body, Accept="application/json"))
    assert (response.status, reply["id"], reply["error"]["code"]) == (406, 1, INVALID_REQUEST)
    assert engine.requests == []


async def test_quiet_streams_get_keep_alive_comments(aiohttp_client: ClientFactory) -> None:
    """A stream with nothing to send commits to SSE and sends ':' comment lines until the answer."""
    proceed = asyncio.Event()

    async def slow(request: FrontRequest, _sink: NotificationSink) -> dict[str, Any]:
        await proceed.wait()
        return ok(request)

    client = await start(aiohttp_client, StubEngine(slow), keepalive_s=0.02)
    body = message(SUBSCRIPTIONS_LISTEN, {"notifications": {}})
    async with asyncio.timeout(WAIT_S):
        response = await client.post("/mcp", json=body, headers=headers_for(body))
        assert response.content_type == "text/event-stream"
        assert await response.content.readline() == b": keep-alive\n"
        proceed.set()
        assert sse_messages(await response.text()) == [
            {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete"}}
        ]


async def test_a_burst_beyond_the_buffer_drops_notifications_not_the_answer(
    aiohttp_client: ClientFactory,
) -> None:
    """send() never blocks: past the buffer notifications are dropped, and the final response still
    arrives."""

    async def burst(request: FrontRequest, sink: NotificationSink) -> dict[str, Any]:
        for value in range(300):
            sink.send(progress(request, value))
        return ok(request)

    client = await start(aiohttp_client, StubEngine(burst))
    response, text = await post(client, message(meta={META_PROGRESS_TOKEN: "p"}))
    assert response.content_type == "text/event-stream"
    events = sse_messages(text)
    assert [event["params"]["progress"] for event in events[:-1]] == list(range(256))
    assert events[-1]["id"] == 1


@pytest.mark.parametrize("streamed", [True, False])
async def test_closing_the_connection_cancels_the_engine(
    aiohttp_client: ClientFactory, streamed: bool
) -> None:
    """A client that goes away cancels engine.handle, streamed or not."""
    started = asyncio.Event()

    async def hang(request: FrontRequest, sink: NotificationSink) -> dict[str, Any]:
        if streamed:
            sink.send(progress(request, 1))
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    engine = StubEngine(hang)
    client = await start(aiohttp_client, engine)
    body = message(meta={META_PROGRESS_TOKEN: "p"} if streamed else {})
    async with asyncio.timeout(WAIT_S):
        pending = asyncio.create_task(client.post("/mcp", json=body, headers=headers_for(body)))
        await started.wait()
        if streamed:
            response = await pending
            assert (await response.content.readline()).startswith(b"event: message")
            response.close()
        else:
            pending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pending
        await engine.cancelled.wait()


async def test_bad_requests_never_disturb_good_ones(aiohttp_client: ClientFactory) -> None:
    """Malformed and mismatched requests sent while valid ones are in the engine fail alone; the
    valid ones complete."""
    all_in, release = asyncio.Event(), asyncio.Event()

    async def held(request: FrontRequest, _sink: NotificationSink) -> dict[str, Any]:
        if len(engine.requests) == 10:
            all_in.set()
        await release.wait()
        result = {"resultType": "complete", "echo": request.front_request_id}
        return {"jsonrpc": "2.0", "id": request.front_request_id, "result": result}

    engine = StubEngine(held)
    client = await start(aiohttp_client, engine, max_body_bytes=1024)
    bad_bodies: list[tuple[Any, dict[str, str]]] = [
        (b"{oops", {"Content-Type": "application/json"}),
        (message(front_request_id="b1"), {"Mcp-Method": "tools/call"}),
        (message(TOOLS_LIST, {"cursor": "x" * 2000}, front_request_id="b2"), {}),
        (message("initialize", front_request_id="b3"), {}),
    ] * 3
    async with asyncio.timeout(WAIT_S):
        good = [
            asyncio.create_task(post(client, message(front_request_id=f"g{n}"))) for n in range(10)
        ]
        await all_in.wait()
        bad = await asyncio.gather(
            *(
                post(client, body, headers_for(body, **extra) if isinstance(body, dict) else extra)
                for body, extra in bad_bodies
            )
        )
        assert [response.status for response, _ in bad] == [400, 400, 413, 404] * 3
        assert [reply.get("id") for _, reply in bad] == [
            None,
            "b1",
            None,
            "b3",
        ] * 3  # no id when unreadable
        assert not any(task.done() for task in good)
        release.set()
        results = await asyncio.gather(*good)
    assert [
        (response.status, reply["id"], reply["result"]["echo"]) for response, reply in results
    ] == [(200, f"g{n}", f"g{n}") for n in range(10)]
    assert len(engine.requests) == 10


# --- identity -----------------------------------------------------------------------------------


def test_principals_are_digests_of_the_configured_source() -> None:
    """Authorization and trusted-header principals are stable digests; 'none' is the local
    principal."""
    by_authorization = IdentitySettings()
    by_header = IdentitySettings(principal="header", principal_header="X-User")
    alice = principal_of({"authorization": "Bearer alice"}, by_authorization)
    assert alice == principal_of({"authorization": "Bearer alice"}, by_authorization)
    assert len(alice) == 32 and "alice" not in alice
    assert alice != principal_of({"authorization": "Bearer bob"}, by_authorization)
    assert principal_of({}, by_authorization) == ANONYMOUS_PRINCIPAL
    assert principal_of({"x-user": "alice"}, by_header) not in (alice, ANONYMOUS_PRINCIPAL)
    assert principal_of({"authorization": "Bearer alice"}, by_header) == ANONYMOUS_PRINCIPAL
    assert (
        principal_of({"authorization": "Bearer alice"}, IdentitySettings(principal="none"))
        == LOCAL_PRINCIPAL
    )
