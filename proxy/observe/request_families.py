"""What requests feed into the metrics: the only part of them a request enters (issue 41).

Each upstream feeds its own `UpstreamMetrics` (its name first in every label set); the HTTP
responses are counted by `HttpResponses` from aiohttp's response signal. The families are plain
numbers (`CountFamily`, `DurationFamily`): an increment is one dictionary update where a
`prometheus_client` Counter or Histogram child takes a lock and three Python calls (about a tenth
of what the bridge itself spends on a forwarded call, with the lookups around them). The bridge
feeds them from its event loop only, so there is nothing to lock. The scrape-time side (the
registry, the families read at scrape time, the exposition of these numbers) is
proxy/observe/metrics.py, which requests never enter.

Label values stay bounded whatever a client sends: methods, outcomes, codes, limit names, rejection
reasons, error classes and HTTP statuses only, mapped to `other` when the bridge does not know
them. The first label of every family here is the upstream's name (configured, so bounded), and
each upstream's label sets are capped at `max_series` per family, later ones counted under
`_overflow` with the upstream kept: one upstream's flood never folds another's series.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from translators.protocol.eras import MODERN_METHODS, RESULT_INPUT_REQUIRED
from translators.wire.errors import (
    BridgeError,
    InvalidRequestState,
    LimitExceeded,
    UpstreamFault,
    UpstreamReturnedError,
)

Labels = tuple[str, ...]
OVERFLOW: Final = "_overflow"
OTHER: Final = "other"
BRIDGE_ROUTES: Final = ""  # the `upstream` of a response no upstream's endpoint sent (/healthz…)


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


class _Series:
    """Label sets in order of first use, at most `max_series` distinct ones per upstream (the
    first label)."""

    def __init__(self, max_series: int) -> None:
        self._max_series = max_series
        self._distinct: dict[str, int] = {}

    def admit(self, values: Labels) -> Labels:
        """A label set not seen before: itself, or its upstream's overflow set once `max_series`
        distinct sets of that upstream are in use."""
        upstream = values[0]
        used = self._distinct.get(upstream, 0)
        if used >= self._max_series:
            return (upstream,) + (OVERFLOW,) * (len(values) - 1)
        self._distinct[upstream] = used + 1
        return values


class CountFamily:
    """A labelled counter (`name` ends in `_total`), its first label the upstream."""

    def __init__(self, name: str, help_text: str, label_names: Labels, max_series: int) -> None:
        self.name = name.removesuffix("_total")  # the family's name, as prometheus_client's
        self.help = help_text
        self.label_names = label_names
        self._series = _Series(max_series)
        self.counts: dict[Labels, float] = {}

    def inc(self, values: Labels) -> None:
        counts = self.counts
        count = counts.get(values)
        if count is None:
            values = self._series.admit(values)
            count = counts.get(values, 0.0)
        counts[values] = count + 1.0


class DurationFamily:
    """A labelled histogram of seconds, its first label the upstream."""

    def __init__(
        self,
        name: str,
        help_text: str,
        label_names: Labels,
        buckets: tuple[float, ...],
        max_series: int,
    ) -> None:
        self.name = name
        self.help = help_text
        self.label_names = label_names
        self._series = _Series(max_series)
        self.bounds = (*buckets, float("inf"))
        # per label set: the count of each bucket (not cumulative), then the sum
        self.observed: dict[Labels, list[float]] = {}

    def observe(self, values: Labels, seconds: float) -> None:
        observed = self.observed.get(values)
        if observed is None:
            values = self._series.admit(values)
            observed = self.observed.get(values)
            if observed is None:
                observed = self.observed[values] = [0.0] * (len(self.bounds) + 1)
        observed[bisect_left(self.bounds, seconds)] += 1.0  # the first bound >= seconds
        observed[-1] += seconds


class Families:
    """The families requests feed, one of each per bridge (names `prefix` + ...); each upstream's
    `UpstreamMetrics` and the `HttpResponses` write into them."""

    def __init__(self, prefix: str, max_series: int, buckets: tuple[float, ...]) -> None:
        def count(name: str, help_text: str, labels: Labels) -> CountFamily:
            return CountFamily(prefix + name, help_text, labels, max_series)

        def duration(name: str, help_text: str, labels: Labels) -> DurationFamily:
            return DurationFamily(prefix + name, help_text, labels, buckets, max_series)

        self.requests = count(
            "requests_total",
            "Modern requests answered by the engine, by upstream, method "
            "and outcome (complete, input_required, error, cancelled).",
            ("upstream", "method", "outcome"),
        )
        self.request_seconds = duration(
            "request_duration_seconds",
            "Time the engine took to answer one modern request.",
            ("upstream", "method", "outcome"),
        )
        self.request_errors = count(
            "request_errors_total",
            "Error responses by upstream, method and JSON-RPC code.",
            ("upstream", "method", "code"),
        )
        self.state_rejections = count(
            "request_state_rejections_total",
            "Retries whose requestState was refused, by upstream and reason.",
            ("upstream", "reason"),
        )
        self.recovered_calls = count(
            "recovered_calls_total",
            "Lost held calls started again upstream "
            "(recovery), by upstream and cause (lost, expired, owner_unreachable).",
            ("upstream", "cause"),
        )
        self.recovery_refusals = count(
            "recovery_refusals_total",
            "Lost held calls not started again, by upstream and the policy that refused.",
            ("upstream", "reason"),
        )
        self.limit_rejections = count(
            "limit_rejections_total",
            "Requests refused by a configured limit, by upstream and setting name.",
            ("upstream", "limit"),
        )
        self.upstream_errors = count(
            "upstream_errors_total",
            "Failed upstream exchanges seen by front requests, by upstream and kind.",
            ("upstream", "kind"),
        )
        self.http_responses = count(
            "http_responses_total",
            "HTTP responses by upstream (empty: the bridge's own routes) and status.",
            ("upstream", "status"),
        )

    def __iter__(self) -> Iterator[CountFamily | DurationFamily]:
        """Every family, in the order of the exposition."""
        return iter(vars(self).values())


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


@dataclass(frozen=True)
class Watched:
    """One upstream's held-call registry and pool, as the bridge reads them at scrape time."""

    held_now: Callable[[], int]
    in_progress: Callable[[], int]
    rounds_total: Callable[[], int]
    pool_stats: Callable[[], PoolStatsSource]
    transport: str


class BridgeReading(Protocol):
    """What an upstream's metrics hand to the bridge's (`proxy.observe.metrics.BridgeMetrics`):
    its readers for scrape time, and a reading of one sample."""

    def watch(self, upstream: str, source: Watched) -> None: ...

    def watch_upstream(self, upstream: str, is_up: Callable[[], bool | None]) -> None: ...

    def sample(self, name: str, **labels: str) -> float: ...


class UpstreamMetrics:
    """What one upstream's requests feed, its name in every label set: the engine's answers, the
    errors the bridge answers for it (engine, legacy relay, reverse direction) and its recoveries.
    """

    __slots__ = ("_bridge", "_families", "name")

    def __init__(self, name: str, families: Families, bridge: BridgeReading) -> None:
        self.name = name
        self._families = families
        self._bridge = bridge

    def observe_response(self, method: str, response: Mapping[str, Any], seconds: float) -> None:
        """One engine answer: its outcome, its latency and, for an error, its code."""
        outcome, code = outcome_of(response)
        labels = (self.name, method if method in MODERN_METHODS else OTHER, outcome)
        families = self._families
        families.requests.inc(labels)
        families.request_seconds.observe(labels, seconds)
        if code is not None:
            families.request_errors.inc((*labels[:2], code))

    def observe_cancelled(self, method: str, seconds: float) -> None:
        """A request whose client went away (or that shutdown cancelled) before its answer."""
        label = method_label(method)
        self._families.requests.inc((self.name, label, "cancelled"))
        self._families.request_seconds.observe((self.name, label, "cancelled"), seconds)

    def observe_error(self, exc: BridgeError) -> None:
        """Classify a bridge error: requestState rejection, limit, or upstream failure."""
        families = self._families
        if isinstance(exc, InvalidRequestState):  # a RejectionReason: a bounded set
            families.state_rejections.inc((self.name, exc.reason.value))
        elif isinstance(exc, LimitExceeded):
            limit = exc.limit if len(exc.limit) <= 64 else OTHER
            families.limit_rejections.inc((self.name, limit))
        elif isinstance(exc, UpstreamReturnedError):
            families.upstream_errors.inc((self.name, "jsonrpc_error"))
        elif isinstance(exc, UpstreamFault):
            families.upstream_errors.inc((self.name, type(exc).__name__))

    def observe_recovered(self, cause: str) -> None:
        self._families.recovered_calls.inc((self.name, cause))

    def observe_recovery_refused(self, reason: str) -> None:
        self._families.recovery_refusals.inc((self.name, reason))

    def watch(self, source: Watched) -> None:
        """Have the bridge read this upstream's held calls and pool at scrape time."""
        self._bridge.watch(self.name, source)

    def watch_up(self, is_up: Callable[[], bool | None]) -> None:
        """Have the bridge say at scrape time whether this upstream answers (`upstream_up`)."""
        self._bridge.watch_upstream(self.name, is_up)

    def sample(self, name: str, **labels: str) -> float:
        """One sample of this upstream's series (0 when it does not exist yet)."""
        return self._bridge.sample(name, upstream=self.name, **labels)


class HttpResponses:
    """Every HTTP response counted by upstream (the one whose endpoint is at the request's path)
    and status as it is sent."""

    def __init__(self, family: CountFamily) -> None:
        self._family = family
        self.upstream_at: dict[str, str] = {}  # endpoint path -> upstream name

    async def on_response_prepare(self, request: Any, response: Any) -> None:
        """aiohttp's response signal: aiohttp's own 400s for oversized headers excepted; a signal
        rather than a middleware, which would wrap every handler in two more coroutines."""
        status = response.status
        upstream = self.upstream_at.get(request.path, BRIDGE_ROUTES)
        self._family.inc((upstream, str(status) if 100 <= status <= 599 else OTHER))


__all__ = [
    "BRIDGE_ROUTES",
    "OTHER",
    "OVERFLOW",
    "BridgeReading",
    "CountFamily",
    "DurationFamily",
    "Families",
    "HttpResponses",
    "PoolStatsSource",
    "UpstreamMetrics",
    "Watched",
    "method_label",
    "outcome_of",
]
