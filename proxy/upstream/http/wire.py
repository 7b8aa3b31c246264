"""Wire details of the legacy Streamable HTTP transport (2025-11-25/basic/transports.mdx): headers,
bounded bodies, SSE message streams with their resumption cursor, and JSON-RPC message shapes.

**The one body reader** (docs/security.md, "Limits"): every HTTP client to the upstream, legacy or
modern, reads bodies and SSE events here, within the one cap on a message,
`upstream.max_line_bytes` (16 MiB by default, the same as a stdio line's). `read_body` reads a body
chunk by chunk to its end (a read that returned the first chunk only lost every answer over about
100 KB: issue 40, defect 3) and refuses it as soon as it passes the cap, or at once when its
`Content-Length` says it will; `stream_decoder` bounds each SSE event alike. Past the cap what was
read is dropped and `UpstreamMessageTooLarge` names the limit: the client gets a precise -32603,
and the bridge never holds more than the cap of one answer.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import structlog

from translators.wire import fast_json
from translators.wire.errors import UpstreamMessageTooLarge, UpstreamProtocolError
from translators.wire.jsonrpc import JsonObject
from translators.wire.jsonrpc_batches import batch_elements
from translators.wire.sse import SSEDecoder, SSEEvent

if TYPE_CHECKING:
    import aiohttp

_log = structlog.get_logger("proxy.upstream")

SESSION_HEADER: Final = "Mcp-Session-Id"
VERSION_HEADER: Final = "MCP-Protocol-Version"
LAST_EVENT_ID_HEADER: Final = "Last-Event-ID"
SSE_TYPE: Final = "text/event-stream"
JSON_TYPE: Final = "application/json"
POST_ACCEPT: Final = f"{JSON_TYPE}, {SSE_TYPE}"
DEFAULT_RETRY_MS: Final = 1000
MAX_RETRY_MS: Final = 60_000
# Headers the transport owns; callers' extras can never override them.
_RESERVED: Final = frozenset(
    {
        "accept",
        "content-type",
        "content-length",
        "host",
        "last-event-id",
        "mcp-session-id",
        "mcp-protocol-version",
    }
)


def build_headers(
    base: Mapping[str, str],
    extra: Mapping[str, str],
    *,
    accept: str,
    session_id: str | None,
    protocol_version: str | None,
    last_event_id: str | None = None,
) -> dict[str, str]:
    """Caller headers (base, then per-request extras) plus the transport's own, which always win."""
    headers = {
        name: value for name, value in {**base, **extra}.items() if name.lower() not in _RESERVED
    }
    headers["Accept"] = accept
    if session_id is not None:
        headers[SESSION_HEADER] = session_id
    if protocol_version is not None:
        headers[VERSION_HEADER] = protocol_version
    if last_event_id is not None:
        headers[LAST_EVENT_ID_HEADER] = last_event_id
    return headers


def is_sse(response: aiohttp.ClientResponse) -> bool:
    return response.content_type == SSE_TYPE


def is_json(response: aiohttp.ClientResponse) -> bool:
    return response.content_type == JSON_TYPE


def parse_message(text: str | bytes) -> JsonObject:
    """One JSON-RPC 2.0 message object, or `UpstreamProtocolError`."""
    return as_message(_parse_json(text))


def _parse_json(text: str | bytes) -> Any:
    try:
        return fast_json.loads(text)
    except ValueError as exc:
        raise UpstreamProtocolError("sent a message that is not JSON") from exc


def as_message(message: Any) -> JsonObject:
    """`message` if it is a JSON-RPC 2.0 message object, else `UpstreamProtocolError`."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise UpstreamProtocolError("sent something that is not a JSON-RPC 2.0 message object")
    return message


def is_response(message: JsonObject) -> bool:
    return "method" not in message and ("result" in message or "error" in message)


def is_request(message: JsonObject) -> bool:
    return isinstance(message.get("method"), str) and message.get("id") is not None


def is_notification(message: JsonObject) -> bool:
    return isinstance(message.get("method"), str) and "id" not in message


async def read_body(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The whole body of `response`, at most `limit` bytes; `UpstreamMessageTooLarge` past it."""
    declared = response.content_length
    if declared is not None and declared > limit:
        raise UpstreamMessageTooLarge(limit, f"a body of {declared} bytes,")
    body = bytearray()
    async for chunk in response.content.iter_any():
        body += chunk
        if len(body) > limit:
            raise UpstreamMessageTooLarge(limit, "a body")
    return bytes(body)


async def read_json_message(response: aiohttp.ClientResponse, limit: int) -> JsonObject:
    """The body of an `application/json` response as one message, at most `limit` bytes."""
    return parse_message(await read_body(response, limit))


async def read_reply(
    response: aiohttp.ClientResponse,
    request_id: Any,
    limit: int,
    on_notification: Callable[[JsonObject], None] | None = None,
) -> Any:
    """The reply to `request_id` in a JSON or SSE answer (a modern request's, a probe's): a JSON
    body's value (None when it is not JSON), or the response in an SSE stream whose notifications
    before it go to `on_notification` (None when the stream ends without it)."""
    if not is_sse(response):
        return _loaded(await read_body(response, limit))
    decoder = stream_decoder(limit)
    async for chunk in response.content.iter_any():
        for event in decoder.feed(chunk):
            message = _loaded(event.data)
            if not isinstance(message, dict):
                continue
            if "method" not in message and message.get("id") == request_id:
                return message
            if on_notification is not None and "method" in message and "id" not in message:
                on_notification(message)
    return None


def _loaded(text: str | bytes) -> Any:
    try:
        return fast_json.loads(text)
    except ValueError:
        return None


@dataclass
class StreamCursor:
    """Where an SSE stream stands: the last event id seen and the reconnection delay to obey."""

    last_event_id: str | None = None
    retry_ms: int = DEFAULT_RETRY_MS
    events_seen: int = 0

    def note(self, event: SSEEvent) -> None:
        """An event arrived: count it, and remember its id and `retry`."""
        self.events_seen += 1
        if event.event_id is not None:
            self.last_event_id = event.event_id
        if event.retry is not None:
            self.retry_ms = min(event.retry, MAX_RETRY_MS)

    def absorb(self, decoder: SSEDecoder) -> None:
        if decoder.last_event_id is not None:
            self.last_event_id = decoder.last_event_id
        if decoder.retry_ms is not None:
            self.retry_ms = min(decoder.retry_ms, MAX_RETRY_MS)

    @property
    def retry_s(self) -> float:
        return self.retry_ms / 1000


def stream_decoder(limit: int) -> SSEDecoder:
    """An SSE decoder whose events are bounded by `limit` (`UpstreamMessageTooLarge` past it)."""
    return SSEDecoder(max_event_size=limit)


async def iter_stream_events(
    response: aiohttp.ClientResponse, cursor: StreamCursor, limit: int
) -> AsyncIterator[SSEEvent]:
    """The events of an SSE response, in order, each at most `limit` bytes.

    The cursor moves as events arrive, so a caller that stops early can resume from it."""
    decoder = stream_decoder(limit)
    async for chunk in response.content.iter_any():
        for event in decoder.feed(chunk):
            cursor.note(event)
            yield event
        cursor.absorb(decoder)


def event_elements(data: str, *, batches: bool) -> list[Any]:
    """The decoded values one `message` event's data carries: itself, or where the revision has
    `batches`, each element of an array in order (`UpstreamProtocolError` if it is not JSON)."""
    return batch_elements(_parse_json(data), batches=batches)


def event_messages(data: str, *, batches: bool, quiet: bool = False) -> list[JsonObject]:
    """`event_elements` as JSON-RPC messages. The one rule for every transport: an event that is
    not JSON, or an element that is not a JSON-RPC message, is logged (`upstream_message_ignored`)
    and skipped, as a stdio line is; the rest of the event and of the stream go on, and a call whose
    response was lost so ends by its stream's end or `front.request_timeout_s`. `quiet` logs at
    debug level: a replayed stream, where a server's event store may hand back what it stored."""
    try:
        value = _parse_json(data)
    except UpstreamProtocolError as exc:
        _ignored(exc, quiet)
        return []
    if type(value) is dict and value.get("jsonrpc") == "2.0":
        return [value]  # the usual event: one message, as `as_message` would pass it
    messages: list[JsonObject] = []
    for element in batch_elements(value, batches=batches):
        try:
            messages.append(as_message(element))
        except UpstreamProtocolError as exc:
            _ignored(exc, quiet)
    return messages


def _ignored(exc: UpstreamProtocolError, quiet: bool) -> None:
    """`upstream_message_ignored`, at debug level on a replayed stream (the logger is looked up
    only here: every event of every stream passes `event_messages`)."""
    (_log.debug if quiet else _log.warning)("upstream_message_ignored", reason=exc.message)


async def iter_stream_messages(
    response: aiohttp.ClientResponse, cursor: StreamCursor, limit: int, *, batches: bool = False
) -> AsyncIterator[JsonObject]:
    """JSON-RPC messages of an SSE response, in order; priming events (empty data) are skipped;
    where the revision has `batches`, each element of an array in one event comes as a message of
    its own."""
    async for event in iter_stream_events(response, cursor, limit):
        for message in messages_of(event, batches=batches):
            yield message


def messages_of(event: SSEEvent, *, batches: bool, quiet: bool = False) -> list[JsonObject]:
    """The JSON-RPC messages an SSE event carries: none for a priming event (empty data) or another
    event type; where the revision has `batches`, each element of an array in the event."""
    if event.event == "message" and event.data.strip():
        return event_messages(event.data, batches=batches, quiet=quiet)
    return []


CLIENT_NAME: Final = "mrtr-bridge"


def _own_version() -> str:
    try:
        return importlib.metadata.version("mrtr-bridge")
    except importlib.metadata.PackageNotFoundError:
        return "0"


_CLIENT_INFO: Final[JsonObject] = {"name": CLIENT_NAME, "version": _own_version()}


def client_info() -> JsonObject:
    """The `clientInfo` the bridge sends upstream."""
    return dict(_CLIENT_INFO)


__all__ = [
    "CLIENT_NAME",
    "DEFAULT_RETRY_MS",
    "JSON_TYPE",
    "LAST_EVENT_ID_HEADER",
    "POST_ACCEPT",
    "SESSION_HEADER",
    "SSE_TYPE",
    "VERSION_HEADER",
    "StreamCursor",
    "as_message",
    "build_headers",
    "client_info",
    "event_elements",
    "event_messages",
    "is_json",
    "is_notification",
    "is_request",
    "is_response",
    "is_sse",
    "iter_stream_events",
    "iter_stream_messages",
    "messages_of",
    "parse_message",
    "read_body",
    "read_json_message",
    "read_reply",
    "stream_decoder",
]
