"""Issue 3 figures over HTTP, against one legacy bench server (mcp 1.x FastMCP, Streamable HTTP).

- echo (no push) at concurrency 1, 16, 64: bridge (raw modern POST) vs direct (raw legacy POST on
  a session per worker); throughput ratio and added p50/p99.
- (the MRTR round trip is in bench/scenarios_mrtr.py)
- 1,000 held calls opened in one burst: bridge RSS per held call, errors counted.
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import dataclass
from typing import Final

import aiohttp
from drivers import ELICIT_FORM, LegacyHttp, ModernHttp
from figures import Figure, compare, errors_of, first_errors, latency_summary, verdict
from load import Call, Sample, alternating, closed_loop, median, percentile, timed
from peers import Processes, rss_kib

ROUNDS: Final = 4  # interleaved rounds per concurrency (c > 1): direct, bridge, bridge, direct, ...
ECHO_CALLS: Final = {1: 500, 16: 480, 64: 640}  # c=1: calls per path; c>1: calls per path per round
WARMUP_CALLS: Final = 40
BURST: Final = 1000
BURST_CAPACITY: Final = 1100
THROUGHPUT_TARGET: Final = 0.95
ADDED_P50_TARGET_MS: Final = 1.0
HELD_KB_TARGET: Final = 20.0


@dataclass(frozen=True)
class Endpoints:
    legacy: str  # the legacy server's /mcp
    bridge: str  # the bridge (defaults) in front of it
    bridge_quiet_1ms: str  # the same bridge with held.batch_quiet_ms = 1
    relay: str  # a bare aiohttp relay in front of the legacy server (calibration)


def burst_env() -> dict[str, str]:
    """Enough capacity for the burst: each held call holds one upstream legacy session."""
    capacity = str(BURST_CAPACITY)
    return {
        "MRTR_BRIDGE_HELD_MAX_PER_PRINCIPAL": capacity,
        "MRTR_BRIDGE_HELD_MAX_TOTAL": capacity,
        "MRTR_BRIDGE_UPSTREAM_MAX_SESSIONS": capacity,
        "MRTR_BRIDGE_UPSTREAM_MAX_SESSIONS_PER_PRINCIPAL": capacity,
    }


async def _legacy_echo(session: LegacyHttp, index: int) -> str:
    return await session.echo(f"echo {index}")


async def _finish(modern: ModernHttp, held: dict[str, object], index: int) -> str:
    return await modern.finish_held(f"burst {index}", held)


async def _echo_paths(
    http: aiohttp.ClientSession, ends: Endpoints, concurrency: int
) -> tuple[list[Call], list[Call]]:
    """Per-worker calls: a legacy session per direct worker; stateless POSTs through the bridge."""
    sessions = [LegacyHttp(http, ends.legacy) for _ in range(concurrency)]
    await asyncio.gather(*(session.initialize() for session in sessions))
    direct: list[Call] = [functools.partial(_legacy_echo, session) for session in sessions]
    modern = ModernHttp(http, ends.bridge)
    bridge: list[Call] = [lambda i: modern.echo(f"echo {i}")] * concurrency
    await closed_loop(direct, max(WARMUP_CALLS, 2 * concurrency))
    await closed_loop(bridge, max(WARMUP_CALLS, 2 * concurrency))
    return direct, bridge


async def _echo_rounds(
    direct: list[Call], bridge: list[Call], calls: int
) -> tuple[Sample, Sample, list[float]]:
    """Interleaved rounds; returns the merged samples and each round's throughput ratio."""
    merged_direct, merged_bridge, ratios = Sample(), Sample(), []
    for index in range(ROUNDS):
        order = (direct, bridge) if index % 2 == 0 else (bridge, direct)
        first = await closed_loop(order[0], calls)
        second = await closed_loop(order[1], calls)
        d, b = (first, second) if index % 2 == 0 else (second, first)
        ratios.append(b.throughput / d.throughput if d.throughput else float("nan"))
        merged_direct.merge(d)
        merged_bridge.merge(b)
    return merged_direct, merged_bridge, ratios


def _echo_figures(concurrency: int, d: Sample, b: Sample, ratios: list[float]) -> list[Figure]:
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
    p50 = compare(
        f"echo_c{concurrency}_p50",
        f"echo, c={concurrency}: p50 latency",
        "ms",
        median(b.latencies_ms),
        median(d.latencies_ms),
        comparison="delta",
        target="" if gated else f"<= +{ADDED_P50_TARGET_MS:g} ms",
        check=None if gated else (lambda v: v <= ADDED_P50_TARGET_MS),
        errors=errors,
        detail=f"p90 {percentile(b.latencies_ms, 90):.2f} vs {percentile(d.latencies_ms, 90):.2f} "
        "ms",
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
            figures += _echo_figures(
                concurrency, d, b, [b.throughput / d.throughput if d.throughput else float("nan")]
            )
            figures.append(_relay_figure(d, r))
        else:
            d, b, ratios = await _echo_rounds(direct, bridge, calls)
            figures += _echo_figures(concurrency, d, b, ratios)
    return figures


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


async def _open_burst(modern: ModernHttp) -> tuple[Sample, list[tuple[int, dict[str, object]]]]:
    sample = Sample()
    opened: list[tuple[int, dict[str, object]]] = []

    async def open_one(index: int) -> None:
        held = await timed(lambda i: modern.open_held(f"burst {i}"), index, sample)
        if held is not None:
            opened.append((index, held))

    started = time.perf_counter()
    async with asyncio.timeout(120):
        await asyncio.gather(*(open_one(index) for index in range(BURST)))
    sample.elapsed_s = time.perf_counter() - started
    return sample, opened


async def burst_figures(procs: Processes) -> list[Figure]:
    """1,000 held calls at once on a fresh legacy server and bridge; RSS from /proc before and
    after."""
    legacy = procs.legacy_http("legacy-burst")
    bridge = procs.bridge("bridge-burst", ["--upstream", legacy.url], burst_env())
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        modern = ModernHttp(http, bridge.url, capabilities=ELICIT_FORM)
        for index in range(10):  # warm-up: the code paths and one pooled session
            await modern.mrtr_round_trip(f"warm {index}")
        before = rss_kib(bridge.pid)
        opened_sample, opened = await _open_burst(modern)
        after = rss_kib(bridge.pid)
        finished = Sample()
        async with asyncio.timeout(120):
            await asyncio.gather(
                *(
                    timed(functools.partial(_finish, modern, held), index, finished)
                    for index, held in opened
                )
            )
        settled = rss_kib(bridge.pid)
    return _burst_report(before, after, settled, opened_sample, finished)


def _burst_report(
    before: int, after: int, settled: int, opened: Sample, finished: Sample
) -> list[Figure]:
    per_call_kb = (after - before) * 1024 / 1000 / BURST
    errors = opened.errors + finished.errors + (BURST - opened.calls)
    extra = {
        "rss_before_kib": before,
        "rss_held_kib": after,
        "rss_after_completing_kib": settled,
        "burst_wall_s": round(opened.elapsed_s, 3),
        "open": latency_summary(opened),
        "complete": latency_summary(finished),
    }
    note = first_errors(opened, finished)
    held = opened.calls - opened.errors
    memory = Figure(
        "held_call_memory",
        f"memory per held call ({BURST} held at once)",
        "KB",
        per_call_kb,
        None,
        "",
        None,
        f"<= {HELD_KB_TARGET:g} KB",
        verdict(per_call_kb, lambda v: v <= HELD_KB_TARGET, errors),
        {"bridge": errors},
        note,
        extra,
        f"bridge RSS {before / 1024:.1f} -> {after / 1024:.1f} MiB with {held} calls held",
    )
    open_p50, open_p99 = (
        median(opened.latencies_ms) / 1000,
        percentile(opened.latencies_ms, 99) / 1000,
    )
    failures = Figure(
        "held_burst_errors",
        f"errors opening and completing {BURST} held calls",
        "calls",
        float(errors),
        None,
        "",
        None,
        "= 0",
        verdict(errors, lambda v: v == 0),
        {"open": opened.errors, "complete": finished.errors},
        note,
        detail=f"burst {opened.elapsed_s:.1f} s; open p50/p99 {open_p50:.1f}/{open_p99:.1f} s "
        "(upstream.init_timeout_s is 10 s)",
    )
    return [memory, failures]
