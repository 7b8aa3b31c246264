"""The one clock type of every time-driven rule in the bridge (idle reaping, eviction, backoffs,
expiries): a callable returning seconds. The class that owns a rule takes its clock as a parameter,
so a test moves time forward instead of sleeping (docs/architecture.md, "Clocks").

- `loop_time`: the running event loop's clock, the one `asyncio.timeout_at` and `call_at` read; the
  default of owners that also set loop timers (the upstream pool).
- `time.monotonic`: the default of owners with no timer of their own (the per-principal tables).
- `time.time`: wall-clock seconds, for what is compared with a client's or another process's
  notion of time (sealed expiries, a task's `createdAt + ttlMs`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeAlias

Clock: TypeAlias = Callable[[], float]


def loop_time() -> float:
    """The running loop's time."""
    return asyncio.get_running_loop().time()


__all__ = ["Clock", "loop_time"]
