"""Two upstreams behind one bridge, each named everywhere (issue 42): `/metrics` carries an
`upstream` label on every family about an upstream and reads both engines at scrape time,
`/status` and `/status.json` show a section per upstream, `/readyz` says which upstreams answer
and follows `front.ready_requires`, and every log line about an upstream names it.

The bridge is `make_app` with a second `Upstream` (at `/servers/beta/mcp`) beside its own, the way
the composition root builds each upstream, each in front of a scripted fake of its own
(tests/engine/fake_upstream.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import structlog
from aiohttp.test_utils import TestClient
from engine_harness import (
    ScriptedBridge,
    accepted,
    hold,
    known_ordinary,
    result_text,
    settings_with,
    text_result,
)
from fake_upstream import FakeUpstream
from prometheus_client.parser import text_string_to_metric_families

from proxy.app.compose import held_counts
from proxy.app.health import bridge_status
from proxy.app.http_app import METRICS_KEY, UPSTREAMS_KEY, make_app
from proxy.app.upstreams import Upstream
from proxy.common.log_context import merge_log_context
from translators.protocol.eras import (
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    MODERN_VERSION,
    TOOLS_CALL,
)
from translators.wire.errors import UpstreamUnavailable

ALPHA, BETA = "alpha.invalid", "beta.invalid"  # their names: host (and port) of their URLs
BETA_PATH = "/servers/beta/mcp"
# families about the bridge as a whole, not an upstream (the replicas' and the build's)
BRIDGE_WIDE = {
    "mrtr_bridge_build_info",
    "mrtr_bridge_start_time_seconds",
    "mrtr_bridge_forwarded_retries",
    "mrtr_bridge_forwarded_retries_received",
    "mrtr_bridge_forward_failures",
    "mrtr_bridge_forward_proof_rejections",
}


def _fake(*, up: bool) -> FakeUpstream:
    fake = FakeUpstream()
    fake.auto["ping"] = {}  # the readiness probe's ping
    if not up:
        fake.open_errors += [UpstreamUnavailable("Fake upstream refused the connection")] * 20
    return fake


async def two_upstreams(
    aiohttp_client: Any, *, alpha_up: bool = True, beta_up: bool = True, requires: str = "any"
) -> tuple[TestClient[Any, Any], ScriptedBridge, ScriptedBridge]:
    """The HTTP app with upstreams `alpha.invalid` at /mcp and `beta.invalid` at /servers/beta/mcp,
    started; a scripted driver of each one's engine."""
    fakes = _fake(up=alpha_up), _fake(up=beta_up)
    front = {"ready_requires": requires}
    app = make_app(
        settings_with(upstream={"url": f"http://{ALPHA}/mcp"}, front=front), opener=fakes[0].open
    )
    beta_settings = settings_with(
        upstream={"url": f"http://{BETA}/mcp"}, front={**front, "path": BETA_PATH}
    )
    beta = Upstream(
        beta_settings,
        metrics=app[METRICS_KEY],
        held=held_counts(beta_settings),
        opener=fakes[1].open,
    )
    app[UPSTREAMS_KEY].append(beta)
    beta.front(beta_settings.front.sse_keepalive_s).add_routes(app)
    client = await aiohttp_client(app)
    drivers = []
    for upstream, fake in zip(app[UPSTREAMS_KEY], fakes, strict=True):
        assert upstream.runtime is not None and upstream.pool is not None
        drivers.append(ScriptedBridge(known_ordinary(upstream.runtime), upstream.pool, fake))
    return client, drivers[0], drivers[1]


async def _echo(bridge: ScriptedBridge) -> str:
    reply = bridge.start(bridge.request("echo"))
    (await bridge.upstream.next_call()).finish(text_result("echoed"))
    return result_text(await reply)


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_metrics_name_the_upstream_of_every_series(aiohttp_client: Any) -> None:
    client, alpha, beta = await two_upstreams(aiohttp_client)
    assert await _echo(alpha) == "echoed"
    held = await hold(beta)
    refused = await client.post(BETA_PATH, data=b"{", headers={"Content-Type": "application/json"})
    assert refused.status == 400
    text = await (await client.get("/metrics")).text()
    samples = _samples(text)

    def value(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    calls = {"method": TOOLS_CALL}
    assert value("mrtr_bridge_requests_total", upstream=ALPHA, outcome="complete", **calls) == 1
    assert value("mrtr_bridge_requests_total", upstream=BETA, outcome="input_required", **calls)
    assert ("mrtr_bridge_requests_total", (("method", TOOLS_CALL), ("outcome", "complete"),
            ("upstream", BETA))) not in samples  # fmt: skip
    # read from both engines at scrape time
    assert (value("mrtr_bridge_held_calls", upstream=ALPHA), value(
        "mrtr_bridge_held_calls", upstream=BETA)) == (0, 1)  # fmt: skip
    assert value("mrtr_bridge_input_rounds_total", upstream=BETA) == 1
    for name in (ALPHA, BETA):
        assert value("mrtr_bridge_upstream_sessions", upstream=name, transport="http") == 1
    # HTTP responses: each endpoint's under its upstream, the bridge's own routes under ""
    assert value("mrtr_bridge_http_responses_total", upstream=BETA, status="400") == 1
    assert ("mrtr_bridge_http_responses_total", (("status", "400"), ("upstream", ALPHA))) not in (
        samples
    )
    sampled = {
        family.name: family.samples
        for family in text_string_to_metric_families(text)
        if family.name.startswith("mrtr_bridge_") and family.samples
    }
    assert {name.removeprefix("mrtr_bridge_") for name in set(sampled) - BRIDGE_WIDE} == {
        "requests",
        "request_duration_seconds",
        "http_responses",
        "held_calls",
        "interactive_calls",
        "input_rounds",
        "upstream_sessions",
        "upstream_sessions_opened",
        "upstream_session_reuses",
        "upstream_session_reinitializations",
    }
    for name, family_samples in sampled.items():
        named = {"upstream" in sample.labels for sample in family_samples}
        assert named == ({False} if name in BRIDGE_WIDE else {True}), name
    retry = beta.start(beta.retry_of(held.request, held.reply, {"name": accepted("Ada")}))
    await held.push.answered()
    held.call.finish(text_result("done"))
    assert result_text(await retry) == "done"


async def test_the_status_page_has_a_section_per_upstream(aiohttp_client: Any) -> None:
    client, alpha, beta = await two_upstreams(aiohttp_client)
    held = await hold(beta, principal="bob")
    assert (await client.get("/readyz")).status == 200  # the page shows what it found, unasked
    facts = await (await client.get("/status.json")).json()
    assert [up["name"] for up in facts["upstreams"]] == [ALPHA, BETA]
    assert [(up["ready"], up["health"]) for up in facts["upstreams"]] == [(True, "reachable")] * 2
    assert facts["held"] == {"count": 1, "in_progress": 1, "rounds_total": 1}
    up_alpha, up_beta = facts["upstreams"]
    assert (up_alpha["held"]["count"], up_alpha["held"]["calls"]) == (0, [])
    assert up_beta["held"]["per_tool"] == {"tools/call ask": 1}
    [call] = up_beta["held"]["calls"]
    assert (call["name"], call["state"]) == ("ask", "waiting_client")
    assert {up["transport"] for up in facts["upstreams"]} == {"streamable-http"}
    assert (facts["bridge"]["keys"], facts["replicas"]["clustered"]) == ("ephemeral", False)
    page = await (await client.get("/status")).text()
    assert page.count("<h2>Upstreams</h2>") == page.count("<h2>Replicas</h2>") == 1
    for name in (ALPHA, BETA):
        assert f"<h2>{name}: held calls</h2>" in page and f"<tr><td>{name}</td>" in page
    assert page.count('<td class="waiting_client">waiting_client</td>') == 1
    assert held.request.principal == "bob"
    assert await _echo(alpha) == "echoed"


@pytest.mark.parametrize(
    ("ready", "requires", "expected"),
    [
        ([True], "any", ("ready", 200)),
        ([True], "all", ("ready", 200)),
        ([False], "any", ("unavailable", 503)),
        ([False], "all", ("unavailable", 503)),
        ([True, True], "any", ("ready", 200)),
        ([True, True], "all", ("ready", 200)),
        ([True, False], "any", ("degraded", 200)),
        ([False, True], "any", ("degraded", 200)),
        ([True, False], "all", ("unavailable", 503)),
        ([False, False], "any", ("unavailable", 503)),
        ([False, False], "all", ("unavailable", 503)),
        ([], "any", ("unavailable", 503)),
    ],
)
def test_the_readiness_rule(ready: list[bool], requires: Any, expected: tuple[str, int]) -> None:
    """200 while any upstream answers (`any`, the default) or only while all do (`all`)."""
    assert bridge_status(ready, requires) == expected


@pytest.mark.parametrize(
    ("alpha_up", "beta_up", "requires", "status", "code"),
    [
        (True, True, "any", "ready", 200),
        (True, False, "any", "degraded", 200),
        (False, True, "any", "degraded", 200),
        (True, False, "all", "unavailable", 503),
        (False, False, "any", "unavailable", 503),
    ],
)
async def test_readyz_says_which_upstreams_answer(
    aiohttp_client: Any, alpha_up: bool, beta_up: bool, requires: str, status: str, code: int
) -> None:
    client, _, _ = await two_upstreams(
        aiohttp_client, alpha_up=alpha_up, beta_up=beta_up, requires=requires
    )
    with structlog.testing.capture_logs(processors=[merge_log_context]) as logged:
        reply = await client.get("/readyz")
        body = await reply.json()
    assert (reply.status, body["status"], body["ready_requires"]) == (code, status, requires)
    assert body["checks"] == {"keys": "ephemeral"}  # the bridge's own; each upstream's below
    # each named by its name, or (unnamed, as here) by its path: never by its address
    assert sorted(body["upstreams"]) == sorted(["/mcp", BETA_PATH])
    for key, up in (("/mcp", alpha_up), (BETA_PATH, beta_up)):
        verdict = body["upstreams"][key]
        assert verdict["status"] == ("ready" if up else "unavailable"), verdict
        assert verdict["checks"]["upstream"] == (
            "reachable" if up else "unreachable: it is unavailable"
        )
    failed = [line for line in logged if line["event"] == "readiness_probe_failed"]
    down = [name for name, up in ((ALPHA, alpha_up), (BETA, beta_up)) if not up]
    assert sorted(line["upstream"] for line in failed) == down  # each line names its upstream
    assert json.dumps(body).count("invalid") == 0  # paths, never addresses


async def test_every_line_about_an_upstream_names_it(aiohttp_client: Any) -> None:
    """A request's lines (bound by its endpoint) and its upstream's lifetime lines (bound around
    its start and close) carry the upstream's name."""
    with structlog.testing.capture_logs(processors=[merge_log_context]) as logged:
        client, _, _ = await two_upstreams(aiohttp_client, beta_up=False)
        meta = {META_PROTOCOL_VERSION: MODERN_VERSION, META_CLIENT_CAPABILITIES: {}}
        body = {"jsonrpc": "2.0", "id": 7, "method": TOOLS_CALL,
                "params": {"name": "echo", "_meta": meta}}  # fmt: skip
        headers = {"MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": TOOLS_CALL,
                   "Mcp-Name": "echo", "Accept": "application/json, text/event-stream"}  # fmt: skip
        reply = await (await client.post(BETA_PATH, json=body, headers=headers)).json()
        assert reply["error"]["data"]["source"] == "mrtr-bridge"
        assert (await client.get("/readyz")).status == 200  # alpha answers
        await client.close()
    failed = [line for line in logged if line["event"] == "front_request_failed"]
    assert [(line["upstream"], line["request_id"]) for line in failed] == [(BETA, 7)]
    closed = [line for line in logged if line["event"] == "upstream_sessions_closed"]
    assert [line["upstream"] for line in closed] == [ALPHA]  # its probe's session; beta had none
    assert all(line.get("upstream") != ALPHA for line in logged if "request_id" in line)
