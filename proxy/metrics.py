"""Prometheus text exposition (format 0.0.4) for the bridge, with no extra dependency (DESIGN § 10).

Three metric kinds: `Counter`, `Gauge` and `Histogram` (fixed buckets). Every family has a fixed
tuple of label names and a cap on distinct label sets, so a hostile client can never grow the
output without bound; label values are also bounded by `BridgeMetrics`, which maps anything it
does not know to `other`. A family may instead read its value from a function at scrape time
(`set_function`), which is how the held-call registry and the upstream pool are exposed without
bookkeeping of their own. Asyncio only: no locks, no threads; a scrape renders synchronously.

`BridgeMetrics` names the bridge's metrics (listed in docs/operations.md) and classifies engine
outcomes and errors into them. Label values never carry a secret: methods, outcomes, codes,
limit names, rejection reasons, error classes and HTTP statuses only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import version
from typing import Any, ClassVar, Final, Protocol

from translators.eras import MODERN_METHODS, RESULT_INPUT_REQUIRED
from translators.errors import (
    BridgeError,
    InvalidRequestState,
    LimitExceeded,
    UpstreamFault,
    UpstreamReturnedError,
)

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
PREFIX: Final = "mrtr_bridge_"
MAX_SERIES: Final = 512  # distinct label sets per family; beyond it, samples fold into OVERFLOW
OVERFLOW: Final = "_overflow"
OTHER: Final = "other"
LATENCY_BUCKETS: Final[tuple[float, ...]] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip
REQUEST_STATE_REASONS: Final[frozenset[str]] = frozenset(
    {"malformed", "unknown_key", "authentication_failed", "expired", "other_principal", "other_request",
     "other_replica", "stale_round", "unknown_held_call", "not_waiting", "already_used"}
)  # fmt: skip
Labels = tuple[str, ...]


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """A sample value as Prometheus writes it: integers without a fraction, `+Inf`, `NaN`."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def _series(name: str, names: Labels, values: Labels, value: float) -> str:
    if not names:
        return f"{name} {format_value(value)}"
    pairs = ",".join(f'{label}="{_escape_label(item)}"' for label, item in zip(names, values, strict=True))
    return f"{name}{{{pairs}}} {format_value(value)}"


class _Family:
    """One metric family: a name, a help line, label names and its series."""

    kind: ClassVar[str] = "untyped"

    def __init__(self, name: str, help_text: str, labels: Labels = (), *, max_series: int = MAX_SERIES) -> None:
        self.name = name
        self.help = help_text
        self.label_names = labels
        self._max_series = max_series
        self._values: dict[Labels, Any] = {}
        self._function: Callable[[], Mapping[Labels, float]] | None = None

    def _key(self, values: Labels) -> Labels:
        if len(values) != len(self.label_names):
            raise ValueError(f"{self.name} takes labels {self.label_names}, got {values}")
        if values in self._values or len(self._values) < self._max_series:
            return values
        return (OVERFLOW,) * len(values)

    def set_function(self, function: Callable[[], Mapping[Labels, float]]) -> None:
        """Read the family's samples from `function` at scrape time (label values -> value)."""
        self._function = function

    def _lines(self) -> Iterable[str]:
        samples = self._function() if self._function is not None else self._values
        for values, value in sorted(samples.items()):
            yield _series(self.name, self.label_names, values, value)

    def render(self) -> list[str]:
        head = [f"# HELP {self.name} {_escape_help(self.help)}", f"# TYPE {self.name} {self.kind}"]
        return head + list(self._lines())


class Counter(_Family):
    """A monotonically increasing count; its name ends in `_total`."""

    kind = "counter"

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up")
        key = self._key(labels)
        self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, *labels: str) -> float:
        return float(self._values.get(labels, 0.0))


class Gauge(_Family):
    """A value that goes up and down."""

    kind = "gauge"

    def set(self, value: float, *labels: str) -> None:
        self._values[self._key(labels)] = value

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        key = self._key(labels)
        self._values[key] = self._values.get(key, 0.0) + amount


class _Buckets:
    __slots__ = ("count", "counts", "total")

    def __init__(self, size: int) -> None:
        self.counts = [0] * size
        self.count = 0
        self.total = 0.0


class Histogram(_Family):
    """Observations counted into fixed cumulative buckets, with their sum and count."""

    kind = "histogram"

    def __init__(self, name: str, help_text: str, labels: Labels = (), *,
                 buckets: tuple[float, ...] = LATENCY_BUCKETS, max_series: int = MAX_SERIES) -> None:
        if list(buckets) != sorted(set(buckets)) or not buckets:
            raise ValueError("histogram buckets must be distinct and increasing")
        super().__init__(name, help_text, labels, max_series=max_series)
        self.buckets = buckets

    def observe(self, value: float, *labels: str) -> None:
        key = self._key(labels)
        state = self._values.get(key)
        if state is None:
            state = self._values[key] = _Buckets(len(self.buckets))
        for index, bound in enumerate(self.buckets):
            if value <= bound:
                state.counts[index] += 1
                break
        state.count += 1
        state.total += value

    def count(self, *labels: str) -> int:
        state = self._values.get(labels)
        return state.count if state is not None else 0

    def _lines(self) -> Iterable[str]:
        names = (*self.label_names, "le")
        for values, state in sorted(self._values.items()):
            running = 0
            for bound, count in zip(self.buckets, state.counts, strict=True):
                running += count
                yield _series(f"{self.name}_bucket", names, (*values, format_value(bound)), running)
            yield _series(f"{self.name}_bucket", names, (*values, "+Inf"), state.count)
            yield _series(f"{self.name}_sum", self.label_names, values, state.total)
            yield _series(f"{self.name}_count", self.label_names, values, state.count)


class Registry:
    """The families one `/metrics` scrape renders, in registration order."""

    def __init__(self) -> None:
        self._families: dict[str, _Family] = {}

    def add(self, family: _Family) -> Any:
        if family.name in self._families:
            raise ValueError(f"metric {family.name} is already registered")
        self._families[family.name] = family
        return family

    def render(self) -> str:
        lines: list[str] = []
        for family in self._families.values():
            lines.extend(family.render())
        return "\n".join(lines) + "\n"


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


class BridgeMetrics:
    """The bridge's metric families (names in docs/operations.md) and how outcomes feed them."""

    def __init__(self) -> None:
        registry = self.registry = Registry()
        self.requests: Counter = registry.add(Counter(
            PREFIX + "requests_total", "Modern requests answered by the engine, by method and outcome "
            "(complete, input_required, error, cancelled).", ("method", "outcome")))
        self.request_seconds: Histogram = registry.add(Histogram(
            PREFIX + "request_duration_seconds", "Time the engine took to answer one modern request.",
            ("method", "outcome")))
        self.request_errors: Counter = registry.add(Counter(
            PREFIX + "request_errors_total", "Error responses by method and JSON-RPC code.", ("method", "code")))
        self.state_rejections: Counter = registry.add(Counter(
            PREFIX + "request_state_rejections_total", "Retries whose requestState was refused, by reason.",
            ("reason",)))
        self.limit_rejections: Counter = registry.add(Counter(
            PREFIX + "limit_rejections_total", "Requests refused by a configured limit, by setting name.",
            ("limit",)))
        self.upstream_errors: Counter = registry.add(Counter(
            PREFIX + "upstream_errors_total", "Failed upstream exchanges seen by front requests, by kind.",
            ("kind",)))
        self.http_responses: Counter = registry.add(Counter(
            PREFIX + "http_responses_total", "HTTP responses of the modern endpoint and health routes, by status.",
            ("status",)))
        self._add_runtime_families(registry)

    def _add_runtime_families(self, registry: Registry) -> None:
        self.held_calls: Gauge = registry.add(Gauge(
            PREFIX + "held_calls", "Held calls waiting for the client's retry now."))
        self.interactive_calls: Gauge = registry.add(Gauge(
            PREFIX + "interactive_calls", "MRTR-capable calls in progress now (running or held)."))
        self.rounds: Counter = registry.add(Counter(
            PREFIX + "input_rounds_total", "InputRequiredResult rounds issued."))
        self.upstream_sessions: Gauge = registry.add(Gauge(
            PREFIX + "upstream_sessions", "Open upstream sessions (one process each on stdio).", ("transport",)))
        self.upstream_sessions_opened: Counter = registry.add(Counter(
            PREFIX + "upstream_sessions_opened_total", "Upstream sessions initialized (processes started on stdio).",
            ("transport",)))
        self.upstream_sessions_reused: Counter = registry.add(Counter(
            PREFIX + "upstream_session_reuses_total", "Leases served by a warm upstream session.", ("transport",)))
        self.upstream_reinitialized: Counter = registry.add(Counter(
            PREFIX + "upstream_session_reinitializations_total",
            "Expired upstream sessions re-initialized transparently.", ("transport",)))
        info: Gauge = registry.add(Gauge(PREFIX + "build_info", "The bridge's version (value 1).", ("version",)))
        info.set(1, version("mrtr-bridge"))
        started: Gauge = registry.add(Gauge(PREFIX + "start_time_seconds", "Start time, seconds since the epoch."))
        started.set(round(time.time(), 3))

    # ---- feeding --------------------------------------------------------------------------------

    def watch(self, *, held_now: Callable[[], int], in_progress: Callable[[], int],
              rounds_total: Callable[[], int], pool_stats: Callable[[], PoolStatsSource], transport: str) -> None:
        """Read the held-call registry and the upstream pool at scrape time."""
        self.held_calls.set_function(lambda: {(): held_now()})
        self.interactive_calls.set_function(lambda: {(): in_progress()})
        self.rounds.set_function(lambda: {(): rounds_total()})
        self.upstream_sessions.set_function(lambda: {(transport,): pool_stats().sessions_open})
        self.upstream_sessions_opened.set_function(lambda: {(transport,): pool_stats().created_total})
        self.upstream_sessions_reused.set_function(lambda: {(transport,): pool_stats().reused_total})
        self.upstream_reinitialized.set_function(lambda: {(transport,): pool_stats().reinitialized_total})

    def observe_response(self, method: str, response: Mapping[str, Any], seconds: float) -> None:
        """One engine answer: its outcome, its latency and, for an error, its code."""
        outcome, code = outcome_of(response)
        label = method_label(method)
        self.requests.inc(label, outcome)
        self.request_seconds.observe(seconds, label, outcome)
        if code is not None:
            self.request_errors.inc(label, code)

    def observe_cancelled(self, method: str, seconds: float) -> None:
        """A request whose client went away (or that shutdown cancelled) before its answer."""
        label = method_label(method)
        self.requests.inc(label, "cancelled")
        self.request_seconds.observe(seconds, label, "cancelled")

    def observe_error(self, exc: BridgeError) -> None:
        """Classify a bridge error: requestState rejection, limit, or upstream failure."""
        if isinstance(exc, InvalidRequestState):
            self.state_rejections.inc(exc.reason if exc.reason in REQUEST_STATE_REASONS else OTHER)
        elif isinstance(exc, LimitExceeded):
            limit = exc.data.get("limit") if isinstance(exc.data, dict) else None
            self.limit_rejections.inc(limit if isinstance(limit, str) and len(limit) <= 64 else OTHER)
        elif isinstance(exc, UpstreamReturnedError):
            self.upstream_errors.inc("jsonrpc_error")
        elif isinstance(exc, UpstreamFault):
            self.upstream_errors.inc(type(exc).__name__)

    def observe_http(self, status: int) -> None:
        self.http_responses.inc(str(status) if 100 <= status <= 599 else OTHER)

    def render(self) -> str:
        return self.registry.render()


__all__ = [
    "CONTENT_TYPE",
    "LATENCY_BUCKETS",
    "BridgeMetrics",
    "Counter",
    "Gauge",
    "Histogram",
    "PoolStatsSource",
    "Registry",
    "format_value",
    "method_label",
    "outcome_of",
]
