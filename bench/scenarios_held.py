"""Held calls (issues 3, 14 and 45): what a held call costs the bridge, and how many it holds.

- The steady state, the figure with the target (issue 45): 2,000 `ask` calls held on a fresh
  legacy server and bridge, opened at most 100 in flight at a time: bridge RSS per held call
  (VmRSS while all are held minus before, / 2,000), then every call completed; errors counted.
- 1,000 `ask` calls opened in one burst: the allocator's peak with every first attempt in flight at
  once (no target). The same burst with `upstream.share_attributed_calls = false` (one upstream
  session per held call, as before sharing) runs in the same run, in its own fresh server and
  bridge, right before: the baseline that row is compared with.
- 5,000 `ask` calls held at once in one fresh bridge: errors opening and completing them, and the
  bridge's RSS. They are opened 500 at a time (5,000 opens at once would wait longer than a
  driver's timeout for the bridge's 16 concurrent upstream handshakes) and completed 100 at a
  time (more overload the single legacy server process: see bench/README.md).

The warm-up runs `ask` once on a session of its own, so the bridge learns that `ask`'s push comes
on the call's POST stream: from then on the held calls of the burst share upstream sessions, and
each holds its POST stream (one open connection) and the modern client's idle keep-alive
connection to the bridge (docs/decisions.md § 28). Without sharing each also holds a session (a
second connection, its GET stream). The bridge gets the capacity for either (`burst_env`). Where
the memory goes: bench/held_memory.py, bench/README.md; what aiohttp alone costs for the
connections: bench/aiohttp_floor.py (a calibration row).
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Final

import aiohttp
import aiohttp_floor
from drivers import ELICIT_FORM, ModernHttp
from figures import Figure, first_errors, latency_summary, verdict
from load import Sample, median, percentile, timed
from peers import Processes, rss_kib

BURST: Final = 1000
PACED: Final = 2000  # the steady state: held calls opened PACED_OPENING at a time
HELD_KB_TARGET: Final = 32.0  # per held call, in the steady state (issue 45)
HELD_KB_GOAL: Final = 25.0
SESSION_EACH: Final = {"MRTR_BRIDGE_UPSTREAM_SHARE_ATTRIBUTED_CALLS": "false"}
MANY: Final = 5000
MANY_OPENING: Final = 500  # opens in flight at once for the 5,000
PACED_OPENING: Final = 100  # opens in flight at once for the paced 2,000
MANY_COMPLETING: Final = 100  # completions in flight at once for the 5,000
HELD_TIMEOUT_S: Final = 600.0


def burst_env(held: int = BURST) -> dict[str, str]:
    """Enough capacity for `held` calls: each held call holds one upstream legacy session."""
    capacity = str(held + held // 10)
    return {
        "MRTR_BRIDGE_HELD_MAX_PER_PRINCIPAL": capacity,
        "MRTR_BRIDGE_HELD_MAX_TOTAL": capacity,
        "MRTR_BRIDGE_UPSTREAM_MAX_SESSIONS": capacity,
        "MRTR_BRIDGE_UPSTREAM_MAX_SESSIONS_PER_PRINCIPAL": capacity,
    }


async def open_held_calls(
    modern: ModernHttp, count: int, in_flight: int
) -> tuple[Sample, list[tuple[int, dict[str, object]]]]:
    sample, opened, slots = Sample(), [], asyncio.Semaphore(in_flight)

    async def open_one(index: int) -> None:
        async with slots:
            held = await timed(lambda i: modern.open_held(f"burst {i}"), index, sample)
        if held is not None:
            opened.append((index, held))

    started = time.perf_counter()
    async with asyncio.timeout(HELD_TIMEOUT_S):
        await asyncio.gather(*(open_one(index) for index in range(count)))
    sample.elapsed_s = time.perf_counter() - started
    return sample, opened


async def _finish(
    modern: ModernHttp, opened: list[tuple[int, dict[str, object]]], in_flight: int
) -> Sample:
    finished, slots = Sample(), asyncio.Semaphore(in_flight)

    async def finish(held: dict[str, object], index: int) -> str:
        async with slots:
            return await modern.finish_held(f"burst {index}", held)

    async with asyncio.timeout(HELD_TIMEOUT_S):
        await asyncio.gather(
            *(timed(functools.partial(finish, held), index, finished) for index, held in opened)
        )
    return finished


async def _held_run(
    procs: Processes,
    name: str,
    count: int,
    opening: int,
    completing: int,
    env: dict[str, str] | None = None,
) -> tuple[int, int, int, Sample, Sample]:
    """Opens `count` held calls on a fresh server and bridge; RSS before, held, after completing."""
    legacy = procs.legacy_http(f"legacy-{name}")
    bridge_env = {**burst_env(count), **(env or {})}
    bridge = procs.bridge(f"bridge-{name}", ["--upstream", legacy.url], bridge_env)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        modern = ModernHttp(http, bridge.url, capabilities=ELICIT_FORM)
        for index in range(10):  # warm-up: the code paths and one pooled session
            await modern.mrtr_round_trip(f"warm {index}")
        before = rss_kib(bridge.pid)
        opened_sample, opened = await open_held_calls(modern, count, opening)
        held = rss_kib(bridge.pid)
        finished = await _finish(modern, opened, completing)
        settled = rss_kib(bridge.pid)
    legacy.stop()
    bridge.stop()
    return before, held, settled, opened_sample, finished


async def held_figures(procs: Processes) -> list[Figure]:
    each = await _held_run(procs, "burst-session-each", BURST, BURST, BURST, SESSION_EACH)
    burst = _burst_figures(*await _held_run(procs, "burst", BURST, BURST, BURST), baseline=each)
    paced = _paced_figure(*await _held_run(procs, "paced", PACED, PACED_OPENING, MANY_COMPLETING))
    floor = _floor_figure(await asyncio.to_thread(aiohttp_floor.measure))
    many = await _held_run(procs, "many", MANY, MANY_OPENING, MANY_COMPLETING)
    return [*burst, paced, floor, _many_figure(*many)]


def _floor_figure(floor: dict[str, float]) -> Figure:
    """aiohttp alone for a held call's open connections (bench/aiohttp_floor.py): its POST stream
    and the client's idle keep-alive connection; a held call on a session of its own also holds
    that session's GET stream."""
    stream, idle = floor["client_kb_per_stream"], floor["server_kb_per_idle_connection"]
    return Figure(
        "held_call_memory_aiohttp_floor",
        "calibration: aiohttp alone for a held call's connections, no bridge",
        "KB",
        stream + idle,
        None,
        "",
        None,
        extra=floor,
        detail=f"1 open SSE client response (the call's POST stream) {stream:.1f} KB + 1 idle "
        f"keep-alive server connection {idle:.1f} KB (bench/aiohttp_floor.py); with a session "
        f"per held call (its GET stream too) {2 * stream + idle:.1f} KB",
    )


def _extra(
    before: int, held: int, settled: int, opened: Sample, finished: Sample
) -> dict[str, object]:
    return {
        "rss_before_kib": before,
        "rss_held_kib": held,
        "rss_after_completing_kib": settled,
        "open_wall_s": round(opened.elapsed_s, 3),
        "open": latency_summary(opened),
        "complete": latency_summary(finished),
    }


def _burst_figures(
    before: int,
    after: int,
    settled: int,
    opened: Sample,
    finished: Sample,
    *,
    baseline: tuple[int, int, int, Sample, Sample],
) -> list[Figure]:
    per_call_kb = (after - before) * 1024 / 1000 / BURST
    each_kb = (baseline[1] - baseline[0]) * 1024 / 1000 / BURST
    each_errors = baseline[3].errors + baseline[4].errors + (BURST - baseline[3].calls)
    errors = opened.errors + finished.errors + (BURST - opened.calls)
    note = first_errors(opened, finished)
    held = opened.calls - opened.errors
    memory = Figure(
        "held_call_memory",
        f"memory per held call ({BURST} held at once)",
        "KB",
        per_call_kb,
        each_kb,
        "ratio",
        per_call_kb / each_kb if each_kb > 0 else None,
        "",
        "info",
        {"bridge": errors, "session_each": each_errors},
        note,
        {**_extra(before, after, settled, opened, finished), "session_each": _extra(*baseline)},
        f"bridge RSS {before / 1024:.1f} -> {after / 1024:.1f} MiB with {held} calls held; "
        f"*direct*: one upstream session per held call (share_attributed_calls = false) in the "
        f"same run, {each_kb:.1f} KB; no target: the allocator's peak with every first attempt "
        "in flight at once (the steady-state row has the target)",
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


def _paced_figure(
    before: int, after: int, settled: int, opened: Sample, finished: Sample
) -> Figure:
    """2,000 held calls opened 100 at a time: what holding costs in the steady state, without the
    peak of every first attempt in flight at once (bench/README.md, "Memory per held call")."""
    per_call_kb = (after - before) * 1024 / 1000 / PACED
    errors = opened.errors + finished.errors + (PACED - opened.calls)
    return Figure(
        "held_call_memory_paced",
        f"memory per held call ({PACED} held, opened {PACED_OPENING} at a time)",
        "KB",
        per_call_kb,
        None,
        "",
        None,
        f"<= {HELD_KB_TARGET:g} KB (goal {HELD_KB_GOAL:g})",
        verdict(per_call_kb, lambda v: v <= HELD_KB_TARGET, errors),
        {"bridge": errors},
        first_errors(opened, finished),
        _extra(before, after, settled, opened, finished),
        f"bridge RSS {before / 1024:.1f} -> {after / 1024:.1f} MiB with "
        f"{opened.calls - opened.errors} calls held; the steady state (issue 45)",
    )


def _many_figure(before: int, after: int, settled: int, opened: Sample, finished: Sample) -> Figure:
    errors = opened.errors + finished.errors + (MANY - opened.calls)
    held = opened.calls - opened.errors
    per_call_kb = (after - before) * 1024 / 1000 / MANY
    return Figure(
        "held_5000_errors",
        f"{MANY} held calls at once in one bridge: errors",
        "calls",
        float(errors),
        None,
        "",
        None,
        "= 0",
        verdict(errors, lambda v: v == 0),
        {"open": opened.errors, "complete": finished.errors},
        first_errors(opened, finished),
        {**_extra(before, after, settled, opened, finished), "kb_per_held_call": per_call_kb},
        f"{held} held; bridge RSS {before / 1024:.1f} -> {after / 1024:.1f} MiB "
        f"({per_call_kb:.1f} KB per held call); opened {MANY_OPENING} and completed "
        f"{MANY_COMPLETING} at a time, opening took {opened.elapsed_s:.0f} s",
    )
