"""`/metrics`, `/healthz` and `/readyz` (issue 6): Prometheus text that a scraper accepts, bridge
activity counted by method, outcome, reason and limit, and readiness that follows the upstream.

The exposition is checked line by line on small registries; the bridge's own figures are checked
in-process in front of a real legacy server (`tests/peers/journal_server.py`, mcp 1.x).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import choose_encoder
from safety_harness import (
    JournalPeer,
    accept,
    bridge_settings,
    call,
    error_of,
    finish,
    inprocess_bridge,
    journal_peer,
    retry,
    start_held,
    text_of,
)

from config.settings import Settings
from proxy.app.http_app import METRICS_KEY, make_front_app
from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.observe.access import upstream_name
from proxy.observe.metrics import CONTENT_TYPE, Bounded, BridgeMetrics, RequestFamilies
from proxy.observe.request_families import (
    CountFamily,
    DurationFamily,
    method_label,
    outcome_of,
)
from translators.protocol.eras import (
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    MODERN_VERSION,
    TOOLS_CALL,
)

TIMEOUT_S = 30.0
_SAMPLE = re.compile(
    r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*",?)*\})? (\S+)$'
)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JournalPeer]:
    """One journaling legacy server for the module."""
    with journal_peer(tmp_path_factory.mktemp("metrics")) as peer:
        yield peer


def parse_exposition(text: str) -> dict[str, float]:
    """Samples by series (`name{labels}`), after checking every line is valid 0.0.4 text format."""
    samples: dict[str, float] = {}
    typed: set[str] = set()
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if line.startswith("# HELP "):
            continue
        match = _SAMPLE.match(line)
        assert match is not None, f"not a sample line: {line!r}"
        family = re.sub(r"_(bucket|sum|count)$", "", match.group(1))
        assert match.group(1) in typed or family in typed, f"sample before its TYPE: {line!r}"
        series = line.rsplit(" ", 1)[0]
        assert series not in samples, f"duplicate series {series}"
        samples[series] = float(line.rsplit(" ", 1)[1])
    return samples


def test_label_sets_are_capped_per_family() -> None:
    """A family never grows past its series cap: later label sets fold into `_overflow`."""
    registry = CollectorRegistry()
    counter = Bounded(Counter("x_total", "X.", ("v",), registry=registry), max_series=2)
    counter.labels('a"b\\c\nd').inc()
    for n in range(10):
        counter.labels(f"flood-{n}").inc()
    text = generate_latest(registry).decode()
    assert 'x_total{v="a\\"b\\\\c\\nd"} 1.0' in text
    assert parse_exposition(text) == {
        'x_total{v="a\\"b\\\\c\\nd"}': 1,
        'x_total{v="flood-0"}': 1,
        'x_total{v="_overflow"}': 9,
    }


def series(name: str, **labels: str) -> str:
    """The key of one series in `parse_exposition`: labels in name order, as written."""
    pairs = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    return f"{name}{{{pairs}}}" if pairs else name


def test_labels_are_bounded() -> None:
    """Methods outside the modern set and odd codes become `other`; outcomes come from the
    response."""
    assert method_label(TOOLS_CALL) == TOOLS_CALL
    assert method_label("x/" + "y" * 500) == "other"
    assert outcome_of({"error": {"code": -32602}}) == ("error", "-32602")
    assert outcome_of({"error": {"code": True}}) == ("error", "other")
    assert outcome_of({"result": {"resultType": "input_required"}}) == ("input_required", None)
    assert outcome_of({"result": {}}) == ("complete", None)


async def test_metrics_route_counts_bridge_activity(upstream: JournalPeer) -> None:
    """Requests by outcome, latency, held calls, rounds, rejections, limits and sessions appear in
    /metrics."""
    settings = bridge_settings(upstream.url, held={"max_per_principal": 1})
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        alice, bob = bridge.poster("Bearer alice"), bridge.poster("Bearer bob")
        assert text_of(await call(alice, "echo", text="one")) == "one"
        held = await start_held(alice, "ask", tag="metrics-held")
        assert (
            error_of(await call(alice, "ask", tag="metrics-refused"))["data"]["limit"]
            == "held.max_per_principal"
        )
        tampered = held.request_state[:-2] + (
            "AA" if not held.request_state.endswith("AA") else "BB"
        )
        forged = type(held)(held.tool, held.arguments, tampered, held.keys)
        assert error_of(await retry(bob, forged, accept(held, "x")))["code"] == -32602
        status, body = await bridge.get("/metrics")
        during = parse_exposition(body)
        assert await finish(alice, held, "done") == "metrics-held: done"
        after = parse_exposition(bridge.metrics_text())
    up = upstream_name(settings.upstream)
    assert status == 200
    assert during[series("mrtr_bridge_held_calls", upstream=up)] == 1
    assert during[series("mrtr_bridge_interactive_calls", upstream=up)] == 1
    assert after[series("mrtr_bridge_held_calls", upstream=up)] == 0
    calls = {"upstream": up, "method": "tools/call"}
    for outcome, count in (("complete", 2), ("input_required", 1), ("error", 2)):
        assert after[series("mrtr_bridge_requests_total", **calls, outcome=outcome)] == count
    assert after[series("mrtr_bridge_request_errors_total", **calls, code="-32603")] == 1
    assert after[series("mrtr_bridge_request_errors_total", **calls, code="-32602")] == 1
    duration = "mrtr_bridge_request_duration_seconds_count"
    assert after[series(duration, **calls, outcome="complete")] == 2
    limits = "mrtr_bridge_limit_rejections_total"
    assert after[series(limits, upstream=up, limit="held.max_per_principal")] == 1
    rejected = "mrtr_bridge_request_state_rejections_total"
    assert after[series(rejected, upstream=up, reason="authentication_failed")] == 1
    assert after[series("mrtr_bridge_input_rounds_total", upstream=up)] == 1
    # Alice's, warm and reused; Bob none
    http = {"upstream": up, "transport": "http"}
    assert after[series("mrtr_bridge_upstream_sessions", **http)] == 1
    assert after[series("mrtr_bridge_upstream_session_reuses_total", **http)] == 1
    # five POSTs and the scrape: the POSTs at the upstream's endpoint, the scrape the bridge's own
    responses = "mrtr_bridge_http_responses_total"
    assert after[series(responses, upstream=up, status="200")] == 5
    assert after[series(responses, upstream="", status="200")] == 1


async def test_metrics_content_type_and_health(upstream: JournalPeer) -> None:
    """/metrics has the Prometheus content type; /healthz answers while the process lives."""
    async with (
        asyncio.timeout(TIMEOUT_S),
        inprocess_bridge(bridge_settings(upstream.url)) as bridge,
    ):
        async with bridge.http.get(bridge.server.make_url("/metrics")) as response:
            assert response.headers["Content-Type"] == CONTENT_TYPE
        assert await bridge.get("/healthz") == (200, json.dumps({"status": "ok"}))


async def test_readyz_follows_the_upstream(upstream: JournalPeer) -> None:
    """/readyz is 200 with keys and upstream checked, and probes the upstream at most once per
    interval."""
    settings = bridge_settings(upstream.url, held={"keys": {"k1": "A" * 43}})
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        first = await bridge.get("/readyz")
        opened = bridge.pool.stats().created_total
        again = await asyncio.gather(*(bridge.get("/readyz") for _ in range(5)))
        assert bridge.pool.stats().created_total == opened == 1
    checks = {"upstream": "reachable", "transport": "streamable-http", "era": "legacy"}
    body = {
        "status": "ready",
        "ready_requires": "any",
        # the bridge's checks and, with one upstream, its checks as well
        "checks": {"keys": "configured", **checks},
        "upstreams": {"/mcp": {"status": "ready", "checks": checks}},
    }
    ready = (200, json.dumps(body))
    assert first == ready
    assert again == [ready] * 5


async def test_readyz_is_503_when_the_upstream_is_down(upstream: JournalPeer) -> None:
    """With nothing listening upstream, /readyz is 503 naming the failure and requests count an
    upstream error."""
    settings = bridge_settings("http://127.0.0.1:9/mcp", upstream={"connect_timeout_s": 2})
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        status, body = await bridge.get("/readyz")
        assert (
            error_of(await call(bridge.poster(), "echo", text="x"))["data"]["source"]
            == "mrtr-bridge"
        )
        after = parse_exposition(bridge.metrics_text())
    checks = {
        "upstream": "unreachable: cannot connect: connection refused",
        "transport": "auto (not detected yet)",
        "era": "unknown",
    }
    up = upstream_name(settings.upstream)
    assert (status, json.loads(body)) == (
        503,
        {
            "status": "unavailable",
            "ready_requires": "any",
            "checks": {"keys": "ephemeral", **checks},
            "upstreams": {"/mcp": {"status": "unavailable", "checks": checks}},
        },
    )
    kind = series("mrtr_bridge_upstream_errors_total", upstream=up, kind="UpstreamUnavailable")
    assert after[kind] == 1
    assert after[series("mrtr_bridge_http_responses_total", upstream="", status="503")] == 1


def test_every_documented_metric_is_registered() -> None:
    """The metric table of docs/operations.md names exactly the registered families."""
    registered = {
        line.split()[2]
        for line in BridgeMetrics().render().splitlines()
        if line.startswith("# TYPE mrtr_bridge_")
    }
    operations = (Path(__file__).resolve().parents[3] / "docs" / "operations.md").read_text(
        encoding="utf-8"
    )
    documented = set(re.findall(r"^\| `(mrtr_bridge_[a-z_]+)` \|", operations, flags=re.MULTILINE))
    assert documented == registered
    assert len(registered) == 23


async def test_every_response_is_counted_as_sent_a_failed_handlers_500_too(
    aiohttp_client: Callable[..., Awaitable[TestClient[Any, Any]]],
) -> None:
    """The response counter sees what the client got: a 200, a 404 of an unknown path, a 405, and
    the 500 aiohttp sends when a handler fails (counted since the count moved to the response
    signal)."""

    class FailingEngine:
        async def handle(self, request: FrontRequest, _sink: NotificationSink) -> dict[str, Any]:
            raise RuntimeError("engine failed")

        def is_ready(self) -> bool:
            return True

    app = make_front_app(Settings(), FailingEngine())
    client = await aiohttp_client(app)
    meta = {META_PROTOCOL_VERSION: MODERN_VERSION, META_CLIENT_CAPABILITIES: {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": TOOLS_CALL, "params": {"name": "t", "_meta": meta}}
    headers = {"MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": TOOLS_CALL, "Mcp-Name": "t"}
    statuses = [
        (await client.post("/mcp", json=body, headers=headers)).status,
        (await client.get("/healthz")).status,
        (await client.get("/nowhere")).status,
        (await client.get("/mcp")).status,
    ]
    assert statuses == [500, 200, 404, 405]
    metrics = app[METRICS_KEY]
    # the endpoint's responses under its upstream's name (none configured: `none`), the others
    # under the bridge's own routes (`upstream=""`)
    upstreams = ["none", "", "", "none"]
    assert [
        metrics.sample("mrtr_bridge_http_responses_total", upstream=up, status=str(status))
        for up, status in zip(upstreams, statuses, strict=True)
    ] == [1.0, 1.0, 1.0, 1.0]


def test_request_families_expose_what_prometheus_client_families_did() -> None:
    """The families every request feeds are plain numbers (proxy/observe/request_families.py):
    the same exposition as a prometheus_client Counter and Histogram fed the same samples."""
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    buckets = (0.01, 0.1, 1.0)
    count = CountFamily("x_total", "X.", ("m", "o"), 10)
    duration = DurationFamily("d_seconds", "D.", ("m", "o"), buckets, 10)
    ours.register(RequestFamilies([count, duration]))
    counter = Counter("x_total", "X.", ("m", "o"), registry=theirs)
    histogram = Histogram("d_seconds", "D.", ("m", "o"), buckets=buckets, registry=theirs)
    for labels, seconds in [(("a", "ok"), 0.01), (("b", "x"), 0.5), (("a", "ok"), 7.0)]:
        count.inc(labels)
        duration.observe(labels, seconds)
        counter.labels(*labels).inc()
        histogram.labels(*labels).observe(seconds)
    for wanted in ("", "application/openmetrics-text"):
        encoder, _ = choose_encoder(wanted)
        assert encoder(ours) == encoder(theirs)


def test_request_families_cap_their_label_sets_per_upstream() -> None:
    """A flood of label sets at one upstream folds into its own `_overflow` series; another
    upstream's series stay its own."""
    registry = CollectorRegistry()
    count = CountFamily("x_total", "X.", ("upstream", "v"), 2)
    duration = DurationFamily("d_seconds", "D.", ("upstream", "v"), (1.0,), 2)
    registry.register(RequestFamilies([count, duration]))
    for n in range(10):
        count.inc(("alpha", f"flood-{n}"))
        duration.observe(("alpha", f"flood-{n}"), 0.5)
    count.inc(("beta", "calm"))
    samples = parse_exposition(generate_latest(registry).decode())
    assert {name: value for name, value in samples.items() if name.startswith("x_")} == {
        'x_total{upstream="alpha",v="flood-0"}': 1,
        'x_total{upstream="alpha",v="flood-1"}': 1,
        'x_total{upstream="alpha",v="_overflow"}': 8,
        'x_total{upstream="beta",v="calm"}': 1,
    }
    assert samples['d_seconds_count{upstream="alpha",v="_overflow"}'] == 8
    assert samples['d_seconds_bucket{le="1.0",upstream="alpha",v="_overflow"}'] == 8
    assert samples['d_seconds_sum{upstream="alpha",v="_overflow"}'] == 4.0
