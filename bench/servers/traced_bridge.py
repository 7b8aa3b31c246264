#!/usr/bin/env python3
"""`mrtr-bridge` under tracemalloc, for the held-call memory breakdown (bench/held_memory.py).

Runs the bridge's own entry point with its arguments; on SIGUSR1 it writes a tracemalloc
snapshot, a count of live objects by type and the process's VmRSS to `$MRTR_TRACE_DIR/<n>.*`,
then touches `<n>.done`. Not part of `make bench`: tracing slows the bridge down.

    MRTR_TRACE_DIR=/tmp/trace python -X tracemalloc=12 bench/servers/traced_bridge.py serve ...
"""

from __future__ import annotations

import collections
import gc
import itertools
import json
import os
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType

_dumps = itertools.count(1)


def _dump(_signum: int, _frame: FrameType | None) -> None:
    out = Path(os.environ["MRTR_TRACE_DIR"])
    index = next(_dumps)
    gc.collect()
    tracemalloc.take_snapshot().dump(str(out / f"{index}.snapshot"))
    counts = collections.Counter(type(obj).__qualname__ for obj in gc.get_objects())
    rss = next(
        int(line.split()[1])
        for line in Path("/proc/self/status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    (out / f"{index}.json").write_text(json.dumps({"rss_kib": rss, "types": counts}))
    (out / f"{index}.done").touch()


def main() -> int:
    if not tracemalloc.is_tracing():
        tracemalloc.start(12)
    signal.signal(signal.SIGUSR1, _dump)
    from proxy.__main__ import main as bridge_main

    sys.argv[0] = "mrtr-bridge"
    return bridge_main()


if __name__ == "__main__":
    sys.exit(main())
