"""`/metrics` of the whole HTTP app (`make_app` with the fake upstream as its opener), parsed by
`prometheus_client`'s own parsers: every family, type, help text, label name and sample name that
the hand-written exposition had (recorded in tests/fixtures/metrics-families.json) is still there,
and a scraper that asks for OpenMetrics gets it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient
from engine_harness import (
    ELICIT_PARAMS,
    ScriptedBridge,
    accepted,
    error_of,
    fault_of,
    hold,
    known_ordinary,
    result_text,
    settings_with,
    text_result,
)
from fake_upstream import FakeUpstream
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families

from proxy.app.http_app import UPSTREAMS_KEY, make_app
from translators.protocol.eras import ELICIT
from translators.wire.errors import UpstreamUnavailable

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "metrics-families.json"
TEXT_0_0_4 = "text/plain; version=0.0.4; charset=utf-8"
# prometheus_client's process, platform and gc collectors, on the app's own registry (Linux).
STANDARD_FAMILIES = {
    "process_virtual_memory_bytes",
    "process_resident_memory_bytes",
    "process_start_time_seconds",
    "process_cpu_seconds",
    "process_open_fds",
    "process_max_fds",
    "python_info",
    "python_gc_objects_collected",
    "python_gc_objects_uncollectable",
    "python_gc_collections",
}


def families_of(metrics: Any) -> dict[str, dict[str, Any]]:
    """name -> type, help, label names (bucket bound `le` aside) and sample names, as parsed."""
    return {
        family.name: {
            "type": family.type,
            "help": family.documentation,
            "labels": sorted({k for s in family.samples for k in s.labels if k != "le"}),
            "samples": sorted({s.name for s in family.samples}),
        }
        for family in metrics
    }


async def exercised_bridge(aiohttp_client: Any) -> TestClient[Any, Any]:
    """The HTTP app after traffic that gives every labelled family a sample."""
    fake = FakeUpstream()
    fake.open_errors.append(UpstreamUnavailable("Fake upstream refused the connection"))
    client = await aiohttp_client(
        make_app(settings_with(held={"max_per_principal": 1}), opener=fake.open)
    )
    (upstream,) = client.app[UPSTREAMS_KEY]
    assert upstream.runtime is not None and upstream.pool is not None
    bridge = ScriptedBridge(known_ordinary(upstream.runtime), upstream.pool, fake)
    assert fault_of(await bridge.send(bridge.request("echo")))["data"] == {"source": "mrtr-bridge"}
    held = await hold(bridge)
    over = bridge.start(bridge.request("again"))
    (await bridge.upstream.next_call()).push(ELICIT, ELICIT_PARAMS, key="name")
    assert error_of(await over)["data"]["limit"] == "held.max_per_principal"
    stolen = bridge.retry_of(held.request, held.reply, {"name": accepted("Eve")}, principal="bob")
    assert error_of(await bridge.send(stolen))["code"] == -32602
    retry = bridge.start(bridge.retry_of(held.request, held.reply, {"name": accepted("Ada")}))
    await held.push.answered()
    held.call.finish(text_result("done"))
    assert result_text(await retry) == "done"
    assert (await client.get("/healthz")).status == 200
    return client


async def test_metrics_keeps_every_family_and_label_of_the_recorded_exposition(
    aiohttp_client: Any,
) -> None:
    client = await exercised_bridge(aiohttp_client)
    response = await client.get("/metrics")
    assert response.headers["Content-Type"] == TEXT_0_0_4
    text = await response.text()
    families = families_of(text_string_to_metric_families(text))
    own = {name: family for name, family in families.items() if name.startswith("mrtr_bridge_")}
    assert own == json.loads(RECORDED.read_text(encoding="utf-8"))
    assert set(families) - set(own) == STANDARD_FAMILIES
    (upstream,) = client.app[UPSTREAMS_KEY]
    named = f'upstream="{upstream.name}"'
    assert f'rejections_total{{reason="other_principal",{named}}} 1.0' in text
    assert f'limit_rejections_total{{limit="held.max_per_principal",{named}}} 1.0' in text
    assert f'mrtr_bridge_upstream_errors_total{{kind="UpstreamUnavailable",{named}}} 1.0' in text
    assert f"mrtr_bridge_input_rounds_total{{{named}}} 1.0" in text
    assert "_created" not in text
    assert 'python_info{implementation="CPython"' in text
    cpu = next(line for line in text.splitlines() if line.startswith("process_cpu_seconds_total "))
    assert float(cpu.split()[1]) > 0


async def test_metrics_offers_openmetrics_to_a_scraper_that_asks(aiohttp_client: Any) -> None:
    client = await exercised_bridge(aiohttp_client)
    accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
    response = await client.get("/metrics", headers={"Accept": accept})
    assert response.headers["Content-Type"].startswith(
        "application/openmetrics-text; version=1.0.0"
    )
    text = await response.text()
    assert text.endswith("# EOF\n")
    parsed = families_of(parse_openmetrics(text))
    assert {name for name in parsed if not name.startswith("mrtr_bridge_")} == STANDARD_FAMILIES
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    assert {name: (f["type"], f["labels"]) for name, f in parsed.items() if name in recorded} == {
        name: (f["type"], f["labels"]) for name, f in recorded.items()
    }
