#!/usr/bin/env python3
"""Where a held call's memory goes: the breakdown behind the "memory per held call" figure.

Starts the legacy bench server and a bridge under tracemalloc (bench/servers/traced_bridge.py),
warms it up, opens N `ask` calls through it (each held), and diffs a
snapshot taken before against one taken while all N are held: Python allocations per held call by
source line and by file, live objects per held call by type, and RSS per held call. Then
completes the calls. Not part of `make bench` (tracing slows the bridge); method in
bench/README.md.

    .venv/bin/python bench/held_memory.py            # 1,000 held calls
    .venv/bin/python bench/held_memory.py -n 200 --top 40
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any, Final

import aiohttp
from drivers import ELICIT_FORM, ModernHttp
from peers import BRIDGE_PYTHON, REPO, Processes
from scenarios_held import burst_env

TRACED: Final = REPO / "bench" / "servers" / "traced_bridge.py"


def _dump(pid: int, trace_dir: Path, index: int) -> tuple[tracemalloc.Snapshot, dict[str, Any]]:
    os.kill(pid, signal.SIGUSR1)
    done = trace_dir / f"{index}.done"
    deadline = time.monotonic() + 300
    while not done.exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the traced bridge wrote no snapshot")
        time.sleep(0.2)
    facts = json.loads((trace_dir / f"{index}.json").read_text())
    return tracemalloc.Snapshot.load(str(trace_dir / f"{index}.snapshot")), facts


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename.replace(str(REPO) + "/", "")


# Who an allocation is for: the first frame (innermost first) outside the standard library and
# the task helper, matched against these path fragments in order.
CATEGORIES: Final = (
    ("aiohttp/web", "front: the client's keep-alive connection and request (aiohttp server)"),
    (
        "proxy/app/http_server",
        "front: the client's keep-alive connection and request (aiohttp server)",
    ),
    ("aiohttp/", "upstream: open HTTP responses, POST and any GET streams (aiohttp client)"),
    ("proxy/upstream/", "upstream: the bridge's session, call and stream readers"),
    ("translators/wire/sse", "upstream: the bridge's session, call and stream readers"),
    ("proxy/calls/driver", "held call: the bridge's driver and state machine"),
    ("translators/", "held call: the bridge's driver and state machine"),
    ("proxy/", "front: the bridge's request handling (front_http, routes, dispatch)"),
    ("structlog/", "bound loggers and log context"),
)
_SKIPPED: Final = ("/lib/python3", "proxy/common/owned_tasks.py", "<frozen", "<string>")


def _category(traceback: tracemalloc.Traceback) -> str:
    for frame in reversed(traceback):  # innermost frame last in a Traceback
        name = frame.filename
        if any(part in name for part in _SKIPPED) and "site-packages" not in name:
            continue
        return next((label for part, label in CATEGORIES if part in name), _short(name))
    return "event loop and standard library (no other frame recorded)"


def categories(
    before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, held: int
) -> list[tuple[float, str]]:
    """KB per held call by category, largest first."""
    totals: dict[str, float] = {}
    for stat in after.compare_to(before, "traceback"):
        label = _category(stat.traceback)
        totals[label] = totals.get(label, 0.0) + stat.size_diff / 1000 / held
    return sorted(((kb, label) for label, kb in totals.items()), reverse=True)


def _report(
    before: tracemalloc.Snapshot,
    after: tracemalloc.Snapshot,
    facts: tuple[dict[str, Any], dict[str, Any]],
    held: int,
    top: int,
) -> None:
    stats = after.compare_to(before, "lineno")
    total = sum(stat.size_diff for stat in stats)
    rss = (facts[1]["rss_kib"] - facts[0]["rss_kib"]) * 1024 / 1000 / held
    print(f"held calls: {held}")
    print(f"RSS per held call (traced, so higher than untraced): {rss:.1f} KB")
    print(f"Python allocations per held call (tracemalloc): {total / 1000 / held:.1f} KB")
    print("\nby category (KB per held call):")
    for kb, label in categories(before, after, held):
        if abs(kb) >= 0.05:
            print(f"  {kb:7.2f}  {label}")
    print(f"\ntop {top} source lines (KB per held call, allocations per held call):")
    for stat in stats[:top]:
        frame = stat.traceback[0]
        print(
            f"  {stat.size_diff / 1000 / held:7.2f}  {stat.count_diff / held:6.1f}  "
            f"{_short(frame.filename)}:{frame.lineno}"
        )
    by_file = after.compare_to(before, "filename")
    print(f"\ntop {top} files:")
    for stat in by_file[:top]:
        frame = stat.traceback[0]
        print(f"  {stat.size_diff / 1000 / held:7.2f}  {_short(frame.filename)}")
    types_before, types_after = facts[0]["types"], facts[1]["types"]
    growth = sorted(
        ((types_after[name] - types_before.get(name, 0), name) for name in types_after),
        reverse=True,
    )
    print(f"\ntop {top} live object types (objects per held call, gc-tracked only):")
    for count, name in growth[:top]:
        print(f"  {count / held:6.2f}  {name}")
    print(f"\ntop {top // 2} allocation tracebacks (KB per held call, innermost frame last):")
    for stat in after.compare_to(before, "traceback")[: top // 2]:
        print(f"  {stat.size_diff / 1000 / held:7.2f}  {stat.count_diff / held:6.1f}")
        for frame in stat.traceback[-6:]:
            print(f"           {_short(frame.filename)}:{frame.lineno}")


async def _drive(bridge_url: str, pid: int, trace_dir: Path, held: int, top: int) -> None:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        modern = ModernHttp(http, bridge_url, capabilities=ELICIT_FORM)
        for index in range(10):
            await modern.mrtr_round_trip(f"warm {index}")
        before = await asyncio.to_thread(_dump, pid, trace_dir, 1)
        opened = await asyncio.gather(
            *(modern.open_held(f"burst {index}") for index in range(held)),
            return_exceptions=True,
        )
        ok = [(i, result) for i, result in enumerate(opened) if isinstance(result, dict)]
        after = await asyncio.to_thread(_dump, pid, trace_dir, 2)
        _report(before[0], after[0], (before[1], after[1]), len(ok), top)
        finished = await asyncio.gather(
            *(modern.finish_held(f"burst {i}", result) for i, result in ok),
            return_exceptions=True,
        )
        failed = sum(isinstance(result, BaseException) for result in finished)
        print(f"\nopened {len(ok)}/{held}, completed {len(ok) - failed}/{len(ok)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("-n", "--held", type=int, default=1000)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # ~3 sockets per held call
    procs = Processes()
    trace_dir = Path(tempfile.mkdtemp(prefix="mrtr-trace-"))
    try:
        legacy = procs.legacy_http("legacy-traced")
        env = {**burst_env(), "MRTR_TRACE_DIR": str(trace_dir)}
        exe = [str(BRIDGE_PYTHON), str(TRACED)]
        bridge = procs.bridge("bridge-traced", ["--upstream", legacy.url], env, exe)
        asyncio.run(_drive(bridge.url, bridge.pid, trace_dir, args.held, args.top))
    finally:
        procs.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
