"""OpenTelemetry tracing (issue 29; proxy/observe/tracing.py): the span tree of a two-round call
through
the bridge to a real legacy server (`tests/peers/journal_server.py`, mcp 1.x), from the SDK's
in-memory exporter, and the `traceparent` the server received, recorded on the way."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import aiohttp
import pytest
import structlog.testing
from integration import recording_proxy as recording
from integration.harness import free_port
from integration.raw_http import ModernPoster
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from safety_harness import (
    CAPABILITIES,
    Held,
    JournalPeer,
    accept,
    bridge_settings,
    inprocess_bridge,
    inprocess_replicas,
    journal_peer,
    retry,
    start_held,
    text_of,
)

from proxy.auth.keys import new_key
from proxy.observe import tracing

TIMEOUT_S = 30.0
CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
OTHER_TRACE = "0af7651916cd43dd8448eb211c80319c"
OTHER_SPAN = "b7ad6b7169203331"


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JournalPeer]:
    with journal_peer(tmp_path_factory.mktemp("tracing")) as peer:
        yield peer


@asynccontextmanager
async def traced_upstream(target: str) -> AsyncIterator[tuple[str, list[str]]]:
    """A relay in front of the legacy server that records the `traceparent` of every
    `tools/call` POST (the relay forwards it too, like any header it records)."""
    seen: list[str] = []
    headers = recording.FORWARDED_REQUEST_HEADERS
    recording.FORWARDED_REQUEST_HEADERS = (*headers, "traceparent")  # type: ignore[misc]
    try:
        async with recording.recording_proxy(target) as proxy:
            yield proxy.url, seen
            seen += [
                r.headers.get("traceparent", "")
                for r in proxy.requests
                if r.method == "POST" and b'"tools/call"' in r.body
            ]
    finally:
        recording.FORWARDED_REQUEST_HEADERS = headers  # type: ignore[misc]


def _header(trace_id: str, span_id: str) -> dict[str, str]:
    return {"traceparent": f"00-{trace_id}-{span_id}-01"}


async def _two_rounds(
    upstream: JournalPeer, tag: str, second: dict[str, str]
) -> tuple[list[str], Held]:
    kid, key = new_key()
    async with traced_upstream(upstream.url) as (url, seen):
        settings = bridge_settings(url, held={"keys": {kid: key}})
        async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
            first = bridge.poster(traceparent=_header(CLIENT_TRACE, CLIENT_SPAN)["traceparent"])
            held = await start_held(first, "ask", tag=tag)
            then = bridge.poster(**second)
            assert text_of(await retry(then, held, accept(held, "yes"))) == f"{tag}: yes"
    assert upstream.events(tag) == ["call_started", "elicit_answered"]
    return seen, held


def _by_name(finished: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    named: dict[str, list[ReadableSpan]] = {}
    for span in sorted(finished, key=lambda s: s.start_time or 0):
        named.setdefault(span.name, []).append(span)
    return named


def _ids(span: ReadableSpan) -> tuple[str, str]:
    context = span.get_span_context()
    assert context is not None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


def _parent(span: ReadableSpan) -> str:
    assert span.parent is not None
    return f"{span.parent.span_id:016x}"


async def test_a_retry_without_traceparent_continues_the_first_rounds_trace(
    upstream: JournalPeer, spans: InMemorySpanExporter
) -> None:
    seen, held = await _two_rounds(upstream, "trace-1", {})
    named = _by_name(spans.get_finished_spans())
    assert sorted(named) == [
        "mrtr held",
        "roots affinity",  # the process's first call: does the upstream keep roots? (a probe)
        "tools/call ask",
        "upstream answers",
        "upstream session",  # a session leased (here: opened, initialized) for the call
        "upstream tools/call",
        "upstream tools/list",  # the bridge's own: the tool's input schema (Mcp-Param-* checks)
    ]
    first, second = named["tools/call ask"]
    [exchange], [answers], [wait] = (
        named["upstream tools/call"],
        named["upstream answers"],
        named["mrtr held"],
    )
    assert (first.kind, second.kind, exchange.kind, answers.kind) == (SpanKind.SERVER,) * 2 + (
        SpanKind.CLIENT,
    ) * 2
    trace_id, first_id = _ids(first)
    assert trace_id == CLIENT_TRACE and _parent(first) == CLIENT_SPAN  # the client's traceparent
    # every span of the call is in one trace; the retry's parent is the first round's span
    assert {_ids(s)[0] for s in (second, exchange, answers, wait)} == {CLIENT_TRACE}
    assert _parent(second) == first_id and [
        f"{link.context.span_id:016x}" for link in second.links
    ] == [first_id]
    [listing] = named["upstream tools/list"]
    assert _parent(listing) == first_id
    [roots] = named["roots affinity"]
    assert (_parent(roots), roots.kind) == (first_id, SpanKind.INTERNAL)
    [lease] = named["upstream session"]  # the call's own (the tools/list runs on it too)
    assert (_parent(lease), dict(lease.attributes or {})) == (first_id, {"exclusive": True})
    assert (_parent(exchange), _parent(wait), _parent(answers)) == (
        first_id,
        first_id,
        _ids(second)[1],
    )
    attributes = [dict(s.attributes or {}) for s in (first, second)]
    assert [a[tracing.CALL_ID] for a in attributes] == [CLIENT_TRACE, CLIENT_TRACE]
    assert [
        (a["mrtr_bridge.outcome"], a.get("mrtr_bridge.round"), a["mrtr_bridge.rounds"])
        for a in attributes
    ] == [
        ("input_required", 1, 1),
        ("complete", None, 1),
    ]
    assert (
        attributes[0]["gen_ai.tool.name"] == "ask"
        and attributes[0]["mcp.method.name"] == "tools/call"
    )
    assert dict(wait.attributes or {}) == {
        "mrtr_bridge.round": 1,
        "mrtr_bridge.held_outcome": "retried",
    }
    # the held wait spans the time between the rounds
    assert (
        first.end_time is not None and wait.end_time is not None and second.start_time is not None
    )
    assert wait.start_time is not None and first.start_time < wait.start_time <= first.end_time
    assert second.start_time <= wait.end_time <= (second.end_time or 0)
    # the server saw the upstream exchange's span as its parent
    assert seen == [f"00-{CLIENT_TRACE}-{_ids(exchange)[1]}-01"]
    for span in spans.get_finished_spans():
        assert held.request_state not in repr(span.attributes) and "yes" not in repr(
            span.attributes
        )


async def test_a_retry_with_its_own_traceparent_links_to_the_first_round(
    upstream: JournalPeer, spans: InMemorySpanExporter
) -> None:
    await _two_rounds(upstream, "trace-2", _header(OTHER_TRACE, OTHER_SPAN))
    named = _by_name(spans.get_finished_spans())
    first, second = named["tools/call ask"]
    assert _ids(first)[0] == CLIENT_TRACE
    assert _ids(second)[0] == OTHER_TRACE and _parent(second) == OTHER_SPAN
    assert [f"{link.context.trace_id:032x}" for link in second.links] == [CLIENT_TRACE]
    call_ids = [dict(s.attributes or {})[tracing.CALL_ID] for s in (first, second)]
    assert call_ids == [CLIENT_TRACE, CLIENT_TRACE]


def test_configured_by_the_standard_variables() -> None:
    try:
        assert tracing.configure({"OTEL_SDK_DISABLED": "true"}) is False
        assert tracing.configure({"OTEL_TRACES_EXPORTER": "none"}) is False
        assert not tracing.active()
        assert tracing.configure({"OTEL_TRACES_EXPORTER": "console"}) is True
        assert tracing.active()
    finally:
        tracing.use(None)


def test_the_sdk_alone_does_not_trace_until_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK without the OTLP exporter (the test extras, or another package's dependency) turns
    nothing on and says nothing: no `OTEL_*` variable asked for traces, and the default exporter
    is not there. A variable that asks for OTLP without the exporter gets the warning and its
    hint; one that names another exporter traces."""
    monkeypatch.setattr(tracing, "_OTLP_HTTP", "opentelemetry.sdk.no_such_exporter")
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    try:
        with structlog.testing.capture_logs() as quiet:
            assert tracing.configure({}) is False
        assert quiet == [] and not tracing.active()
        with structlog.testing.capture_logs() as asked:
            assert (
                tracing.configure({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}) is False
            )
        assert [entry["event"] for entry in asked] == ["tracing_exporter_missing"]
        assert "mrtr-bridge[otel]" in asked[0]["hint"] and not tracing.active()
        assert tracing.configure({"OTEL_TRACES_EXPORTER": "console"}) is True
    finally:
        tracing.use(None)


def test_nothing_of_opentelemetry_is_imported_while_tracing_is_off() -> None:
    code = (
        "import sys, proxy.app.http_app, proxy.observe.tracing, proxy.app.cli\n"
        "from config.settings import Settings\n"
        "proxy.app.http_app.make_app(Settings.model_validate({'upstream': {'url': 'http://127.0.0.1:9/mcp'}}))\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    assert _python(code) == "[]"


def test_serve_starts_where_opentelemetry_is_not_installed() -> None:
    """`pip install mrtr-bridge` (and the Docker image) has no OpenTelemetry at all: `serve`
    configures tracing at start-up, which must find it off, not fail on the missing package."""
    code = (
        "import sys\n"
        "for name in [m for m in sys.modules if m.startswith('opentelemetry')]:\n"
        "    del sys.modules[name]\n"
        "sys.modules['opentelemetry'] = None  # what an interpreter without the package imports\n"
        "from proxy.observe import tracing\n"
        "print(tracing.configure({}), tracing.configure({'OTEL_TRACES_EXPORTER': 'console'}),"
        " tracing.active())"
    )
    assert _python(code) == "False False False"


def _python(code: str) -> str:
    """What `code` prints, run by a fresh interpreter of this environment."""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return out.stdout.strip()


async def test_a_retry_forwarded_to_its_owner_stays_in_the_calls_trace(
    upstream: JournalPeer, spans: InMemorySpanExporter
) -> None:
    """Two real bridges, peers of each other: round 1 to r1, the retry (no traceparent) to r2,
    which forwards it to r1. One trace: r2's span continues the first round's (sealed context), its
    `forward` span is the parent of the owner's span, which links to the first round."""
    async with (
        asyncio.timeout(TIMEOUT_S),
        inprocess_replicas(upstream.url) as urls,
        aiohttp.ClientSession() as http,
    ):
        traced = _header(CLIENT_TRACE, CLIENT_SPAN)
        first = ModernPoster(http, urls[0] + "/mcp", capabilities=CAPABILITIES, headers=traced)
        held = await start_held(first, "ask", tag="trace-3")
        then = ModernPoster(http, urls[1] + "/mcp", capabilities=CAPABILITIES)
        assert text_of(await retry(then, held, accept(held, "yes"))) == "trace-3: yes"
    named = _by_name(spans.get_finished_spans())
    first_span, hop_span, owner_span = named["tools/call ask"]
    [forward] = named["forward"]
    _, first_id = _ids(first_span)
    assert {_ids(s)[0] for s in (first_span, hop_span, forward, owner_span)} == {CLIENT_TRACE}
    assert dict(hop_span.attributes or {})["mrtr_bridge.outcome"] == "forwarded"
    assert _parent(hop_span) == first_id  # r2 opened the state: the call's trace goes on
    assert (_parent(forward), forward.kind) == (_ids(hop_span)[1], SpanKind.CLIENT)
    assert dict(forward.attributes or {}) == {"mrtr_bridge.owner": "r1"}
    assert _parent(owner_span) == _ids(forward)[1]  # the hop's traceparent, on r1
    assert [f"{link.context.span_id:016x}" for link in owner_span.links] == [first_id]
    assert dict(owner_span.attributes or {})["mrtr_bridge.outcome"] == "complete"
    call_ids = {
        dict(s.attributes or {})[tracing.CALL_ID] for s in (first_span, hop_span, owner_span)
    }
    assert call_ids == {CLIENT_TRACE}


async def test_what_a_client_sends_is_bounded_on_the_span(
    upstream: JournalPeer, spans: InMemorySpanExporter
) -> None:
    """An unknown method and a request id of 5,000 characters: -32601, and a span that keeps 128
    of each and says they were cut."""
    settings = bridge_settings(upstream.url)
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        reply = await bridge.poster().post("m" * 5000, {}, request_id="i" * 5000)
    assert reply.response["error"]["code"] == -32601
    [span] = spans.get_finished_spans()
    attributes = dict(span.attributes or {})
    cut = "...[cut, 5000 characters]"
    assert span.name == "m" * 128 + cut
    assert (attributes["mcp.method.name"], attributes["jsonrpc.request.id"]) == (
        "m" * 128 + cut,
        "i" * 128 + cut,
    )
    assert (attributes["mrtr_bridge.outcome"], attributes["rpc.jsonrpc.error_code"]) == (
        "error",
        -32601,
    )


async def test_a_call_recovered_after_a_restart_stays_in_its_trace(
    upstream: JournalPeer, spans: InMemorySpanExporter
) -> None:
    """Round 1 on one bridge, which then stops (the held call is lost); the retry to a new bridge
    with the same key runs the call again (recovery.tools allows `ask`), in the same trace."""
    kid, key = new_key()
    settings = bridge_settings(
        upstream.url,
        held={"keys": {kid: key}},
        recovery={"reexecute": "allowlist", "tools": ["ask"]},
    )
    async with asyncio.timeout(TIMEOUT_S):
        async with inprocess_bridge(settings) as before:
            traced = before.poster(traceparent=_header(CLIENT_TRACE, CLIENT_SPAN)["traceparent"])
            held = await start_held(traced, "ask", tag="trace-4")
        async with inprocess_bridge(settings) as after:
            reply = await retry(after.poster(), held, accept(held, "yes"))
    assert text_of(reply) == "trace-4: yes"
    assert upstream.events("trace-4").count("call_started") == 2  # run again after the restart
    first, second = _by_name(spans.get_finished_spans())["tools/call ask"]
    _, first_id = _ids(first)
    assert _ids(second)[0] == CLIENT_TRACE and _parent(second) == first_id
    assert [f"{link.context.span_id:016x}" for link in second.links] == [first_id]
    assert dict(second.attributes or {})[tracing.CALL_ID] == CLIENT_TRACE


async def test_a_failed_upstream_exchange_names_its_error_class_not_its_text(
    spans: InMemorySpanExporter,
) -> None:
    """An upstream that refuses connections: the session span is an error with `error.type`,
    and no span carries the exception's text (it names the upstream URL)."""
    closed = f"http://127.0.0.1:{free_port()}/mcp"
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(bridge_settings(closed)) as bridge:
        reply = await bridge.poster().post("tools/call", {"name": "echo", "arguments": {}})
    assert reply.response["error"]["code"] == -32603
    named = _by_name(spans.get_finished_spans())
    # the first call's roots probe is the first exchange with the upstream: it fails there
    [failed] = [s for s in spans.get_finished_spans() if "error.type" in (s.attributes or {})]
    assert (failed.name, failed.status.status_code) == ("roots affinity", StatusCode.ERROR)
    assert dict(failed.attributes or {})["error.type"] == "UpstreamUnavailable"
    assert all(span.events == () for span in spans.get_finished_spans())
    [request] = named["tools/call echo"]
    assert dict(request.attributes or {})["mrtr_bridge.outcome"] == "error"
    for span in spans.get_finished_spans():
        assert closed not in repr(span.to_json())


async def test_the_access_line_names_the_trace_of_each_round(
    upstream: JournalPeer, spans: InMemorySpanExporter
) -> None:
    """With tracing on, each round's access line carries its span's trace id: the client's for the
    first, and the same for a retry that sent no `traceparent` of its own (it joins that trace)."""
    with structlog.testing.capture_logs() as captured:
        await _two_rounds(upstream, "trace-access", {})
    lines = [entry for entry in captured if entry["event"] == "front_request_finished"]
    assert [line["trace_id"] for line in lines] == [CLIENT_TRACE, CLIENT_TRACE]
    served = _by_name(spans.get_finished_spans())["tools/call ask"]
    assert [_ids(span)[0] for span in served] == [CLIENT_TRACE, CLIENT_TRACE]
