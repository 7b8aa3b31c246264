"""Waiting for a lease to wait: the pool counts every wait a lease begins (`waits_total`, for room
or at the gate), so a test knows the point from which the lease can only go on when a session is
released or closed, and asserts then that it has not, with no sleep."""

from __future__ import annotations

import asyncio
from typing import Any, Final

from proxy.upstream.pool import UpstreamPool

WAIT_S: Final = 10.0


async def until_waiting(pool: UpstreamPool, since: int, *leases: asyncio.Task[Any]) -> None:
    """Until each of `leases` has begun one more wait than the `since` waits counted before them
    (or one of them has ended: the caller's assertion then fails)."""
    async with asyncio.timeout(WAIT_S):
        while pool.waits_total < since + len(leases) and not any(t.done() for t in leases):
            await asyncio.sleep(0)
