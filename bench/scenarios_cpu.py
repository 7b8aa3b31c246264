"""CPU per forwarded echo call: the bridge's against the bare relay's, same server, same run.

`cpu_seconds(pid)` is the time a process has spent on a CPU (user and system), from the
scheduler's nanosecond count (/proc/<pid>/task/*/schedstat). The figure
drives echo calls at concurrency 16 through the bridge (raw modern POSTs) and through the bare
aiohttp relay (`servers/relay.py`, raw legacy POSTs on one session per worker) in interleaved
rounds, and divides each process's CPU time over its rounds by the calls it served. Both forward
to the same legacy server; the relay forwards bytes, so the ratio is what the bridge's own work
(validation, translation, sessions, logs, metrics) costs on top of one aiohttp hop.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Final

import aiohttp
from drivers import LegacyHttp, ModernHttp
from figures import Figure, compare, errors_of, first_errors
from load import Call, Sample, closed_loop

CPU_CONCURRENCY: Final = 16
CPU_ROUNDS: Final = 8  # interleaved; the figure is the total over all of them
CPU_CALLS: Final = 600  # per path per round
CPU_TARGET: Final = 1.7  # bridge CPU per call <= 1.7x the relay's (issue 45)
_TICK_S: Final = 1 / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """The CPU time of `pid` so far (all its threads, user and system), in seconds: the scheduler's
    exact count (the first field of /proc/<pid>/task/*/schedstat, nanoseconds) where the kernel
    keeps it, else /proc/<pid>/stat fields 14 and 15 in clock ticks (10 ms: a round of 600 relay
    calls is only about 16 ticks, so a tick more or less moved a round's ratio by 6%)."""
    try:
        return (
            sum(
                int((task / "schedstat").read_text().split()[0])
                for task in Path(f"/proc/{pid}/task").iterdir()
            )
            / 1e9
        )
    except (OSError, ValueError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()  # after the command name (may hold spaces)
        return (int(fields[11]) + int(fields[12])) * _TICK_S


async def _measured(workers: list[Call], pid: int, calls: int) -> tuple[Sample, float]:
    before = cpu_seconds(pid)
    sample = await closed_loop(workers, calls)
    return sample, cpu_seconds(pid) - before


async def cpu_figures(
    http: aiohttp.ClientSession,
    bridge: tuple[str, int],
    relay: tuple[str, int],
    *,
    key: str = "echo_cpu_per_call",
    label: str = "",
    gated: bool = True,
) -> list[Figure]:
    """`bridge` and `relay` are (url, pid); the relay fronts the same server as the bridge.

    The bridge is warmed up by one call at a time first: its sessions are then those of a client
    that began with one call (docs/decisions.md § 31), whatever the rows before did."""
    modern = ModernHttp(http, bridge[0])
    through_bridge: list[Call] = [lambda i: modern.echo(f"echo {i}")] * CPU_CONCURRENCY
    sessions = [LegacyHttp(http, relay[0]) for _ in range(CPU_CONCURRENCY)]
    for session in sessions:
        await session.initialize()
    through_relay: list[Call] = [
        functools.partial(lambda s, i: s.echo(f"echo {i}"), session) for session in sessions
    ]
    await closed_loop(through_bridge[:1], CPU_CONCURRENCY)
    await closed_loop(through_bridge, 2 * CPU_CONCURRENCY)
    await closed_loop(through_relay, 2 * CPU_CONCURRENCY)
    b, r = Sample(), Sample()
    spent_by: dict[int, list[float]] = {bridge[1]: [], relay[1]: []}  # CPU s per round, by pid
    for index in range(CPU_ROUNDS):
        order = [(through_bridge, bridge[1], b), (through_relay, relay[1], r)]
        for workers, pid, merged in order if index % 2 == 0 else order[::-1]:
            sample, spent = await _measured(workers, pid, CPU_CALLS)
            merged.merge(sample)
            spent_by[pid].append(spent)
    b_cpu, r_cpu = sum(spent_by[bridge[1]]), sum(spent_by[relay[1]])
    pairs = zip(spent_by[bridge[1]], spent_by[relay[1]], strict=True)
    ratios = [x / y if y else float("nan") for x, y in pairs]
    per_round = "/".join(f"{x:.2f}" for x in ratios)
    b_us = b_cpu / max(1, len(b.latencies_ms)) * 1e6
    r_us = r_cpu / max(1, len(r.latencies_ms)) * 1e6
    return [
        compare(
            key,
            f"CPU per forwarded echo call (c={CPU_CONCURRENCY}){label}, bridge vs bare relay",
            "us",
            b_us,
            r_us,
            comparison="ratio",
            target=f"<= {CPU_TARGET:g}x relay" if gated else "",
            check=(lambda v: v <= CPU_TARGET) if gated else None,
            errors=errors_of(b, r),
            note=first_errors(b, r),
            extra={"bridge_cpu_s": b_cpu, "relay_cpu_s": r_cpu, "round_ratios": ratios},
            detail=f"on-CPU time of each process over {b.calls} calls (schedstat); the "
            f"*direct* column is the relay; per-round ratios {per_round}",
        )
    ]
