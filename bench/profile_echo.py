#!/usr/bin/env python3
"""Profile the bridge under the bench's echo load: cProfile of a `serve` process, top costs.

Starts the legacy bench server and one bridge run under `python -m cProfile`, drives `calls`
echo calls at the given concurrency with the bench's modern driver, stops the bridge (SIGTERM:
it exits normally and cProfile writes its file) and prints the top functions by own time and by
cumulative time, with the bridge's CPU time per call (schedstat, cProfile included,
so only its ratio between runs means something).

    .venv/bin/python bench/profile_echo.py --concurrency 16 --calls 3000 --out /tmp/bridge.prof
"""

from __future__ import annotations

import argparse
import asyncio
import pstats
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
from ab_echo import bridge_exe
from drivers import ModernHttp
from load import closed_loop
from peers import BRIDGE_PYTHON, Processes, free_port
from scenarios_cpu import cpu_seconds


async def _drive(url: str, concurrency: int, calls: int, pid: int) -> float:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        modern = ModernHttp(http, url)
        workers = [lambda i: modern.echo(f"echo {i}")] * concurrency
        await closed_loop(workers, 100)
        before = cpu_seconds(pid)
        sample = await closed_loop(workers, calls)
        spent = cpu_seconds(pid) - before
    if sample.errors:
        print(f"{sample.errors} errors: {sample.first_error}", file=sys.stderr)
    print(f"{sample.throughput:.0f} calls/s; bridge CPU {spent / calls * 1e6:.0f} us per call")
    return spent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--out", default="/tmp/bridge.prof")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument(
        "--py-spy", metavar="EXE", help="sample with this py-spy instead (raw output to --out)"
    )
    parser.add_argument("--rate", type=int, default=300, help="py-spy samples per second")
    parser.add_argument(
        "--tree", type=Path, help="with --py-spy: the bridge of this source tree (bench/ab_echo.py)"
    )
    args = parser.parse_args(argv)
    if args.tree and not args.py_spy:
        parser.error("--tree needs --py-spy (cProfile cannot run `python -c`)")
    procs = Processes()
    try:
        legacy = procs.legacy_http()
        port = free_port()
        profiler = [] if args.py_spy else ["-m", "cProfile", "-o", args.out]
        bridge_ = bridge_exe(args.tree)[1:] if args.tree else ["-m", "proxy"]
        argv_ = [str(BRIDGE_PYTHON), *profiler, *bridge_, "serve", "--upstream", legacy.url]
        bridge = procs._spawn(
            "bridge-profiled", [*argv_, "--listen", f"127.0.0.1:{port}"], None, port
        )
        spy = None
        if args.py_spy:
            record = ["record", "--idle", "-r", str(args.rate), "-f", "raw", "-o", args.out]
            spy = subprocess.Popen([args.py_spy, *record, "-p", str(bridge.pid)])
        asyncio.run(_drive(bridge.url, args.concurrency, args.calls, bridge.pid))
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=30)
    finally:
        procs.close()
    if args.py_spy:
        return 0
    stats = pstats.Stats(args.out)
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
