"""`make compat`: install the pinned servers, run each directly and through the bridge (a few at a
time), and write docs/compatibility.md.

    python -m compat [--only NAME,NAME] [--fast] [--jobs N] [--install-only]
(run with `tests/` and the repository on PYTHONPATH, from `.venv`; the Makefile does).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from compat.catalog import Server, load
from compat.install import install_all
from compat.report import RESULTS, save, write
from compat.runner import Row, run_server


async def run_all(servers: list[Server], jobs: int) -> list[Row]:
    gate = asyncio.Semaphore(jobs)

    async def one(server: Server) -> Row:
        async with gate:
            try:
                row = await run_server(server)
            except Exception as error:  # a harness failure is still a row, and the run goes on
                row = Row(server.name, server.spec, server.ecosystem, server.transport)
                row.direct = row.bridged = f"not run: {type(error).__name__}: {error}"
        save(row)
        print(f"{row.name}: {row.direct} | {row.bridged} ({row.seconds} s)", flush=True)
        return row

    return await asyncio.gather(*(one(server) for server in servers))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", default="", help="comma-separated row names")
    parser.add_argument("--fast", action="store_true", help="the rows marked fast only")
    parser.add_argument("--jobs", type=int, default=2, help="servers run at once")
    parser.add_argument("--missing", action="store_true", help="rows without a saved result")
    parser.add_argument("--install-only", action="store_true")
    args = parser.parse_args()
    catalog = load()
    chosen = [s for s in catalog if not args.fast or s.fast]
    if args.only:
        names = set(args.only.split(","))
        chosen = [s for s in chosen if s.name in names]
    if args.missing:
        chosen = [s for s in chosen if not (RESULTS / f"{s.name}.json").exists()]
    began = time.monotonic()
    for name, reason in install_all(chosen).items():
        print(f"{name}: not installed: {reason}", file=sys.stderr)
    if args.install_only:
        return 0
    asyncio.run(run_all(chosen, args.jobs))
    command = "make compat" + (f" ONLY={args.only}" if args.only else "")
    print(f"wrote {write(catalog, command, time.monotonic() - began)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
