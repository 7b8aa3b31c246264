#!/usr/bin/env python3
"""Bytecodes executed per forwarded echo call, function by function (bench/README.md, "Issue 45:
the c=1 hop").

Starts the legacy bench server and a bridge under an opcode counter (`sys.settrace` with
`f_trace_opcodes`, switched on by SIGUSR1 after a warm-up and written out by SIGUSR2), drives
`--calls` echo calls one at a time, and prints the bytecodes per call by package and the functions
that execute the most. Exact and repeatable, but a count of bytecodes, not of time: a bytecode that
calls into C (a dict lookup of a tuple, a JSON encode) may cost ten times another, so a change it
favours is measured again with `instructions.py` before it is kept.

    .venv/bin/python bench/opcodes.py --calls 200 --top 40
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import sys
import tempfile
from pathlib import Path

import aiohttp
from drivers import ModernHttp
from load import closed_loop
from peers import BRIDGE_PYTHON, REPO, Processes, free_port

# Run in the bridge's process: the counter, then `python -m proxy` with the given arguments.
_COUNTER = """
import collections, json, os, runpy, signal, sys
counts, calls, keys = collections.Counter(), collections.Counter(), {}
def local(key):
    def trace(frame, event, arg):
        if event == "opcode":
            counts[key] += 1
        return trace
    return trace
def tracer(frame, event, arg):
    code = frame.f_code
    key = keys.get(code)
    if key is None:
        key = keys[code] = (code.co_filename, code.co_firstlineno, code.co_name)
    calls[key] += 1
    frame.f_trace_opcodes = True
    return local(key)
def start(*_):
    counts.clear(); calls.clear(); sys.settrace(tracer)
def stop(*_):
    sys.settrace(None)
    with open(os.environ["MRTR_OPCODES_OUT"], "w") as out:
        json.dump([[list(key), counts[key], calls[key]] for key in counts], out)
signal.signal(signal.SIGUSR1, start)
signal.signal(signal.SIGUSR2, stop)
sys.argv = ["proxy", *sys.argv[1:]]
runpy.run_module("proxy", run_name="__main__")
"""


async def _drive(url: str, pid: int, calls: int) -> None:
    async with aiohttp.ClientSession() as http:
        modern = ModernHttp(http, url)
        workers = [lambda index: modern.echo(f"echo {index}")]
        await closed_loop(workers, 100)  # warm: the session open, every path taken once
        os.kill(pid, signal.SIGUSR1)
        await asyncio.sleep(0.3)
        sample = await closed_loop(workers, calls)
        os.kill(pid, signal.SIGUSR2)
        await asyncio.sleep(1.0)
    if sample.errors:
        print(f"{sample.errors} errors: {sample.first_error}", file=sys.stderr)


def _where(filename: str) -> str:
    if filename.startswith(str(REPO)) and "site-packages" not in filename:
        return "/".join(Path(filename).relative_to(REPO).parts[:2])
    if "site-packages/" in filename:
        return filename.split("site-packages/")[1].split("/")[0]
    return "stdlib"


Row = tuple[str, int, str, int, int]  # file, first line, function, bytecodes, times entered


def _report(rows: list[Row], calls: int, top: int) -> None:
    print(f"{sum(row[3] for row in rows) / calls:,.0f} bytecodes per call")
    by_package: collections.Counter[str] = collections.Counter()
    for filename, _line, _name, count, _entered in rows:
        by_package[_where(filename)] += count
    for package, count in by_package.most_common(15):
        print(f"{count / calls:8,.0f}  {package}")
    print()
    rows.sort(key=lambda row: -row[3])
    for filename, line, name, count, entered in rows[:top]:
        shown = filename.split("site-packages/")[-1].removeprefix(f"{REPO}/")
        print(f"{count / calls:7,.0f}  {entered / calls:4.1f}x  {shown}:{line} {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args(argv)
    procs = Processes()
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "opcodes.json"
        try:
            legacy = procs.legacy_http()
            port = free_port()
            argv_ = [str(BRIDGE_PYTHON), "-c", _COUNTER, "serve", "--upstream", legacy.url]
            env = {"MRTR_OPCODES_OUT": str(out)}
            bridge = procs._spawn(
                "bridge-opcodes", [*argv_, "--listen", f"127.0.0.1:{port}"], env, port
            )
            asyncio.run(_drive(bridge.url, bridge.pid, args.calls))
        finally:
            procs.close()
        rows = [
            (f, line, n, count, entered)
            for (f, line, n), count, entered in json.loads(out.read_text())
        ]
        _report(rows, args.calls, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
