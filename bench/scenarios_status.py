"""The status page under pollers (issue 45): what eight pollers cost a bystander's calls while the
bridge holds 2,000 calls.

A fresh legacy server and bridge; 2,000 `ask` calls held (opened 100 at a time, as the paced
burst row does); then a bystander's echo calls at concurrency 1 in interleaved rounds, alternately
quiet (no poller) and polled (8 loops each fetching `/status` and `/status.json` every 100 ms, on
connections of their own), the quiet round first in even rounds. The figure is the bystander's
p50 in the polled rounds against its p50 in the quiet rounds of the same run (target: within 2x
+ 2 ms). The details give the pollers' requests, their latency and errors, and the bridge's CPU
per status request (its CPU time in the polled rounds minus the quiet ones, over the requests).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Final

import aiohttp
from drivers import ELICIT_FORM, ModernHttp
from figures import Figure, compare, first_errors, latency_summary
from load import Sample, median, timed
from peers import Processes
from scenarios_cpu import cpu_seconds
from scenarios_held import PACED_OPENING, burst_env, open_held_calls

HELD: Final = 2000
POLLERS: Final = 8
POLL_EVERY_S: Final = 0.1
ROUNDS: Final = 6  # quiet and polled, interleaved
ROUND_CALLS: Final = 100  # bystander echo calls per round
SETTLE_S: Final = 0.3  # pollers run this long before a polled round's first call
STATUS_PATHS: Final = ("/status", "/status.json")


async def _poller(http: aiohttp.ClientSession, base: str, polls: Sample) -> None:
    """Fetch both pages every `POLL_EVERY_S` until cancelled."""
    while True:
        started = time.perf_counter()
        for path in STATUS_PATHS:

            async def fetch(_: int, path: str = path) -> None:
                async with http.get(base + path) as response:
                    await response.read()
                    if response.status != 200:
                        raise RuntimeError(f"{path} answered HTTP {response.status}")

            await timed(fetch, 0, polls)
        await asyncio.sleep(max(0.0, POLL_EVERY_S - (time.perf_counter() - started)))


async def _round(bystander: ModernHttp, sample: Sample, tag: str) -> None:
    for index in range(ROUND_CALLS):
        await timed(lambda i: bystander.echo(f"{tag} {i}"), index, sample)


async def _polled_round(
    http: aiohttp.ClientSession, base: str, bystander: ModernHttp, sample: Sample, polls: Sample
) -> None:
    pollers = [asyncio.create_task(_poller(http, base, polls)) for _ in range(POLLERS)]
    try:
        await asyncio.sleep(SETTLE_S)
        await _round(bystander, sample, "polled")
    finally:
        for poller in pollers:
            poller.cancel()
        for poller in pollers:
            with contextlib.suppress(asyncio.CancelledError):
                await poller


async def _measure(base: str, pid: int) -> tuple[Sample, Sample, Sample, float, float]:
    """(quiet, polled, polls, CPU s in quiet rounds, CPU s in polled rounds)."""
    quiet, polled, polls = Sample(), Sample(), Sample()
    cpu = {"quiet": 0.0, "polled": 0.0}
    connector = aiohttp.TCPConnector(limit=0)
    async with (
        aiohttp.ClientSession() as calls,
        aiohttp.ClientSession(connector=connector) as pages,
    ):
        bystander = ModernHttp(calls, base + "/mcp")
        for index in range(20):  # warm-up: its session, the tool schema
            await bystander.echo(f"warm {index}")
        for index in range(ROUNDS):
            order = ("quiet", "polled") if index % 2 == 0 else ("polled", "quiet")
            for which in order:
                before = cpu_seconds(pid)
                if which == "quiet":
                    await _round(bystander, quiet, "quiet")
                else:
                    await _polled_round(pages, base, bystander, polled, polls)
                cpu[which] += cpu_seconds(pid) - before
    return quiet, polled, polls, cpu["quiet"], cpu["polled"]


async def status_figures(procs: Processes, exe: list[str] | None = None) -> list[Figure]:
    """The figure; `exe` runs another bridge (`ab_echo.bridge_exe(tree)`: an A/B by hand)."""
    legacy = procs.legacy_http("legacy-status")
    bridge = procs.bridge("bridge-status", ["--upstream", legacy.url], burst_env(HELD), exe)
    base = bridge.url.removesuffix("/mcp")
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        holder = ModernHttp(http, bridge.url, capabilities=ELICIT_FORM)
        for index in range(10):  # warm-up: `ask` learned to push on its own POST stream
            await holder.mrtr_round_trip(f"warm {index}")
        opened, held = await open_held_calls(holder, HELD, PACED_OPENING)
        quiet, polled, polls, cpu_quiet, cpu_polled = await _measure(base, bridge.pid)
    legacy.stop()
    bridge.stop()
    return [_figure(quiet, polled, polls, cpu_quiet, cpu_polled, opened, len(held))]


def _figure(
    quiet: Sample,
    polled: Sample,
    polls: Sample,
    cpu_quiet: float,
    cpu_polled: float,
    opened: Sample,
    held: int,
) -> Figure:
    idle_p50, polled_p50 = median(quiet.latencies_ms), median(polled.latencies_ms)
    bound = 2 * idle_p50 + 2
    requests = polls.calls
    cpu_per_request_ms = (cpu_polled - cpu_quiet) / requests * 1000 if requests else float("nan")
    held_errors = opened.errors + (HELD - opened.calls)
    return compare(
        "status_page_bystander_p50",
        f"bystander echo p50, c=1, {held} held calls, {POLLERS} pollers of /status and "
        "/status.json every 100 ms",
        "ms",
        polled_p50,
        idle_p50,
        comparison="delta",
        target="<= 2x quiet p50 + 2 ms",
        check=lambda _delta: polled_p50 <= bound,
        errors={
            "bystander": quiet.errors + polled.errors,
            "pollers": polls.errors,
            "held": held_errors,
        },
        note=first_errors(quiet, polled, polls, opened),
        extra={
            "quiet": latency_summary(quiet),
            "polled": latency_summary(polled),
            "status_requests": latency_summary(polls),
            "bridge_cpu_ms_per_status_request": cpu_per_request_ms,
            "bridge_cpu_s": {"quiet": cpu_quiet, "polled": cpu_polled},
            "held": held,
        },
        detail=f"*direct*: the same bystander in quiet rounds (no poller), interleaved; bound "
        f"{bound:.1f} ms; {requests} status requests (p50 "
        f"{median(polls.latencies_ms):.1f} ms), bridge CPU {cpu_per_request_ms:.2f} ms each",
    )
