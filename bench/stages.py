#!/usr/bin/env python3
"""Where a forwarded echo call's instructions go, stage by stage (the profile behind the CPU
figure; bench/README.md, "The ninth batch").

Counts instructions per call (callgrind, `instructions.py`) of the bare relay, of this checkout's
bridge, and of the bridge with one stage stubbed out at a time (`stage_stubs.py`); a stage's cost is
what its stub saves. Not part of `make bench` (about a minute under valgrind).

    .venv/bin/python bench/stages.py
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import instructions
from peers import Processes
from stage_stubs import STAGES

WHAT = {
    "no_access_line": "the access line",
    "no_engine": "the engine and the upstream call",
    "raw_upstream": "  of which beyond one bare aiohttp POST",
    "whole_reply": "  of which streaming the reply (SSE, router, drain)",
}


async def _run(args: argparse.Namespace) -> None:
    procs = Processes()
    try:
        legacy = procs.legacy_http()
        counts = {
            tree: await instructions._count(procs, tree, legacy.url, args)
            for tree in ["relay", ".", *(f"stage:{stage}" for stage in STAGES)]
        }
    finally:
        procs.close()
    relay, bridge = counts["relay"], counts["."]
    print(f"{'':52} M instructions per call")
    print(f"{'the bare relay':52} {relay / 1e6:6.3f}")
    print(f"{'the bridge':52} {bridge / 1e6:6.3f}  ({bridge / relay:.2f}x the relay)")
    for stage in STAGES:
        cost = bridge - counts[f"stage:{stage}"]
        print(f"{WHAT[stage]:52} {cost / 1e6:6.3f}  ({cost / bridge:.0%} of the bridge)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    asyncio.run(_run(instructions.counting_args(parser, argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
