"""OpenTelemetry tracing, optional (`pip install mrtr-bridge[otel]`; docs/operations.md § Tracing).

Off unless the OpenTelemetry SDK is installed, and, when no `OTEL_*` variable asks for traces,
the OTLP exporter too (the `otel` extra); then configured by the standard `OTEL_*` variables
(`OTEL_TRACES_EXPORTER`: `otlp` by default, `console`, `none`; `OTEL_EXPORTER_OTLP_*`,
`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`, `OTEL_PROPAGATORS`,
`OTEL_BSP_*`; `OTEL_SDK_DISABLED=true` turns it off). Nothing of OpenTelemetry is imported while it
is off: every hook below returns at once when no tracer is set.

One span per front request (`RequestTrace`, kind SERVER), its parent the client's `traceparent`.
It is created lazily, with the request's start time, because a retry's parent may come from its
`requestState`: the first round's trace context is sealed there (translators/held/request_state.py),
and a retry without a `traceparent` of its own continues that trace, on whichever replica it
lands. Every round of one logical call has the attribute `mrtr_bridge.call_id` (the first round's
trace id) and a retry links to the first round's span. Children: one span per upstream exchange
(kind CLIENT: what the front request waited for upstream; its context is the `traceparent` sent
upstream) and one per held wait (from an `InputRequiredResult` until the client's retry claims
the call, or the call ends). Attributes never carry secrets: names (a resource URI without its
userinfo, query and fragment: proxy/observe/access.py, `shown_name`), a principal digest,
outcomes; what a client sent is cut by proxy/common/shown.py's `bounded` (names to 200
characters, ids and methods to 128).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Final

import structlog

from proxy.common.shown import bounded

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, SpanContext, Tracer

CALL_ID: Final = "mrtr_bridge.call_id"
MAX_ID: Final = 128  # characters of a client's request id or method kept on a span (`bounded`)
_TRACE_HEADERS: Final = ("traceparent", "tracestate")
_log = structlog.get_logger("proxy.observe.tracing")
_tracer: Tracer | None = None


def active() -> bool:
    return _tracer is not None


def use(tracer: Tracer | None) -> None:
    """Trace with `tracer` (tests: one from an SDK provider with an in-memory exporter)."""
    global _tracer
    _tracer = tracer


def configure(env: Mapping[str, str] | None = None) -> bool:
    """Turn tracing on from the `OTEL_*` variables when the SDK is installed; whether it is on."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    names = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "otlp").split(",")]
    if names == ["none"] or not _sdk_installed():
        return False
    if not any(name in env for name in _ASKED_FOR) and not _installed(_OTLP_HTTP):
        # the SDK alone (another package's dependency, or the test extras): nobody asked for
        # traces, and the default exporter is not there to send them
        return False
    from proxy.observe.tracing_setup import provider_from_env

    provider = provider_from_env(env, [name for name in names if name and name != "none"])
    if provider is None:
        return False
    use(provider.get_tracer("mrtr-bridge"))
    _log.info("tracing_enabled", exporters=names)
    return True


# variables that ask for traces: with one set, a missing exporter is worth a warning
_ASKED_FOR: Final = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
)
_OTLP_HTTP: Final = "opentelemetry.exporter.otlp.proto.http"


def _sdk_installed() -> bool:
    return _installed("opentelemetry.sdk")


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is not installed (not even the API)
        return False


def encode_context(context: SpanContext) -> bytes:
    """A span context as sealed in `requestState`: trace id, span id, trace flags (25 bytes)."""
    return (
        context.trace_id.to_bytes(16, "big")
        + context.span_id.to_bytes(8, "big")
        + bytes([int(context.trace_flags) & 0xFF])
    )


def _decode_context(sealed: bytes) -> SpanContext:
    from opentelemetry.trace import SpanContext, TraceFlags

    return SpanContext(
        int.from_bytes(sealed[:16], "big"),
        int.from_bytes(sealed[16:24], "big"),
        is_remote=True,
        trace_flags=TraceFlags(sealed[24]),
    )


class RequestTrace:
    """The span of one front request, created on first use with the request's start time."""

    def __init__(self, tracer: Tracer, headers: Mapping[str, str]) -> None:
        from opentelemetry import propagate, trace

        self._tracer = tracer
        self._start_ns = _now_ns()
        carrier = {name: headers[name] for name in (*_TRACE_HEADERS, "baggage") if name in headers}
        self._parent: Context = propagate.extract(carrier)
        self._client_parent = trace.get_current_span(self._parent).get_span_context().is_valid
        self._links: list[SpanContext] = []
        self.call_context: bytes = b""  # the first round's context (sealed into requestState)
        self.span: Span | None = None

    def adopt(self, sealed: bytes) -> None:
        """A retry's sealed first-round context: the parent unless the client sent its own, and a
        link either way."""
        if not sealed or self.span is not None:
            return
        from opentelemetry import trace

        first = _decode_context(sealed)
        self.call_context = sealed
        self._links.append(first)
        if not self._client_parent:
            self._parent = trace.set_span_in_context(trace.NonRecordingSpan(first))

    def materialize(self) -> Span:
        if self.span is None:
            from opentelemetry.trace import Link, SpanKind

            self.span = self._tracer.start_span(
                "mcp request",
                context=self._parent,
                kind=SpanKind.SERVER,
                links=[Link(link) for link in self._links],
                start_time=self._start_ns,
            )
            if not self.call_context:
                self.call_context = encode_context(self.span.get_span_context())
            self.span.set_attribute(CALL_ID, self.call_context[:16].hex())
        return self.span

    def end(self, name: str, attributes: Mapping[str, Any], error: bool) -> None:
        from opentelemetry.trace import Status, StatusCode

        span = self.materialize()
        span.update_name(name)
        span.set_attributes({k: v for k, v in attributes.items() if v is not None})
        if error:
            span.set_status(Status(StatusCode.ERROR))
        span.end()


_NAME_ATTRIBUTE: Final = {
    "tools/call": "gen_ai.tool.name",
    "prompts/get": "gen_ai.prompt.name",
    "resources/read": "mcp.resource.uri",
}


def end_request(trace: RequestTrace | None, fields: Mapping[str, Any]) -> None:
    """End the request's span with what its access log line says (`fields`, proxy/http_front)."""
    if trace is None:
        return
    method, name, rid = fields.get("method"), fields.get("name"), fields["request_id"]
    method = bounded(method, MAX_ID) if isinstance(method, str) else None  # a client's
    attributes = {
        "mcp.method.name": method,
        "jsonrpc.request.id": None if rid is None else bounded(str(rid), MAX_ID),
        "mrtr_bridge.principal": fields["principal"],
        "mrtr_bridge.client_era": fields["client_era"],
        "mrtr_bridge.upstream_era": fields["upstream_era"],
        "mrtr_bridge.upstream": fields["upstream"],
        "mrtr_bridge.outcome": fields["outcome"],
        "mrtr_bridge.round": fields["round"],
        "mrtr_bridge.rounds": fields["rounds"],
        "rpc.jsonrpc.error_code": fields["code"],
        "http.response.status_code": fields["status"],
    }
    if isinstance(method, str) and method in _NAME_ATTRIBUTE:
        attributes[_NAME_ATTRIBUTE[method]] = name
    label = f"{method} {name}" if method and name else (method or "mcp request")
    trace.end(label, attributes, error=fields["outcome"] == "error")


def adopt(trace: RequestTrace | None, sealed: bytes) -> None:
    if trace is not None:
        trace.adopt(sealed)


def call_context(trace: RequestTrace) -> bytes:
    """The trace context every round of this request's call carries (the request's span's own for
    a first round)."""
    trace.materialize()
    return trace.call_context


def trace_id(trace: RequestTrace | None) -> str | None:
    """The request's span's trace id (32 hex digits) for its access log line, or None."""
    if trace is None:
        return None
    return format(trace.materialize().get_span_context().trace_id, "032x")


def begin_request(headers: Mapping[str, str]) -> RequestTrace | None:
    """`headers`: the request's, lower-cased."""
    return RequestTrace(_tracer, headers) if _tracer is not None else None


_NO_SPAN: Final[AbstractContextManager[None]] = nullcontext()


def child(
    trace: RequestTrace | None,
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    internal: bool = False,
) -> AbstractContextManager[None]:
    """A CLIENT span (an upstream exchange; INTERNAL if `internal`) under the request's span,
    current for the block (so `upstream_headers` sends its context upstream). Not tracing, the
    block costs nothing: one shared no-op context, no generator (several per call)."""
    if trace is None or _tracer is None:
        return _NO_SPAN
    name = bounded(name, MAX_ID)  # "upstream <method>": a client's method, maybe
    return _child_span(_tracer, trace, name, attributes, internal=internal)


@contextmanager
def _child_span(
    tracer: Tracer,
    trace: RequestTrace,
    name: str,
    attributes: Mapping[str, Any] | None,
    *,
    internal: bool,
) -> Iterator[None]:
    from opentelemetry import trace as api
    from opentelemetry.trace import SpanKind, Status, StatusCode

    parent = api.set_span_in_context(trace.materialize())
    kind = SpanKind.INTERNAL if internal else SpanKind.CLIENT
    # an exception's text may name an internal URL or program: only its class goes on the span
    with tracer.start_as_current_span(
        name,
        context=parent,
        kind=kind,
        attributes=dict(attributes or {}),
        record_exception=False,
        set_status_on_exception=False,  # its description would be the exception's text
    ) as span:
        try:
            yield
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR))
            raise


def start_wait(trace: RequestTrace | None, name: str, **attributes: Any) -> Span | None:
    """An INTERNAL span under the request's span that outlives the request (a held wait)."""
    if trace is None or _tracer is None:
        return None
    from opentelemetry import trace as api

    parent = api.set_span_in_context(trace.materialize())
    return _tracer.start_span(name, context=parent, attributes=attributes)


def end_wait(span: Span | None, **attributes: Any) -> None:
    if span is not None:
        span.set_attributes(attributes)
        span.end()


class HeldWait:
    """A held call's wait for its client's retry, as a span under the request that asked."""

    __slots__ = ("_span",)

    def __init__(self) -> None:
        self._span: Span | None = None

    def start(self, trace: RequestTrace | None, round_: int) -> None:
        """Start waiting after the round `round_` of the request `trace` answered."""
        self.end("superseded")
        self._span = start_wait(trace, "mrtr held", **{"mrtr_bridge.round": round_})

    def end(self, outcome: str) -> None:
        span, self._span = self._span, None
        end_wait(span, **{"mrtr_bridge.held_outcome": outcome})


def upstream_headers(headers: Mapping[str, str]) -> Mapping[str, str]:
    """`headers` with the current span's context as `traceparent` (unchanged when not tracing)."""
    if _tracer is None:
        return headers
    from opentelemetry import propagate, trace

    if not trace.get_current_span().get_span_context().is_valid:
        return headers  # no span of ours here: what the client sent goes on
    carrier = {k: v for k, v in headers.items() if k.lower() not in _TRACE_HEADERS}
    propagate.inject(carrier)
    return carrier


def _now_ns() -> int:
    import time

    return time.time_ns()


__all__ = [
    "CALL_ID",
    "HeldWait",
    "RequestTrace",
    "active",
    "adopt",
    "begin_request",
    "call_context",
    "child",
    "configure",
    "encode_context",
    "end_request",
    "end_wait",
    "start_wait",
    "trace_id",
    "upstream_headers",
    "use",
]
