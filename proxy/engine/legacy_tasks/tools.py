"""Which upstream tools run as legacy tasks (`execution.taskSupport`), learned from `tools/list`.

One map per upstream (a legacy server's task support is per tool, not per session). It is read on
the first `tools/call` and again when a call names a tool it does not know (at most every
`RELIST_S`); a server without `tasks.requests.tools.call` is never asked. One listing at a time:
a call that needs one while another runs waits for it, then reads what it learned (judged without
it, a tool the listing is about to show as a task tool would run as a plain call).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Final

from proxy.upstream.base import UpstreamSession
from translators.protocol.eras import TOOLS_LIST
from translators.tasks_ext.messages import server_runs_tool_tasks, task_support
from translators.wire.fast_json import as_object
from translators.wire.jsonrpc import JsonObject

RELIST_S: Final = 5.0
MAX_TOOLS: Final = 4096


class TaskTools:
    def __init__(self) -> None:
        self.upstream_runs_tasks: bool | None = None  # None: not known yet
        self._support: dict[str, str] = {}
        self._listed_at = -RELIST_S
        self._listing = asyncio.Lock()

    def note_session(self, session: UpstreamSession) -> bool:
        """Learn from a session's initialize result whether the upstream runs tool tasks."""
        caps = as_object(session.init_result.get("capabilities"))
        self.upstream_runs_tasks = server_runs_tool_tasks(caps)
        return self.upstream_runs_tasks

    def known(self, name: str) -> str | None:
        return self._support.get(name)

    def should_list(self, name: str) -> bool:
        return name not in self._support and time.monotonic() - self._listed_at >= RELIST_S

    def remember(self, tools_result: JsonObject) -> None:
        tools = tools_result.get("tools")
        for tool in tools if isinstance(tools, list) else []:
            name = as_object(tool).get("name")
            if isinstance(name, str) and len(self._support) < MAX_TOOLS:
                self._support[name] = task_support(tool)

    def _needs_listing(self, name: str) -> bool:
        return self.upstream_runs_tasks is None or self.should_list(name)

    async def support(
        self,
        name: str,
        lease: Callable[[], AbstractAsyncContextManager[Any]],
        headers: Mapping[str, str],
    ) -> str:
        """The tool's `taskSupport` (`forbidden` when not listed), listed first on a session of
        `lease()` when not known; a listing under way is waited for."""
        if self._needs_listing(name) or self._listing.locked():  # or one is under way
            async with self._listing:
                if self._needs_listing(name):
                    async with lease() as held:
                        if self.note_session(held.session):
                            await self.refresh(held.session, dict(headers))
        return self.known(name) or "forbidden"

    async def refresh(self, session: UpstreamSession, headers: dict[str, str]) -> None:
        self._listed_at = time.monotonic()
        result = await session.start(TOOLS_LIST, {}, headers=headers, on_inbound=None).result()
        self.remember(result)


__all__ = ["TaskTools"]
