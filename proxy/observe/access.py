"""What the access log line of one front request says (docs/operations.md § Access log).

The HTTP front opens a `RequestNote` per request and makes it current (a context variable: the
engine runs in the front's own task), the MRTR routes write into it what only they know (the input
round issued, the rounds of the logical call so far, the upstream session's revision), and the
front logs it once, as `front_request_finished`, when the request ends. Names are what a person
looks for (tool, prompt, resource URI without its userinfo, query and fragment: `shown_name`) and
the upstream is named by host and port or by its command's program, never by a URL that could carry
credentials.

Who sent it (`RequestNote.who`): the client's address and `User-Agent`, its `clientInfo` name (a
modern request's `_meta`, a legacy `initialize`'s params), the trace id (the bridge's span's when
tracing, else the client's `traceparent`'s) and `bridge_request_id`, a random id the bridge gives
each request (`request_id` is the client's JSON-RPC id: every client's first is 1). What a client
sent is cut by `bounded` here, and the log writer masks credentials in every text
(proxy/observe/redaction.py).
"""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Final
from urllib.parse import urlsplit

from config.settings import Settings, UpstreamSettings
from proxy.common.front_request import FrontRequest
from proxy.common.shown import bounded, shown_principal, shown_uri
from proxy.observe import tracing
from proxy.observe.logs import emit
from proxy.observe.redaction import GeneratedText
from translators.protocol.eras import (
    INITIALIZE,
    META_CLIENT_INFO,
    PROMPTS_GET,
    RESOURCES_READ,
    TOOLS_CALL,
)
from translators.wire.jsonrpc import JsonObject

MAX_NAME: Final = 200  # characters of a tool / prompt name or resource URI in a log line or page
MAX_CLIENT_TEXT: Final = 200  # characters of a user agent or clientInfo name on the access line
MAX_ADDRESS: Final = 64  # an IPv6 address with a zone is at most 45 or so
# W3C Trace Context `traceparent`: version-traceid-parentid-flags; an all-zero trace id is invalid.
_TRACEPARENT: Final = re.compile(r"[0-9a-f]{2}-(?!0{32})([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")


def client_trace_id(traceparent: str | None) -> str | None:
    """The trace id of a client's `traceparent` header, if it is a valid one."""
    found = _TRACEPARENT.fullmatch(traceparent.strip()) if traceparent else None
    return found.group(1) if found else None


class RequestNote:
    """What the engine learned about one front request, for its access log line and its span.

    Who sent it is kept as received and worked out by `who`, when the line is written: the HTTP
    front writes the line after the answer (proxy/http_front/endpoint.py), so none of it is on the
    request's way to the upstream and back."""

    __slots__ = (
        "_agent",
        "_remote",
        "_traceparent",
        "client_message",
        "name",
        "revision",
        "round",
        "rounds",
        "trace",
    )

    def __init__(self, remote: str | None = None, headers: Mapping[str, str] | None = None) -> None:
        self.trace: tracing.RequestTrace | None = None  # its span, when tracing
        self.name: str | None = None
        self.round: int | None = None  # the input round this answer asks for (input_required)
        self.rounds = 0  # input rounds of the logical call so far
        self.revision: str | None = None  # the upstream session's revision, when one served it
        self._remote = remote
        self._agent = headers.get("user-agent") if headers is not None else None
        self._traceparent = headers.get("traceparent") if headers is not None else None
        self.client_message: object = None  # the request whose clientInfo names the client

    def who(self) -> dict[str, Any]:
        """Who sent the request, for its access log line; `bridge_request_id` is new on every
        call (the line's, written once)."""
        remote, agent = self._remote, self._agent
        return {
            # unique per request, unlike the client's id; the bridge's own text (nothing to mask)
            "bridge_request_id": GeneratedText(os.urandom(8).hex()),
            "client_address": bounded(remote, MAX_ADDRESS) if remote else None,
            "user_agent": bounded(agent, MAX_CLIENT_TEXT) if agent else None,
            "client_name": client_name(self.client_message),
            "trace_id": tracing.trace_id(self.trace) or client_trace_id(self._traceparent),
        }


_CURRENT: ContextVar[RequestNote | None] = ContextVar("mrtr_request_note", default=None)


def begin(
    remote: str | None = None, headers: Mapping[str, str] | None = None
) -> tuple[RequestNote, Token[RequestNote | None]]:
    """A note for a request from `remote` (its address) with `headers`, made current."""
    note = RequestNote(remote, headers)
    return note, _CURRENT.set(note)


def client_name(message: object) -> str | None:
    """The `clientInfo` name a JSON-RPC request carries: in its `_meta` (modern), or in an
    `initialize`'s params (legacy); cut to `MAX_CLIENT_TEXT`."""
    if not isinstance(message, dict) or not isinstance(message.get("params"), dict):
        return None
    params = message["params"]
    meta = params.get("_meta")
    info = meta.get(META_CLIENT_INFO) if isinstance(meta, dict) else None
    if info is None and message.get("method") == INITIALIZE:
        info = params.get("clientInfo")
    name = info.get("name") if isinstance(info, dict) else None
    return bounded(name, MAX_CLIENT_TEXT) if isinstance(name, str) and name else None


def note_client(message: object) -> None:
    """Record the request being served, whose `clientInfo` names its client (`client_name`)."""
    note = _CURRENT.get()
    if note is not None:
        note.client_message = message


def end(token: Token[RequestNote | None]) -> None:
    _CURRENT.reset(token)


def current() -> RequestNote | None:
    """The note of the front request being served in this task, if any."""
    return _CURRENT.get()


def current_trace() -> tracing.RequestTrace | None:
    note = _CURRENT.get()
    return note.trace if note is not None else None


def note_rounds(*, rounds: int, asked: int | None, revision: str | None) -> None:
    """An MRTR route's outcome: `asked` is the round of the InputRequiredResult it answers with."""
    note = _CURRENT.get()
    if note is not None:
        note.rounds, note.round, note.revision = rounds, asked, revision


@dataclass(frozen=True)
class AccessLog:
    """The access log of the stdio front (the HTTP front logs from its `Exchange`)."""

    enabled: bool = True  # log.access; off: the same line at debug level
    upstream: str = "none"  # `upstream_name`

    @classmethod
    def of(cls, settings: Settings) -> AccessLog:
        return cls(settings.log.access, upstream_name(settings.upstream))

    def stdio_line(
        self,
        request: FrontRequest,
        note: RequestNote,
        response: JsonObject | None,
        started: float,
    ) -> None:
        """The line of one stdio request; `response` None: cancelled before its answer."""
        error = response.get("error") if response is not None else None
        result = response.get("result") if response is not None else None
        kind = result.get("resultType") if isinstance(result, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        outcome = (
            "cancelled"
            if response is None
            else "error"
            if error is not None
            else kind
            if kind in ("input_required", "task")
            else "complete"
        )
        note.client_message = {"params": request.params}
        fields = dict(
            request_id=request.front_request_id,
            **note.who(),
            method=request.method,
            name=call_name(request.method, request.params),
            principal=shown_principal(request.principal),
            client_era="modern",
            upstream_era="legacy",
            upstream_revision=note.revision,
            upstream=self.upstream,
            outcome=outcome,
            round=note.round,
            rounds=note.rounds,
            code=code,
            mode="stdio",
            cancelled=response is None,
            duration_ms=round((time.monotonic() - started) * 1000, 1),
        )
        emit("info" if self.enabled else "debug", "front_request_finished", fields)


def shown_name(method: str | None, name: str) -> str:
    """A tool or prompt name, or a resource URI made safe to show (`shown_uri`: no userinfo, query
    or fragment), cut to `MAX_NAME` characters."""
    return bounded(shown_uri(name) if method == RESOURCES_READ else name, MAX_NAME)


def call_name(method: str | None, params: Any) -> str | None:
    """The tool or prompt name, or the resource URI, of a request, as `shown_name` shows it."""
    if not isinstance(params, dict):
        return None
    if method in (TOOLS_CALL, PROMPTS_GET):
        name = params.get("name")
    elif method == RESOURCES_READ:
        name = params.get("uri")
    else:
        return None
    return shown_name(method, name) if isinstance(name, str) else None


def host_port(url: str) -> str:
    """`host:port` of a URL: no userinfo, path or query."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "?"
    host = parts.hostname or "?"
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port}" if port else host


def upstream_name(settings: UpstreamSettings) -> str:
    """The upstream as a name: `host:port` of its URL (no credentials, path or query), or
    `stdio:<program>` of its command."""
    if settings.url is not None:
        return host_port(settings.url)
    if settings.command:
        try:
            argv = shlex.split(settings.command)
        except ValueError:
            argv = settings.command.split()
        return f"stdio:{PurePath(argv[0]).name}" if argv else "stdio"
    return "none"


__all__ = [
    "MAX_CLIENT_TEXT",
    "MAX_NAME",
    "AccessLog",
    "RequestNote",
    "begin",
    "call_name",
    "client_name",
    "client_trace_id",
    "current",
    "current_trace",
    "end",
    "host_port",
    "note_client",
    "note_rounds",
    "shown_name",
    "upstream_name",
]
