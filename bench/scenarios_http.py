"""Issue 3 figures over HTTP, against one legacy bench server (mcp 1.x FastMCP, Streamable HTTP).

- echo (no push) at concurrency 1, 16, 64: bridge (raw modern POST) vs direct (raw legacy POST on
  a session per worker); throughput ratio and added p50/p99.
- the MRTR round trip: bench/scenarios_mrtr.py; held calls: bench/scenarios_held.py.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass
from typing import Final

import aiohttp
from drivers import LegacyHttp, ModernHttp
from figures import Figure, compare, errors_of, first_errors, latency_summary
from load import Call, Sample, alternating, closed_loop, median, percentile
from scenarios_cpu import cpu_seconds

ROUNDS: Final = 8  # interleaved rounds per concurrency (c > 1): direct, bridge, bridge, direct, ...
ECHO_CALLS: Final = {1: 500, 16: 480, 64: 640}  # c=1: calls per path; c>1: calls per path per round
WARMUP_CALLS: Final = 40
THROUGHPUT_TARGET: Final = 0.90
ADDED_P50_OVER_RELAY_MS: Final = 0.3  # added p50 at c=1 <= the bare relay's added p50 + this


@dataclass(frozen=True)
class Endpoints:
    legacy: str  # the legacy server's /mcp
    legacy_pid: int  # its process: its CPU per call is measured in each round
    bridge: str  # the bridge (defaults) in front of it
    bridge_quiet_1ms: str  # the same bridge with held.batch_quiet_ms = 1
    relay: str  # a bare aiohttp relay in front of the legacy server (calibration)
    bridge_many: str  # a bridge told the server serves many sessions (its plain calls spread)


async def _legacy_echo(session: LegacyHttp, index: int) -> str:
    return await session.echo(f"echo {index}")


async def _modern_echo(modern: ModernHttp, index: int) -> str:
    return await modern.echo(f"echo {index}")


def _modern_workers(http: aiohttp.ClientSession, url: str, concurrency: int) -> list[Call]:
    """`concurrency` workers sharing one modern client (stateless POSTs, one principal)."""
    return [functools.partial(_modern_echo, ModernHttp(http, url))] * concurrency


async def _legacy_workers(http: aiohttp.ClientSession, url: str, concurrency: int) -> list[Call]:
    """`concurrency` workers, each on a legacy session of its own at `url`, initialized."""
    sessions = [LegacyHttp(http, url) for _ in range(concurrency)]
    await asyncio.gather(*(session.initialize() for session in sessions))
    return [functools.partial(_legacy_echo, session) for session in sessions]


async def _echo_paths(
    http: aiohttp.ClientSession, ends: Endpoints, concurrency: int
) -> tuple[list[Call], list[Call]]:
    """Per-worker calls: a legacy session per direct worker; stateless POSTs through the bridge."""
    direct = await _legacy_workers(http, ends.legacy, concurrency)
    bridge = _modern_workers(http, ends.bridge, concurrency)
    await closed_loop(direct, max(WARMUP_CALLS, 2 * concurrency))
    await closed_loop(bridge, max(WARMUP_CALLS, 2 * concurrency))
    return direct, bridge


@dataclass
class Rounds:
    """Interleaved rounds of one concurrency: each path's merged sample, the per-round throughput
    ratios, and the legacy server's CPU seconds spent while each path ran."""

    direct: Sample
    bridge: Sample
    ratios: list[float]
    server_cpu_s: dict[str, float]


async def _echo_rounds(
    direct: list[Call], bridge: list[Call], calls: int, server_pid: int
) -> Rounds:
    rounds = Rounds(Sample(), Sample(), [], {"direct": 0.0, "bridge": 0.0})
    order = [("direct", direct), ("bridge", bridge)]
    for index in range(ROUNDS):
        samples: dict[str, Sample] = {}
        for path, workers in order if index % 2 == 0 else order[::-1]:
            before = cpu_seconds(server_pid)
            samples[path] = await closed_loop(workers, calls)
            rounds.server_cpu_s[path] += cpu_seconds(server_pid) - before
        d, b = samples["direct"], samples["bridge"]
        rounds.ratios.append(b.throughput / d.throughput if d.throughput else float("nan"))
        rounds.direct.merge(d)
        rounds.bridge.merge(b)
    return rounds


def _server_cpu_figure(concurrency: int, rounds: Rounds) -> Figure:
    """What the same legacy server spends per call while each path runs: where the server is the
    bottleneck, the throughput ratio cannot exceed direct / bridge of this figure."""

    def per_call_us(path: str, sample: Sample) -> float:
        return rounds.server_cpu_s[path] / max(1, len(sample.latencies_ms)) * 1e6

    return compare(
        f"echo_c{concurrency}_server_cpu",
        f"echo, c={concurrency}: the legacy server's CPU per call",
        "us",
        per_call_us("bridge", rounds.bridge),
        per_call_us("direct", rounds.direct),
        comparison="ratio",
        errors=errors_of(rounds.bridge, rounds.direct),
        detail="on-CPU time of the server process (schedstat) while each path's rounds "
        "ran: the same server, calls and concurrency",
    )


def _echo_figures(
    concurrency: int, d: Sample, b: Sample, ratios: list[float], relay: Sample | None = None
) -> list[Figure]:
    errors = errors_of(b, d)
    note = first_errors(b, d)
    extra = {"bridge": latency_summary(b), "direct": latency_summary(d), "round_ratios": ratios}
    gated = concurrency > 1
    rounds = "/".join(f"{r:.2f}" for r in ratios)
    throughput = compare(
        f"echo_c{concurrency}_throughput",
        f"echo, c={concurrency}: throughput",
        "calls/s",
        b.throughput,
        d.throughput,
        comparison="ratio",
        target=f">= {THROUGHPUT_TARGET}x direct" if gated else "",
        check=(lambda v: v >= THROUGHPUT_TARGET) if gated else None,
        errors=errors,
        note=note,
        extra=extra,
        detail=f"{b.calls} calls per path; per-round ratios {rounds}"
        if gated
        else f"{b.calls} calls per path, alternating call by call",
    )
    p90 = f"p90 {percentile(b.latencies_ms, 90):.2f} vs {percentile(d.latencies_ms, 90):.2f} ms"
    limit = float("nan")
    if relay is not None:  # the bare relay's added p50, measured in the same alternation
        limit = median(relay.latencies_ms) - median(d.latencies_ms) + ADDED_P50_OVER_RELAY_MS
        p90 += f"; the relay adds {limit - ADDED_P50_OVER_RELAY_MS:+.2f} ms"
    p50 = compare(
        f"echo_c{concurrency}_p50",
        f"echo, c={concurrency}: p50 latency",
        "ms",
        median(b.latencies_ms),
        median(d.latencies_ms),
        comparison="delta",
        target="" if relay is None else f"<= relay +{ADDED_P50_OVER_RELAY_MS:g} ms ({limit:+.2f})",
        check=None if relay is None else (lambda v: v <= limit),
        errors=errors,
        detail=p90,
    )
    p99 = compare(
        f"echo_c{concurrency}_p99",
        f"echo, c={concurrency}: p99 latency",
        "ms",
        percentile(b.latencies_ms, 99),
        percentile(d.latencies_ms, 99),
        comparison="delta",
        errors=errors,
    )
    return [throughput, p50, p99]


async def echo_figures(http: aiohttp.ClientSession, ends: Endpoints) -> list[Figure]:
    figures: list[Figure] = []
    for concurrency, calls in ECHO_CALLS.items():
        direct, bridge = await _echo_paths(http, ends, concurrency)
        if concurrency == 1:
            relayed = LegacyHttp(http, ends.relay)
            await relayed.initialize()
            relay = functools.partial(_legacy_echo, relayed)
            await closed_loop([relay], WARMUP_CALLS)
            d, b, r = await alternating([direct[0], bridge[0], relay], calls)
            ratio = b.throughput / d.throughput if d.throughput else float("nan")
            figures += _echo_figures(concurrency, d, b, [ratio], relay=r)
            figures.append(_relay_figure(d, r))
            # the spreading bridge begins with one call at a time too
            await closed_loop(_modern_workers(http, ends.bridge_many, 1), WARMUP_CALLS)
        else:
            rounds = await _echo_rounds(direct, bridge, calls, ends.legacy_pid)
            figures += _echo_figures(concurrency, rounds.direct, rounds.bridge, rounds.ratios)
            figures.append(_server_cpu_figure(concurrency, rounds))
            figures.append(await _spreading_figure(http, ends, direct, concurrency, calls))
            figures.append(await _relay_throughput_figure(http, ends, direct, concurrency, calls))
    return figures


async def _relay_throughput_figure(
    http: aiohttp.ClientSession, ends: Endpoints, direct: list[Call], concurrency: int, calls: int
) -> Figure:
    """Calibration: the same rounds through the bare relay (a legacy session per worker, as
    direct): what one extra aiohttp hop costs the throughput on this machine."""
    relayed = await _legacy_workers(http, ends.relay, concurrency)
    return await _rounds_figure(
        f"echo_c{concurrency}_throughput_bare_relay",
        f"calibration: echo, c={concurrency}: throughput through a bare aiohttp relay, no bridge",
        direct,
        relayed,
        concurrency,
        calls,
        ends.legacy_pid,
        "; the *bridge* column is the relay",
    )


async def _spreading_figure(
    http: aiohttp.ClientSession, ends: Endpoints, direct: list[Call], concurrency: int, calls: int
) -> Figure:
    """The same rounds through the bridge with `upstream.session_limit = "many"`: its crowded
    plain calls spread over sessions (docs/decisions.md § 31)."""
    return await _rounds_figure(
        f"echo_c{concurrency}_throughput_many_sessions",
        f'echo, c={concurrency}: throughput, upstream.session_limit = "many"',
        direct,
        _modern_workers(http, ends.bridge_many, concurrency),
        concurrency,
        calls,
        ends.legacy_pid,
    )


async def _rounds_figure(
    key: str,
    label: str,
    direct: list[Call],
    other: list[Call],
    concurrency: int,
    calls: int,
    server_pid: int,
    more: str = "",
) -> Figure:
    """`other`'s throughput against direct's in interleaved rounds (an info row), with the
    per-round ratios and the server's CPU per call in those rounds."""
    await closed_loop(other, max(WARMUP_CALLS, 2 * concurrency))
    rounds = await _echo_rounds(direct, other, calls, server_pid)
    server = _server_cpu_figure(concurrency, rounds)
    per_round = "/".join(f"{r:.2f}" for r in rounds.ratios)
    return compare(
        key,
        label,
        "calls/s",
        rounds.bridge.throughput,
        rounds.direct.throughput,
        comparison="ratio",
        errors=errors_of(rounds.bridge, rounds.direct),
        note=first_errors(rounds.bridge, rounds.direct),
        extra={"round_ratios": rounds.ratios, "server_cpu_ratio": server.value},
        detail=f"per-round ratios {per_round}; the server's CPU per call {server.value:.2f}x "
        f"direct's in these rounds{more}",
    )


def _relay_figure(d: Sample, r: Sample) -> Figure:
    """Calibration: what one bare aiohttp hop adds (the *bridge* column is the relay here)."""
    return compare(
        "echo_c1_p50_bare_relay",
        "calibration: echo, c=1: p50 through a bare aiohttp relay, no bridge",
        "ms",
        median(r.latencies_ms),
        median(d.latencies_ms),
        comparison="delta",
        errors=errors_of(r, d),
        note=first_errors(r, d),
        extra={"relay": latency_summary(r), "direct": latency_summary(d)},
        detail="bench/servers/relay.py: forwards bytes, no parsing or logging; the floor for one "
        "extra hop",
    )
