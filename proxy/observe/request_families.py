"""The metric families every request feeds (`requests_total`, `request_duration_seconds`,
`request_errors_total`, `http_responses_total`), kept as plain numbers and read at scrape time.

A `prometheus_client` Counter or Histogram child takes a lock and three Python calls per
increment (about a tenth of what the bridge itself spends on a forwarded call, with the lookups
around them); here an increment is one dictionary update. The bridge feeds them from its event loop
only, so there is nothing to lock. The exposition is the one the `prometheus_client` families wrote:
the same names, samples, label order and values (tests/engine/test_metrics_exposition.py), and, as
`Bounded` does, at most `max_series` label sets, later ones counted under `_overflow`.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterator
from typing import Final

from prometheus_client.core import Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

Labels = tuple[str, ...]
OVERFLOW: Final = "_overflow"


class _Series:
    """Label sets in order of first use, at most `max_series` distinct ones."""

    def __init__(self, max_series: int) -> None:
        self._max_series = max_series
        self._distinct = 0

    def admit(self, values: Labels) -> Labels:
        """A label set not seen before: itself, or the overflow set once `max_series` distinct sets
        are in use."""
        if self._distinct >= self._max_series:
            return (OVERFLOW,) * len(values)
        self._distinct += 1
        return values


class CountFamily(Collector):
    """A labelled counter (`name` ends in `_total`)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        name: str,
        help_text: str,
        label_names: Labels,
        max_series: int,
    ) -> None:
        self.name = name.removesuffix("_total")  # the family's name, as prometheus_client's
        self.label_names = label_names
        self._help = help_text
        self._series = _Series(max_series)
        self._counts: dict[Labels, float] = {}
        registry.register(self)

    def inc(self, values: Labels) -> None:
        counts = self._counts
        count = counts.get(values)
        if count is None:
            values = self._series.admit(values)
            count = counts.get(values, 0.0)
        counts[values] = count + 1.0

    def collect(self) -> Iterator[Metric]:
        metric = Metric(self.name, self._help, "counter")
        names, sample = self.label_names, self.name + "_total"
        for values, count in self._counts.items():
            metric.add_sample(sample, dict(zip(names, values, strict=True)), count)
        yield metric


class DurationFamily(Collector):
    """A labelled histogram of seconds."""

    def __init__(
        self,
        registry: CollectorRegistry,
        name: str,
        help_text: str,
        label_names: Labels,
        buckets: tuple[float, ...],
        max_series: int,
    ) -> None:
        self.name = name
        self.label_names = label_names
        self._help = help_text
        self._series = _Series(max_series)
        self._bounds = (*buckets, math.inf)
        self._le = tuple(floatToGoString(bound) for bound in self._bounds)  # type: ignore[no-untyped-call]
        # per label set: the count of each bucket (not cumulative), then the sum
        self._observed: dict[Labels, list[float]] = {}
        registry.register(self)

    def observe(self, values: Labels, seconds: float) -> None:
        observed = self._observed.get(values)
        if observed is None:
            values = self._series.admit(values)
            observed = self._observed.get(values)
            if observed is None:
                observed = self._observed[values] = [0.0] * (len(self._bounds) + 1)
        observed[bisect_left(self._bounds, seconds)] += 1.0  # the first bound >= seconds
        observed[-1] += seconds

    def collect(self) -> Iterator[Metric]:
        metric = Metric(self.name, self._help, "histogram")
        name, names = self.name, self.label_names
        for values, observed in self._observed.items():
            labels = dict(zip(names, values, strict=True))
            cumulative = 0.0
            for le, count in zip(self._le, observed, strict=False):
                cumulative += count
                metric.add_sample(name + "_bucket", {"le": le, **labels}, cumulative)
            metric.add_sample(name + "_count", labels, cumulative)
            metric.add_sample(name + "_sum", labels, observed[-1])
        yield metric


__all__ = ["OVERFLOW", "CountFamily", "DurationFamily"]
