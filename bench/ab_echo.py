#!/usr/bin/env python3
"""A/B of two bridge source trees on the echo load: CPU per call and throughput, same run.

Starts the legacy bench server, the bare relay, and one bridge per source tree (`--a` and `--b`,
each a checkout or `git archive` of the repository; both run on this `.venv`'s Python and
packages), then drives echo calls at `--concurrency` through each in interleaved rounds (the
order turns every round) and prints each one's CPU per call (on-CPU time, schedstat),
throughput and p50, and the ratios B/A and each against the relay. On a shared machine only
these ratios mean something: every path sees the same noise.

    git archive main | tar -x -C /tmp/main-tree
    .venv/bin/python bench/ab_echo.py --a /tmp/main-tree --b . --rounds 6
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from drivers import LegacyHttp, ModernHttp
from load import Call, Sample, closed_loop, median
from peers import BRIDGE_PYTHON, Processes
from scenarios_cpu import cpu_seconds


@dataclass
class Path_:
    name: str
    pid: int
    workers: list[Call]
    sample: Sample = field(default_factory=Sample)
    cpu_s: float = 0.0
    server_cpu_s: float = 0.0  # the legacy server's, while this path's rounds ran
    client_cpu_s: float = 0.0  # this process's (the driver's), while this path's rounds ran

    @property
    def us_per_call(self) -> float:
        return self.cpu_s / max(1, self.sample.calls) * 1e6

    @property
    def server_us_per_call(self) -> float:
        return self.server_cpu_s / max(1, self.sample.calls) * 1e6

    @property
    def client_us_per_call(self) -> float:
        return self.client_cpu_s / max(1, self.sample.calls) * 1e6


def bridge_exe(tree: Path) -> list[str]:
    """`python -m proxy` importing the bridge from `tree`: first on the import path, and the
    editable install's finder (which maps the packages to this checkout) taken out."""
    code = (
        "import sys; sys.meta_path[:] = [f for f in sys.meta_path "
        "if '__editable__' not in str(getattr(f, '__module__', ''))]; "
        f"sys.path.insert(0, {str(tree.resolve())!r}); import runpy; "
        "runpy.run_module('proxy', run_name='__main__')"
    )
    return [str(BRIDGE_PYTHON), "-c", code]


async def _drive(
    paths: list[Path_], rounds: int, calls: int, concurrency: int, server_pid: int
) -> None:
    for path in paths:  # warm: sessions opened, code paths hot
        await closed_loop(path.workers, 4 * concurrency)
    for index in range(rounds):
        turn = index % len(paths)
        for path in paths[turn:] + paths[:turn]:
            before, server_before = cpu_seconds(path.pid), cpu_seconds(server_pid)
            client_before = time.process_time()
            sample = await closed_loop(path.workers, calls)
            path.cpu_s += cpu_seconds(path.pid) - before
            path.server_cpu_s += cpu_seconds(server_pid) - server_before
            path.client_cpu_s += time.process_time() - client_before
            path.sample.merge(sample)


def _report(paths: list[Path_]) -> None:
    a, b, relay = paths
    for path in paths:
        s = path.sample
        print(
            f"{path.name:6} {path.us_per_call:8.0f} us CPU/call  "
            f"(server {path.server_us_per_call:5.0f}, client {path.client_us_per_call:4.0f} us)  "
            f"{s.throughput:7.1f} calls/s  "
            f"p50 {median(s.latencies_ms):6.2f} ms  {s.calls} calls, {s.errors} errors"
        )
    print(f"CPU/call  B/A {b.us_per_call / a.us_per_call:.3f}x", end="  ")
    print(f"A/relay {a.us_per_call / relay.us_per_call:.3f}x", end="  ")
    print(f"B/relay {b.us_per_call / relay.us_per_call:.3f}x")
    print(f"throughput B/A {b.sample.throughput / a.sample.throughput:.3f}x")


async def _echo(modern: ModernHttp, index: int) -> str:
    return await modern.echo(f"echo {index}")


async def _run(args: argparse.Namespace) -> None:
    procs = Processes()
    try:
        legacy = procs.legacy_http()
        bridge_a = procs.bridge("bridge-a", ["--upstream", legacy.url], exe=bridge_exe(args.a))
        bridge_b = procs.bridge("bridge-b", ["--upstream", legacy.url], exe=bridge_exe(args.b))
        relay = procs.relay(legacy.url)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            paths = []
            for name, proc in (("A", bridge_a), ("B", bridge_b)):
                modern = ModernHttp(http, proc.url)
                workers: list[Call] = [functools.partial(_echo, modern)] * args.concurrency
                paths.append(Path_(name, proc.pid, workers))
            sessions = [LegacyHttp(http, relay.url) for _ in range(args.concurrency)]
            for session in sessions:
                await session.initialize()
            relay_workers: list[Call] = [
                functools.partial(lambda s, i: s.echo(f"echo {i}"), session) for session in sessions
            ]
            paths.append(Path_("relay", relay.pid, relay_workers))
            await _drive(paths, args.rounds, args.calls, args.concurrency, legacy.pid)
        _report(paths)
    finally:
        procs.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--a", type=Path, required=True, help="source tree A (the baseline)")
    parser.add_argument("--b", type=Path, required=True, help="source tree B")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=600, help="calls per path per round")
    asyncio.run(_run(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
