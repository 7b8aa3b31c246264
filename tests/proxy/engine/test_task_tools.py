"""Which tools run as legacy tasks, learned from one `tools/list` at a time
(proxy/engine/legacy_tasks/tools.py): calls that arrive while the first listing runs wait for it
and read what it learned. Before, a call that came after the listing had started but before it
answered found the tool unknown and took it for a plain tool: 16 of 20 concurrent task creations
ran as 60 s plain calls (tests/integration/test_tasks_limits.py, seen in CI)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from proxy.engine.legacy_tasks.tools import TaskTools

INIT = {"capabilities": {"tasks": {"requests": {"tools": {"call": {}}}}}}
TOOLS = {
    "tools": [
        {"name": "slow_compute", "inputSchema": {}, "execution": {"taskSupport": "optional"}},
        {"name": "echo", "inputSchema": {}},
    ]
}


@dataclass
class Listing:
    answered: asyncio.Event

    async def result(self) -> Any:
        await self.answered.wait()
        return TOOLS


@dataclass
class Session:
    init_result: Any = field(default_factory=lambda: INIT)
    listings: int = 0
    answered: asyncio.Event = field(default_factory=asyncio.Event)

    def start(self, method: str, params: Any, *, headers: Any, on_inbound: Any) -> Listing:
        assert method == "tools/list"
        self.listings += 1
        return Listing(self.answered)


@dataclass
class Held:
    session: Session


async def test_calls_during_the_first_listing_wait_for_it() -> None:
    tools, session = TaskTools(), Session()

    @contextlib.asynccontextmanager
    async def lease() -> AsyncIterator[Held]:
        yield Held(session)

    asked = [
        asyncio.create_task(tools.support(name, lease, {}))
        for name in ("slow_compute", "slow_compute", "echo", "slow_compute")
    ]
    for _ in range(5):  # every call has reached the listing or waits for it
        await asyncio.sleep(0)
    assert not any(task.done() for task in asked)
    session.answered.set()
    assert await asyncio.gather(*asked) == ["optional", "optional", "forbidden", "optional"]
    assert session.listings == 1
