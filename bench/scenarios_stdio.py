"""Issue 4 figures: the legacy bench server over stdio, directly and behind the bridge.

- echo at concurrency 1 and 16: direct (one legacy stdio process, raw newline-delimited JSON-RPC)
  vs the bridge launching the same server (`serve --upstream-command`, raw modern HTTP POSTs) and
  vs the bridge's own stdio front (`mrtr-bridge stdio --upstream-command`, raw modern stdio lines:
  the same driver style as direct).
- process spawn cost: time to the first answer of a fresh process, directly (spawn, initialize,
  echo) and through the bridge (a new principal makes the pool spawn, initialize, list the tools
  and call).
- pool reuse: the `pid` tool through the bridge; the share of calls answered by a process that
  had already answered one, and how many processes the server side saw.
- first answer (issue 30): what a desktop client waits for when it launches a stdio command, from
  the spawn to the answer to its first `tools/list` (initialize, notifications/initialized,
  tools/list), for the legacy server launched directly and for `mrtr-bridge stdio` launching it;
  the bridge's own interpreter start is included. Target: <= 1.25x direct.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Final

import aiohttp
from drivers import (
    CLIENT_INFO,
    LEGACY_VERSION,
    MODERN_VERSION,
    JsonObject,
    LegacyStdio,
    ModernHttp,
    ModernStdio,
    StdioPeer,
)
from figures import Figure, compare, errors_of, first_errors, latency_summary
from load import Call, Sample, alternating, closed_loop, median, percentile
from peers import BRIDGE_EXE, Processes, legacy_stdio_argv, legacy_stdio_command

CONCURRENCY: Final = (1, 16)
CALLS: Final = {1: 300, 16: 320}  # c=1: calls per path; c=16: calls per path per round
ROUNDS: Final = 2
WARMUP_CALLS: Final = 40
SPAWNS: Final = 5
REUSE_CALLS: Final = {1: 100, 16: 320}
FIRST_ANSWER_SAMPLES: Final = 9  # each path, interleaved
FIRST_ANSWER_TARGET: Final = 1.25  # bridge / direct, medians
POOL_COUNTERS: Final = {  # the bridge's /metrics series for its stdio pool (any `upstream`)
    "opened": 'mrtr_bridge_upstream_sessions_opened_total{transport="stdio",',
    "reused": 'mrtr_bridge_upstream_session_reuses_total{transport="stdio",',
}


def bridge_children(pid: int) -> set[str]:
    """The bridge's child processes right now (its stdio pool), as pid strings."""
    children: set[str] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        children |= set((task / "children").read_text().split())
    return children


class StdioPaths:
    """Direct stdio, bridge with HTTP front, bridge with stdio front: one worker call list each."""

    def __init__(self, http: aiohttp.ClientSession, bridge_url: str) -> None:
        self.direct = LegacyStdio(legacy_stdio_argv())
        self.http_front = ModernHttp(http, bridge_url)
        command = legacy_stdio_command()
        self.stdio_front = ModernStdio(
            [str(BRIDGE_EXE), "stdio", "--upstream-command", command, "--log-level", "warning"]
        )

    async def start(self) -> None:
        await asyncio.gather(self.direct.start(), self.stdio_front.start())

    async def aclose(self) -> None:
        await asyncio.gather(self.direct.peer.aclose(), self.stdio_front.peer.aclose())

    def calls(self, concurrency: int) -> list[list[Call]]:
        paths: list[Call] = [
            lambda i: self.direct.echo(f"echo {i}"),
            lambda i: self.http_front.echo(f"echo {i}"),
            lambda i: self.stdio_front.echo(f"echo {i}"),
        ]
        return [[path] * concurrency for path in paths]


async def _measure(paths: list[list[Call]], concurrency: int) -> list[Sample]:
    for calls in paths:  # warm-up: the bridge's pool spawns `concurrency` processes here
        await closed_loop(calls, max(WARMUP_CALLS, 3 * concurrency))
    if concurrency == 1:
        return await alternating([calls[0] for calls in paths], CALLS[1])
    merged = [Sample() for _ in paths]
    for index in range(ROUNDS):
        order = list(range(len(paths))) if index % 2 == 0 else list(reversed(range(len(paths))))
        for which in order:
            merged[which].merge(await closed_loop(paths[which], CALLS[concurrency]))
    return merged


def _echo_figures(concurrency: int, direct: Sample, bridged: Sample, front: str) -> list[Figure]:
    errors = errors_of(bridged, direct)
    extra = {"bridge": latency_summary(bridged), "direct": latency_summary(direct)}
    name = f"stdio_{front}_c{concurrency}"
    label = f"echo over stdio upstream, {front} front, c={concurrency}"
    return [
        compare(
            f"{name}_throughput",
            f"{label}: throughput",
            "calls/s",
            bridged.throughput,
            direct.throughput,
            comparison="ratio",
            errors=errors,
            note=first_errors(bridged, direct),
            extra=extra,
            detail=f"{bridged.calls} calls per path"
            + (
                ", alternating call by call"
                if concurrency == 1
                else "; direct: one process, bridge: a pool"
            ),
        ),
        compare(
            f"{name}_p50",
            f"{label}: p50 latency",
            "ms",
            median(bridged.latencies_ms),
            median(direct.latencies_ms),
            comparison="delta",
            errors=errors,
        ),
        compare(
            f"{name}_p99",
            f"{label}: p99 latency",
            "ms",
            percentile(bridged.latencies_ms, 99),
            percentile(direct.latencies_ms, 99),
            comparison="delta",
            errors=errors,
        ),
    ]


async def _direct_spawn(sample: Sample) -> None:
    server = LegacyStdio(legacy_stdio_argv())
    started = time.perf_counter()
    try:
        await server.start()
        await server.echo("first")
        sample.latencies_ms.append((time.perf_counter() - started) * 1000)
    except Exception as exc:  # counted in the figure
        sample.note_error(exc)
    finally:
        await server.peer.aclose()


async def _bridge_spawn(http: aiohttp.ClientSession, url: str, index: int, sample: Sample) -> None:
    fresh = ModernHttp(http, url, headers={"Authorization": f"Bearer bench-spawn-{index}"})
    started = time.perf_counter()
    try:
        await fresh.echo("first")
        sample.latencies_ms.append((time.perf_counter() - started) * 1000)
    except Exception as exc:  # counted in the figure
        sample.note_error(exc)


async def spawn_figure(http: aiohttp.ClientSession, url: str) -> Figure:
    direct, bridged = Sample(), Sample()
    for index in range(SPAWNS):
        await _direct_spawn(direct)
        await _bridge_spawn(http, url, index, bridged)
    return compare(
        "stdio_spawn_first_answer",
        "stdio: fresh process, time to first answer",
        "ms",
        median(bridged.latencies_ms),
        median(direct.latencies_ms),
        comparison="delta",
        errors=errors_of(bridged, direct),
        note=first_errors(bridged, direct),
        extra={"bridge_ms": bridged.latencies_ms, "direct_ms": direct.latencies_ms},
        detail=f"{SPAWNS} samples each; direct: spawn + initialize + echo; bridge: a new "
        "principal's first "
        "call (a spare process started ahead, upstream.spare_processes=2, then initialize + "
        "tools/list"
        " + echo)",
    )


def _as_installed() -> dict[str, str]:
    """The environment of both first-answer paths: this one, but letting Python cache bytecode. An
    installed bridge has its .pyc (pip compiles a wheel's modules; a source checkout writes them on
    its first run), and so has the server's `mcp`; with PYTHONDONTWRITEBYTECODE set (as in some CI
    and sandbox shells) the editable bridge alone would compile its own modules at every start."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


MODERN_META: Final[JsonObject] = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def _first_answer(argv: list[str], sample: Sample, *, modern: bool = False) -> None:
    """Spawn `argv`, then a legacy client's opening (initialize, initialized, tools/list), or with
    `modern` a 2026-07-28 client's first request (tools/list with its `_meta`, nothing before it);
    the time from the spawn to the tools/list answer."""
    peer = StdioPeer(argv, _as_installed())
    started = time.perf_counter()
    try:
        await peer.start()
        if modern:
            params: JsonObject = {"_meta": MODERN_META}
        else:
            params = {
                "protocolVersion": LEGACY_VERSION,
                "capabilities": {},
                "clientInfo": CLIENT_INFO,
            }
            await peer.request({"jsonrpc": "2.0", "method": "initialize", "params": params})
            peer.notify({"jsonrpc": "2.0", "method": "notifications/initialized"})
            params = {}
        listed = await peer.request({"jsonrpc": "2.0", "method": "tools/list", "params": params})
        if not listed.get("tools"):
            raise RuntimeError("tools/list answered without tools")
        sample.latencies_ms.append((time.perf_counter() - started) * 1000)
    except Exception as exc:  # counted in the figure
        sample.note_error(exc)
    finally:
        await peer.aclose()


async def first_answer_figure(*, modern: bool = False) -> Figure:
    """Time to the first `tools/list` answer over stdio, direct vs `mrtr-bridge stdio`, interleaved
    (the order swaps every pair), one warm-up of each first (it writes the bytecode caches). With
    `modern`, the bridge's client is a 2026-07-28 client (the engine answers; its baseline is
    still the legacy opening of the same server used directly)."""
    direct_argv = legacy_stdio_argv()
    bridge_argv = [str(BRIDGE_EXE), "stdio", "--upstream-command", legacy_stdio_command()]
    bridge_argv += ["--log-level", "warning"]
    warmup = Sample()
    await _first_answer(direct_argv, warmup)
    await _first_answer(bridge_argv, warmup, modern=modern)
    direct, bridged = Sample(), Sample()
    for index in range(FIRST_ANSWER_SAMPLES):
        pair = [(direct_argv, direct), (bridge_argv, bridged)]
        for argv, sample in pair if index % 2 == 0 else reversed(pair):
            await _first_answer(argv, sample, modern=modern and argv is bridge_argv)
            await asyncio.sleep(0.2)  # the last process's exit is not part of the next sample
    return compare(
        "stdio_first_answer_modern" if modern else "stdio_first_answer",
        "stdio: launch to the first tools/list answer "
        + ("(modern client through the engine)" if modern else "(legacy client)"),
        "ms",
        median(bridged.latencies_ms),
        median(direct.latencies_ms),
        comparison="ratio",
        target=f"<= {FIRST_ANSWER_TARGET:g}x direct",
        check=lambda ratio: ratio <= FIRST_ANSWER_TARGET,
        errors=errors_of(bridged, direct),
        note=first_errors(bridged, direct),
        extra={
            "bridge_ms": bridged.latencies_ms,
            "direct_ms": direct.latencies_ms,
            # each bridge sample against the direct one next to it: less swayed by load that drifts
            "pair_ratio_median": median(
                [b / d for b, d in zip(bridged.latencies_ms, direct.latencies_ms, strict=False)]
            ),
        },
        detail=f"{FIRST_ANSWER_SAMPLES} samples each, interleaved, medians; spawn -> initialize, "
        "initialized, tools/list answered; bridge: `mrtr-bridge stdio` (its interpreter start "
        "included) launching the same server",
    )


async def pool_counters(http: aiohttp.ClientSession, mcp_url: str) -> dict[str, float]:
    """The bridge's own stdio pool counters from `/metrics` (empty if it does not expose them)."""
    url = mcp_url.removesuffix("/mcp") + "/metrics"
    try:
        async with http.get(url, timeout=aiohttp.ClientTimeout(total=10)) as response:
            text = await response.text() if response.status == 200 else ""
    except aiohttp.ClientError:
        return {}
    counters: dict[str, float] = {}
    for line in text.splitlines():
        series, _, value = line.rpartition(" ")
        for prefix in POOL_COUNTERS.values():
            if series.startswith(prefix):
                counters[prefix] = counters.get(prefix, 0.0) + float(value)
    return counters


def _metrics_text(delta: dict[str, float]) -> str:
    opened, reused = (delta.get(POOL_COUNTERS[key]) for key in ("opened", "reused"))
    if opened is None or reused is None:
        return "pool counters not exposed"
    return f"{opened:.0f} sessions opened, {reused:.0f} reuses"


async def reuse_figures(http: aiohttp.ClientSession, url: str, bridge_pid: int) -> list[Figure]:
    """Share of calls that needed no new process: 1 - (processes spawned during the calls) / calls.

    Spawned = pids that answered (the `pid` tool) or are the bridge's children after the calls, and
    were not its children before."""
    modern = ModernHttp(http, url)
    figures = []
    for concurrency, calls in REUSE_CALLS.items():
        pids: list[str] = []

        async def call(index: int, pids: list[str] = pids) -> None:
            result = await modern.call("pid", {})
            pids.append(str(result["content"][0]["text"]))

        before, counted = bridge_children(bridge_pid), await pool_counters(http, url)
        sample = await closed_loop([call] * concurrency, calls)
        after, counted_after = bridge_children(bridge_pid), await pool_counters(http, url)
        spawned = (set(pids) | after) - before
        reused = 1 - len(spawned) / len(pids) if pids else float("nan")
        metrics = {
            name: counted_after[name] - counted[name] for name in counted if name in counted_after
        }
        figures.append(
            Figure(
                f"stdio_pool_reuse_c{concurrency}",
                f"stdio pool: calls needing no new process, c={concurrency}",
                "share",
                reused,
                None,
                "",
                None,
                errors={"bridge": sample.errors},
                note=first_errors(sample),
                extra={
                    "calls": len(pids),
                    "processes_answering": len(set(pids)),
                    "processes_spawned": len(spawned),
                    "pool_before": len(before),
                    "pool_after": len(after),
                    "bridge_metrics_delta": metrics,
                },
                detail=f"{len(pids)} calls; {len(spawned)} processes spawned, {len(set(pids))} "
                "answered; "
                f"pool {len(before)} -> {len(after)}; /metrics: {_metrics_text(metrics)}",
            )
        )
    return figures


async def stdio_figures(procs: Processes) -> list[Figure]:
    # first: nothing else runs yet
    figures: list[Figure] = [await first_answer_figure(), await first_answer_figure(modern=True)]
    bridge = procs.bridge("bridge-stdio", ["--upstream-command", legacy_stdio_command()])
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        paths = StdioPaths(http, bridge.url)
        await paths.start()
        try:
            # first: the pool starts cold
            figures += await reuse_figures(http, bridge.url, bridge.pid)
            for concurrency in CONCURRENCY:
                direct, http_front, stdio_front = await _measure(
                    paths.calls(concurrency), concurrency
                )
                figures += _echo_figures(concurrency, direct, http_front, "http")
                figures += _echo_figures(concurrency, direct, stdio_front, "stdio")
            figures.append(await spawn_figure(http, bridge.url))
        finally:
            await paths.aclose()
    return figures
