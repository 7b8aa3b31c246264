#!/usr/bin/env python3
"""mrtr-bridge benchmarks: every figure is the bridge against direct, measured in the same run.

Runs from the bridge's virtualenv (`make bench`, or `.venv/bin/python bench/run.py`); starts the
legacy bench server (`.venv-legacy`) and bridge instances on loopback ports, drives them with raw
drivers, and writes `bench/results/latest.md` and `latest.json`. Method: bench/README.md.

    python bench/run.py                    # everything (about 2-3 minutes on 2 cores)
    python bench/run.py --only echo,mrtr   # sections: echo, mrtr, burst, status, stdio, roots,
                                           # conformance
    python bench/run.py --only roots --name roots   # results/roots.md (the issue 10 figures)
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Final

import aiohttp
from conformance_load import conformance_load_figures
from figures import Figure
from peers import Processes
from report import cpu_busy, machine_facts, write
from scenarios_cpu import cpu_figures
from scenarios_held import held_figures
from scenarios_http import Endpoints, echo_figures
from scenarios_mrtr import mrtr_figures
from scenarios_roots import roots_figures
from scenarios_status import status_figures
from scenarios_stdio import stdio_figures

SECTIONS: Final = ("echo", "mrtr", "burst", "status", "stdio", "roots", "conformance")
RUN_TIMEOUT_S: Final = 1800.0
NOTES: Final = """\
How to read it: *bridge* is a raw modern (2026-07-28) client through the bridge, *direct* the same
kind of raw client speaking legacy (2025-11-25) to the same `mcp` 1.x server; both run in the same
process, interleaved. Latencies are medians (p50) and p99 in ms, throughput is completed calls per
second, *ratio* is bridge / direct and *delta* bridge - direct. A figure with errors never passes.
The MRTR round trip no longer waits for a quiet window: the bridge answers as soon as a batch holds
as many pushes as the tool sent last time (`held.batch_quiet_ms` is only the ceiling for a tool it
has not seen; the 1 ms row shows that the ceiling no longer matters), and its floor is the same
legacy round trip through a bare streaming relay (see bench/README.md). In the roots and
session_per_call figures *direct* is a baseline through the bridge instead: a client that declares
no roots, or the default shared sessions (see bench/README.md, "roots")."""


def _raise_open_files() -> None:
    """5,000 held calls hold ~15,000 sockets in the bridge: lift the soft limit its children
    inherit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 65536
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


async def _http_sections(procs: Processes, sections: set[str]) -> list[Figure]:
    figures: list[Figure] = []
    if sections & {"echo", "mrtr"}:
        legacy = procs.legacy_http()
        bridge = procs.bridge("bridge", ["--upstream", legacy.url])
        quiet = procs.bridge(
            "bridge-quiet-1ms", ["--upstream", legacy.url], {"MRTR_BRIDGE_HELD_BATCH_QUIET_MS": "1"}
        )
        declared = {"MRTR_BRIDGE_UPSTREAM_SESSION_LIMIT": "many"}  # spreads from the start
        many = procs.bridge("bridge-many", ["--upstream", legacy.url], declared)
        relay = procs.relay(legacy.url)
        ends = Endpoints(legacy.url, legacy.pid, bridge.url, quiet.url, relay.url, many.url)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            if "echo" in sections:
                figures += await _section("echo", echo_figures(http, ends))
                cpu = cpu_figures(http, (bridge.url, bridge.pid), (relay.url, relay.pid))
                figures += await _section("cpu", cpu)
                spread = cpu_figures(
                    http,
                    (many.url, many.pid),
                    (relay.url, relay.pid),
                    key="echo_cpu_per_call_many_sessions",
                    label=', upstream.session_limit = "many"',
                    gated=False,
                )
                figures += await _section("cpu-many", spread)
            if "mrtr" in sections:
                pids = {bridge.url: bridge.pid, quiet.url: quiet.pid}
                figures += await _section("mrtr", mrtr_figures(http, procs, legacy.url, pids))
    if "burst" in sections:
        figures += await _section("burst", held_figures(procs))
    if "status" in sections:
        figures += await _section("status", status_figures(procs))
    if "roots" in sections:
        async with aiohttp.ClientSession() as http:
            figures += await _section("roots", roots_figures(procs, http))
    return figures


async def _section(name: str, work: Awaitable[list[Figure]]) -> list[Figure]:
    started = time.monotonic()
    print(f"bench: {name} ...", file=sys.stderr, flush=True)
    figures = await work
    for figure in figures:
        print(
            f"  {figure.key}: bridge={figure.bridge} direct={figure.direct} value={figure.value} "
            f"{figure.verdict} errors={figure.errors}",
            file=sys.stderr,
            flush=True,
        )
    print(f"bench: {name} done in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    return figures


async def _run(sections: set[str]) -> list[Figure]:
    procs = Processes()
    try:
        async with asyncio.timeout(RUN_TIMEOUT_S):
            figures = await _http_sections(procs, sections)
            if "stdio" in sections:
                figures += await _section("stdio", stdio_figures(procs))
            if "conformance" in sections:
                figures += await _section("conformance", conformance_load_figures(procs))
            return figures
    finally:
        procs.close()
        print(f"bench: process logs in {procs.log_dir}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help=f"comma-separated sections of {SECTIONS}"
    )
    parser.add_argument("--name", default="latest", help="write results/<name>.md and .json")
    args = parser.parse_args(argv)
    sections = {name.strip() for name in args.only.split(",") if name.strip()}
    if not sections <= set(SECTIONS):
        parser.error(f"unknown section(s): {sorted(sections - set(SECTIONS))}")
    _raise_open_files()
    load_before = " ".join(Path("/proc/loadavg").read_text().split(" ", 3)[:3])
    busy_before = cpu_busy()
    started = time.monotonic()
    figures = asyncio.run(_run(sections))
    path = write(
        figures,
        machine_facts(load_before, busy_before),
        time.monotonic() - started,
        NOTES,
        args.name,
    )
    misses = [figure.key for figure in figures if figure.verdict == "MISS"]
    print(
        f"bench: wrote {path} ({len(figures)} figures, {len(misses)} missed: "
        f"{', '.join(misses) or 'none'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
