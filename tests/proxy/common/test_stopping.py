"""`BridgeStop.before_stop`: set-up work that a stop ends early, its own clean-up run; and the
signal handlers from before `signals()` are back after it (not Python's defaults)."""

from __future__ import annotations

import asyncio
import signal

import pytest

from proxy.common.stopping import STOP_SIGNALS, BridgeStop

WAIT_S = 5.0


async def test_work_that_finishes_first_is_awaited_and_its_failure_raised() -> None:
    stop = BridgeStop()
    assert await stop.before_stop(asyncio.sleep(0)) is True

    async def broken() -> None:
        raise ValueError("set-up failed")

    with pytest.raises(ValueError, match="set-up failed"):
        await stop.before_stop(broken())


async def test_a_stop_first_cancels_the_work_and_waits_for_its_clean_up() -> None:
    stop = BridgeStop()
    steps: list[str] = []

    async def set_up() -> None:
        try:
            steps.append("opened")
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)  # a clean-up that awaits
            steps.append("closed")

    async with asyncio.timeout(WAIT_S):
        work = asyncio.ensure_future(stop.before_stop(set_up()))
        while steps != ["opened"]:
            await asyncio.sleep(0)
        stop.request("test")
        assert await work is False
    assert steps == ["opened", "closed"]


async def test_leaving_signals_restores_the_handlers_from_before() -> None:
    def mine(signum: int, frame: object) -> None:
        """A handler of the process's own (mrtr-bridge's is proxy/app/interrupts.py)."""

    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    try:
        for signum in STOP_SIGNALS:
            signal.signal(signum, mine)
        with BridgeStop().signals():
            pass
        assert {signum: signal.getsignal(signum) for signum in STOP_SIGNALS} == dict.fromkeys(
            STOP_SIGNALS, mine
        )
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
