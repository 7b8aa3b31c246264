"""Closed-loop load and the statistics every figure uses (medians, p99, ratios).

`closed_loop` runs `concurrency` workers that each issue one call after another until `total`
calls have been issued: each call's latency is recorded, errors are counted (with the first
message kept), and the wall time gives the throughput. Everything is bounded by the count and by
the drivers' own timeouts.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Call = Callable[[int], Awaitable[Any]]


@dataclass
class Sample:
    """One measured batch: latencies in ms, errors, wall time."""

    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str | None = None
    elapsed_s: float = 0.0

    @property
    def calls(self) -> int:
        return len(self.latencies_ms) + self.errors

    @property
    def throughput(self) -> float:
        """Completed calls per second."""
        return len(self.latencies_ms) / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def note_error(self, exc: BaseException) -> None:
        self.errors += 1
        if self.first_error is None:
            self.first_error = f"{type(exc).__name__}: {exc}"[:300]

    def merge(self, other: Sample) -> None:
        self.latencies_ms += other.latencies_ms
        self.errors += other.errors
        self.first_error = self.first_error or other.first_error
        self.elapsed_s += other.elapsed_s


async def timed(call: Call, index: int, sample: Sample) -> Any:
    """Run one call, recording its latency (or its error) into `sample`."""
    started = time.perf_counter()
    try:
        value = await call(index)
    except Exception as exc:  # counted, never fatal: the figure reports its errors
        sample.note_error(exc)
        return None
    sample.latencies_ms.append((time.perf_counter() - started) * 1000)
    return value


async def closed_loop(workers: Sequence[Call], total: int) -> Sample:
    """`len(workers)` concurrent closed loops sharing `total` calls; worker i uses `workers[i]`."""
    sample = Sample()
    issued = 0

    async def worker(call: Call) -> None:
        nonlocal issued
        while issued < total:
            index = issued
            issued += 1
            await timed(call, index, sample)

    started = time.perf_counter()
    await asyncio.gather(*(worker(call) for call in workers))
    sample.elapsed_s = time.perf_counter() - started
    return sample


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), nearest-rank on sorted values; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ratio(bridge: float, direct: float) -> float:
    return bridge / direct if direct else float("nan")


async def alternating(calls: Sequence[Call], rounds: int) -> list[Sample]:
    """Call each of `calls` once per round, rotating who goes first; one sample per call.

    For concurrency 1: every path sees the same moment of a noisy machine. A sample's
    `elapsed_s` is the sum of its calls' durations, so its throughput is calls per busy second."""
    samples = [Sample() for _ in calls]
    for index in range(rounds):
        for offset in range(len(calls)):
            which = (index + offset) % len(calls)
            started = time.perf_counter()
            await timed(calls[which], index, samples[which])
            samples[which].elapsed_s += time.perf_counter() - started
    return samples
