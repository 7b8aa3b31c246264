"""What `mrtr-bridge check` lists of an upstream's tools: every page, and which tools a client sees
by the capabilities it declares (`by_capability`).

An upstream may show some tools only to a client that declares a capability (server-everything
lists its elicitation, sampling and roots tools only then), and the bridge declares upstream exactly
what each modern client declared. `check` therefore lists the tools declaring every capability a
modern client may (`translators.check_report.EVERY_CAPABILITY`), then declaring none, and, when the
two differ, declaring each one alone (`DECLARABLE`), through the same translation and session
opener as `serve`. The report says which tools a client that declares nothing sees and which each
capability adds (docs/operations.md, "Checking an upstream").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from proxy.upstream.base import Inbound, PooledSession, SessionOpener
from proxy.upstream.session_limit import SessionLimit
from translators.check_report import DECLARABLE, Observed, tool_names
from translators.protocol.capabilities import modern_client_capabilities_to_legacy
from translators.protocol.eras import ROOTS, TOOLS_LIST
from translators.wire.errors import BridgeError
from translators.wire.jsonrpc import JsonObject

MAX_TOOL_PAGES: Final = 20
ToolLister = Callable[[JsonObject], Awaitable[list[Any]]]
Closer = Callable[[PooledSession], Awaitable[None]]


class RootsWatch:
    """Records `roots/list` asks that arrive outside any call (answered with no roots)."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.pending: list[int | str] = []

    def __call__(self, inbound: Inbound) -> None:
        message = inbound.message
        if message.get("method") == ROOTS and "id" in message:
            self.pending.append(message["id"])
            self.asked.set()

    async def answer(self, session: PooledSession, window_s: float) -> bool:
        """Wait up to `window_s` for an ask, answer every ask so far; whether one came."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(window_s):
                await self.asked.wait()
        for push_id in self.pending:
            with contextlib.suppress(BridgeError):
                await session.respond(push_id, result={"roots": []})
        return self.asked.is_set()


async def all_tools(session: PooledSession) -> list[Any]:
    """`tools/list`, page after page (at most `MAX_TOOL_PAGES`)."""
    tools: list[Any] = []
    params: JsonObject = {}
    for _ in range(MAX_TOOL_PAGES):
        page = await session.start(TOOLS_LIST, params, headers={}, on_inbound=None).result()
        tools.extend(page.get("tools") or [])
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str):
            break
        params = {"cursor": cursor}
    return tools


def session_closer(limit: SessionLimit | None) -> Closer:
    """How `check` closes a session: let go as `serve` would where the session limit is known (a
    one-session upstream's session is never ended upstream), else closed."""
    return _aclose if limit is None else limit.let_go


async def _aclose(session: PooledSession) -> None:
    await session.aclose()


async def legacy_tools(
    opener: SessionOpener,
    headers: Mapping[str, str],
    declared: JsonObject,
    *,
    close: Closer = _aclose,
) -> list[Any]:
    """The tools a legacy session shows a client that declares `declared` (modern capabilities,
    translated as the bridge translates a client's); roots asks are answered with no roots."""
    watch = RootsWatch()
    session = await opener(modern_client_capabilities_to_legacy(declared), headers, watch)
    try:
        return await all_tools(session)
    finally:
        await watch.answer(session, 0)
        await close(session)


async def by_capability(seen: Observed, list_tools: ToolLister, *, at_once: bool) -> None:
    """The tools a client declaring nothing sees and, when `seen.tools` (every capability declared)
    shows others, those each `DECLARABLE` capability shows alone: `at_once` (stdio: a process
    each) or one after the other (HTTP: a server may serve one session at a time). All or nothing:
    a listing that fails leaves a note instead."""
    try:
        without = await list_tools({})
        alone: dict[str, list[Any]] = {}
        if set(tool_names(without)) != set(tool_names(seen.tools)):
            if at_once:
                listed = await asyncio.gather(*map(list_tools, DECLARABLE.values()))
                alone = dict(zip(DECLARABLE, listed, strict=True))
            else:
                alone = {name: await list_tools(declared) for name, declared in DECLARABLE.items()}
    except BridgeError as exc:
        seen.notes.append(f"tools by client capability not listed: {exc.message}")
        return
    seen.tools_without, seen.tools_alone = without, alone


__all__ = [
    "MAX_TOOL_PAGES",
    "RootsWatch",
    "all_tools",
    "by_capability",
    "legacy_tools",
    "session_closer",
]
