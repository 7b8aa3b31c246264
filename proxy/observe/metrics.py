"""The bridge's Prometheus metrics, on `prometheus_client` (names and labels in docs/operations.md):
the scrape-time side. What requests feed is proxy/observe/request_families.py; a request never
enters this module.

Each `BridgeMetrics` owns its own `CollectorRegistry` (never the process-global one), so several
bridges in one process never collide. `exposition(accept)` renders it in the format the scraper
asks for: the Prometheus text format 0.0.4 by default, OpenMetrics 1.0 when `Accept` names
`application/openmetrics-text`.

Every family about an upstream has an `upstream` label, the upstream's name (`Upstream.name`:
configured, or derived from a single unnamed upstream by `proxy.observe.access.upstream_name`).
Label cardinality stays bounded whatever a client sends: label values are upstream names, methods,
outcomes, codes, limit names, rejection reasons, error classes and HTTP statuses only, mapped to
`other` when the bridge does not know them, and every family folds label sets beyond `MAX_SERIES`
(per upstream) into `_overflow`. Label values never carry a secret. Each upstream's held-call
registry and pool are read at scrape time (`watch`), so they keep no bookkeeping of their own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from importlib.metadata import version
from typing import Any, Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder, generate_latest
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from proxy.observe.request_families import (
    BRIDGE_ROUTES,
    OVERFLOW,
    CountFamily,
    DurationFamily,
    Families,
    HttpResponses,
    UpstreamMetrics,
    Watched,
)

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
PREFIX: Final = "mrtr_bridge_"
MAX_SERIES: Final = 512  # label sets per family (and upstream); beyond it, they fold into OVERFLOW
LATENCY_BUCKETS: Final[tuple[float, ...]] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
Labels = tuple[str, ...]

disable_created_metrics()  # type: ignore[no-untyped-call]  # no `_created` series: the exposition keeps exactly the families it always had


class Bounded:
    """A labelled `prometheus_client` metric that never holds more than `max_series` label sets."""

    def __init__(self, metric: Any, max_series: int = MAX_SERIES) -> None:
        self.metric = metric
        self._seen: set[Labels] = set()
        self._max_series = max_series
        self._children: dict[Labels, Any] = {}  # label values -> the series, found once

    def labels(self, *values: str) -> Any:
        child = self._children.get(values)
        if child is not None:
            return child
        asked = values
        if values not in self._seen:
            if len(self._seen) >= self._max_series:
                values = (OVERFLOW,) * len(values)
            else:
                self._seen.add(values)
        child = self.metric.labels(*values)
        if asked == values:  # an overflowing label set is looked up again each time
            self._children[asked] = child
        return child


Kind = type[CounterMetricFamily | GaugeMetricFamily]
# (kind, name, help, labels after `upstream`, the reading of one upstream)
_WATCHED: Final[tuple[tuple[Kind, str, str, Labels, Callable[[Watched], float]], ...]] = (
    (
        GaugeMetricFamily,
        "held_calls",
        "Held calls waiting for the client's retry now, by upstream.",
        (),
        lambda w: w.held_now(),
    ),
    (
        GaugeMetricFamily,
        "interactive_calls",
        "MRTR-capable calls in progress now (running or held), by upstream.",
        (),
        lambda w: w.in_progress(),
    ),
    (
        CounterMetricFamily,
        "input_rounds_total",
        "InputRequiredResult rounds issued, by upstream.",
        (),
        lambda w: w.rounds_total(),
    ),
    (
        GaugeMetricFamily,
        "upstream_sessions",
        "Open upstream sessions (one process each on stdio).",
        ("transport",),
        lambda w: w.pool_stats().sessions_open,
    ),
    (
        CounterMetricFamily,
        "upstream_sessions_opened_total",
        "Upstream sessions initialized (processes started on stdio).",
        ("transport",),
        lambda w: w.pool_stats().created_total,
    ),
    (
        CounterMetricFamily,
        "upstream_session_reuses_total",
        "Leases served by a warm upstream session.",
        ("transport",),
        lambda w: w.pool_stats().reused_total,
    ),
    (
        CounterMetricFamily,
        "upstream_session_reinitializations_total",
        "Expired upstream sessions re-initialized transparently.",
        ("transport",),
        lambda w: w.pool_stats().reinitialized_total,
    ),
)


class WatchedUpstreams(Collector):
    """The families read from every watched upstream's registry and pool at scrape time, one
    series per upstream (`upstream` label)."""

    def __init__(self) -> None:
        self.watched: dict[str, Watched] = {}
        # whether each upstream answers, by its newest readiness or era check (None: not yet)
        self.up: dict[str, Callable[[], bool | None]] = {}

    def collect(self) -> Iterator[Metric]:
        watched = sorted(self.watched.items())
        for kind, name, help_text, extra, reading in _WATCHED:
            family = kind(PREFIX + name, help_text, labels=["upstream", *extra])
            for upstream, source in watched:
                values = [upstream, source.transport] if extra else [upstream]
                family.add_metric(values, reading(source))
            yield family
        up = GaugeMetricFamily(
            PREFIX + "upstream_up",
            "1 while the upstream answers (its newest readiness or era check), 0 while not.",
            labels=["upstream"],
        )
        for upstream, is_up in sorted(self.up.items()):
            answers = is_up()
            if answers is not None:  # no sample before the first check
                up.add_metric([upstream], 1.0 if answers else 0.0)
        yield up


class RequestFamilies(Collector):
    """The families requests feed (proxy/observe/request_families.py), written as the
    `prometheus_client` Counter and Histogram wrote them: the same names, samples and values."""

    def __init__(self, families: Iterable[CountFamily | DurationFamily]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        for family in self._families:
            if isinstance(family, CountFamily):
                yield _counted(family)
            else:
                yield _histogram(family)


def _counted(family: CountFamily) -> Metric:
    metric = Metric(family.name, family.help, "counter")
    names, sample = family.label_names, family.name + "_total"
    for values, count in family.counts.items():
        metric.add_sample(sample, dict(zip(names, values, strict=True)), count)
    return metric


def _histogram(family: DurationFamily) -> Metric:
    metric = Metric(family.name, family.help, "histogram")
    name, names = family.name, family.label_names
    bounds = [floatToGoString(bound) for bound in family.bounds]  # type: ignore[no-untyped-call]
    for values, observed in family.observed.items():
        labels = dict(zip(names, values, strict=True))
        cumulative = 0.0
        for le, count in zip(bounds, observed, strict=False):
            cumulative += count
            metric.add_sample(name + "_bucket", {"le": le, **labels}, cumulative)
        metric.add_sample(name + "_count", labels, cumulative)
        metric.add_sample(name + "_sum", labels, observed[-1])
    return metric


def _counter(registry: CollectorRegistry, name: str, help_text: str, *labels: str) -> Bounded:
    return Bounded(Counter(PREFIX + name, help_text, labels, registry=registry))


def _standard_collectors(registry: CollectorRegistry) -> None:
    """The series every Prometheus user expects next to the bridge's own: `process_*` (CPU,
    memory, file descriptors, start time), `python_info` and `python_gc_*`, as prometheus_client's
    default registry has them, registered on this bridge's own registry."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)


class BridgeMetrics:
    """The bridge's metric families (names in docs/operations.md): what requests feed, per upstream
    (`upstream(name)`), the families read at scrape time from every upstream's registry and pool
    (`watch`), and the replicas' own."""

    def __init__(self) -> None:
        registry = self.registry = CollectorRegistry()
        _standard_collectors(registry)
        self.families = Families(PREFIX, MAX_SERIES, LATENCY_BUCKETS)
        registry.register(RequestFamilies(self.families))
        self.http = HttpResponses(self.families.http_responses)
        self._upstreams: dict[str, UpstreamMetrics] = {}
        self.forwarded = Counter(
            PREFIX + "forwarded_retries_total",
            "Retries this replica forwarded to the "
            "replica owning their held call (the owner answered).",
            registry=registry,
        )
        self.forwarded_received = Counter(
            PREFIX + "forwarded_retries_received_total",
            "Forwarded retries this replica accepted with a valid replica proof.",
            registry=registry,
        )
        self.forward_failures = _counter(
            registry,
            "forward_failures_total",
            "Retries that could not be forwarded to their owner, by reason.",
            "reason",
        )
        self.forward_proof_rejections = _counter(
            registry,
            "forward_proof_rejections_total",
            "Requests claiming to be forwarded whose replica proof failed, by reason.",
            "reason",
        )
        self._watched = WatchedUpstreams()
        registry.register(self._watched)
        Gauge(
            PREFIX + "build_info",
            "The bridge's version (value 1).",
            ("version",),
            registry=registry,
        ).labels(version("mrtr-bridge")).set(1)
        Gauge(
            PREFIX + "start_time_seconds", "Start time, seconds since the epoch.", registry=registry
        ).set(round(time.time(), 3))

    # ---- feeding --------------------------------------------------------------------------------

    def upstream(self, name: str, path: str | None = None) -> UpstreamMetrics:
        """What the upstream `name` feeds (the same object for the same name); `path`: where its
        endpoint is served, so its HTTP responses are counted under its name."""
        if path is not None:
            self.http.upstream_at[path] = name
        metrics = self._upstreams.get(name)
        if metrics is None:
            metrics = self._upstreams[name] = UpstreamMetrics(name, self.families, self)
        return metrics

    def at_path(self, path: str) -> UpstreamMetrics:
        """The metrics of the upstream whose endpoint is at `path` (the bridge's own routes:
        `upstream=""`)."""
        return self.upstream(self.http.upstream_at.get(path, BRIDGE_ROUTES))

    def watch(self, upstream: str, source: Watched) -> None:
        """Read `upstream`'s held-call registry and pool at scrape time, beside every other
        upstream's (an engine built again for the same upstream replaces the earlier one)."""
        self._watched.watched[upstream] = source

    def watch_upstream(self, upstream: str, is_up: Callable[[], bool | None]) -> None:
        """`mrtr_bridge_upstream_up{upstream}` from `is_up` at scrape time (no sample before the
        first check); `upstream` is its name, never a URL."""
        self._watched.up[upstream] = is_up

    # ---- reading ---------------------------------------------------------------------------------

    def sample(self, name: str, **labels: str) -> float:
        """One sample's current value (0 when the series does not exist yet)."""
        value = self.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value

    def exposition(self, accept: str) -> tuple[bytes, str]:
        """(body, content type) for a scrape: OpenMetrics when `accept` asks for it, else text
        0.0.4."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type

    def render(self) -> str:
        """The Prometheus text format (0.0.4)."""
        return generate_latest(self.registry).decode()


__all__ = [
    "CONTENT_TYPE",
    "LATENCY_BUCKETS",
    "MAX_SERIES",
    "OVERFLOW",
    "Bounded",
    "BridgeMetrics",
    "RequestFamilies",
    "WatchedUpstreams",
]
