"""A figure: one measured comparison of the bridge against direct, with its target and verdict."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from load import Sample, median, percentile

Check = Callable[[float], bool]


@dataclass
class Figure:
    """`value` is the comparison (a ratio `bridge / direct`, or a delta `bridge - direct`)."""

    key: str
    label: str
    unit: str
    bridge: float | None
    direct: float | None
    comparison: str  # "ratio", "delta", or "" for a figure with no direct counterpart
    value: float | None
    target: str = ""
    verdict: str = "info"  # PASS, MISS or info
    errors: dict[str, int] = field(default_factory=dict)
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    detail: str = ""  # one short line for the table

    def as_json(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = _clean(asdict(self))
        return cleaned


def _clean(value: Any) -> Any:
    """JSON-ready: floats rounded, NaN as null."""
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 4)
    if isinstance(value, dict):
        return {key: _clean(inner) for key, inner in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(inner) for inner in value]
    return value


def verdict(value: float | None, check: Check | None, errors: int = 0) -> str:
    """PASS when the check holds and nothing failed; MISS otherwise; info with no target."""
    if check is None:
        return "info"
    if value is None or math.isnan(value) or errors:
        return "MISS"
    return "PASS" if check(value) else "MISS"


def compare(
    key: str,
    label: str,
    unit: str,
    bridge: float,
    direct: float,
    *,
    comparison: str,
    target: str = "",
    check: Check | None = None,
    errors: dict[str, int] | None = None,
    note: str = "",
    extra: dict[str, Any] | None = None,
    detail: str = "",
) -> Figure:
    """A figure comparing `bridge` with `direct` as a ratio or a delta, judged by `check`."""
    value = bridge / direct if comparison == "ratio" and direct else bridge - direct
    counted = errors or {}
    return Figure(
        key,
        label,
        unit,
        bridge,
        direct,
        comparison,
        value,
        target,
        verdict(value, check, sum(counted.values())),
        counted,
        note,
        extra or {},
        detail,
    )


def latency_summary(sample: Sample) -> dict[str, float]:
    """Median, p90 and p99 latency of a sample, in ms."""
    values = sample.latencies_ms
    return {
        "p50_ms": median(values),
        "p90_ms": percentile(values, 90),
        "p99_ms": percentile(values, 99),
        "calls": float(sample.calls),
        "errors": float(sample.errors),
    }


def errors_of(bridge: Sample, direct: Sample) -> dict[str, int]:
    return {"bridge": bridge.errors, "direct": direct.errors}


def first_errors(*samples: Sample) -> str:
    """The first error message of each failing sample, for a figure's note."""
    return "; ".join(s.first_error for s in samples if s.first_error)
