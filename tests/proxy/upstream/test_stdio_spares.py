"""Spare legacy processes: started ahead of need, initialized with the capabilities of the
request."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

from test_upstream_stdio import CAPABILITIES, WAIT_S, fixture_command, settings

from proxy.upstream.base import Inbound
from proxy.upstream.stdio.spares import SpareProcesses


def _ignore(inbound: Inbound) -> None:
    return None


async def _until(predicate: Any) -> None:
    async with asyncio.timeout(WAIT_S):
        while not predicate():
            await asyncio.sleep(0.02)


async def test_a_new_session_takes_the_started_spare_and_a_replacement_starts() -> None:
    """take() hands out the spare started ahead (same pid) and starts the next one in the
    background."""
    spares = SpareProcesses(settings(fixture_command(), spare_processes=1))
    spares.start()
    try:
        await _until(lambda: len(spares._spares) == 1)
        ready = spares._spares[0]
        session = await spares.take()
        assert session is ready
        await session.initialize(CAPABILITIES, on_unrelated=_ignore)
        assert session.init_result["serverInfo"]["name"] == "mcp-legacy-conformance-fixture"
        await _until(lambda: len(spares._spares) == 1)
        assert spares._spares[0].pid != session.pid
        await session.aclose()
    finally:
        await spares.aclose()
    assert spares._spares == []


async def test_a_dead_spare_is_never_handed_out() -> None:
    """A spare that exited while waiting is discarded; take() returns a live process."""
    spares = SpareProcesses(settings(fixture_command(), spare_processes=1))
    spares.start()
    try:
        await _until(lambda: len(spares._spares) == 1)
        dead = spares._spares[0]
        os.kill(dead.pid, signal.SIGKILL)
        await _until(lambda: not dead.is_alive)
        session = await spares.take()
        assert session is not dead and session.is_alive
        await session.initialize(CAPABILITIES, on_unrelated=_ignore)
        await session.aclose()
    finally:
        await spares.aclose()


async def test_no_spares_when_disabled() -> None:
    """spare_processes = 0 starts nothing ahead: each take() spawns on demand."""
    spares = SpareProcesses(settings(fixture_command(), spare_processes=0))
    spares.start()
    try:
        session = await spares.take()
        assert spares._spares == [] and spares._refilling is None
        await session.aclose()
    finally:
        await spares.aclose()


async def test_a_take_during_startup_waits_for_the_spare_being_started(monkeypatch: Any) -> None:
    """Right after start(), take() gets the process already being started instead of starting a
    second one."""
    from proxy.upstream.stdio.session import StdioUpstreamSession

    started: list[int] = []
    original = StdioUpstreamSession.spawned.__func__  # type: ignore[attr-defined]

    async def counting(
        cls: type[StdioUpstreamSession], upstream: Any, children: Any = None
    ) -> StdioUpstreamSession:
        session: StdioUpstreamSession = await original(cls, upstream, children)
        started.append(session.pid)
        return session

    monkeypatch.setattr(StdioUpstreamSession, "spawned", classmethod(counting))
    spares = SpareProcesses(settings(fixture_command(), spare_processes=1))
    spares.start()
    try:
        session = await spares.take()
        assert started[0] == session.pid  # the first process started is the one handed out
        await _until(lambda: len(spares._spares) == 1)
        assert len(started) == 2  # and exactly one replacement followed
        await session.aclose()
    finally:
        await spares.aclose()
