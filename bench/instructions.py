#!/usr/bin/env python3
"""Instructions per forwarded echo call, counted by callgrind: an A/B that noise cannot move.

CPU time per call moves by 10 to 25% between runs on a shared 2-core machine; the number of
instructions a process executes for the same calls moves by well under 1%. This starts the
legacy bench server and, under `valgrind --tool=callgrind` with counting off, the bridge of each
`--tree` (a checkout or `git archive` of the repository; `relay` names the bare relay), warms it
up, counts `--calls` echo calls at `--concurrency`, and prints the instructions per call of each
and their ratios to the first.

    git archive main | tar -x -C /tmp/main-tree
    .venv/bin/python bench/instructions.py --tree /tmp/main-tree --tree . --tree relay

Instructions are not time: user-space instructions only (no kernel), and nothing of the cache
misses that a process sharing 2 cores with its peers pays (in the bridge about three times the
time per instruction of the same code in a microbenchmark). Judge a change by this, then confirm
it with `ab_echo.py`'s CPU per call. Needs valgrind (`apt-get install valgrind`); under callgrind
the bridge runs about 50 times slower, so the upstream timeouts are raised.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import aiohttp
from ab_echo import bridge_exe
from drivers import LegacyHttp, ModernHttp
from load import Call, closed_loop
from peers import BRIDGE_PYTHON, RELAY, Processes, free_port

SLOW_PEER_ENV = {  # callgrind slows the bridge ~50x: its upstream waits must not run out
    "MRTR_BRIDGE_UPSTREAM_INIT_TIMEOUT_S": "60",
    "MRTR_BRIDGE_UPSTREAM_CONNECT_TIMEOUT_S": "60",
}


def _target(tree: str, upstream: str, port: int) -> list[str]:
    if tree == "relay":
        return [str(BRIDGE_PYTHON), str(RELAY), "--upstream", upstream, "--port", str(port)]
    if tree.startswith("stage:"):  # this checkout with one stage stubbed out (stages.py)
        code = (
            f"import runpy, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            f"import stage_stubs; stage_stubs.apply({tree.removeprefix('stage:')!r}); "
            "runpy.run_module('proxy', run_name='__main__')"
        )
        exe = [str(BRIDGE_PYTHON), "-c", code]
        return [*exe, "serve", "--upstream", upstream, "--listen", f"127.0.0.1:{port}"]
    exe = bridge_exe(Path(tree))
    return [*exe, "serve", "--upstream", upstream, "--listen", f"127.0.0.1:{port}"]


def _total(out: Path) -> int:
    """The instructions a callgrind dump counted (its `summary:` or `totals:` line)."""
    total = 0
    for dump in out.parent.glob(out.name + "*"):
        for line in dump.read_text(errors="replace").splitlines():
            if line.startswith(("summary:", "totals:")):
                total = max(total, int(line.split()[1]))
    return total


async def _workers(
    http: aiohttp.ClientSession, tree: str, url: str, concurrency: int
) -> list[Call]:
    if tree != "relay":
        modern = ModernHttp(http, url)
        return [lambda i: modern.echo(f"echo {i}")] * concurrency
    sessions = [LegacyHttp(http, url) for _ in range(concurrency)]
    for session in sessions:
        await session.initialize()
    return [functools.partial(lambda s, i: s.echo(f"echo {i}"), s) for s in sessions]


async def _count(procs: Processes, tree: str, upstream: str, args: argparse.Namespace) -> float:
    """Instructions per call of one bridge (or the relay)."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "callgrind.out"
        port = free_port()
        argv = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
            *_target(tree, upstream, port),
        ]
        proc = procs._spawn(f"counted-{len(procs.procs)}", argv, SLOW_PEER_ENV, port)
        control = ["callgrind_control"]
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            workers = await _workers(http, tree, proc.url, args.concurrency)
            await closed_loop(workers, 3 * args.concurrency)
            subprocess.run([*control, "--instr=on", str(proc.pid)], check=True, capture_output=True)
            sample = await closed_loop(workers, args.calls)
            subprocess.run(
                [*control, "--instr=off", str(proc.pid)], check=True, capture_output=True
            )
            subprocess.run([*control, "--dump", str(proc.pid)], check=True, capture_output=True)
        if sample.errors:
            raise SystemExit(f"{tree}: {sample.errors} errors: {sample.first_error}")
        per_call: float = _total(out) / args.calls
        return per_call


async def _run(args: argparse.Namespace) -> None:
    procs = Processes()
    try:
        legacy = procs.legacy_http()
        counts = [(tree, await _count(procs, tree, legacy.url, args)) for tree in args.tree]
    finally:
        procs.close()
    base = counts[0][1]
    for tree, per_call in counts:
        print(f"{per_call / 1e6:8.3f} M instructions per call  {per_call / base:6.3f}x  {tree}")


def counting_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """`--calls` and `--concurrency` added and `argv` parsed; an error unless valgrind is here
    (this script's and stages.py's)."""
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        parser.error("needs valgrind and callgrind_control (apt-get install valgrind)")
    return args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--tree", action="append", required=True, help="a source tree, or `relay` (repeatable)"
    )
    asyncio.run(_run(counting_args(parser, argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
