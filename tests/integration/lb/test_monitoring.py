"""The monitoring files in deploy/ (`make test-lb`): the Prometheus alert rules pass `promtool check
rules` and their own `promtool test rules`, and every metric the rules and the Grafana dashboard
name, with every label they select on, is one a real bridge exposes on /metrics after a real
multi-round call through it (the mcp 2.x client, the legacy demo server)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections.abc import Iterator

import mcp_types as types
import pytest

from proxy.observe.metrics import Bounded, BridgeMetrics
from proxy.observe.request_families import CountFamily, DurationFamily

from ..cluster_helpers import metric, scrape
from ..harness import REPO_ROOT, InputAnswers, Peers, modern_client

RULES = REPO_ROOT / "deploy" / "prometheus-rules.yml"
RULES_TEST = REPO_ROOT / "deploy" / "prometheus-rules.test.yml"
DASHBOARD = REPO_ROOT / "deploy" / "grafana-dashboard.json"
# labels Prometheus adds to every scraped series, and the bucket bound of a histogram
TARGET_LABELS = {"instance", "job"}
NAME = re.compile(r"\bmrtr_bridge_[a-z0-9_]+")
SELECTOR = re.compile(r"\b(mrtr_bridge_[a-z0-9_]+)\{([^}]*)\}")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["promtool", *args], cwd=RULES.parent, capture_output=True, text=True, check=False
    )


def test_the_alert_rules_pass_promtool_check() -> None:
    checked = _promtool("check", "rules", RULES.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 9 rules found" in checked.stdout


def test_the_alert_rules_fire_on_their_test_series() -> None:
    tested = _promtool("test", "rules", RULES_TEST.name)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def _dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    return exprs


def test_the_dashboard_is_well_formed() -> None:
    """One datasource variable for every query, unique panel ids, panels inside the 24-wide grid."""
    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels) == 17
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["w"] > 0 and grid["h"] > 0
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"] and all(t["expr"].strip() for t in panel["targets"])
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"


def _sample_names(exposition: str) -> set[str]:
    """Every sample name the families of an exposition can have (from its `# TYPE` lines)."""
    names: set[str] = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", exposition, re.MULTILINE):
        if kind == "histogram":
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        elif kind == "counter":
            names |= {name, name if name.endswith("_total") else f"{name}_total"}
        else:
            names.add(name)
    return names


def _labels_by_sample(exposition: str) -> dict[str, set[str]]:
    """Label names per sample name: those of the exposition's samples, and those every labelled
    family of `BridgeMetrics` declares (a family no request has touched yet has no sample)."""
    labels: dict[str, set[str]] = {}
    for name, pairs in re.findall(r"^(mrtr_bridge_\w+)\{([^}]*)\}", exposition, re.MULTILINE):
        labels.setdefault(name, set()).update(re.findall(r'(\w+)="', pairs))
    metrics = BridgeMetrics()
    for value in [*vars(metrics).values(), *metrics.families]:
        if isinstance(value, Bounded | CountFamily | DurationFamily):
            if isinstance(value, Bounded):
                family, declared = value.metric._name, set(value.metric._labelnames)
            else:
                family, declared = value.name, set(value.label_names)
            for sample in (
                f"{family}_total",
                f"{family}_bucket",
                f"{family}_sum",
                f"{family}_count",
            ):
                labels.setdefault(sample, set()).update(declared)
            labels[f"{family}_bucket"].add("le")
    return labels


@pytest.fixture(scope="module")
def exposition(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """/metrics of a real bridge after a two-round call (elicitation) through it."""
    peers = Peers(log_dir=tmp_path_factory.mktemp("monitoring"))
    try:
        legacy = peers.legacy("demo_server.py")
        bridge = peers.bridge(legacy.url)

        async def call_and_scrape() -> str:
            answers = InputAnswers(elicit_content={"party_size": 2, "name": "Ada"})
            async with modern_client(bridge.url, **answers.client_kwargs()) as client:
                result = await client.call_tool("book_table", {"restaurant": "Chez Nous"})
            content = result.content[0]
            assert isinstance(content, types.TextContent)
            assert content.text == "Booked Chez Nous for 2 under Ada."
            return await scrape(bridge.port)

        yield asyncio.run(asyncio.wait_for(call_and_scrape(), 60))
    finally:
        peers.close()


def test_every_metric_the_rules_and_dashboard_name_is_exposed(exposition: str) -> None:
    assert metric(exposition, "mrtr_bridge_input_rounds_total") == 1.0
    exposed = _sample_names(exposition)
    labels = _labels_by_sample(exposition)
    sources = {"rules": RULES.read_text(), "dashboard": "\n".join(_dashboard_exprs())}
    for source, text in sources.items():
        named = set(NAME.findall(text))
        assert named, source
        assert named - exposed == set(), f"{source} names metrics /metrics does not have"
        for name, matchers in SELECTOR.findall(text):
            selected = set(MATCHER.findall(matchers)) - TARGET_LABELS
            assert selected <= labels.get(name, set()), f"{source}: {name} lacks {selected}"
    # the one series that is not the bridge's own: Prometheus's `up` of the scrape job
    assert set(re.findall(r"\b(up)\{job=", sources["rules"])) == {"up"}
