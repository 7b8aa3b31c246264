"""Issue 3 figures over HTTP, against one legacy bench server (mcp 1.x FastMCP, Streamable HTTP).

- echo (no push) at concurrency 1, 16, 64: bridge (raw modern POST) vs direct (raw legacy POST on
  a session per worker); throughput ratio and added p50/p99.
- one elicitation at concurrency 1: the bridge's MRTR round trip (tools/call -> InputRequiredResult
  -> retry -> complete) vs the legacy push round trip (tools/call -> push on the SSE stream -> POST
  the answer -> result), with the default `held.batch_quiet_ms` and with 1 ms.
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
MRTR_ROUNDS: Final = 150
BURST: Final = 1000
BURST_CAPACITY: Final = 1100
THROUGHPUT_TARGET: Final = 0.90
ADDED_P50_OVER_RELAY_MS: Final = 0.3  # added p50 at c=1 <= the bare relay's added p50 + this
MRTR_TARGET_MS: Final = 2.0
HELD_KB_TARGET: Final = 20.0
DEFAULT_QUIET_MS: Final = 10.0  # held.batch_quiet_ms's default (config/bridge.example.toml)


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


async def mrtr_figures(http: aiohttp.ClientSession, ends: Endpoints) -> list[Figure]:
    """Interleaved per call: direct push round trip, MRTR (default quiet), MRTR (quiet 1 ms)."""
    direct = LegacyHttp(http, ends.legacy, capabilities=ELICIT_FORM)
    await direct.initialize()
    default = ModernHttp(http, ends.bridge, capabilities=ELICIT_FORM)
    quiet = ModernHttp(http, ends.bridge_quiet_1ms, capabilities=ELICIT_FORM)
    calls: list[Call] = [
        lambda i: direct.push_round_trip(f"t{i}"),
        lambda i: default.mrtr_round_trip(f"t{i}"),
        lambda i: quiet.mrtr_round_trip(f"t{i}"),
    ]
    await alternating(calls, 10)  # warm-up
    d, b, q = await alternating(calls, MRTR_ROUNDS)
    figures = []
    for key, quiet_ms, sample in (
        ("mrtr_default_quiet", DEFAULT_QUIET_MS, b),
        ("mrtr_quiet_1ms", 1.0, q),
    ):
        delta = median(sample.latencies_ms) - median(d.latencies_ms)
        figures.append(
            compare(
                key,
                f"1 elicitation, c=1: round trip (batch_quiet_ms={quiet_ms:g})",
                "ms",
                median(sample.latencies_ms),
                median(d.latencies_ms),
                comparison="delta",
                target=f"<= +{MRTR_TARGET_MS:g} ms",
                check=lambda v: v <= MRTR_TARGET_MS,
                errors=errors_of(sample, d),
                note=first_errors(sample, d),
                extra={
                    "bridge": latency_summary(sample),
                    "direct": latency_summary(d),
                    "batch_quiet_ms": quiet_ms,
                },
                detail=f"{sample.calls} round trips; {delta - quiet_ms:+.2f} ms beyond the "
                f"{quiet_ms:g} ms window; "
                f"p99 {percentile(sample.latencies_ms, 99):.1f} vs "
                f"{percentile(d.latencies_ms, 99):.1f} ms",
            )
        )
    return figures


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
