#!/usr/bin/env python3
"""How many project modules one request enters in the bridge (docs/architecture.md, "One call").

Starts the legacy bench server (Streamable HTTP) and one bridge under a profile hook
(`servers/module_traced_bridge.py`), warms it up, then traces one request at a time: the hook
records every module under `proxy/`, `translators/` and `config/` that runs code between the
moment before the request is sent and a quiet moment after its answer. Reports, per request, the
number of modules entered, the moves between modules, and the list (`--list`).

    .venv/bin/python bench/module_trace.py [--list] [--json OUT]

The targets (issue 41): a plain `tools/call` at most 40, the first round of a call whose server
pushes one elicitation at most 45, its retry at most 40.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
from drivers import ModernHttp
from peers import BRIDGE_PYTHON, REPO, Processes

TRACER = REPO / "bench" / "servers" / "module_traced_bridge.py"
ELICITING: dict[str, Any] = {"elicitation": {"form": {}}}
TARGETS = {"plain tools/call (echo)": 40, "first round (one elicitation)": 45, "its retry": 40}
QUIET_S = 0.2  # after the answer: the access line and the lease's release run then
SETTLE_S = 1.0  # after the warm-up


class Tracer:
    def __init__(self, pid: int, out: Path) -> None:
        self._pid, self._out = pid, out

    async def trace(self, request: Any) -> tuple[Any, dict[str, Any]]:
        done = Path(f"{self._out}.done")
        done.unlink(missing_ok=True)
        os.kill(self._pid, signal.SIGUSR1)
        await asyncio.sleep(QUIET_S)  # the hook is installed when the loop next wakes
        answer = await request
        await asyncio.sleep(QUIET_S)
        os.kill(self._pid, signal.SIGUSR2)
        for _ in range(100):
            if done.exists():
                break
            await asyncio.sleep(0.05)
        return answer, json.loads(self._out.read_text())


async def measure(url: str, tracer: Tracer) -> dict[str, dict[str, Any]]:
    async with aiohttp.ClientSession() as http:
        modern = ModernHttp(http, url, capabilities=ELICITING)
        plain = ModernHttp(http, url)
        for i in range(20):  # warm-up: sessions, tool schemas, learned batch sizes
            await modern.mrtr_round_trip(f"warm {i}")
        for i in range(20):  # the last held call's release is over before the first trace
            await modern.echo(f"warm {i}")
            await plain.echo(f"warm {i}")
        await asyncio.sleep(SETTLE_S)
        rows: dict[str, dict[str, Any]] = {}
        _, rows["plain tools/call (echo)"] = await tracer.trace(modern.echo("traced"))
        _, rows["plain tools/call, no capabilities"] = await tracer.trace(plain.echo("traced"))
        held, rows["first round (one elicitation)"] = await tracer.trace(modern.open_held("t"))
        _, rows["its retry"] = await tracer.trace(modern.finish_held("t", held))
        return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--list", action="store_true", help="print every module entered")
    parser.add_argument("--functions", action="store_true", help="print every function entered")
    parser.add_argument("--json", type=Path, help="write the modules and counts here")
    args = parser.parse_args(argv)
    procs = Processes()
    try:
        legacy = procs.legacy_http()
        out = procs.log_dir / "modules.json"
        bridge = procs.bridge(
            "bridge",
            ["--upstream", legacy.url],
            env={"MRTR_TRACE_OUT": str(out)},
            exe=[str(BRIDGE_PYTHON), str(TRACER)],
        )
        rows = asyncio.run(measure(bridge.url, Tracer(bridge.pid, out)))
    finally:
        procs.close()
    missed = 0
    for name, row in rows.items():
        target = TARGETS.get(name)
        count = len(row["modules"])
        verdict = "" if target is None else f"  (target <= {target}: "
        if target is not None:
            verdict += "PASS)" if count <= target else "MISS)"
            missed += count > target
        print(f"{name}: {count} modules, {row['moves']} moves{verdict}")
        if args.list:
            print("    " + "\n    ".join(row["modules"]))
        if args.functions:
            print("    " + "\n    ".join(row["functions"]))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
