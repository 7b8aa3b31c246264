"""The bridge's Prometheus metrics, on `prometheus_client` (names and labels in docs/operations.md).

Each `BridgeMetrics` owns its own `CollectorRegistry` (never the process-global one), so several
bridges in one process never collide. `exposition(accept)` renders it in the format the scraper
asks for: the Prometheus text format 0.0.4 by default, OpenMetrics 1.0 when `Accept` names
`application/openmetrics-text`.

Label cardinality stays bounded whatever a client sends: label values are methods, outcomes, codes,
limit names, rejection reasons, error classes and HTTP statuses only, mapped to `other` when the
bridge does not know them, and every family folds label sets beyond `MAX_SERIES` into `_overflow`.
Label values never carry a secret. The held-call registry and the upstream pool are read at scrape
time (`watch`), so they keep no bookkeeping of their own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from importlib.metadata import version
from typing import Any, Final, Protocol

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

from proxy.observe.request_families import OVERFLOW, CountFamily, DurationFamily
from translators.protocol.eras import MODERN_METHODS, RESULT_INPUT_REQUIRED
from translators.wire.errors import (
    BridgeError,
    InvalidRequestState,
    LimitExceeded,
    UpstreamFault,
    UpstreamReturnedError,
)

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
PREFIX: Final = "mrtr_bridge_"
MAX_SERIES: Final = 512  # distinct label sets per family; beyond it, samples fold into OVERFLOW
OTHER: Final = "other"
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
Reading = Callable[[], Mapping[Labels, float]]

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


class ScrapeTimeFamilies(Collector):
    """Families whose samples are read from functions at scrape time (label values -> value)."""

    def __init__(self) -> None:
        self._families: dict[
            str, tuple[type[CounterMetricFamily | GaugeMetricFamily], str, Labels, Reading]
        ] = {}

    def add(
        self,
        kind: type[CounterMetricFamily | GaugeMetricFamily],
        name: str,
        help_text: str,
        labels: Labels = (),
    ) -> None:
        self._families[name] = (kind, help_text, labels, dict)

    def read_from(self, name: str, reading: Reading) -> None:
        kind, help_text, labels, _ = self._families[name]
        self._families[name] = (kind, help_text, labels, reading)

    def collect(self) -> Iterator[Metric]:
        for name, (kind, help_text, labels, reading) in self._families.items():
            family = kind(name, help_text, labels=list(labels))
            for values, value in sorted(reading().items()):
                family.add_metric(list(values), value)
            yield family


class PoolStatsSource(Protocol):
    """What the metrics read from `UpstreamPool.stats()`."""

    @property
    def sessions_open(self) -> int: ...

    @property
    def created_total(self) -> int: ...

    @property
    def reused_total(self) -> int: ...

    @property
    def reinitialized_total(self) -> int: ...


def method_label(method: str) -> str:
    """A bounded label for a request method: the modern methods by name, anything else `other`."""
    return method if method in MODERN_METHODS else OTHER


def outcome_of(response: Mapping[str, Any]) -> tuple[str, str | None]:
    """(outcome, error code) of one JSON-RPC response: complete, input_required or error."""
    error = response.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        return "error", str(code) if isinstance(code, int) and not isinstance(code, bool) else OTHER
    result = response.get("result")
    if isinstance(result, dict) and result.get("resultType") == RESULT_INPUT_REQUIRED:
        return RESULT_INPUT_REQUIRED, None
    return "complete", None


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
    """The bridge's metric families (names in docs/operations.md) and how outcomes feed them."""

    def __init__(self) -> None:
        registry = self.registry = CollectorRegistry()
        _standard_collectors(registry)
        # fed by every request: plain numbers (proxy/observe/request_families.py)
        self.requests = CountFamily(
            registry,
            PREFIX + "requests_total",
            "Modern requests answered by the engine, by method "
            "and outcome (complete, input_required, error, cancelled).",
            ("method", "outcome"),
            MAX_SERIES,
        )
        self.request_seconds = DurationFamily(
            registry,
            PREFIX + "request_duration_seconds",
            "Time the engine took to answer one modern request.",
            ("method", "outcome"),
            LATENCY_BUCKETS,
            MAX_SERIES,
        )
        self.request_errors = CountFamily(
            registry,
            PREFIX + "request_errors_total",
            "Error responses by method and JSON-RPC code.",
            ("method", "code"),
            MAX_SERIES,
        )
        self.state_rejections = _counter(
            registry,
            "request_state_rejections_total",
            "Retries whose requestState was refused, by reason.",
            "reason",
        )
        self.recovered_calls = _counter(
            registry,
            "recovered_calls_total",
            "Lost held calls started again upstream "
            "(recovery), by cause (lost, expired, owner_unreachable).",
            "cause",
        )
        self.recovery_refusals = _counter(
            registry,
            "recovery_refusals_total",
            "Lost held calls not started again, by the policy that refused.",
            "reason",
        )
        self.limit_rejections = _counter(
            registry,
            "limit_rejections_total",
            "Requests refused by a configured limit, by setting name.",
            "limit",
        )
        self.upstream_errors = _counter(
            registry,
            "upstream_errors_total",
            "Failed upstream exchanges seen by front requests, by kind.",
            "kind",
        )
        self.http_responses = CountFamily(
            registry,
            PREFIX + "http_responses_total",
            "HTTP responses of the modern endpoint and health routes, by status.",
            ("status",),
            MAX_SERIES,
        )
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
        self.scraped = self._runtime_families()
        registry.register(self.scraped)
        Gauge(
            PREFIX + "build_info",
            "The bridge's version (value 1).",
            ("version",),
            registry=registry,
        ).labels(version("mrtr-bridge")).set(1)
        Gauge(
            PREFIX + "start_time_seconds", "Start time, seconds since the epoch.", registry=registry
        ).set(round(time.time(), 3))

    @staticmethod
    def _runtime_families() -> ScrapeTimeFamilies:
        families = ScrapeTimeFamilies()
        counter, gauge = CounterMetricFamily, GaugeMetricFamily
        families.add(gauge, PREFIX + "held_calls", "Held calls waiting for the client's retry now.")
        families.add(
            gauge,
            PREFIX + "interactive_calls",
            "MRTR-capable calls in progress now (running or held).",
        )
        families.add(counter, PREFIX + "input_rounds_total", "InputRequiredResult rounds issued.")
        families.add(
            gauge,
            PREFIX + "upstream_up",
            "1 while the upstream answers (its newest readiness or era check), 0 while not.",
            ("upstream",),
        )
        families.add(
            gauge,
            PREFIX + "upstream_sessions",
            "Open upstream sessions (one process each on stdio).",
            ("transport",),
        )
        families.add(
            counter,
            PREFIX + "upstream_sessions_opened_total",
            "Upstream sessions initialized (processes started on stdio).",
            ("transport",),
        )
        families.add(
            counter,
            PREFIX + "upstream_session_reuses_total",
            "Leases served by a warm upstream session.",
            ("transport",),
        )
        families.add(
            counter,
            PREFIX + "upstream_session_reinitializations_total",
            "Expired upstream sessions re-initialized transparently.",
            ("transport",),
        )
        return families

    # ---- feeding --------------------------------------------------------------------------------

    def watch(
        self,
        *,
        held_now: Callable[[], int],
        in_progress: Callable[[], int],
        rounds_total: Callable[[], int],
        pool_stats: Callable[[], PoolStatsSource],
        transport: str,
    ) -> None:
        """Read the held-call registry and the upstream pool at scrape time."""
        read = self.scraped.read_from
        read(PREFIX + "held_calls", lambda: {(): held_now()})
        read(PREFIX + "interactive_calls", lambda: {(): in_progress()})
        read(PREFIX + "input_rounds_total", lambda: {(): rounds_total()})
        read(PREFIX + "upstream_sessions", lambda: {(transport,): pool_stats().sessions_open})
        read(
            PREFIX + "upstream_sessions_opened_total",
            lambda: {(transport,): pool_stats().created_total},
        )
        read(
            PREFIX + "upstream_session_reuses_total",
            lambda: {(transport,): pool_stats().reused_total},
        )
        read(
            PREFIX + "upstream_session_reinitializations_total",
            lambda: {(transport,): pool_stats().reinitialized_total},
        )

    def watch_upstream(self, upstream: str, is_up: Callable[[], bool | None]) -> None:
        """`mrtr_bridge_upstream_up{upstream}` from `is_up` at scrape time (no sample before the
        first check); `upstream` is its name, never a URL."""
        self.scraped.read_from(
            PREFIX + "upstream_up",
            lambda: {} if (up := is_up()) is None else {(upstream,): 1.0 if up else 0.0},
        )

    def observe_response(self, method: str, response: Mapping[str, Any], seconds: float) -> None:
        """One engine answer: its outcome, its latency and, for an error, its code."""
        outcome, code = outcome_of(response)
        label = method_label(method)
        self.requests.inc((label, outcome))
        self.request_seconds.observe((label, outcome), seconds)
        if code is not None:
            self.request_errors.inc((label, code))

    def observe_cancelled(self, method: str, seconds: float) -> None:
        """A request whose client went away (or that shutdown cancelled) before its answer."""
        label = method_label(method)
        self.requests.inc((label, "cancelled"))
        self.request_seconds.observe((label, "cancelled"), seconds)

    def observe_error(self, exc: BridgeError) -> None:
        """Classify a bridge error: requestState rejection, limit, or upstream failure."""
        if isinstance(exc, InvalidRequestState):
            self.state_rejections.labels(exc.reason.value).inc()  # a RejectionReason: a bounded set
        elif isinstance(exc, LimitExceeded):
            self.limit_rejections.labels(exc.limit if len(exc.limit) <= 64 else OTHER).inc()
        elif isinstance(exc, UpstreamReturnedError):
            self.upstream_errors.labels("jsonrpc_error").inc()
        elif isinstance(exc, UpstreamFault):
            self.upstream_errors.labels(type(exc).__name__).inc()

    def observe_http(self, status: int) -> None:
        self.http_responses.inc((str(status) if 100 <= status <= 599 else OTHER,))

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
    "PoolStatsSource",
    "ScrapeTimeFamilies",
    "method_label",
    "outcome_of",
]
